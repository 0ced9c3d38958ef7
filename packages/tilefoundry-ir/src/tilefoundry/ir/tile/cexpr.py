"""C++ text of TileIR scalar expressions, types and literals, shared by the C++ targets (cpu, cuda).

Each target's runtime provides the names used here with the same meaning: the storage types
`bf16`/`f16`, `cast<T>`, `max_nan`/`min_nan`, `ipow`, `sigmoid`, `rsqrt`, and `add_rn`/`sub_rn`/
`mul_rn` (two 16-bit floats added, subtracted or multiplied, rounded once to their type).

Bin("max", x, y, f32)          -> max_nan(x, y)
Cast(Load(x_bf16, (i,)), f32)  -> cast<float>(x[i])
Const(inf, f32)                -> std::numeric_limits<float>::infinity()
Cast(Bin("mul", Cast(a_bf16, f32), Cast(b_bf16, f32), f32), bf16)  -> mul_rn(a, b)

The last form is the same value: the f32 sum, difference or product of two 16-bit floats either
is exact (a product's 22 significant bits at most; a sum whose exponents differ by 12 or less) or
lies far closer to the larger operand than any rounding boundary of the 16-bit type, so rounding it
to f32 first never moves the 16-bit result. GPUs compute it in one 16-bit instruction (a pair of
them in one `HADD2` / `HMUL2`) instead of two conversions, the f32 operation and a rounding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..dims import Dim, format_dim
from ..dtypes import DType
from ..errors import PlanError
from .expr import Bin, Cast, Const, Expr, Fold, Load, Select, Un, Var, dim_expr
from .stmt import Buffer, Program

CTYPE = {
    "f64": "double",
    "f32": "float",
    "bf16": "bf16",
    "f16": "f16",
    "i64": "int64_t",
    "i32": "int32_t",
    "i16": "int16_t",
    "i8": "int8_t",
    "u8": "uint8_t",
    "bool": "bool",
}

_INFIX = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "/",
    "mod": "%",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "&&",
    "or": "||",
    "xor": "!=",
}

# `and` / `or` of two operands that cannot fault, evaluated whole: a short circuit is a branch,
# and past one ptxas sinks a loop's loads to their uses (an argmax scan's packs went one at a time).
_WHOLE = {"and": "&", "or": "|"}

# Tests and logic on any operands, and float arithmetic: computed in registers, never undefined.
_TESTS = frozenset({"lt", "le", "gt", "ge", "eq", "ne", "and", "or", "xor"})
_FLOAT_ARITHMETIC = frozenset({"add", "sub", "mul", "max", "min"})


def _cannot_fault(e: Expr) -> bool:
    """`e` reads no memory and has no undefined case: an operand safe to evaluate where a short
    circuit would have skipped it (no load a bounds test guards, no division a zero test guards,
    no integer overflow or float-to-integer conversion a range test guards)."""
    if isinstance(e, (Var, Const)):
        return True
    if isinstance(e, Cast):
        return e.dtype.is_float and _cannot_fault(e.a)
    if not isinstance(e, Bin):
        return False
    safe_op = e.op in _TESTS or (e.op in _FLOAT_ARITHMETIC and e.dtype.is_float)
    return safe_op and _cannot_fault(e.a) and _cannot_fault(e.b)


# 16-bit float operations whose once-rounded result equals rounding the f32 result (see above).
_ROUNDED_16 = {"add": "add_rn", "sub": "sub_rn", "mul": "mul_rn"}

_UNARY = {
    "exp": "std::exp",
    "exp2": "std::exp2",
    "log": "std::log",
    "log2": "std::log2",
    "log1p": "std::log1p",
    "sqrt": "std::sqrt",
    "rsqrt": "rsqrt",
    "tanh": "std::tanh",
    "erf": "std::erf",
    "sigmoid": "sigmoid",
    "abs": "std::abs",
}


def cname(buffer: Buffer) -> str:
    """The C++ name of a buffer's pointer: prefixed, so no parameter name meets a keyword."""
    return f"b_{buffer.name}"


def ctype(dtype: DType) -> str:
    """The C++ element type of a dtype.

    Raises:
        PlanError: fp8 dtypes, which generated code has no storage type for.
    """
    if dtype.name not in CTYPE:
        raise PlanError(
            f"dtype {dtype} has no storage type in generated C++", expected=" ".join(CTYPE), got=dtype.name
        )
    return CTYPE[dtype.name]


def literal(value: int | float | bool, dtype: DType) -> str:
    """A C++ literal of `dtype`."""
    t = ctype(dtype)
    if dtype.is_bool:
        return "true" if value else "false"
    if dtype.is_float:
        base = "float" if dtype.bits <= 32 else "double"
        v = float(value)
        if math.isnan(v):
            text = f"std::numeric_limits<{base}>::quiet_NaN()"
        elif math.isinf(v):
            text = f"{'-' if v < 0 else ''}std::numeric_limits<{base}>::infinity()"
        else:
            text = repr(v) + ("f" if base == "float" else "")
        return text if base == t else f"cast<{t}>({text})"
    v = int(value)
    if dtype.bits == 64 and v == -(2**63):
        return "(-9223372036854775807LL - 1)"
    return f"int64_t({v}LL)" if t == "int64_t" else f"static_cast<{t}>({v})"


class CExpr:
    """Emits expressions; `names` maps a Var name to its C++ spelling (lane arrays, dims)."""

    def __init__(self, names: Mapping[str, str]):
        self.names = names

    def __call__(self, e: Expr) -> str:
        if isinstance(e, Const):
            return literal(e.value, e.dtype)
        if isinstance(e, Var):
            return self.names.get(e.name, e.name)
        if isinstance(e, Load):
            return f"{cname(e.buffer)}[{self.linear(e.buffer.shape, e.index)}]"
        if isinstance(e, Cast):
            return self.cast(e)
        if isinstance(e, Select):
            return f"({self(e.cond)} ? {self(e.a)} : {self(e.b)})"
        if isinstance(e, Un):
            return self.unary(e)
        if isinstance(e, Fold):
            return self.fold(e)
        assert isinstance(e, Bin)
        return self.binary(e)

    def cast(self, e: Cast) -> str:
        """A conversion; a 16-bit add, sub or mul computed in a wider float and rounded back is
        printed as the 16-bit operation itself (the module docstring says why it is exact)."""
        inner = e.a
        if (
            e.dtype.is_float
            and e.dtype.bits == 16
            and isinstance(inner, Bin)
            and inner.op in _ROUNDED_16
            and inner.dtype.is_float
            and inner.dtype.bits >= 32
            and all(isinstance(x, Cast) and x.a.dtype == e.dtype for x in (inner.a, inner.b))
        ):
            a, b = (x.a for x in (inner.a, inner.b))  # type: ignore[attr-defined]
            return f"{_ROUNDED_16[inner.op]}({self(a)}, {self(b)})"
        return f"cast<{ctype(e.dtype)}>({self(e.a)})"

    def fold(self, e: Fold) -> str:
        """A Fold as an immediately invoked lambda: a loop in the reading thread."""
        acc = Var(f"{e.var}_acc", e.dtype)
        step = self(Bin(e.op, acc, e.body, e.dtype))
        return (
            f"([&]() {{ {ctype(e.dtype)} {acc.name} = {self(e.init)}; "
            f"for (int64_t {e.var} = 0; {e.var} < {self(e.extent)}; ++{e.var}) {acc.name} = {step}; "
            f"return {acc.name}; }}())"
        )

    def unary(self, e: Un) -> str:
        a = self(e.a)
        if e.op == "neg":
            return self.narrow(f"(-{a})", e.dtype)
        if e.op == "not":
            return f"(!{a})"
        return f"{_UNARY[e.op]}({a})"

    def binary(self, e: Bin) -> str:
        a, b = self(e.a), self(e.b)
        if e.op == "max":
            return f"max_nan({a}, {b})"
        if e.op == "min":
            return f"min_nan({a}, {b})"
        if e.op == "pow":
            return f"std::pow({a}, {b})" if e.dtype.is_float else f"ipow<{ctype(e.dtype)}>({a}, {b})"
        if e.op in _WHOLE and _cannot_fault(e.a) and _cannot_fault(e.b):
            return f"({a} {_WHOLE[e.op]} {b})"
        text = f"({a} {_INFIX[e.op]} {b})"
        return (
            text
            if e.op in ("lt", "le", "gt", "ge", "eq", "ne", "and", "or", "xor")
            else self.narrow(text, e.dtype)
        )

    @staticmethod
    def narrow(text: str, dtype: DType) -> str:
        """C++ promotes sub-int arithmetic to int; round it back to the dtype (wrapping like torch)."""
        if dtype.is_integer and dtype.bits < 32:
            return f"static_cast<{ctype(dtype)}>{text}"
        return text

    def dim(self, d: Dim) -> str:
        """An extent as C++ (DimVars are the entry's `d_<name>` values)."""
        return self(dim_expr(d))

    def linear(self, shape: tuple[Dim, ...], index: tuple[Expr, ...]) -> str:
        """Row-major offset of `index` in a compact buffer of `shape`."""
        if not index:
            return "0"
        text = self(index[0])
        for d, i in zip(shape[1:], index[1:], strict=True):
            text = f"({text}) * {self.dim(d)} + {self(i)}"
        return text


def shape_text(shape: tuple[Dim, ...]) -> str:
    """`(T, 64)` / `(24,)`: a shape as generated comments and entry messages show it."""
    return "(" + ", ".join(format_dim(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def entry_checks(program: Program, cx: CExpr, arg: str) -> list[str]:
    """The host entry's argument checks, through the `Entry e` of runtime/host_checks.h.

    Every target's entry runs the same checks in the same order: each parameter's device, dtype,
    rank and contiguity (`e.tensor`), each DimVar bound from its first extent with its range
    checked (`e.bind`), every other extent against its declaration (`e.extent`), and outputs
    overlapping no other parameter but, exactly, the input each updates in place (`e.noalias`,
    `Program.updates`). `arg` prefixes the TensorView parameter names.
    """
    out = []
    for b in program.params:
        decl = f"{shape_text(b.shape)} {b.dtype}"
        out.append(f'  e.tensor({arg}{b.name}, "{b.name}", dtype<{ctype(b.dtype)}>(), {b.rank}, "{decl}");')
    bound = set()
    for d in program.dims:
        p = program.params[d.param]
        out.append(
            f'  const int64_t d_{d.var.name} = e.bind({arg}{p.name}, "{p.name}", {d.axis}, "{d.var.name}", '
            f"{d.var.lo}, {d.var.hi});"
        )
        bound.add((d.param, d.axis))
    for pi, b in enumerate(program.params):
        for axis, dim in enumerate(b.shape):
            if (pi, axis) not in bound:
                want = f'{cx.dim(dim)}, "{format_dim(dim)}"'
                out.append(f'  e.extent({arg}{b.name}, "{b.name}", {axis}, {want});')
    pairs = ", ".join(f'{{"{b.name}", &{arg}{b.name}}}' for b in program.params)
    n_in = len(program.inputs)
    updates = ", ".join(f"{{{n_in + j}, {i}}}" for j, i in program.updates.items())
    out.append(f"  e.noalias({{{pairs}}}, {program.output_count}{f', {{{updates}}}' if updates else ''});")
    return out
