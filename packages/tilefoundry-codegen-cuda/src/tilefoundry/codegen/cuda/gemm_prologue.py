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
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from tilefoundry.ir.plan.gemm_groups import gemm_members
from tilefoundry.ir.plan.gemm_prologues import prologue_row
from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype
from tilefoundry.ir.tile.stmt import AtomCall, Buffer, Kernel, Program, Stmt, Store, map_stmt

from .group import GroupCode
from .kernels import dim_names, functor_name, kernel_args, kernel_params
from .realize import Realization
from .serial import SerialCode

LANES = 32  # a warp computes one row


@dataclass(frozen=True)
class PrologueCode:
    """The functor of one prologue, or why there is none.

    Attributes:
        lines: the functor's definition (empty when `refusal` is set).
        packed: the buffers whose base addresses its packed body needs 16-byte aligned.
        refusal: why the row cannot run inside the GEMM; the kernel then always runs.
    """

    lines: tuple[str, ...]
    packed: tuple[Buffer, ...]
    refusal: str | None = None


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
    """The functor of `atom`'s prologue under the options `reassociate` and `vectorize`."""
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
    if scalar.shared or scalar.ws_types or (packed is not None and (packed.shared or packed.ws_types)):
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


def construct(program: Program, atom: AtomCall, code: PrologueCode) -> str:
    """The host line building the functor `pro_` for the GEMM call."""
    p = atom.prologue
    assert p is not None
    args = ", ".join(kernel_args(program, p))
    ptrs = ", ".join(cname(b) for b in code.packed)
    packed = f"aligned16({{{ptrs}}})" if ptrs else "false"
    return f"const {functor_name(program, p, 'prologue')} pro_{{{args}, {packed}}};"


def group_init(atom: AtomCall, cx: CExpr, settled: bool = False) -> str:
    """The `g_` GemmGroup of a GEMM atom call (each member's B, C and N) that the call and the
    prologue gate before it pass the runtime; `settled` per gemm_atom.b_settled."""
    members = gemm_members(atom)
    bs = ", ".join(cname(m.b) for m in members)
    cs = ", ".join(cname(m.c) for m in members)
    ns = ", ".join(cx(m.n) for m in members)
    flag = ", true" if settled else ""
    t = ctype(atom.operands[0].dtype)
    return f"const GemmGroup<{t}> g_{{{{{bs}}}, {{{cs}}}, {{{ns}}}, {len(members)}{flag}}};"


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
    return [
        f"bool {flag} = false;",
        "{",
        f"  {group_init(atom, cx)}",
        f"  {flag} = gemm_stages_prologue<{layout}, {epilogue_members}>({cname(a)}, g_, {dims});",
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
