"""`tf`: the op catalogue as functions for @func bodies; each call records one IR node.

Every function builds an op of `tilefoundry.ir.ops` and hands it to `emit`, which infers the
result type and reports a refusal at the author's file and line. Python numbers next to a
tensor adopt its dtype (`x * 2`, `tf.maximum(x, 0.0)`, `pos + T` with a DimVar T); a
number that the dtype cannot hold (`1.5` for an i32 tensor) is refused, not promoted. The
semantics of each op are on its class (`tf.rms_norm` -> `ir.ops.nn.RmsNorm`).

    @func
    def f(x: Tensor[(T, 64), "bf16"], w: ConstTensor[(64,), "bf16"]):
        h = tf.rms_norm(x, w, eps=1e-6)
        return tf.silu(h[:, :32]) * h[:, 32:]
"""

from __future__ import annotations

import builtins
import difflib
from collections.abc import Callable, Sequence
from typing import Any

from ..ir.dims import Dim, dims_equal, format_dim
from ..ir.dtypes import DType, dtype_of
from ..ir.errors import DSLError
from ..ir.ops import contraction, indexing, movement, nn, placement, pointwise, reduction
from ..ir.ops.base import Op
from ..ir.ops.creation import Arange, Full, value_fits
from ..ir.ops.operands import is_dim, provably_le
from ..ir.shard import Placement
from ._trace import TracedTensor, emit, user_loc

# NOTE: abs, pow, sum, max, min and slice shadow builtins in this module (torch's names for
# the ops); code here spells the builtins as builtins.*.

Scalar = bool | int | float
Operand = TracedTensor | bool | int | float


def _refuse(message: str, expected: object, got: object) -> DSLError:
    return DSLError(message, where=user_loc(), expected=expected, got=got)


def _dtype(op: str, dtype: str | DType) -> DType:
    try:
        return dtype_of(dtype)
    except ValueError as err:
        raise _refuse(f"{op}: {err}", "a dtype name", dtype) from None


def _scalar(op: str, value: object, like: TracedTensor) -> TracedTensor:
    """`value` (a Python number or a DimVar expression) as a 0-d `full` of `like`'s dtype."""
    if isinstance(value, (bool, int, float)) or is_dim(value):
        if not value_fits(value, like.dtype):
            raise _refuse(
                f"{op}: Python scalar {value!r} cannot adopt dtype {like.dtype} of the tensor operand "
                "(no silent promotion)",
                f"a {like.dtype} value",
                value,
            )
        return emit(Full((), value, like.dtype))
    raise _refuse(
        f"{op}: operands must be tensors or Python numbers, got {type(value).__name__} {value!r}",
        "a tensor or a Python number",
        type(value).__name__,
    )


def _adopt(op: str, *args: object) -> tuple[TracedTensor, ...]:
    """The operands with Python numbers turned into tensors of the first tensor's dtype."""
    like = next((a for a in args if isinstance(a, TracedTensor)), None)
    if like is None:
        raise _refuse(
            f"{op}: needs at least one tensor operand, got {', '.join(repr(a) for a in args)}",
            "a tensor",
            args,
        )
    return tuple(a if isinstance(a, TracedTensor) else _scalar(op, a, like) for a in args)


def _named(fn: Callable[..., Any], cls: type[Op]) -> Callable[..., Any]:
    fn.__name__ = fn.__qualname__ = cls.name
    fn.__doc__ = cls.__doc__
    return fn


def _unary(cls: type[pointwise.Unary]) -> Callable[[TracedTensor], TracedTensor]:
    return _named(lambda x: emit(cls(), x), cls)


def _binary(cls: type[pointwise.Binary]) -> Callable[[Operand, Operand], TracedTensor]:
    return _named(lambda a, b: emit(cls(), *_adopt(cls.name, a, b)), cls)


# ---------------------------------------------------------------- pointwise

neg = _unary(pointwise.Neg)
abs = _unary(pointwise.Abs)  # torch's name (shadows the builtin here)
exp = _unary(pointwise.Exp)
exp2 = _unary(pointwise.Exp2)
log = _unary(pointwise.Log)
log2 = _unary(pointwise.Log2)
sqrt = _unary(pointwise.Sqrt)
rsqrt = _unary(pointwise.Rsqrt)
tanh = _unary(pointwise.Tanh)
sigmoid = _unary(pointwise.Sigmoid)
silu = _unary(pointwise.Silu)
relu = _unary(pointwise.Relu)
softplus = _unary(pointwise.Softplus)
logical_not = _unary(pointwise.LogicalNot)

add = _binary(pointwise.Add)
sub = _binary(pointwise.Sub)
mul = _binary(pointwise.Mul)
div = _binary(pointwise.Div)
pow = _binary(pointwise.Pow)  # torch's name (shadows the builtin here)
maximum = _binary(pointwise.Maximum)
minimum = _binary(pointwise.Minimum)
logical_and = _binary(pointwise.LogicalAnd)
logical_or = _binary(pointwise.LogicalOr)
logical_xor = _binary(pointwise.LogicalXor)
eq = _binary(pointwise.Eq)
ne = _binary(pointwise.Ne)
lt = _binary(pointwise.Lt)
le = _binary(pointwise.Le)
gt = _binary(pointwise.Gt)
ge = _binary(pointwise.Ge)


def gelu(x: TracedTensor, approximate: str = "none") -> TracedTensor:
    """GELU; `approximate` is "none" (erf) or "tanh"."""
    return emit(pointwise.Gelu(approximate=approximate), x)


def where(cond: TracedTensor, a: Operand, b: Operand) -> TracedTensor:
    """`a` where bool `cond` holds, else `b`; a Python number adopts the other branch's dtype."""
    return emit(pointwise.Where(), cond, *_adopt("where", a, b))


def clamp(x: TracedTensor, lo: Scalar | None = None, hi: Scalar | None = None) -> TracedTensor:
    """Clamp to Python-number bounds; for tensor bounds use tf.maximum / tf.minimum."""
    for name, bound in (("lo", lo), ("hi", hi)):
        if isinstance(bound, TracedTensor):
            raise _refuse(
                f"clamp: bound {name} is a tensor; clamp takes Python numbers, use tf.maximum / tf.minimum",
                "a Python number",
                "a tensor",
            )
    return emit(pointwise.Clamp(lo=lo, hi=hi), x)


def cast(x: TracedTensor, dtype: str | DType) -> TracedTensor:
    """x converted to `dtype` (a DType or its name), as torch's `.to(dtype)`."""
    return emit(pointwise.Cast(_dtype("cast", dtype)), x)


# ---------------------------------------------------------------- reductions


def reduce(
    x: TracedTensor, axes: int | Sequence[int] | None = None, keepdim: bool = False, kind: str = "sum"
) -> TracedTensor:
    """Reduce over `axes` (an int, a tuple, or None for all) with kind sum, mean, max, min or absmax."""
    if isinstance(axes, list):
        axes = tuple(axes)
    return emit(reduction.Reduce(axes=axes, keepdim=keepdim, kind=kind), x)


def sum(x: TracedTensor, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> TracedTensor:
    """`reduce(x, axis, keepdim, "sum")`; 16-bit floats accumulate in f32."""
    return reduce(x, axis, keepdim, "sum")


def mean(x: TracedTensor, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> TracedTensor:
    """`reduce(x, axis, keepdim, "mean")`."""
    return reduce(x, axis, keepdim, "mean")


def max(x: TracedTensor, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> TracedTensor:
    """`reduce(x, axis, keepdim, "max")`: values only (use tf.argmax for indices)."""
    return reduce(x, axis, keepdim, "max")


def min(x: TracedTensor, axis: int | Sequence[int] | None = None, keepdim: bool = False) -> TracedTensor:
    """`reduce(x, axis, keepdim, "min")`: values only."""
    return reduce(x, axis, keepdim, "min")


def argmax(x: TracedTensor, axis: int = -1, keepdim: bool = False) -> TracedTensor:
    """i64 index of the first maximum along `axis`."""
    return emit(reduction.Argmax(axis=axis, keepdim=keepdim), x)


def softmax(x: TracedTensor, axis: int = -1) -> TracedTensor:
    """Numerically stable softmax along `axis`."""
    return emit(reduction.Softmax(axis=axis), x)


def log_softmax(x: TracedTensor, axis: int = -1) -> TracedTensor:
    """Numerically stable log-softmax along `axis`."""
    return emit(reduction.LogSoftmax(axis=axis), x)


# ---------------------------------------------------------------- contraction and model ops


def matmul(a: TracedTensor, b: TracedTensor) -> TracedTensor:
    """`a @ b` with torch.matmul's rules (1-D operands, broadcast batch dims)."""
    return emit(contraction.Matmul(), a, b)


def rms_norm(x: TracedTensor, w: TracedTensor, eps: float = 1e-6) -> TracedTensor:
    """RMS norm over the trailing dims w covers."""
    return emit(nn.RmsNorm(eps=eps), x, w)


def layer_norm(x: TracedTensor, w: TracedTensor, b: TracedTensor, eps: float = 1e-5) -> TracedTensor:
    """Layer norm over the trailing dims w and b cover."""
    return emit(nn.LayerNorm(eps=eps), x, w, b)


def rope(x: TracedTensor, cos: TracedTensor, sin: TracedTensor, positions: TracedTensor) -> TracedTensor:
    """Rotate-half rotary embedding: x (B, H, S, D), tables (P, D), positions (S,) or (B, S)."""
    return emit(nn.Rope(), x, cos, sin, positions)


def attention(
    q: TracedTensor,
    k: TracedTensor,
    v: TracedTensor,
    *,
    scale: float | None = None,
    causal: bool = False,
    kv_len: TracedTensor | None = None,
) -> TracedTensor:
    """Scaled dot-product attention, sdpa layout, grouped-query; kv_len masks a cache's tail."""
    extra = () if kv_len is None else (kv_len,)
    return emit(nn.Attention(scale=scale, causal=causal), q, k, v, *extra)


def embedding(table: TracedTensor, ids: TracedTensor) -> TracedTensor:
    """Rows of table (V, D) for integer ids of any shape."""
    return emit(nn.Embedding(), table, ids)


# ---------------------------------------------------------------- shape and data movement


def reshape(x: TracedTensor, shape: Sequence[Dim]) -> TracedTensor:
    """x in row-major order as `shape` (a tuple; one entry may be -1)."""
    return emit(movement.Reshape(tuple(shape)), x)


def transpose(x: TracedTensor, perm: Sequence[int]) -> TracedTensor:
    """Reorder all axes: result axis i is x's axis perm[i]."""
    return emit(movement.Transpose(tuple(perm)), x)


def slice(x: TracedTensor, axis: int, start: Dim, stop: Dim, step: int = 1) -> TracedTensor:
    """Elements start, start + step, ... below stop along `axis` (normalized bounds)."""
    return emit(movement.Slice(axis=axis, start=start, stop=stop, step=step), x)


def concat(xs: Sequence[TracedTensor], axis: int = 0) -> TracedTensor:
    """Join tensors along an existing axis."""
    return emit(movement.Concat(axis=axis), *xs)


def stack(xs: Sequence[TracedTensor], axis: int = 0) -> TracedTensor:
    """Join equal-shaped tensors along a new axis."""
    return emit(movement.Stack(axis=axis), *xs)


def split(
    x: TracedTensor, split_size_or_sections: int | Sequence[Dim], axis: int = 0
) -> tuple[TracedTensor, ...]:
    """Consecutive slices along `axis`, as torch.split: chunks of one size (the last may be
    smaller; needs a static extent) or explicit sections that add up to the extent."""
    ax = axis + x.ndim if isinstance(axis, int) and axis < 0 else axis
    if not isinstance(ax, int) or not 0 <= ax < x.ndim:
        raise _refuse(
            f"split: axis {axis!r} is out of range for rank {x.ndim}", f"-{x.ndim}..{x.ndim - 1}", axis
        )
    extent = x.shape[ax]
    if isinstance(split_size_or_sections, int) and not isinstance(split_size_or_sections, bool):
        size = split_size_or_sections
        if size < 1 or not isinstance(extent, int):
            raise _refuse(
                f"split: chunks of size {size} need a static extent and size >= 1, axis {ax} has extent "
                f"{format_dim(extent)}; give the sections explicitly",
                "size >= 1 over a static extent",
                (size, extent),
            )
        sections: list[Dim] = [builtins.min(size, extent - s) for s in range(0, extent, size)]
    else:
        sections = list(split_size_or_sections)
        if not all(is_dim(s) for s in sections):
            raise _refuse(
                f"split: sections must be ints or DimVars, got {sections!r}", "ints or DimVars", sections
            )
    total: Dim = 0
    for s in sections:
        total = total + s
    if not dims_equal(total, extent):
        shown = ", ".join(format_dim(s) for s in sections)
        raise _refuse(
            f"split: sections ({shown}) add up to {format_dim(total)}, axis {ax} has extent "
            f"{format_dim(extent)}",
            format_dim(extent),
            format_dim(total),
        )
    out, start = [], 0
    for s in sections:
        out.append(slice(x, ax, start, start + s))
        start = start + s
    return tuple(out)


def repeat_interleave(x: TracedTensor, repeats: int, axis: int) -> TracedTensor:
    """Repeat each element `repeats` times along `axis`."""
    return emit(movement.RepeatInterleave(repeats=repeats, axis=axis), x)


def broadcast_to(x: TracedTensor, shape: Sequence[Dim]) -> TracedTensor:
    """Stretch x numpy-style to `shape`."""
    return emit(movement.BroadcastTo(tuple(shape)), x)


def index_select(x: TracedTensor, axis: int, index: TracedTensor) -> TracedTensor:
    """Rows of x along `axis` picked by a 1-D integer index."""
    return emit(indexing.IndexSelect(axis=axis), x, index)


def gather(x: TracedTensor, axis: int, index: TracedTensor) -> TracedTensor:
    """torch.gather along `axis`."""
    return emit(indexing.Gather(axis=axis), x, index)


def cache_update(cache: TracedTensor, pos: TracedTensor, new: TracedTensor, axis: int = -2) -> TracedTensor:
    """A copy of cache with `new` written at offset pos along `axis` (functional)."""
    return emit(indexing.CacheUpdate(axis=axis), cache, pos, new)


# ---------------------------------------------------------------- creation and placement


def full(shape: Sequence[Dim], value: Scalar, dtype: str | DType) -> TracedTensor:
    """A tensor of `shape` filled with `value`."""
    return emit(Full(tuple(shape), value, _dtype("full", dtype)))


def zeros(shape: Sequence[Dim], dtype: str | DType) -> TracedTensor:
    """`full(shape, 0, dtype)` (False for bool)."""
    d = _dtype("zeros", dtype)
    return full(shape, False if d.is_bool else 0, d)


def arange(start: Dim, stop: Dim | None = None, step: int = 1, dtype: str | DType = "i64") -> TracedTensor:
    """`arange(n)` or `arange(start, stop, step)`, like torch.arange; bounds may be DimVars."""
    if stop is None:
        start, stop = 0, start
    return emit(Arange(start, stop, step, _dtype("arange", dtype)))


def reshard(x: TracedTensor, layout: Any = None, storage: Any = None) -> TracedTensor:
    """x placed with a new layout (Layout, ShardLayout or mesh[...]) and/or storage name."""
    if isinstance(layout, Placement):
        try:
            layout = layout.resolve(x.shape)
        except DSLError as err:
            raise err.at(user_loc()) from None
    try:
        op = placement.Reshard(layout=layout, storage=storage)
    except ValueError as err:
        raise _refuse(f"reshard: {err}", "a storage name", storage) from None
    return emit(op, x)


def local(x: TracedTensor) -> TracedTensor:
    """The part of sharded x that this execution instance owns (seed 000 §2.10)."""
    return emit(placement.Local(layout=x.type.layout if isinstance(x, TracedTensor) else None), x)


# ---------------------------------------------------------------- subscripts


def _index(i: Dim, extent: Dim, axis: int) -> Dim:
    start = extent + i if isinstance(i, int) and i < 0 else i
    if not (provably_le(0, start) and provably_le(start + 1, extent)):
        raise _refuse(
            f"getitem: index {format_dim(i)} is out of range for axis {axis} of extent {format_dim(extent)}",
            f"an index in [-{format_dim(extent)}, {format_dim(extent)})",
            i,
        )
    return start


def _bounds(s: builtins.slice, extent: Dim, axis: int) -> tuple[Dim, Dim, int]:
    step = 1 if s.step is None else s.step
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise _refuse(
            f"getitem: slice step must be an int >= 1, got {s.step!r} on axis {axis}", ">= 1", s.step
        )
    for bound in (s.start, s.stop):
        if bound is not None and not is_dim(bound):
            raise _refuse(
                f"getitem: slice bounds must be ints or DimVars, got {bound!r} on axis {axis}", "a dim", bound
            )
    if isinstance(extent, int) and all(b is None or isinstance(b, int) for b in (s.start, s.stop)):
        start, stop, _ = s.indices(extent)  # Python's clamping, exactly
        return start, builtins.max(start, stop), step

    def norm(b: Dim | None, default: Dim) -> Dim:
        if b is None:
            return default
        return extent + b if isinstance(b, int) and b < 0 else b

    return norm(s.start, 0), norm(s.stop, extent), step


def getitem(x: TracedTensor, key: Any) -> TracedTensor:
    """`x[key]`: ints (negative count from the end), slices with positive steps, None, Ellipsis.

    Built from `slice` ops and one `reshape` (dropping indexed axes, inserting None axes).
    Integer slice bounds on a static extent clamp as in Python; on a DimVar extent they must
    provably lie within it. Tensor indices are refused: use tf.index_select or tf.gather.
    """
    items = key if isinstance(key, tuple) else (key,)
    for k in items:
        if isinstance(k, (TracedTensor, bool)) or not (
            k is None or k is Ellipsis or isinstance(k, builtins.slice) or is_dim(k)
        ):
            raise _refuse(
                f"getitem: index {k!r} is not an int, slice, None or Ellipsis; for tensor indices use "
                "tf.index_select or tf.gather",
                "int, slice, None, Ellipsis",
                type(k).__name__,
            )
    if builtins.sum(k is Ellipsis for k in items) > 1:
        raise _refuse("getitem: at most one Ellipsis (...) per subscript", "one ...", key)
    consumed = builtins.sum(k is not None and k is not Ellipsis for k in items)
    if consumed > x.ndim:
        raise _refuse(f"getitem: {consumed} indices for a tensor of rank {x.ndim}", f"<= {x.ndim}", consumed)
    fill = (builtins.slice(None),) * (x.ndim - consumed)
    if Ellipsis in items:
        at = next(i for i, k in enumerate(items) if k is Ellipsis)
        items = items[:at] + fill + items[at + 1 :]
    else:
        items = items + fill
    cur, axis, plan = x, 0, []
    for k in items:
        if k is None:
            plan.append(("new", None))
            continue
        extent = cur.shape[axis]
        if isinstance(k, builtins.slice):
            start, stop, step = _bounds(k, extent, axis)
            if not (dims_equal(start, 0) and step == 1 and dims_equal(stop, extent)):
                cur = slice(cur, axis, start, stop, step)
            plan.append(("keep", axis))
        else:
            start = _index(k, extent, axis)
            cur = slice(cur, axis, start, start + 1)
            plan.append(("drop", axis))
        axis += 1
    if all(kind == "keep" for kind, _ in plan):
        return cur
    shape = tuple(1 if kind == "new" else cur.shape[a] for kind, a in plan if kind != "drop")
    return reshape(cur, shape)


# ---------------------------------------------------------------- unknown names


class UnknownOp(DSLError, AttributeError):
    """`tf.<name>` for a name not in the catalogue (an AttributeError too, so hasattr works)."""


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(f"module 'tf' has no attribute {name!r}")
    known = [
        n
        for n, v in globals().items()
        if callable(v) and getattr(v, "__module__", None) == __name__ and n[0].islower()
    ]
    close = difflib.get_close_matches(name, known, n=3)
    hint = (
        f"; did you mean {', '.join(f'tf.{c}' for c in close)}?"
        if close
        else "; see DESIGN.md §3 for the catalogue"
    )
    raise UnknownOp(
        f"unknown op tf.{name}{hint}", where=user_loc(), expected=close or "a catalogue op", got=name
    )
