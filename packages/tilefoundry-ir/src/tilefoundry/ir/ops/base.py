"""The op base class and the per-concern registries keyed by op class.

An op is a frozen dataclass: its fields are its attributes, `inputs` names its operands.
Each concern (type inference, evaluation, cost, lowering) is a separate `Registry`, so a new op
or a new target adds entries and edits no central switch:

    @dataclass(frozen=True)
    class RmsNorm(Op):
        name = "rms_norm"
        inputs = ("x", "w")
        eps: float = 1e-6

    @infer.register(RmsNorm)
    def _(op, x, w): ...          # TensorTypes in, TensorType out

    @evaluate.register(RmsNorm)
    def _(op, x, w): ...          # torch tensors in, torch tensor out
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

import torch

from ..dims import DimExpr, DimVar, evaluate_dim

OPS: dict[str, type[Op]] = {}


class Op:
    """Base of every IR op. Subclasses are `@dataclass(frozen=True)` and set `name` and `inputs`.

    `inputs` names the operands in order; a last name starting with `*` takes any number.
    """

    name: ClassVar[str]
    inputs: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        name = cls.__dict__.get("name")
        if name is not None:
            if name in OPS and OPS[name] is not cls:
                raise TypeError(
                    f"op name {name!r} registered twice: {OPS[name].__qualname__}, {cls.__qualname__}"
                )
            OPS[name] = cls

    @property
    def variadic(self) -> bool:
        return bool(self.inputs) and self.inputs[-1].startswith("*")

    def attrs(self) -> dict[str, Any]:
        """The attribute fields, in declaration order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def resolve_dims(op: Op, bindings: Mapping[DimVar, int]) -> Op:
    """`op` with every symbolic dimension in its attributes replaced by its int under `bindings`."""

    def sub(v: Any) -> Any:
        if isinstance(v, (DimVar, DimExpr)):
            return evaluate_dim(v, bindings)
        if isinstance(v, tuple):
            return tuple(sub(x) for x in v)
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v

    changes = {k: sub(v) for k, v in op.attrs().items()}
    return dataclasses.replace(op, **changes)  # type: ignore[type-var]


class Registry:
    """Rules of one concern keyed by op class; lookup follows the class's MRO.

    Calling the registry dispatches: `infer(op, *operand_types)`.
    """

    def __init__(self, concern: str):
        self.concern = concern
        self._rules: dict[type, Callable[..., Any]] = {}

    def register(self, *op_classes: type[Op]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            for cls in op_classes:
                if cls in self._rules:
                    raise TypeError(f"{self.concern}: a rule for {cls.__qualname__} is already registered")
                self._rules[cls] = fn
            return fn

        return deco

    def rule(self, op_cls: type[Op]) -> Callable[..., Any] | None:
        """The rule for `op_cls` or its nearest registered base, or None."""
        for cls in op_cls.__mro__:
            if cls in self._rules:
                return self._rules[cls]
        return None

    def __contains__(self, op_cls: type[Op]) -> bool:
        return self.rule(op_cls) is not None

    def __call__(self, op: Op, *args: Any, **kw: Any) -> Any:
        fn = self.rule(type(op))
        if fn is None:
            raise NotImplementedError(f"no {self.concern} rule for op {op.name!r}")
        return fn(op, *args, **kw)


infer = Registry("type inference")
evaluate = Registry("evaluation")
cost = Registry("cost")


# None stands for the CPU (a ContextVar default must be immutable).
_EVAL_DEVICE: contextvars.ContextVar[torch.device | None] = contextvars.ContextVar(
    "tilefoundry_eval_device", default=None
)


def eval_device() -> torch.device:
    """The device the evaluator runs on now; creation ops (full, arange) place results there."""
    return _EVAL_DEVICE.get() or torch.device("cpu")


@contextlib.contextmanager
def evaluating_on(device: torch.device | str) -> Iterator[None]:
    """Scope in which `eval_device()` answers `device`."""
    token = _EVAL_DEVICE.set(torch.device(device))
    try:
        yield
    finally:
        _EVAL_DEVICE.reset(token)
