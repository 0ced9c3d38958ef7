"""`RuntimeFunction`: the base class of one node's function body (a kernel).

A body subclasses it and overrides `__call__`; whatever it needs beyond its call arguments
(converted weights, compiled state) it takes at construction:

    class SiluMul(RuntimeFunction):
        def __call__(self, gate, up):
            return torch.nn.functional.silu(gate) * up

    body = SiluMul(entry_abi_of(silu_mul))
"""

from __future__ import annotations

from typing import Any

from .abi import EntryABI


class RuntimeFunction:
    """A function body with an ABI; the base class itself cannot run.

    Attributes:
        type: the EntryABI this body implements (`entry_abi_of(ir_func)` for a handwritten body).
    """

    type: EntryABI

    def __init__(self, type: EntryABI) -> None:
        if not isinstance(type, EntryABI):
            raise TypeError(
                f"{self.__class__.__name__}: type must be an EntryABI (e.g. entry_abi_of(fn)), "
                f"got {type.__class__.__name__} {type!r}"
            )
        self.type = type

    @property
    def name(self) -> str:
        """The entry name of the ABI."""
        return self.type.name

    def __call__(self, *acts: Any) -> Any:
        """Run the body on positional arguments; every usable body overrides this.

        Raises:
            NotImplementedError: always, on the base class.
        """
        raise NotImplementedError(
            f"RuntimeFunction {self.type.name!r} has no body: subclass RuntimeFunction and override "
            f"__call__ with the kernel (torch / triton / CUDA / ...)"
        )

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.type})"
