"""The attention atom family: a proved attention region as one call of atoms/attention.cuh."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.target import TargetCatalog
from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype
from tilefoundry.ir.tile.expr import Const
from tilefoundry.ir.tile.stmt import AtomCall, Kernel, Program

from .atoms import AtomKind, register
from .attention import atom_blocker, match_attention
from .options import ATTENTION_WARP_ROWS
from .realize import Realization

PREFIX = "cuda_attention_"


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
        elif atom.params.get("out_bshd") != Const(int(region.out_bshd)):
            why = "the atom's out layout is not the one the region stores"
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
    # out's rows in (B, Sq, Hq, D) order: the stores of a folded reshape(transpose(o)) copy
    bshd = "true" if p["out_bshd"] == Const(1) else "false"
    d = q.shape[3]
    return [
        f"{{  // {atom.atom}: flash attention, online softmax over K/V tiles",
        f"  const AttentionArgs<{t}, {length}> a_{{{cname(q)}, {cname(k)}, {cname(v)}, {cname(out)}, {lens}, "
        f"{extents}, {cx(p['scale'])}, {causal}, /*out_bshd=*/{bshd}}};",
        f"  const size_t ws_bytes_ = attention_workspace_bytes(a_, {d});",
        "  DeviceScratch<unsigned char> ws_(e, static_cast<int64_t>(ws_bytes_), stream_);",
        f"  e.cuda(attention<{d}, {p['stages'].value}>(a_, ws_.ptr, stream_), "
        f'"the attention atom of kernel {r.kernel.name}");',
        "}",
    ]


register(AtomKind(PREFIX, _attention_recheck, _attention_launch))


WGMMA_MACRO = "TILEFOUNDRY_FLASH_WGMMA"


def attention_defines(
    options: Mapping[str, Any], called: list[Realization], catalog: TargetCatalog
) -> list[str]:
    """The attention atom's macros where the module calls it: option attention_warp_rows's
    TILEFOUNDRY_FLASH_WARP_ROWS (atoms/attention_mma.cuh) where it fixes the mma.sync prefill config;
    under "auto" on an arch with wgmma (sm_90a), TILEFOUNDRY_FLASH_WGMMA, which builds the Hopper
    prefill tier (atoms/attention_wgmma.cuh) that head dim 128 takes; else none, and the header
    chooses between the mma.sync configs per call. The option is read (and checked) either way.

    Raises:
        PlanError: a value that is not one of the option's declared values, naming them.
    """
    rows = ATTENTION_WARP_ROWS.read(options)
    if not any(isinstance(r.body, AtomCall) and r.body.atom.startswith(PREFIX) for r in called):
        return []
    if rows != "auto":
        return [f"#define TILEFOUNDRY_FLASH_WARP_ROWS {rows}"]
    return [f"#define {WGMMA_MACRO} 1"] if "wgmma" in catalog.capabilities else []
