"""A GEMM atom's prologue (`ir.plan.gemm_prologues`) in CUDA: the row kernel as a device functor.

The prologue kernel's one row (its statements for one instance of the row loop) is emitted as
a functor the skinny GEMM calls for each of A's rows, a warp's lanes together, writing the row
into the CTA's shared memory instead of A:

    struct attention__k0_rms_norm_prologue {
      const bf16* __restrict__ b_w; const bf16* __restrict__ b_x; bf16* __restrict__ b_t0; int64_t d_T;
      bool packed_;                                     // 16-byte packs: every packed base aligned
      __device__ void operator()(int64_t i0, bf16* b_arow_) const { ...lanes share the row... }
    };

The host asks before the row kernel's launch whether the atom's tier will stage A
(`gemm_stages_prologue`); only if not does the kernel run, and the answer goes to the GEMM call.
A row the functor cannot express (group scratch in shared memory, more than one row loop) keeps
the kernel: the flag is then false at compile time, and a decision says why.

A row kernel whose stored element is a row scale times an element map (`Kernel.element`: the
RMS norm's `rsqrt(mean(x^2) + eps) * (x * w)`, the scale's statistics as `Fold`s over the row)
is *folded* instead: nothing is staged and no CTA computes a row before streaming its weights
(only where x's and g's bases are 16-byte aligned: the functor moves packs only).
The functor gives the skinny kernel each 16-byte pack of A's element map as the warp reaches it
in its K loop, adding each statistic's terms there from the same loads; after the lanes'
butterfly the kernel multiplies each result by the row's scale (`folds_rows`, gemm_skinny.cuh):

    struct mlp__k0_rms_norm_prologue {
      ...the kernel's parameters...
      static constexpr int kFolds = 1;
      __device__ void pack(int64_t i0, int64_t jb_, bf16 (&a_)[8], float (&f_)[1]) const;  // x * w, x^2
      __device__ float scale(int64_t i0, const float (&f_)[1]) const;  // rsqrt(f_[0] / 2048 + eps)
    };

A then differs from the kernel's by where the scale is applied: the kernel rounds
`x * inv * w` to A's dtype, the fold rounds `x * w` and scales the f32 dot product, so results
agree within a rounding of A's dtype.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

from tilefoundry.ir.dtypes import DType, f32
from tilefoundry.ir.plan.gemm_groups import gemm_members
from tilefoundry.ir.plan.gemm_prologues import prologue_row
from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype
from tilefoundry.ir.tile.expr import (
    Bin,
    Cast,
    Const,
    Expr,
    Fold,
    Var,
    binary,
    cast,
    free_vars,
    identity,
    substitute,
    transform,
    walk,
)
from tilefoundry.ir.tile.stmt import Assign, AtomCall, Buffer, Kernel, Program, Seq, Stmt, Store, map_stmt

from .group import GroupCode
from .kernels import dim_names, functor_name, kernel_args, kernel_params
from .realize import Realization
from .serial import SerialCode, indent
from .vector import PackCode, plan_packs

LANES = 32  # a warp computes one row


@dataclass(frozen=True)
class PrologueCode:
    """The functor of one prologue, or why there is none.

    Attributes:
        lines: the functor's definition (empty when `refusal` is set).
        packed: the buffers whose base addresses its packed body needs 16-byte aligned.
        refusal: why the row cannot run inside the GEMM; the kernel then always runs.
        folded: the functor folds A into the K loop (`pack`, `scale`) instead of staging rows.
    """

    lines: tuple[str, ...]
    packed: tuple[Buffer, ...]
    refusal: str | None = None
    folded: bool = False


def staged_flag(p: Kernel) -> str:
    """The host entry's flag saying the GEMM atom computes A itself (so `p` must not run)."""
    return f"{p.name}_staged_"


# The prologue's code of each atom realization, computed once for its three readers (the device
# functor, the call's arguments, the host gate); held weakly, so it dies with the realization.
_REALIZED: weakref.WeakKeyDictionary[Realization, PrologueCode] = weakref.WeakKeyDictionary()


def realized_prologue(program: Program, r: Realization) -> PrologueCode:
    """The functor of the prologue of `r` (an atom realization whose AtomCall has one)."""
    code = _REALIZED.get(r)
    if code is None:
        atom = r.body
        assert isinstance(atom, AtomCall)
        code = _REALIZED[r] = _prologue_code(program, atom, r.reassociate, r.vectorize)
    return code


def _prologue_code(program: Program, atom: AtomCall, reassociate: bool, vectorize: bool) -> PrologueCode:
    """The functor of `atom`'s prologue under the options `reassociate` and `vectorize`: folded
    where its row is a row scale times an element map, else staged."""
    folded = _folded_code(program, atom, vectorize)
    if isinstance(folded, PrologueCode):
        return folded
    p = atom.prologue
    assert p is not None
    row = prologue_row(p)
    assert row is not None, "fuse_prologues admits one row loop only"
    a = atom.operands[0]
    arow = Buffer("arow_", a.dtype, (a.shape[1],), "temp")  # memory, not thread scratch: packs may store it

    def to_row(s: Stmt) -> Stmt | None:
        if isinstance(s, Store) and s.buffer is a:
            return Store(arow, s.index[1:], s.value)
        return None

    body = map_stmt(row.body, to_row)
    serial = SerialCode(dim_names(program), p.name)
    scalar = GroupCode(serial, LANES, set(), reassociate, False)
    lines = scalar.stmt(body, 2, {})
    packed = GroupCode(serial, LANES, set(), reassociate, True) if vectorize else None
    packed_lines = packed.stmt(body, 3, {}) if packed is not None else []
    if packed is not None and not packed.packed:
        packed = None  # no loop moves 16-byte packs: the scalar body alone
    if scalar.shared or scalar.workspaces or (packed is not None and (packed.shared or packed.workspaces)):
        return PrologueCode((), (), f"{p.name}'s row needs group scratch in shared memory")
    packs = packed.packed if packed is not None else []
    aligned = tuple(dict.fromkeys(b for plan in packs for b in plan.buffers if b is not arow))
    fields = [f"  {x};" for x in kernel_params(program, p).split(", ")]
    t = ctype(a.dtype)
    out = [
        f"// prologue {p.name}: its statements for one row {row.var} of A, the lanes of a warp together, "
        f"writing the row to {cname(arow)} (shared memory) instead of {a.name}",
        f"struct {functor_name(program, p, 'prologue')} {{",
        *fields,
        "  bool packed_;",
        f"  __device__ void operator()(int64_t {row.var}, {t}* {cname(arow)}) const {{",
        f"    const int lane_ = threadIdx.x % {LANES};",
    ]
    if packed is not None:
        out += ["    if (packed_) {", *packed_lines, "      return;", "    }"]
    out += [*lines, "  }", "};"]
    return PrologueCode(tuple(out), aligned)


PACK = 8  # elements of A a lane of the skinny kernel reads at a time (16 bytes of bf16 / f16)


@dataclass(frozen=True)
class RowScale:
    """A row kernel's element split as `scale * element`: `scale` free of the column, its
    statistics the `folds` (sums over the whole row); `element` an element map of the column,
    rounded to A's dtype (the A the folded GEMV multiplies, before the scale)."""

    scale: Expr
    element: Expr
    folds: tuple[Fold, ...]


def row_scale(p: Kernel, row: str, col: str, k: Expr, dtype: DType) -> RowScale | str:
    """`p`'s stored element at [row, col] as a row scale times an element map, or why it is not."""
    if p.element is None or len(p.element.index) != 2:
        return f"{p.name} offers no element expression over (row, column)"
    at = dict(zip((v.name for v in p.element.index), (Var(row), Var(col)), strict=True))
    e = substitute(p.element.expr, at)
    if not (isinstance(e, Cast) and e.dtype is dtype):
        return f"{p.name}'s element is not rounded to A's dtype"
    factors = _factors(e.a)
    scale = [f for f in factors if col not in free_vars(f)]
    element = [f for f in factors if col in free_vars(f)]
    folds = tuple(dict.fromkeys(x for f in scale for x in walk(f) if isinstance(x, Fold)))
    if not folds or any(isinstance(x, Fold) for f in element for x in walk(f)):
        return f"{p.name}'s element is not a row scale over folds times an element map"
    for fd in folds:
        if fd.op != "add" or fd.init != identity("add", fd.dtype) or fd.extent != k or _nested(fd):
            return f"{p.name} folds a statistic other than a sum over the whole row"
    return RowScale(_product(scale), cast(_product(element), dtype), folds)


def _factors(e: Expr) -> list[Expr]:
    if isinstance(e, Bin) and e.op == "mul":
        return _factors(e.a) + _factors(e.b)
    return [e]


def _product(factors: list[Expr]) -> Expr:
    return functools.reduce(lambda a, b: binary("mul", a, b), factors)


def _nested(fd: Fold) -> bool:
    return any(isinstance(x, Fold) for x in walk(fd.body))


def _folded_code(program: Program, atom: AtomCall, vectorize: bool) -> PrologueCode | str:
    """The folding functor of `atom`'s prologue (module doc), or why its row does not fold."""
    p = atom.prologue
    assert p is not None
    row = prologue_row(p)
    assert row is not None, "fuse_prologues admits one row loop only"
    a = atom.operands[0]
    k = a.shape[1]
    if not isinstance(k, int) or k % PACK or a.dtype.itemsize * PACK != 16:
        return "A's rows are not whole 16-byte packs of a static length"
    col, base = "jf_", "jb_"
    rs = row_scale(p, row.var, col, Const(k), a.dtype)
    if isinstance(rs, str):
        return rs
    cx = CExpr(dim_names(program))
    sums = [f"q{i}_" for i in range(len(rs.folds))]
    updates = [
        Assign(q, binary("add", Var(q, fd.dtype), substitute(fd.body, {fd.var: Var(col)})))
        for q, fd in zip(sums, rs.folds, strict=True)
    ]
    arow = Buffer("arow_", a.dtype, (k,), "temp")  # stands for the pack a_: its lanes are a_'s
    body = Seq((Store(arow, (Var(col),), rs.element), *updates))
    plan = plan_packs(col, Const(k), body, "g", frozenset(sums)) if vectorize else "option vectorize is off"
    if isinstance(plan, str) or plan.lanes != PACK:
        return f"{p.name}'s row does not move 16-byte packs: {plan if isinstance(plan, str) else plan.lanes}"
    code = PackCode(plan, base)
    (store,) = plan.stores
    lines = [
        *(f"float {q} = f_[{i}];" for i, q in enumerate(sums)),
        *code.prologue(cx, body),
        *code.lanes(body, cx),
        "#pragma unroll",
        f"for (int l_ = 0; l_ < {PACK}; ++l_) a_[l_] = {store.name}[l_];",
        *(f"f_[{i}] = {q};" for i, q in enumerate(sums)),
    ]
    totals = {fd: Var(f"f_[{i}]", fd.dtype) for i, fd in enumerate(rs.folds)}
    scale = transform(rs.scale, lambda x: totals.get(x) if isinstance(x, Fold) else None)
    t, n = ctype(a.dtype), len(sums)
    return PrologueCode(
        (
            f"// prologue {p.name} folded into the GEMV's K loop: A[{row.var}, {col}] = "
            f"cast<{t}>(scale({row.var}) * element({row.var}, {col})), the scale from {n} row sum(s)",
            f"struct {functor_name(program, p, 'prologue')} {{",
            *(f"  {x};" for x in kernel_params(program, p).split(", ")),
            f"  static constexpr int kFolds = {n};",
            f"  __device__ void pack(int64_t {row.var}, int64_t {base}, {t} (&a_)[{PACK}], "
            f"float (&f_)[{n}]) const {{",
            *indent(lines, 2),
            "  }",
            f"  __device__ float scale(int64_t {row.var}, const float (&f_)[{n}]) const {{",
            f"    return {cx(cast(scale, f32))};",
            "  }",
            "};",
        ),
        tuple(b for b in plan.buffers if b is not arow),
        folded=True,
    )


def construct(program: Program, atom: AtomCall, code: PrologueCode) -> str:
    """The host line building the functor `pro_` for the GEMM call."""
    p = atom.prologue
    assert p is not None
    args = ", ".join(kernel_args(program, p))
    if code.folded:  # packs only: the host gate folds it only where every packed base is aligned
        return f"const {functor_name(program, p, 'prologue')} pro_{{{args}}};"
    return f"const {functor_name(program, p, 'prologue')} pro_{{{args}, {_aligned(code)}}};"


def _aligned(code: PrologueCode) -> str:
    """The host's test that every base address the functor's packs read is 16-byte aligned."""
    ptrs = ", ".join(cname(b) for b in code.packed)
    return f"aligned16({{{ptrs}}})" if ptrs else "false"


def group_init(atom: AtomCall, cx: CExpr, settled: bool = False, name: str = "g_") -> str:
    """The GemmGroup `name` of a GEMM atom call (each member's B, C and N) that the call and the
    prologue gate before it pass the runtime; `settled` per gemm_atom.b_settled."""
    members = gemm_members(atom)
    bs = ", ".join(cname(m.b) for m in members)
    cs = ", ".join(cname(m.c) for m in members)
    ns = ", ".join(cx(m.n) for m in members)
    flag = ", true" if settled else ""
    t = ctype(atom.operands[0].dtype)
    return f"const GemmGroup<{t}> {name}{{{{{bs}}}, {{{cs}}}, {{{ns}}}, {len(members)}{flag}}};"


def gate(atom: AtomCall, layout: str, epilogue_members: int, cx: CExpr, code: PrologueCode) -> list[str]:
    """Host lines before the prologue kernel's launch: whether the GEMM atom stages A itself.

    Args:
        epilogue_members: the members an epilogue covers (the staged launch is the epilogue's),
            0 without one.
    """
    p = atom.prologue
    assert p is not None
    flag = staged_flag(p)
    if code.refusal is not None:
        return [f"const bool {flag} = false;  // {code.refusal}"]
    a = atom.operands[0]
    dims = f"{cx(atom.params['m'])}, {cx(atom.params['k'])}"
    aligned = f"{_aligned(code)} && " if code.folded else ""
    return [
        f"bool {flag} = false;",
        "{",
        f"  {group_init(atom, cx)}",
        f"  {flag} = {aligned}gemm_stages_prologue<{layout}, {epilogue_members}>({cname(a)}, g_, {dims});",
        "}",
    ]


def gates(program: Program, atoms: list[Realization], cx: CExpr) -> dict[int, list[str]]:
    """id of each prologue kernel -> the host lines deciding, before its launch, whether it runs."""
    out: dict[int, list[str]] = {}
    for r in atoms:
        atom = r.body
        if not isinstance(atom, AtomCall) or atom.prologue is None:
            continue
        layout = f"GemmLayout::{atom.atom.rsplit('_', 1)[1]}"
        members = len(gemm_members(atom)) if atom.epilogue is not None else 0
        code = realized_prologue(program, r)
        out[id(atom.prologue)] = gate(atom, layout, members, cx, code)
    return out
