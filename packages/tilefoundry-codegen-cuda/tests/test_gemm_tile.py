"""Option gemm_tile: the sm90 GEMM collective's CTA tile, fixed for a module (a knob for the
autotuner) or, by default, chosen per call between 128 x 128, 128 x 256, 64 x 64 ping-pong and
stream-K."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tilefoundry.codegen.cuda.build import UNITS_VARIABLE, translation_units, unit_count
from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.emit import module_sources
from tilefoundry.codegen.cuda.gemm_atom import (
    SKINNY_MAX_M,
    SM90_B_K_MAJOR_SLOTS,
    SM90_SLOTS,
    SMALL_TILE_MAX_M,
    STREAM_K_MIN_K,
    SWAPPED_LONE_MIN_NK,
    SWAPPED_MAX_M,
    SWAPPED_MID_MAX_M,
    SWAPPED_MIN_NK,
    SWAPPED_QUAD_MAX_N,
    SWAPPED_ROWS_MIN_NK,
    WIDE_PAIR_MIN_K,
    WIDE_PAIR_MIN_M,
    WIDE_PAIR_MIN_N,
    WIDE_TILE_MIN_NK,
)
from tilefoundry.codegen.cuda.options import GEMM_CLUSTER, GEMM_TILE
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, tf
from tilefoundry.ir.errors import PlanError

T = DimVar("T", 1, 4097)
WIDE = "#define TILEFOUNDRY_SM90_WIDE_TILE 1\n"
PAIR = "#define TILEFOUNDRY_SM90_WIDE_PAIR 1\n"
STREAM_K = "#define TILEFOUNDRY_SM90_STREAM_K 1\n"
SMALL = "#define TILEFOUNDRY_SM90_SMALL_TILE 1\n"
SWAPPED = "#define TILEFOUNDRY_SM90_SWAPPED 1\n"
SWAPPED_MID = "#define TILEFOUNDRY_SM90_SWAPPED_MID 1\n"
QUAD_ONLY = "#define TILEFOUNDRY_SM90_SWAPPED_QUAD_ONLY 1\n"
SINGLE_ONLY = "#define TILEFOUNDRY_SM90_SWAPPED_SINGLE_ONLY 1\n"
SMALL_WIDE = "#define TILEFOUNDRY_SM90_SMALL_WIDE 1\n"
ATOMS = Path(__file__).resolve().parents[3] / "cpp/runtime/include/tilefoundry/runtime/cuda/atoms"
SM90_HEADER = ATOMS / "gemm_sm90.cuh"


def span(text: str, start: str, end: str) -> str:
    """`text` from the first `start` up to the first `end` after it (a function or branch of a header)."""
    first = text.index(start)
    return text[first : text.index(end, first)]


def slot_collective(header: str, slot: int) -> str:
    """The collective type gemm_sm90.cuh's Sm90SlotCollective names for `slot` (with_sm90_gemm's
    `return slot(Int<slot>{})`)."""
    match = re.search(rf"struct Sm90SlotCollective<{slot}, T, BKMajor> \{{\s*using type = ([^;]+);", header)
    assert match is not None, slot
    return " ".join(match.group(1).split())


@func
def proj(x: Tensor[(T, 256), bf16], w: ConstTensor[(512, 256), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def wide(x: Tensor[(T, 4096), bf16], w: ConstTensor[(4096, 4096), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def wide_short_m(x: Tensor[(255, 4096), bf16], w: ConstTensor[(4096, 4096), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def wide_tall(x: Tensor[(256, 4096), bf16], w: ConstTensor[(4096, 4096), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def wide_n_short_k(x: Tensor[(T, 2048), bf16], w: ConstTensor[(8192, 2048), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def square_2048(x: Tensor[(T, 2048), bf16], w: ConstTensor[(2048, 2048), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def narrow_n(x: Tensor[(T, 2048), bf16], w: ConstTensor[(1024, 2048), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def long_k(x: Tensor[(T, 8192), bf16], w: ConstTensor[(1024, 8192), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def tall(x: Tensor[(256, 2048), bf16], w: ConstTensor[(2048, 2048), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def short_m(x: Tensor[(128, 2048), bf16], w: ConstTensor[(2048, 2048), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def short_m_wide(x: Tensor[(128, 2048), bf16], w: ConstTensor[(6144, 2048), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def very_wide(x: Tensor[(T, 256), bf16], w: ConstTensor[(20480, 256), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def narrow_and_very_wide(
    x: Tensor[(T, 2048), bf16], w: ConstTensor[(2048, 2048), bf16], v: ConstTensor[(20480, 2048), bf16]
):
    return x @ tf.transpose(w, (1, 0)), x @ tf.transpose(v, (1, 0))


@func
def sixteen_rows(x: Tensor[(16, 2048), bf16], w: ConstTensor[(2048, 2048), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def eight_rows(x: Tensor[(8, 2048), bf16], w: ConstTensor[(2048, 2048), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def one_row(x: Tensor[(1, 2048), bf16], w: ConstTensor[(2048, 2048), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def one_row_wide(x: Tensor[(1, 2048), bf16], w: ConstTensor[(6144, 2048), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def four_rows_small(x: Tensor[(4, 1024), bf16], w: ConstTensor[(1024, 1024), bf16]):
    return x @ tf.transpose(w, (1, 0))


@func
def row_major_b(x: Tensor[(T, 2048), bf16], w: ConstTensor[(2048, 2048), bf16]):
    return x @ w


@func
def scale(x: Tensor[(T, 8), f32]):
    return x * 2.0


def test_a_non_default_tile_defines_the_collectives_tile_shape(cuda_source) -> None:
    """gemm_tile=256x128 reaches the sm90 collective as its TileShape macros; the default defines none."""
    text = cuda_source(proj, {"gemm_tile": "256x128"})
    assert "#define TILEFOUNDRY_SM90_TILE_M 256\n#define TILEFOUNDRY_SM90_TILE_N 128\n" in text
    assert "TILEFOUNDRY_SM90_TILE_M" not in cuda_source(proj)
    assert GEMM_TILE.values[0] == GEMM_TILE.default == "auto"


def test_auto_adds_the_wide_tile_only_where_n_and_k_are_large(cuda_source) -> None:
    """Under "auto" a module gets the 128 x 256 collective beside 128 x 128 only when some GEMM's
    constant N and K reach their thresholds (N 4096; K 4096 on a 1 x 1 cluster, 2048 paired under
    gemm_cluster "auto"); a fixed tile, 128x128 included, means that tile alone."""
    for cluster in ("auto", "1x1"):
        variant = PAIR if cluster == "auto" else WIDE
        assert variant in cuda_source(wide, {"gemm_cluster": cluster})
        assert variant not in cuda_source(proj, {"gemm_cluster": cluster})
    assert WIDE not in cuda_source(wide_n_short_k, {"gemm_cluster": "1x1"})
    square = cuda_source(wide, {"gemm_tile": "128x128"})
    assert WIDE not in square and PAIR not in square and "TILEFOUNDRY_SM90_TILE" not in square
    fixed = cuda_source(wide, {"gemm_tile": "128x256"})
    assert WIDE not in fixed and PAIR not in fixed and "#define TILEFOUNDRY_SM90_TILE_N 256\n" in fixed


def test_auto_cluster_pairs_the_wide_tile_where_m_may_reach_two_tiles(cuda_source) -> None:
    """gemm_cluster "auto" (the default) builds the 128 x 256 tile as a 2 x 1 cluster alone, for a
    GEMM whose M may be at least 256 (a DimVar, or the constant 256) and whose N and K are at least
    2048 (N = 2048 takes the pair but not the 1 x 1 wide tile); a constant M of 255, an N of 1024 or
    a K of 256 gets no wide tile at all, and no module-wide cluster macro is set."""
    assert GEMM_CLUSTER.default == "auto"
    for fn in (wide, wide_tall, wide_n_short_k, square_2048, tall):
        text = cuda_source(fn)
        assert PAIR in text and WIDE not in text and "TILEFOUNDRY_SM90_CLUSTER" not in text, fn.name
    assert WIDE not in cuda_source(square_2048, {"gemm_cluster": "1x1"})
    for fn in (wide_short_m, proj, very_wide, narrow_n):
        text = cuda_source(fn)
        assert PAIR not in text and WIDE not in text, fn.name
    assert WIDE in cuda_source(wide_short_m, {"gemm_cluster": "1x1"})


def test_the_wide_pair_is_the_wide_tile_at_a_two_by_one_cluster() -> None:
    """The header runs the pair as Sm90Gemm<..., 128, 256, ..., 2, 1> only where M, N and K reach
    their bounds (and the tiles fill 7/8 of the SMs), and the plain wide tile only without the pair."""
    header = SM90_HEADER.read_text()
    pair, plain = "#if defined(TILEFOUNDRY_SM90_WIDE_PAIR)", "#elif defined(TILEFOUNDRY_SM90_WIDE_TILE)"
    branch = span(header, pair, plain)
    assert "if (sm90_wide_pair_pays(batch, M, N, K))" in branch
    assert "return slot(Int<3>{});" in branch
    assert slot_collective(header, 3) == "Sm90Gemm<T, BKMajor, 128, 256, void, false, 2, 1>"
    pays = span(header, "inline bool sm90_wide_pair_pays(", "\n}\n")
    bounds = ("M >= kSm90WidePairMinM", "N >= kSm90WidePairMinN", "K >= kSm90WidePairMinK", "8 * tiles >= 7")
    for bound in bounds:
        assert bound in pays, bound


def test_auto_adds_stream_k_only_where_k_is_long(cuda_source) -> None:
    """Under "auto" a module gets the stream-K collective when some GEMM's constant K reaches the
    threshold (K = 8192 here, not 256, 2048 or 4096); a fixed tile runs the data-parallel grid alone."""
    assert STREAM_K in cuda_source(long_k)
    for short in (proj, wide_n_short_k, wide):
        assert STREAM_K not in cuda_source(short), short.name
    assert STREAM_K not in cuda_source(long_k, {"gemm_tile": "128x128"})


def test_auto_adds_the_small_tile_where_m_may_be_short(cuda_source) -> None:
    """Under "auto" a module gets the 64 x 64 ping-pong collective when some GEMM's M may be at
    most 128 (a DimVar, or the constant 128) and its N is not so wide that 64 x 64 tiles exceed two
    waves of an H200's SMs (20480 columns: 320 tiles a 64-row block); a fixed tile means that alone."""
    assert SMALL in cuda_source(proj) and SMALL in cuda_source(short_m)
    assert SMALL not in cuda_source(tall)
    assert SMALL not in cuda_source(very_wide)
    assert SMALL not in cuda_source(proj, {"gemm_tile": "128x128"})


def test_auto_adds_the_swapped_gemm_where_m_may_be_short(cuda_source) -> None:
    """Under "auto" a module gets the swapped TN collective when a GEMM with B stored (N, K) may run
    at M <= 16 with B as large as that M needs: 2Mi elements where M may be 2..8 (a DimVar: 1024 x
    2048 and up; the constant 8), 4Mi at 9..16 (the constant 16), 8Mi at M = 1 (6144 x 2048, not
    2048 x 2048). M = 128, a small B (512 x 256, 1024 x 1024 at M = 4), B (K, N) and a fixed tile
    get none."""
    for fn in (square_2048, sixteen_rows, eight_rows, narrow_n, one_row_wide, wide, very_wide):
        assert SWAPPED in cuda_source(fn), fn.name
    for fn in (proj, one_row, four_rows_small, short_m, row_major_b):
        assert SWAPPED not in cuda_source(fn), fn.name
    assert SWAPPED not in cuda_source(square_2048, {"gemm_tile": "128x128"})


def test_the_swapped_gemm_runs_where_it_pays() -> None:
    """gemm_tier hands the sm90 tier a TN call up to M = 16 only where sm90_swapped_pays (at M = 1
    not for a call whose launch the skinny tier serves better: skinny_first), and with_sm90_gemm
    runs that call on the swapped 64 x 16 ping-pong tile with K steps of 128, B's rows on the
    tile's M mode (its operands passed B first), as 4 x 1 clusters where sm90_swapped_quad_pays."""
    header = SM90_HEADER.read_text()
    branch = span(header, "#if defined(TILEFOUNDRY_SM90_SWAPPED)", "#endif\n    }\n  }\n#endif")
    assert "return Sm90GemmSwapped::operands(B, A, C, batch, N, M, K);" in header
    pays = span(header, "inline bool sm90_swapped_pays(", "\n}\n")
    assert "if (M == 1) return !skinny_first && nk >= kSm90SwappedLoneMinNK" in pays
    assert "if (M <= kSkinnyMaxM) return nk >= kSm90SwappedRowsMinNK;" in pays
    assert "if (sm90_swapped_quad_pays(N)) return slot(Int<0>{});" in branch
    assert slot_collective(header, 0) == "Sm90GemmSwapped<T, 64, 16, 128, void, true, 1, 4>"
    assert slot_collective(header, 1) == "Sm90GemmSwapped<T, 64, 16, 128, void, true>"
    tier = (ATOMS / "gemm.cuh").read_text()
    assert "kBKMajor && detail::sm90_swapped_pays(M, N, K, skinny_first)" in tier
    assert "if ((!skinny_m || swapped) && aligned && detail::device_facts().major == 9" in tier
    assert "bool const skinny_first = fused || g.b_settled || g.count > 1;" in tier


def test_the_swapped_gemm_builds_the_cluster_forms_its_calls_may_take(cuda_source) -> None:
    """A module whose swapped calls all have N <= 16384 builds only the 4 x 1 cluster form, one
    whose calls are all wider only the lone tile, and one with both (or an N not known) both."""
    for fn in (square_2048, narrow_n, sixteen_rows):
        source = cuda_source(fn)
        assert SWAPPED in source and QUAD_ONLY in source and SINGLE_ONLY not in source, fn.name
    source = cuda_source(very_wide)
    assert SWAPPED in source and SINGLE_ONLY in source and QUAD_ONLY not in source
    source = cuda_source(narrow_and_very_wide)
    assert SWAPPED in source and QUAD_ONLY not in source and SINGLE_ONLY not in source
    assert QUAD_ONLY not in cuda_source(proj)  # no swapped call at all


def test_auto_adds_the_64x96_tile_where_64x64_tiles_may_exceed_one_wave(cuda_source) -> None:
    """Under "auto" a module gets the 64 x 96 ping-pong collective when a TN GEMM may take the small
    tile with more 64 x 64 tiles than an H200 has SMs: M = 128 with N = 6144 (192 tiles), a DimVar
    M with N = 8192; not M = 128 with N = 2048 (64), N = 4096 at any M <= 128 (128), B (K, N) or a
    fixed tile. The header takes it only for B stored (N, K), where sm90_small_wide_pays."""
    for fn in (short_m_wide, wide_n_short_k):
        assert SMALL_WIDE in cuda_source(fn), fn.name
    for fn in (short_m, proj, wide, tall, row_major_b):
        assert SMALL_WIDE not in cuda_source(fn), fn.name
    assert SMALL_WIDE not in cuda_source(short_m_wide, {"gemm_tile": "128x128"})
    header = SM90_HEADER.read_text()
    branch = span(header, "#if defined(TILEFOUNDRY_SM90_SMALL_WIDE)", "#endif")
    assert "if constexpr (BKMajor)" in branch
    assert "if (sm90_small_wide_pays(batch, M, N)) return slot(Int<5>{});" in branch
    assert slot_collective(header, 5) == "Sm90Gemm<T, BKMajor, 64, 96, void, true>"
    pays = span(header, "inline bool sm90_small_wide_pays(", "\n}\n")
    assert "batch * ((M + 63) / 64) * ((N + 63) / 64) > device_facts().sms;" in pays


def test_auto_adds_the_mid_swapped_gemm_where_its_tiles_may_be_one_wave(cuda_source) -> None:
    """Under "auto" a module gets the 64 x 32 swapped TN collective when a GEMM with B stored (N, K)
    may run at 16 < M <= 128 with its tiles (N / 64 times M / 32) one wave of an H200's SMs at most:
    M = 128 with N = 2048 (128 tiles), a DimVar M with N up to 8448; not M = 128 with N = 6144 (384
    tiles), N = 20480, a constant M of 16 or 256, B (K, N) or a fixed tile."""
    for fn in (short_m, square_2048, narrow_n, proj, wide):
        assert SWAPPED_MID in cuda_source(fn), fn.name
    for fn in (short_m_wide, very_wide, sixteen_rows, tall, row_major_b):
        assert SWAPPED_MID not in cuda_source(fn), fn.name
    assert SWAPPED_MID not in cuda_source(short_m, {"gemm_tile": "128x128"})
    header = SM90_HEADER.read_text()
    branch = span(header, "#if defined(TILEFOUNDRY_SM90_SWAPPED_MID)", "#endif")
    assert "if (sm90_swapped_mid_pays(batch, M, N)) return slot(Int<2>{});" in branch
    assert slot_collective(header, 2) == "Sm90GemmSwapped<T, 64, 32, 128, void, true>"
    small = header.index("#if defined(TILEFOUNDRY_SM90_SMALL_TILE)")
    assert header.index("#if defined(TILEFOUNDRY_SM90_SWAPPED_MID)") < small
    pays = span(header, "inline bool sm90_swapped_mid_pays(", "\n}\n")
    assert "batch * ((N + 63) / 64) * ((M + 31) / 32) <= device_facts().sms;" in pays


def test_the_variants_thresholds_are_the_runtimes() -> None:
    """The code generator instantiates the wide tile, the small tile, stream-K and the swapped GEMM
    for exactly the M, N and K the runtime may use them at."""
    header = SM90_HEADER.read_text()
    limits = (
        ("kSm90WideMinNK", WIDE_TILE_MIN_NK),
        ("kSm90WidePairMinM", WIDE_PAIR_MIN_M),
        ("kSm90WidePairMinN", WIDE_PAIR_MIN_N),
        ("kSm90WidePairMinK", WIDE_PAIR_MIN_K),
        ("kSm90SmallTileMaxM", SMALL_TILE_MAX_M),
        ("kSm90StreamKMinK", STREAM_K_MIN_K),
        ("kSm90SwappedMaxM", SWAPPED_MAX_M),
        ("kSm90SwappedMinNK", SWAPPED_MIN_NK),
        ("kSm90SwappedMidMaxM", SWAPPED_MID_MAX_M),
        ("kSm90SwappedRowsMinNK", SWAPPED_ROWS_MIN_NK),
        ("kSm90SwappedLoneMinNK", SWAPPED_LONE_MIN_NK),
        ("kSm90SwappedQuadMaxN", SWAPPED_QUAD_MAX_N),
    )
    for name, value in limits:
        match = re.search(rf"{name} = (\d+);", header)
        assert match is not None and int(match.group(1)) == value, name
    skinny = re.search(r"kSkinnyMaxM = (\d+);", (ATOMS / "gemm_skinny.cuh").read_text())
    assert skinny is not None and int(skinny.group(1)) == SKINNY_MAX_M


def test_the_tile_only_matters_where_the_collective_is_built(cuda_source) -> None:
    """A module without the sm90 collective gets no tile macros, and sm_80 builds ignore the knob."""
    assert "TILEFOUNDRY_SM90_TILE" not in cuda_source(scale, {"gemm_tile": "128x256"})
    assert "TILEFOUNDRY_SM90_TILE" not in cuda_source(proj, {"gemm_tile": "128x256"}, "sm_80")


def test_an_unknown_tile_is_refused_naming_the_choices(cuda_source) -> None:
    """A tile the collective is not offered with fails closed before any code is written."""
    message = r"option gemm_tile must be one of auto, 128x128, 128x256, 256x128, got '64x64'"
    with pytest.raises(PlanError, match=message):
        cuda_source(scale, {"gemm_tile": "64x64"})


def test_a_cluster_reaches_every_collective_of_the_module(cuda_source) -> None:
    """gemm_cluster=2x1 (or 1x2) sets the cluster macros beside whatever tiles "auto" adds; the
    default "auto", 1x1, a module without the collective and an sm_80 build define none."""
    text = cuda_source(wide, {"gemm_cluster": "2x1"})
    assert "#define TILEFOUNDRY_SM90_CLUSTER_M 2\n#define TILEFOUNDRY_SM90_CLUSTER_N 1\n" in text
    assert WIDE in text
    assert "#define TILEFOUNDRY_SM90_CLUSTER_N 2\n" in cuda_source(proj, {"gemm_cluster": "1x2"})
    assert "TILEFOUNDRY_SM90_CLUSTER" not in cuda_source(wide)
    assert "TILEFOUNDRY_SM90_CLUSTER" not in cuda_source(wide, {"gemm_cluster": "1x1"})
    assert "TILEFOUNDRY_SM90_CLUSTER" not in cuda_source(scale, {"gemm_cluster": "2x1"})
    assert "TILEFOUNDRY_SM90_CLUSTER" not in cuda_source(proj, {"gemm_cluster": "2x1"}, "sm_80")


def test_the_cluster_macros_are_the_collectives_cluster_shape() -> None:
    """The header defaults both macros to 1 and builds its ClusterShape from the template's
    ClusterM / ClusterN, whose defaults are the macros."""
    header = SM90_HEADER.read_text()
    for axis in "MN":
        macro = f"TILEFOUNDRY_SM90_CLUSTER_{axis}"
        assert f"#ifndef {macro}\n#define {macro} 1\n" in header
        assert f"int Cluster{axis} = {macro}" in header
    assert "cute::Shape<cute::Int<ClusterM>, cute::Int<ClusterN>, cute::_1>" in header


def test_an_unknown_cluster_is_refused_naming_the_choices(cuda_source) -> None:
    """A cluster the collective is not offered with fails closed, also in a module without a GEMM."""
    message = r"option gemm_cluster must be one of auto, 1x1, 2x1, 1x2, got '4x1'"
    with pytest.raises(PlanError, match=message):
        cuda_source(scale, {"gemm_cluster": "4x1"})


def test_a_swizzle_reaches_the_collectives_launch_arguments(cuda_source) -> None:
    """gemm_swizzle=4 defines the scheduler's band width, which the header's arguments() passes as
    max_swizzle_size (default 1, CUTLASS's); 1, a module without the collective and sm_80 define none."""
    assert "#define TILEFOUNDRY_SM90_SWIZZLE 4\n" in cuda_source(wide, {"gemm_swizzle": 4})
    assert "TILEFOUNDRY_SM90_SWIZZLE" not in cuda_source(wide)
    assert "TILEFOUNDRY_SM90_SWIZZLE" not in cuda_source(wide, {"gemm_swizzle": 1})
    assert "TILEFOUNDRY_SM90_SWIZZLE" not in cuda_source(scale, {"gemm_swizzle": 4})
    assert "TILEFOUNDRY_SM90_SWIZZLE" not in cuda_source(proj, {"gemm_swizzle": 4}, "sm_80")
    header = SM90_HEADER.read_text()
    assert "#ifndef TILEFOUNDRY_SM90_SWIZZLE\n#define TILEFOUNDRY_SM90_SWIZZLE 1\n" in header
    assert "args.scheduler.max_swizzle_size = TILEFOUNDRY_SM90_SWIZZLE;" in header


def test_a_swizzle_off_the_powers_of_two_is_refused() -> None:
    """3, and "4" (a string), are not declared values: refused naming the option and its choices."""
    from tilefoundry.codegen.cuda.options import GEMM_SWIZZLE

    for value in (3, "4", True):
        with pytest.raises(PlanError, match=r"option gemm_swizzle must be one of 1, 2, 4, 8, got"):
            GEMM_SWIZZLE.read({"gemm_swizzle": value})


def _slot_conditions(header: str) -> dict[int, list[str]]:
    """The preprocessor conditions each `return slot(Int<k>{})` of with_sm90_gemm sits under."""
    body = span(header, "inline decltype(auto) with_sm90_gemm(", "\n}\n")
    stack: list[str] = []
    found: dict[int, list[str]] = {}
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("#if defined("):
            stack.append(line[len("#if defined(") : -1])
        elif line.startswith("#elif defined("):
            stack[-1] = line[len("#elif defined(") : -1]
        elif line == "#else":
            stack[-1] = f"not {stack[-1]}"
        elif line == "#endif":
            stack.pop()
        for match in re.finditer(r"return slot\(Int<(\d)>\{\}\)", line):
            found.setdefault(int(match.group(1)), []).extend(stack)
    return found


def test_the_slot_table_is_the_headers() -> None:
    """Each slot of SM90_SLOTS names a collective (Sm90SlotCollective) and is returned by
    with_sm90_gemm under its macro (the default slot under none), so a module builds the slot
    sources its dispatch may reach; the B (N, K)-only slots return under `if constexpr (BKMajor)`."""
    header = SM90_HEADER.read_text()
    conditions = _slot_conditions(header)
    assert set(conditions) == {slot for slot, _ in SM90_SLOTS}
    for slot, macro in SM90_SLOTS:
        slot_collective(header, slot)
        assert (macro in conditions[slot]) if macro else not conditions[slot], (slot, conditions[slot])
    assert {0, 1, 2, 5} == SM90_B_K_MAJOR_SLOTS


def test_a_module_with_the_collective_builds_each_slot_in_a_source_of_its_own(sched) -> None:
    """`short_m_wide` (M = 128, N = 6144) may take the 64 x 96, 64 x 64 and 128 x 128 collectives:
    its main source declares their Sm90Ops `extern template`, defines TILEFOUNDRY_SM90_SPLIT and the
    variant macros that pick them, and each has a source that instantiates it, naming no module and
    carrying no variant macro (they pick slots and change no collective)."""
    files = module_sources(short_m_wide.name, (sched(short_m_wide),), arch_catalog("sm_90a"), {})
    main, *slots = files
    assert main == "short_m_wide.cu" and slots == [f"short_m_wide_sm90_{k}.cu" for k in (5, 6, 8)]
    assert "#define TILEFOUNDRY_SM90_SPLIT 1\n" in files[main] and SMALL_WIDE in files[main]
    detail, element = "tilefoundry::atoms::detail", "tilefoundry::atoms::bf16"
    for k, name in zip((5, 6, 8), slots, strict=True):
        ops = f"{detail}::Sm90Ops<{detail}::Sm90SlotCollective<{k}, {element}, true>::type, {element}>;"
        assert f"extern template struct {ops}" in files[main]
        assert f"\ntemplate struct {ops}" in files[name]
        assert SMALL_WIDE not in files[name] and "TILEFOUNDRY_SM90_SPLIT" not in files[name]
        assert "short_m_wide" not in files[name]


def test_modules_reaching_a_slot_write_the_same_source_for_it(sched) -> None:
    """Slot 8 (the 128 x 128 collective) of a module with the 64 x 96 variant and of one with the
    wide pair reads the same, so build.side_object compiles it once for both; a fixed tile or a
    cluster option, which shape the collective, changes it."""
    catalog = arch_catalog("sm_90a")

    def slot_8(fn, options=None):
        files = module_sources(fn.name, (sched(fn, options or {}),), catalog, options or {})
        return files[f"{fn.name}_sm90_8.cu"], files[f"{fn.name}.cu"]

    small, small_main = slot_8(short_m_wide)
    pair, pair_main = slot_8(wide)
    assert SMALL_WIDE in small_main and PAIR in pair_main
    assert small == pair
    assert slot_8(wide, {"gemm_tile": "128x256"})[0] != pair
    assert slot_8(wide, {"gemm_cluster": "1x2"})[0] != pair


def test_sources_join_into_at_most_one_unit_a_core() -> None:
    """Source i joins unit i mod the count, main first; one unit holds them all in order."""
    files = {"m.cu": "M", "m_sm90_5.cu": "5", "m_sm90_6.cu": "6", "m_sm90_8.cu": "8"}
    assert translation_units(files, 2) == {"m.cu": "M\n6", "m_sm90_5.cu": "5\n8"}
    assert translation_units(files, 1) == {"m.cu": "M\n5\n6\n8"}
    assert translation_units(files, 16) == files


def test_nvcc_units_variable_caps_a_build_and_rejects_anything_but_a_positive_integer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TILEFOUNDRY_NVCC_UNITS fixes the units a build compiles at once; a bad value names itself."""
    monkeypatch.setenv(UNITS_VARIABLE, "3")
    assert unit_count() == 3
    for bad in ("0", "-2", "two", ""):
        monkeypatch.setenv(UNITS_VARIABLE, bad)
        with pytest.raises(ValueError, match=UNITS_VARIABLE):
            unit_count()
    monkeypatch.delenv(UNITS_VARIABLE)
    assert 1 <= unit_count() <= (os.cpu_count() or 1)
