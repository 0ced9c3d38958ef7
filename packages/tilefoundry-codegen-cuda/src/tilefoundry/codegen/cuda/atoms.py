"""Whole-region atoms: a proved region realized as one call into the runtime's atom templates.

Seed 003 lets a target collapse a proved region into one opaque atom if it keeps the region's
values, layout correspondence, alias contract and numerical policy. Selection happened in
planning (`ir.plan.atoms` for GEMMs, by the catalog's atoms); here the proof is re-done on the
final body before any code is written, so stale metadata cannot change what runs:

    atom sm90_gemm_tma_wgmma_128x128x64_bf16_rcr(a, w, out0; m=T, n=128, k=64)
      ->  ws = gemm_workspace_bytes<GemmLayout::rcr>(...);
          gemm<GemmLayout::rcr>(b_a, b_w, b_out0, 1, d_T, 128, 64, ws, stream_)

The atom template picks its tier (sm90 collective, skinny split-K, mma.sync, SIMT) from the
facts at the call (device, extents, alignment): one public entry per atom, as seed 000 §3 asks
of runtime ops. Each atom kind registers its re-check, its host launch and the macros its
templates need. A GEMM atom's name ends in its operands' storage (`_rrr`: B (K, N); `_rcr`: B
stored (N, K), K-major), which must be the proved region's and is passed to the runtime as
`GemmLayout`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.plan.atoms import GemmRegion, match_gemm
from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype
from tilefoundry.ir.tile.expr import Const, Expr, mul
from tilefoundry.ir.tile.stmt import AtomCall, Kernel, Program

from .attention import atom_blocker, match_attention
from .realize import Realization

# Macros a generated source defines before including the runtime, per atom-name prefix: the
# sm90 collective is compiled only into modules that use it.
SM90_GEMM_MACRO = "TILEFOUNDRY_CUDA_GEMM_SM90"
GEMM_DTYPES = ("f32", "bf16", "f16")
# The runtime's GemmLayout for each (A major, B major) of a proved region: r row-major, c
# column-major, for A, B and C in turn; also the suffix of the catalog atom's name.
GEMM_LAYOUTS = {("K", "N"): "rrr", ("K", "K"): "rcr"}


@dataclass(frozen=True)
class AtomKind:
    """What the code generator knows about one family of catalog atoms (matched by name prefix)."""

    prefix: str
    recheck: Callable[[Realization], None]
    launch: Callable[[Program, Realization, CExpr], list[str]]
    macros: tuple[str, ...] = ()


KINDS: list[AtomKind] = []


def _kind(r: Realization) -> AtomKind:
    atom = r.body
    assert isinstance(atom, AtomCall)
    for k in KINDS:
        if atom.atom.startswith(k.prefix):
            return k
    raise PlanError(
        f"cuda: kernel {r.kernel.name}: the atom {atom.atom} has no CUDA realization; known atom families: "
        f"{', '.join(k.prefix for k in KINDS)}",
        where=r.kernel.name,
        expected=[k.prefix for k in KINDS],
        got=atom.atom,
    )


def features(r: Realization) -> tuple[str, ...]:
    """Macros the atom's templates need defined before <tilefoundry/runtime.h>."""
    return _kind(r).macros


def emit_device(program: Program, r: Realization) -> list[str]:
    """Device code of an atom: its templates live in the runtime headers; a comment marks the kernel."""
    _kind(r).recheck(r)
    k = r.kernel
    lines = [f"// kernel {k.name} [{k.form}]" + (f": {', '.join(k.origin)}" if k.origin else "")]
    return [*lines, *(f"//   {d}" for d in k.decisions), ""]


def launch(program: Program, r: Realization, cx: CExpr) -> list[str]:
    """Host lines calling the atom."""
    return _kind(r).launch(program, r, cx)


# ---------------------------------------------------------------- GEMM


def _gemm_recheck(r: Realization) -> None:
    atom = r.body
    assert isinstance(atom, AtomCall)
    k = r.kernel
    region = match_gemm(Kernel(k.name, k.form, atom.replaces, k.reads, k.writes, k.origin))
    why = None
    if isinstance(region, str):
        why = region
    elif (region.a, region.b, region.c) != atom.operands:
        why = "the atom's operands are not the region's A, B and C"
    elif region.a.dtype.name not in GEMM_DTYPES:
        why = f"dtype {region.a.dtype} is not one of {', '.join(GEMM_DTYPES)}"
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
    a, b, c = atom.operands
    layout = f"GemmLayout::{atom.atom.rsplit('_', 1)[1]}"
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
        f"  e.cuda(gemm<{layout}>({ptrs}, {dims}, ws_.ptr, stream_), "
        f'"the GEMM atom of kernel {r.kernel.name}");',
        "}",
    ]


KINDS.append(AtomKind("sm90_gemm_", _gemm_recheck, _gemm_launch, (SM90_GEMM_MACRO,)))
KINDS.append(AtomKind("sm80_gemm_", _gemm_recheck, _gemm_launch))
KINDS.append(AtomKind("cuda_gemm_", _gemm_recheck, _gemm_launch))


# ---------------------------------------------------------------- attention


def _attention_recheck(r: Realization) -> None:
    atom = r.body
    assert isinstance(atom, AtomCall)
    k = r.kernel
    region = match_attention(Kernel(k.name, k.form, atom.replaces, k.reads, k.writes, k.origin))
    why = region if isinstance(region, str) else atom_blocker(region)
    if why is None and not isinstance(region, str):
        operands = (region.q, region.k, region.v, region.out) + ((region.kv_len,) if region.kv_len else ())
        if operands != atom.operands:
            why = "the atom's operands are not the region's q, k, v, out and kv_len"
    if why is not None:
        raise PlanError(
            f"cuda: kernel {k.name}: atom {atom.atom} no longer matches its region: {why}",
            where=k.name,
            expected="a proved attention region",
            got=why,
        )


def _attention_launch(program: Program, r: Realization, cx: CExpr) -> list[str]:
    atom = r.body
    assert isinstance(atom, AtomCall)
    q, k, v, out, *kv_len = atom.operands
    t = ctype(q.dtype)
    p = atom.params
    length = f"{ctype(kv_len[0].dtype)}" if kv_len else "void"
    lens = f"{cname(kv_len[0])}, {'true' if kv_len[0].rank == 1 else 'false'}" if kv_len else "nullptr, false"
    extents = ", ".join(cx(p[x]) for x in ("batch", "heads", "kv_heads", "sq", "skv"))
    causal = "true" if p["causal"] == Const(1) else "false"
    d = q.shape[3]
    return [
        f"{{  // {atom.atom}: flash attention, online softmax over K/V tiles",
        f"  const AttentionArgs<{t}, {length}> a_{{{cname(q)}, {cname(k)}, {cname(v)}, {cname(out)}, {lens}, "
        f"{extents}, {cx(p['scale'])}, {causal}}};",
        f"  const size_t ws_bytes_ = attention_workspace_bytes(a_, {d});",
        "  DeviceScratch<unsigned char> ws_(e, static_cast<int64_t>(ws_bytes_), stream_);",
        f"  e.cuda(attention<{d}, {p['stages'].value}>(a_, ws_.ptr, stream_), "
        f'"the attention atom of kernel {r.kernel.name}");',
        "}",
    ]


KINDS.append(AtomKind("cuda_attention_", _attention_recheck, _attention_launch))
