"""The GEMM atom family: a proved GEMM region as one call of atoms/gemm.cuh's `gemm<GemmLayout>`.

    atom sm90_gemm_tma_wgmma_128x128x64_bf16_rcr(a, w, out0; m=T, n=128, k=64)
      ->  ws = gemm_workspace_bytes<GemmLayout::rcr>(...);
          gemm<GemmLayout::rcr>(b_a, b_w, b_out0, 1, d_T, 128, 64, ws, stream_)

The template picks its tier (sm90 collective, skinny split-K, mma.sync, SIMT) at the call. A
GEMM atom's name ends in its operands' storage (`_rrr`: B (K, N); `_rcr`: B stored (N, K),
K-major), which must be the proved region's and is passed to the runtime as `GemmLayout`. A
group of GEMMs sharing A (`ir.plan.gemm_groups`) is one `gemm_group` call; every member's region
is re-proved.
"""

from __future__ import annotations

from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.plan.atoms import GemmRegion, match_gemm
from tilefoundry.ir.plan.gemm_groups import gemm_members
from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype
from tilefoundry.ir.tile.expr import Const, Expr, mul
from tilefoundry.ir.tile.stmt import AtomCall, Kernel, Program

from .atoms import AtomKind, register
from .realize import Realization

# Macros a generated source defines before including the runtime, per atom-name prefix: the
# sm90 collective is compiled only into modules that use it.
SM90_GEMM_MACRO = "TILEFOUNDRY_CUDA_GEMM_SM90"
GEMM_DTYPES = ("f32", "bf16", "f16")
# The runtime's GemmLayout for each (A major, B major) of a proved region: r row-major, c
# column-major, for A, B and C in turn; also the suffix of the catalog atom's name.
GEMM_LAYOUTS = {("K", "N"): "rrr", ("K", "K"): "rcr"}

def _gemm_recheck(r: Realization) -> None:
    atom = r.body
    assert isinstance(atom, AtomCall)
    k = r.kernel
    for member in gemm_members(atom):
        region = match_gemm(Kernel(k.name, k.form, member.replaces, k.reads, k.writes, k.origin))
        why = None
        if isinstance(region, str):
            why = region
        elif (region.a, region.b, region.c) != (atom.operands[0], member.b, member.c):
            why = "the atom's operands are not the region's A, B and C"
        elif region.a.dtype.name not in GEMM_DTYPES:
            why = f"dtype {region.a.dtype} is not one of {', '.join(GEMM_DTYPES)}"
        elif "group" in atom.params and region.batch:
            why = "a grouped member has batch dims"
        else:
            why = _layout_mismatch(atom.atom, region)
        if why is not None:
            raise PlanError(
                f"cuda: kernel {k.name}: atom {atom.atom} no longer matches its region: {why}",
                where=k.name,
                expected="a proved GEMM region",
                got=why,
            )


def _layout_mismatch(name: str, region: GemmRegion) -> str | None:
    """Why atom `name` cannot realize the region's operand majors, or None."""
    a, b = region.a_major, region.b_major
    layout = GEMM_LAYOUTS.get((a, b))
    if layout is None:
        return f"the runtime has no GEMM layout for A {a}-major, B {b}-major"
    if not name.endswith(f"_{layout}"):
        return f"the region's operands are {layout} (A {a}-major, B {b}-major), not the atom's"
    return None


def _gemm_launch(program: Program, r: Realization, cx: CExpr) -> list[str]:
    atom = r.body
    assert isinstance(atom, AtomCall)
    layout = f"GemmLayout::{atom.atom.rsplit('_', 1)[1]}"
    a = atom.operands[0]
    what = f'"the GEMM atom of kernel {r.kernel.name}"'
    if "group" in atom.params:
        members = gemm_members(atom)
        t = ctype(a.dtype)
        group = (
            f"{{{{{', '.join(cname(m.b) for m in members)}}}, {{{', '.join(cname(m.c) for m in members)}}}, "
            f"{{{', '.join(cx(m.n) for m in members)}}}, {len(members)}}}"
        )
        dims = f"{cx(atom.params['m'])}, {cx(atom.params['k'])}"
        return [
            f"{{  // {atom.atom} x{len(members)} sharing A: C_s = A . B_s, {t} operands, f32 accumulation",
            f"  const GemmGroup<{t}> g_{group};",
            f"  const size_t ws_bytes_ = gemm_group_workspace_bytes<{layout}>({cname(a)}, g_, {dims});",
            "  DeviceScratch<unsigned char> ws_(e, static_cast<int64_t>(ws_bytes_), stream_);",
            f"  e.cuda(gemm_group<{layout}>({cname(a)}, g_, {dims}, ws_.ptr, stream_), {what});",
            "}",
        ]
    _, b, c = atom.operands
    batch: Expr = Const(1)
    for name, e in atom.params.items():
        if name.startswith("batch"):
            batch = mul(batch, e)
    ptrs = f"{cname(a)}, {cname(b)}, {cname(c)}"
    dims = f"{cx(batch)}, {cx(atom.params['m'])}, {cx(atom.params['n'])}, {cx(atom.params['k'])}"
    return [
        f"{{  // {atom.atom}: C = A . B, {ctype(a.dtype)} operands, f32 accumulation",
        f"  const size_t ws_bytes_ = gemm_workspace_bytes<{layout}>({ptrs}, {dims});",
        "  DeviceScratch<unsigned char> ws_(e, static_cast<int64_t>(ws_bytes_), stream_);",
        f"  e.cuda(gemm<{layout}>({ptrs}, {dims}, ws_.ptr, stream_), {what});",
        "}",
    ]


register(AtomKind("sm90_gemm_", _gemm_recheck, _gemm_launch, (SM90_GEMM_MACRO,)))
register(AtomKind("sm80_gemm_", _gemm_recheck, _gemm_launch))
register(AtomKind("cuda_gemm_", _gemm_recheck, _gemm_launch))
