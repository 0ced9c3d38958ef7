"""`RuntimeModule`: the runtime instance of a module node, authored like a torch.nn.Module.

Lifecycle: construct (structure) -> load (materialize weights) -> call:

    class Mlp(RuntimeModule):
        def __init__(self):
            super().__init__("mlp", entry="mlp", modules=(Norm("norm"),))
        def forward(self, x):
            ...

    twin = Mlp().load(SafetensorsResource(out_dir, device="cuda"))
    y = twin(x)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tilefoundry.ir.module import Module

    from .resource import RuntimeResource


class RuntimeModule:
    """A runtime node: a name, an entry (metadata), children, and a subclass-written `forward`.

    The base class holds no weights or resource and never runs the HIR evaluator.

    Attributes:
        name: mirrors the ir Module node name; it is the weight-path segment of this node.
        entry: mirrors the ir Module entry.
        modules: the children, registered through `modules=` in `__init__`.
    """

    def __init__(self, name: str, entry: str | None = None, modules: Iterable[RuntimeModule] = ()) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"{self.__class__.__name__}: name must be a non-empty str, got {name!r}")
        if entry is not None and not isinstance(entry, str):
            raise TypeError(f"RuntimeModule {name!r}: entry must be a str or None, got {entry!r}")
        children = tuple(modules)
        for child in children:
            if not isinstance(child, RuntimeModule):
                raise TypeError(
                    f"RuntimeModule {name!r}: modules holds RuntimeModule instances, "
                    f"got {child.__class__.__name__} {child!r}"
                )
        seen = [c.name for c in children]
        dup = sorted({n for n in seen if seen.count(n) > 1})
        if dup:
            raise ValueError(
                f"RuntimeModule {name!r}: child names must be unique (they are weight-path segments), "
                f"{', '.join(map(repr, dup))} repeats"
            )
        self.name = name
        self.entry = entry
        self.modules = children

    @property
    def module(self) -> Module | None:
        """The authored Module this node stands for; None on a node generated from none.

        A compiled entry or a hand-written subclass stands for no single authored Module and
        reports None rather than something chosen for it.
        """
        return None

    def forward(self, *args: Any) -> Any:
        """The step: subclass-written orchestration over this node's functions and children."""
        raise NotImplementedError(
            f"RuntimeModule {self.name!r} ({self.__class__.__name__}) has no forward: a subclass writes "
            f"forward, or @runtime_module generates one from its semantic Module"
        )

    def __call__(self, *args: Any) -> Any:
        return self.forward(*args)

    def load(self, resource: RuntimeResource) -> RuntimeModule:
        """Load weights: recurse into each child with `resource.subtree(child.name)`.

        The base class resolves nothing itself. Returns self, so `Twin().load(res)` chains.
        """
        for child in self.modules:
            child.load(resource.subtree(child.name))
        return self

    def __repr__(self) -> str:
        kind = self.__class__.__name__
        return f"{kind}(name={self.name!r}, entry={self.entry!r}, modules={len(self.modules)})"


def authored_module(rt: RuntimeModule, *, needed_for: str) -> Module:
    """The authored Module behind `rt`, for a caller that cannot proceed without one.

    Raises:
        TypeError: `rt.module` is None; a caller needing the authored Module refuses rather than
            substitute another.
    """
    mod = rt.module
    if mod is None:
        raise TypeError(
            f"{needed_for} needs the authored Module behind RuntimeModule {rt.name!r} "
            f"({rt.__class__.__name__}), and it stands for none (module is None); pass the semantic "
            f"Module explicitly"
        )
    return mod
