"""Module: a tree of semantic functions, children and orchestration methods (seed 000 §1.1.2).

A Module is pure IR. It holds no weights and is never mutated: `load` returns a separate
reading (a LoadedModule), and `cloned` / `renamed` make independent copies. Attribute access
reaches what the class body declared:

    mod.mlp(x, w_gate, w_up, w_down)    # a function: evaluated, one argument per declared param
    mod.layers[0] / mod.lookup("layers.0.attn")   # children
    mod.forward(...)                    # methods["forward"], else the entry function

A child's checkpoint prefix is its dotted path (`layers.3.attn.w_kv`), so a tuple attribute
`layers = (L, L)` yields children named `layers.0`, `layers.1`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType, MethodType
from typing import Any

from .errors import DSLError, EvalError
from .hir import Function
from .types import TensorType

# Names the Module class itself answers; an authored function, child or method may not take them.
RESERVED = frozenset(
    {
        "name", "entry", "functions", "children", "methods", "attributes", "topologies",
        "effective_topologies", "weights", "lookup", "walk", "cloned", "renamed", "of", "load",
        "prepare",
    }
)  # fmt: skip
_NAME = re.compile(r"[A-Za-z_]\w*(\.\d+)?$")
_GROUP = re.compile(r"(.+)\.(\d+)$")


class Module:
    """A semantic module: functions, children, methods and constants, with an entry and topology.

    Build one with `@module` on a class; this constructor is what the decorator calls.

    Args:
        name: the node name (a class name, or the attribute a child was bound to).
        functions: name -> Function, in declaration order.
        children: child Modules; each is copied, so the tree shares no node with another.
        methods: orchestration methods (plain functions taking `self`), e.g. forward.
        attributes: plain constants of the class body (ints, floats, strings, tuples).
        entry: the function `forward` runs when no forward method is defined.
        topologies: the declared execution hierarchy (children without one inherit it).
        inherited: the owner's effective topologies (set when this Module is a child).

    Raises:
        DSLError: for an unknown entry, a name used twice or reserved, or one weight name with
            two types.
    """

    __slots__ = (
        "_inherited", "attributes", "children", "entry", "functions", "methods", "name", "topologies",
        "weights",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        *,
        functions: Mapping[str, Function] | None = None,
        children: Sequence[Module] = (),
        methods: Mapping[str, Callable[..., Any]] | None = None,
        attributes: Mapping[str, Any] | None = None,
        entry: str | None = None,
        topologies: Sequence[Any] | None = None,
        inherited: tuple[Any, ...] | None = None,
    ):
        put = object.__setattr__
        put(self, "name", name)
        put(self, "functions", MappingProxyType(dict(functions or {})))
        put(self, "methods", MappingProxyType(dict(methods or {})))
        put(self, "attributes", MappingProxyType(dict(attributes or {})))
        put(self, "entry", entry)
        put(self, "topologies", tuple(topologies) if topologies is not None else None)
        put(self, "_inherited", inherited)
        effective = self.effective_topologies
        put(self, "children", tuple(c._adopted(c.name, effective) for c in children))
        self._check_names()
        put(self, "weights", MappingProxyType(_weights(name, self.functions)))

    def _check_names(self) -> None:
        if not _NAME.match(self.name):
            raise DSLError(
                f"module name {self.name!r} is not an identifier", expected="an identifier", got=self.name
            )
        kinds = {
            "function": list(self.functions),
            "child": [c.name for c in self.children],
            "child tuple": sorted({m.group(1) for c in self.children if (m := _GROUP.match(c.name))}),
            "method": list(self.methods),
            "attribute": list(self.attributes),
        }
        seen: dict[str, str] = {}
        for kind, names in kinds.items():
            for n in names:
                if n in RESERVED and not (kind == "method" and n == "forward"):
                    raise DSLError(
                        f"module {self.name}: {kind} {n!r} takes a name the Module itself answers; "
                        f"reserved: {', '.join(sorted(RESERVED))}",
                        expected="a name outside the reserved set",
                        got=n,
                    )
                if n in seen:
                    raise DSLError(
                        f"module {self.name}: {n!r} is both a {seen[n]} and a {kind}",
                        expected="distinct names",
                        got=n,
                    )
                seen[n] = kind
        for n, f in self.functions.items():
            if n != f.name:
                raise DSLError(
                    f"module {self.name}: attribute {n!r} holds function {f.name!r}; bind a function under "
                    f"its own name",
                    where=f.loc,
                    expected=f.name,
                    got=n,
                )
        if self.entry is not None and self.entry not in self.functions:
            raise DSLError(
                f"module {self.name}: entry {self.entry!r} is not one of its functions; "
                f"accepted: {', '.join(self.functions) or 'none (it has no functions)'}",
                expected=tuple(self.functions),
                got=self.entry,
            )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Module {self.name} is immutable IR; build a new one (renamed, cloned) instead")

    @property
    def effective_topologies(self) -> tuple[Any, ...] | None:
        """The declared topology hierarchy, else the one inherited from the owner."""
        return self.topologies if self.topologies is not None else self._inherited

    def _adopted(self, name: str, inherited: tuple[Any, ...] | None) -> Module:
        return Module(
            name,
            functions=self.functions,
            children=self.children,
            methods=self.methods,
            attributes=self.attributes,
            entry=self.entry,
            topologies=self.topologies,
            inherited=inherited,
        )

    def cloned(self) -> Module:
        """An independent copy of this tree (functions are immutable and shared)."""
        return self._adopted(self.name, self._inherited)

    def renamed(self, name: str) -> Module:
        """An independent copy named `name`."""
        return self._adopted(name, self._inherited)

    @staticmethod
    def of(fn_or_mod: Function | Module) -> Module:
        """`fn_or_mod` as a Module: a bare Function becomes a single-function Module (its entry)."""
        if isinstance(fn_or_mod, Module):
            return fn_or_mod
        if isinstance(fn_or_mod, Function):
            return Module(
                fn_or_mod.name,
                functions={fn_or_mod.name: fn_or_mod},
                entry=fn_or_mod.name,
                topologies=fn_or_mod.topologies,
            )
        raise TypeError(
            f"expected a TileFoundry Function or Module, got {type(fn_or_mod).__name__}; "
            f"decorate a Python function with @func first"
        )

    def walk(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """Every node of the tree as (dotted path, module), preorder; the root's path is `prefix`."""
        yield prefix, self
        for c in self.children:
            yield from c.walk(f"{prefix}.{c.name}" if prefix else c.name)

    def lookup(self, path: str) -> Module | Function:
        """The child Module or Function at a dotted path: `mod.lookup("layers.0.attn.qkv")`.

        Raises:
            KeyError: naming the path, the node where it stopped, and what that node holds.
        """
        node: Module = self
        rest = path
        while True:
            if rest in node.functions:
                return node.functions[rest]
            # Child names may hold a dot (`layers.0`): match the longest name first.
            for c in sorted(node.children, key=lambda c: -len(c.name)):
                if rest == c.name:
                    return c
                if rest.startswith(c.name + "."):
                    node, rest = c, rest[len(c.name) + 1 :]
                    break
            else:
                held = [*node.functions, *(c.name for c in node.children)]
                raise KeyError(f"{path!r}: module {node.name} has no {rest!r}; it holds: {', '.join(held)}")

    def _group(self, name: str) -> tuple[Module, ...]:
        parts = [
            (int(m.group(2)), c) for c in self.children if (m := _GROUP.match(c.name)) and m.group(1) == name
        ]
        return tuple(c for _, c in sorted(parts, key=lambda ic: ic[0]))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in Module.__slots__:
            raise AttributeError(name)
        if name in self.functions:
            return self.functions[name]
        for c in self.children:
            if c.name == name:
                return c
        if group := self._group(name):
            return group
        if name in self.methods:
            return MethodType(self.methods[name], self)
        if name in self.attributes:
            return self.attributes[name]
        held = ", ".join(self._names()) or "nothing"
        raise AttributeError(f"module {self.name} has no {name!r}; it holds: {held}")

    def _names(self) -> list[str]:
        groups = {m.group(1) for c in self.children if (m := _GROUP.match(c.name))}
        plain = [c.name for c in self.children if not _GROUP.match(c.name)]
        return [*self.functions, *plain, *sorted(groups), *self.methods, *self.attributes]

    def forward(self, *args: Any) -> Any:
        """Run the forward method if the class body defined one, else the entry function.

        A Module holds no constants, so the entry function takes one argument per declared
        parameter, weights included (a LoadedModule's forward takes activations alone).

        Raises:
            EvalError: when there is neither, naming the functions and methods to call instead.
        """
        if "forward" in self.methods:
            return self.methods["forward"](self, *args)
        if self.entry is not None:
            return self.functions[self.entry](*args)
        functions = ", ".join(self.functions) or "none"
        methods = ", ".join(self.methods) or "none"
        raise EvalError(
            f"module {self.name} has no forward method and no entry function; call one of its "
            f"functions ({functions}) or methods ({methods}) by name, or declare @module(entry=...)",
            where=self.name,
            expected="a forward method or an entry",
            got="neither",
        )

    __call__ = forward

    def load(self, resource: Any) -> Any:
        """Read this tree's weights from `resource`: a LoadedModule (this Module stays unchanged)."""
        from .loading import load_module

        return load_module(self, resource)

    def prepare(self, raw: Any, out_dir: str, *, device: str = "cpu") -> None:
        """Convert raw checkpoint tensors into `out_dir` (one safetensors shard + index)."""
        from .loading import prepare_module

        prepare_module(self, raw, out_dir, device=device)

    def __repr__(self) -> str:
        return f"<Module {self.name}: {', '.join(self._names())}>"


def _weights(name: str, functions: Mapping[str, Function]) -> dict[str, TensorType]:
    """The union of the functions' ConstTensor params by name; one name must have one type."""
    out: dict[str, TensorType] = {}
    owner: dict[str, Function] = {}
    for f in functions.values():
        for p in f.weights:
            t: TensorType = p.type  # type: ignore[assignment]
            if p.name in out and out[p.name] != t:
                first = owner[p.name]
                raise DSLError(
                    f"module {name}: weight {p.name!r} is {out[p.name]} in {first.name!r} ({first.loc}) "
                    f"but {t} in {f.name!r}; one weight name has one type",
                    where=f.loc,
                    expected=out[p.name],
                    got=t,
                )
            out.setdefault(p.name, t)
            owner.setdefault(p.name, f)
    return out
