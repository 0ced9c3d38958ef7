"""A GEMM chain (`ir.plan.gemm_chains`) in CUDA: both calls as one split launch where it fits.

The first call's host block asks the runtime to run the pair (atoms/gemm_chain.cuh) and, only
where it did not, makes its own call; the second call's block runs only where the pair did not.
Each call's epilogue flag starts from the chain's, so neither epilogue kernel launches after the
pair ran as one:

    bool k7_matmul_chained_ = false;
    {  // ... x2 and k7_matmul's, as one launch split over t5's columns where it fits
      const GemmGroup<bf16> g_{...};  const mlp__k5_mul_epilogue epi_{...};
      const GemmGroup<bf16> g2_{...}; const mlp__k8_add_epilogue epi2_{...};
      ...
      e.cuda(gemm_chain<GemmLayout::rcr, 2, 8>(b_t0, g_, d_tokens, int64_t(2048LL), epi_, b_t5, g2_,
             int64_t(6144LL), epi2_, ws_.ptr, stream_, &k7_matmul_chained_), ...);
    }
    bool k5_mul_applied_ = k7_matmul_chained_;
    if (!k7_matmul_chained_) { ...the first call as unchained... }

The split launch holds A's row in registers, P 16-byte packs a lane: the chain is emitted only
for a constant K that is 256 · P with P up to MAX_PACKS; otherwise a comment says why and both
calls are made as before.
"""

from __future__ import annotations

from tilefoundry.ir.plan.gemm_groups import gemm_members
from tilefoundry.ir.tile.cexpr import CExpr, cname
from tilefoundry.ir.tile.expr import Const
from tilefoundry.ir.tile.stmt import AtomCall, Kernel, Program

from .gemm_prologue import group_init
from .kernels import functor_name, kernel_args

LANE_K = 256  # elements of K a warp's lanes cover with one 16-byte pack each
MAX_PACKS = 16  # packs of A a lane holds (K up to 4096)


def chain_packs(atom: AtomCall) -> int | None:
    """P of the split launch for a chained call (K = 256 · P), or None where the target refuses it."""
    k = atom.params["k"]
    if atom.chain is None or not isinstance(k, Const):
        return None
    packs, rest = divmod(int(k.value), LANE_K)
    return packs if rest == 0 and 1 <= packs <= MAX_PACKS else None


def chain_refusal(atom: AtomCall) -> str | None:
    """Why a chained call is emitted unchained, or None (no chain, or one the target takes)."""
    if atom.chain is None or chain_packs(atom) is not None:
        return None
    return f"no chain with {atom.chain.name}: K is not a constant {LANE_K} x 1..{MAX_PACKS}"


def chain_flag(second: Kernel) -> str:
    """The host entry's flag saying the chain ending in GEMM kernel `second` ran as one launch."""
    return f"{second.name}_chained_"


def ends_chain(program: Program, second: Kernel) -> bool:
    """Whether GEMM kernel `second` ends a chain that is emitted (its flag is `chain_flag(second)`)."""
    return any(
        isinstance(k.body, AtomCall) and k.body.chain is second and chain_packs(k.body) is not None
        for k in program.kernels
    )


def unless_chained(flag: str, lines: list[str]) -> list[str]:
    """An epilogue call's host block, run only where the chain did not: its epilogue flag (the
    block's first line) starts from the chain's."""
    head, *block = lines
    assert head.endswith(" = false;"), head
    return [head.removesuffix("false;") + f"{flag};", f"if (!{flag}) {{", *("  " + x for x in block), "}"]


def chain_block(program: Program, first: Kernel, cx: CExpr, layout: str, group_lines: list[str]) -> list[str]:
    """Host lines asking the runtime to run the chain of GEMM kernel `first` as one launch, before
    its own block.

    Args:
        group_lines: the first call's GemmGroup `g_` lines (with its settled note).
    """
    atom = first.body
    assert isinstance(atom, AtomCall)
    second, packs = atom.chain, chain_packs(atom)
    assert second is not None and packs is not None and atom.epilogue is not None
    nxt = second.body
    assert isinstance(nxt, AtomCall) and nxt.epilogue is not None
    flag = chain_flag(second)
    a, h = atom.operands[0], nxt.operands[0]
    count = len(gemm_members(atom))
    epi, epi2 = atom.epilogue, nxt.epilogue
    m, k, k2 = (cx(atom.params["m"]), cx(atom.params["k"]), cx(nxt.params["k"]))
    template = f"{layout}, {count}, {packs}"
    functors = [
        f"  const {functor_name(program, ep, 'epilogue')} {name}{{{', '.join(kernel_args(program, ep))}}};"
        for ep, name in ((epi, "epi_"), (epi2, "epi2_"))
    ]
    return [
        f"bool {flag} = false;",
        f"{{  // {atom.atom} x{count} and {second.name}'s, as one launch split over {h.name}'s columns "
        "where it fits (atoms/gemm_chain.cuh)",
        *group_lines,
        functors[0],
        f"  {group_init(nxt, cx, name='g2_')}",
        functors[1],
        f"  const size_t ws_bytes_ = gemm_chain_workspace_bytes<{template}>({cname(a)}, g_, {m}, {k}, "
        f"{cname(h)}, g2_, {k2});",
        "  DeviceScratch<unsigned char> ws_(e, static_cast<int64_t>(ws_bytes_), stream_);",
        f"  e.cuda(gemm_chain<{template}>({cname(a)}, g_, {m}, {k}, epi_, {cname(h)}, g2_, {k2}, epi2_, "
        f'ws_.ptr, stream_, &{flag}), "the GEMM chain of kernels {first.name} and {second.name}");',
        "}",
    ]
