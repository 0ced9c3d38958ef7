"""attention.py: the proof that a kernel is exactly the attention nest, and its refusals."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tilefoundry.codegen.cuda import atoms
from tilefoundry.codegen.cuda.attention import atom_blocker, match_attention
from tilefoundry.codegen.cuda.attention_atom import WGMMA_MACRO
from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.options import ATTENTION_WARP_ROWS
from tilefoundry.codegen.cuda.realize import realize_kernel
from tilefoundry.dsl import DimVar, Tensor, bf16, f32, func, i32, i64, tf
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.tile.cexpr import CExpr
from tilefoundry.ir.tile.expr import Const, Var
from tilefoundry.ir.tile.stmt import Assign, For, Seq, map_stmt

P = DimVar("P", 1, 513)


@func
def gqa(q: Tensor[(2, 8, P, 64), bf16], k: Tensor[(2, 2, P, 64), bf16], v: Tensor[(2, 2, P, 64), bf16]):
    return tf.attention(q, k, v, causal=True)


@func
def cached(
    q: Tensor[(1, 4, 1, 128), f32],
    k: Tensor[(1, 4, P, 128), f32],
    v: Tensor[(1, 4, P, 128), f32],
    n: Tensor[(1,), i32],
):
    return tf.attention(q, k, v, scale=0.25, kv_len=n)


@func
def cached_i64(
    q: Tensor[(1, 4, 1, 128), f32],
    k: Tensor[(1, 4, P, 128), f32],
    v: Tensor[(1, 4, P, 128), f32],
    n: Tensor[(1,), i64],
):
    return tf.attention(q, k, v, causal=True, kv_len=n)


@func
def small(q: Tensor[(1, 2, P, 8), f32], k: Tensor[(1, 2, P, 8), f32], v: Tensor[(1, 2, P, 8), f32]):
    return tf.attention(q, k, v)


def _kernel(sched, fn, **options):
    return next(k for k in sched(fn, options).kernels if k.form == "attention")


def test_lowered_attention_is_proved_with_its_facts(sched) -> None:
    """The proof reads q, k, v, out, scale, group and causal form off the body and rebuilds it exactly."""
    region = match_attention(_kernel(sched, gqa))
    assert (region.q.name, region.k.name, region.v.name, region.out.name) == ("q", "k", "v", "out0")
    assert (region.causal, region.head_dim, region.kv_len) == (True, 64, None)
    assert region.scale == pytest.approx(64**-0.5)
    cached_region = match_attention(_kernel(sched, cached))
    assert (cached_region.causal, cached_region.scale, cached_region.kv_len.name) == (False, 0.25, "n")
    wide_region = match_attention(_kernel(sched, cached_i64))
    assert wide_region.kv_len.name == "n" and wide_region.causal


def test_a_changed_body_is_not_attention(sched) -> None:
    """A transform that changes one statement (here: the running max is not updated) breaks the proof."""
    k = _kernel(sched, gqa)

    def drop_max_update(s):
        if isinstance(s, For) and s.kind == "serial" and isinstance(s.body, Seq):
            body = tuple(x for x in s.body.body if not (isinstance(x, Assign) and isinstance(x.value, Var)))
            return dataclasses.replace(s, body=Seq(body))
        return None

    k.body = map_stmt(k.body, drop_max_update)
    assert isinstance(match_attention(k), str)


def test_atom_takes_head_dims_in_multiples_of_32(sched) -> None:
    """Head dim 8 is proved attention but has no atom: the loop stays, and says why."""
    region = match_attention(_kernel(sched, small))
    assert atom_blocker(region) == "head dim 8 is not a multiple of 32 up to 256"


def test_atom_realization_prefetches_two_windows_when_they_fit(sched) -> None:
    """seed 003: K/V tiles double-buffered (two-window prefetch) when both stages fit shared memory."""
    k = _kernel(sched, gqa)
    (r,) = realize_kernel("gqa", k, arch_catalog("sm_90a"), {})
    assert r.kind == "atom" and r.body.atom == "cuda_attention_flash_d64_bf16"
    assert r.body.params["stages"] == Const(2)
    assert "two-window K/V prefetch (2 stages in shared memory)" in r.notes[0]


def test_attention_loop_option_keeps_the_reference_nest(sched) -> None:
    """Option attention='loop' keeps the lowering's nest (realized as rows)."""
    k = _kernel(sched, gqa, attention="loop")
    (r,) = realize_kernel("gqa", k, arch_catalog("sm_90a"), {"attention": "loop"})
    assert r.kind == "rows"


def test_explicit_attention_atom_fails_closed(sched) -> None:
    """seed 003: attention='atom' that cannot be honored raises PlanError naming the blocker."""
    k = _kernel(sched, small, attention="atom")
    with pytest.raises(
        PlanError,
        match=r"cuda: kernel k0_attention \(attention@.*\): explicit attention atom "
        r"refused: head dim 8 is not a multiple of 32 up to 256",
    ):
        realize_kernel("small", k, arch_catalog("sm_90a"), {"attention": "atom"})


@func
def heads_side_by_side(
    q: Tensor[(2, 8, P, 64), bf16], k: Tensor[(2, 2, P, 64), bf16], v: Tensor[(2, 2, P, 64), bf16]
):
    o = tf.attention(q, k, v, causal=True)
    return tf.reshape(tf.transpose(o, (0, 2, 1, 3)), (2 * P, 512)), tf.transpose(
        tf.attention(q, k, v), (0, 2, 1, 3)
    )


def test_out_in_bshd_order_is_proved_with_its_layout(sched) -> None:
    """Stores moved in from the reshape(transpose(o)) copy, out[b * P + i, h * 64 + d], and from a
    transpose alone, out[b, i, h, d]: both proved, out_bshd recorded and passed to the atom."""
    kernels = [k for k in sched(heads_side_by_side).kernels if k.form == "attention"]
    assert len(sched(heads_side_by_side).kernels) == 2
    regions = [match_attention(k) for k in kernels]
    assert [(r.out.name, r.out_bshd, r.causal) for r in regions] == [
        ("out0", True, True),
        ("out1", True, False),
    ]
    for k in kernels:
        (r,) = realize_kernel("heads_side_by_side", k, arch_catalog("sm_90a"), {})
        assert r.kind == "atom" and r.body.params["out_bshd"] == Const(1)
    (r,) = realize_kernel("gqa", _kernel(sched, gqa), arch_catalog("sm_90a"), {})
    assert r.body.params["out_bshd"] == Const(0)


def test_out_in_another_order_keeps_the_loop(sched) -> None:
    """A (1, P · 512) out holds the rows in (S, H, D) order too, but not as the atom writes them."""

    @func
    def flat(q: Tensor[(1, 8, P, 64), bf16], k: Tensor[(1, 2, P, 64), bf16], v: Tensor[(1, 2, P, 64), bf16]):
        return tf.reshape(tf.transpose(tf.attention(q, k, v), (0, 2, 1, 3)), (1, P * 512))

    k = _kernel(sched, flat)
    assert match_attention(k) == "out is not stored compact in (B, Hq, Sq, D) or (B, Sq, Hq, D) order"
    (r,) = realize_kernel("flat", k, arch_catalog("sm_90a"), {})
    assert r.kind == "rows"


def test_stale_out_layout_is_refused_and_the_launch_passes_the_region_s(sched) -> None:
    """seed 003: the out layout the launch passes is the one re-proved on the final body."""
    p = sched(heads_side_by_side)
    k = next(k for k in p.kernels if k.form == "attention")
    (r,) = realize_kernel("heads_side_by_side", k, arch_catalog("sm_90a"), {})
    launch = atoms.launch(p, r, CExpr({"P": "d_P"}))
    assert launch[1].endswith("0.125f, true, /*out_bshd=*/true};")
    r.body.params["out_bshd"] = Const(0)
    with pytest.raises(
        PlanError,
        match=r"cuda: kernel k0_attention: atom cuda_attention_flash_d64_bf16 no longer matches its region: "
        r"the atom's out layout is not the one the region stores",
    ):
        atoms.emit_device(p, r)


ATOMS_DIR = Path(__file__).resolve().parents[3] / "cpp/runtime/include/tilefoundry/runtime/cuda/atoms"
MMA_HEADER = ATOMS_DIR / "attention_mma.cuh"


def test_the_keys_kernel_guesses_kv_len_before_its_wait_and_checks_it_after() -> None:
    """attention_mma.cuh: the keys configs (decode) read kv_len before the PDL wait and work out the
    key range from it there; after the wait kv_len is read again, the first copies go out, and only
    then is the second read taken up (an empty asm statement keeps its clamp below the copies) and
    the guess checked, a stale one draining its copies and taking the range from the value after
    the wait. The rows configs (prefill) wait first."""
    text = MMA_HEADER.read_text()
    body = text[text.index("flash_mma_kernel(AttentionArgs") :]
    order = [
        "constexpr bool kGuess = Cfg::kKeyWarps > 1;",
        "pdl_trigger();",
        "if constexpr (!kGuess) pdl_wait();",
        "int64_t const guess = kv_clamp(flash_entry(a), a.skv);",
        "FlashRange cr = flash_range(a, Cfg::kRows, Step, chunk, solo, guess);",
        "if constexpr (kGuess) {\n    pdl_wait();\n    len = flash_entry(a);",
        "first_copies();",
        'asm volatile("" : "+l"(len));',
        "len = kv_clamp(len, a.skv);",
        "if (len != guess) {",
        "cp_async_wait<0>();",
        "cr = flash_range(a, Cfg::kRows, Step, chunk, solo, len);",
        "if (alone && blockIdx.z != 0) return;",
    ]
    at = [body.index(x) for x in order]
    assert at == sorted(at), [x for x, i in zip(order, at, strict=True) if i != sorted(at)[order.index(x)]]
    assert "pdl_begin();" not in body[: body.index("cp_async_wait<Stages - 1>")]


def test_warp_rows_option_defines_the_rows_config_where_attention_is_called(cuda_source) -> None:
    """attention_warp_rows=16 or 32 defines TILEFOUNDRY_FLASH_WARP_ROWS before the runtime's include
    in a module that calls the attention atom, and no wgmma tier; "auto" (the default), and a module
    without attention, define no rows."""
    for rows in (16, 32):
        text = cuda_source(gqa, {"attention_warp_rows": rows})
        assert f"#define TILEFOUNDRY_FLASH_WARP_ROWS {rows}\n" in text and WGMMA_MACRO not in text
        assert text.index("TILEFOUNDRY_FLASH_WARP_ROWS") < text.index("#include <tilefoundry/runtime.h>")
    assert ATTENTION_WARP_ROWS.default == "auto"
    assert "TILEFOUNDRY_FLASH_WARP_ROWS" not in cuda_source(gqa)
    assert "TILEFOUNDRY_FLASH_WARP_ROWS" not in cuda_source(gqa, {"attention_warp_rows": "auto"})
    loop = {"attention_warp_rows": 32, "attention": "loop"}
    assert "TILEFOUNDRY_FLASH_WARP_ROWS" not in cuda_source(gqa, loop)


@pytest.mark.parametrize(("arch", "built"), [("sm_90a", True), ("sm_90", False), ("sm_80", False)])
def test_the_wgmma_tier_is_built_under_auto_where_the_arch_has_wgmma(
    cuda_source, arch: str, built: bool
) -> None:
    """Under attention_warp_rows "auto" a module that calls the attention atom defines
    TILEFOUNDRY_FLASH_WGMMA before the runtime's include for sm_90a alone (plain sm_90 turns wgmma
    into traps); a module without the atom never does."""
    text = cuda_source(gqa, arch=arch)
    assert (f"#define {WGMMA_MACRO} 1\n" in text) is built
    if built:
        assert text.index(WGMMA_MACRO) < text.index("#include <tilefoundry/runtime.h>")
    assert WGMMA_MACRO not in cuda_source(gqa, {"attention": "loop"}, arch=arch)


def test_an_undeclared_warp_rows_value_is_refused_naming_the_choices(cuda_source) -> None:
    """64 rows a warp (and "32", a string) are not declared: refused, also in a module without attention."""
    for value in (64, "32"):
        with pytest.raises(PlanError, match=r"option attention_warp_rows must be one of auto, 16, 32, got"):
            cuda_source(small, {"attention_warp_rows": value, "attention": "loop"})


def test_the_rows_configs_follow_the_warp_rows_macro() -> None:
    """The header defaults the macro to 0 (the choice per call), takes 8 warps of one m16 tile as the
    rows config and 4 warps of two tiles, 32-key steps, three stages and two CTAs an SM as the paired
    one; the plan's choice reads the macro, and a fixed macro builds one config alone."""
    header = MMA_HEADER.read_text()
    assert "#ifndef TILEFOUNDRY_FLASH_WARP_ROWS\n#define TILEFOUNDRY_FLASH_WARP_ROWS 0\n" in header
    assert "using FlashRowsConfig = FlashConfig<D, 8, 1, 64, 3, 1>;" in header
    assert "using FlashPairedRowsConfig = FlashConfig<D, 4, 1, 32, 3, 2, 2>;" in header
    plan = (ATOMS_DIR / "attention.cuh").read_text()
    choice = plan[plan.index("inline AttnTier flash_rows_tier(") :]
    choice = choice[: choice.index("\n}\n")]
    assert "TILEFOUNDRY_FLASH_WARP_ROWS == 16" in choice and "TILEFOUNDRY_FLASH_WARP_ROWS == 32" in choice
    assert "ctas >= kFlashPairedMinCtasPerSm * dev.sms" in choice
    # the wgmma tier first, where it is built, the rows are not fixed and the head dim is 128
    wgmma = choice.index("if constexpr (TILEFOUNDRY_FLASH_WGMMA == 1 && TILEFOUNDRY_FLASH_WARP_ROWS == 0)")
    assert wgmma < choice.index("TILEFOUNDRY_FLASH_WARP_ROWS == 16")
    assert "if (head_dim == 128 && dev.sm90_code && fits) return AttnTier::wgmma_rows;" in choice
    assert "FlashWgmmaRowsConfig::kSmemBytes <= static_cast<size_t>(dev.smem_optin)" in choice
    wgmma_header = (ATOMS_DIR / "attention_wgmma.cuh").read_text()
    assert "#ifndef TILEFOUNDRY_FLASH_WGMMA\n#define TILEFOUNDRY_FLASH_WGMMA 0\n" in wgmma_header
