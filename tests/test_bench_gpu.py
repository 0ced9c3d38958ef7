"""bench/gpu without a GPU: floors, goals, timing statistics, case lists, checks, table and files.

The DSL function of every case is run through the evaluator at toy sizes and compared with its
torch peers, so the GPU run compares like with like; one smoke run builds a case for the CPU
target and goes through a measuring child process end to end.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gpu import run
from bench.gpu.builds import CACHE_VARIABLES, BuildFailed, Builds, build_cache
from bench.gpu.cases import KernelCase, ModelCase, matches, select
from bench.gpu.cases.gemm import projections
from bench.gpu.cases.model import QWEN3_1_7B, config_of, weight_work
from bench.gpu.cases.plans import PLANS
from bench.gpu.checking import check_against, output_paths, poisoned
from bench.gpu.floors import (
    Limits,
    attention_work,
    causal_pairs,
    gemm_work,
    rotation_sets,
    tensor_bytes,
)
from bench.gpu.goals import AtLimit, BeatsPeer, Rate
from bench.gpu.machine import Machine, header, slug
from bench.gpu.measure_model import _Reference, device_weights, hf_model
from bench.gpu.report import (
    COLUMNS,
    Row,
    goal_summary,
    read_rows,
    render_table,
    result_stem,
    rows_of,
    write_json,
    write_plot,
)
from bench.gpu.results import CaseResult, CompileTimes, Measured, describe
from bench.gpu.session import Session
from bench.gpu.timing import (
    Timing,
    TimingPlan,
    calls_per_sample,
    quantile,
    sample_count,
    summarize,
    time_calls,
    time_each,
)
from bench.gpu.worker import skipped

H200 = Limits(copy_bytes_per_s=4.0e12, flops_per_s={"bf16": 1.0e15}, l2_bytes=50 * 2**20)
CPU = torch.device("cpu")


# ---------------------------------------------------------------- floors


def test_work_counts_of_gemm_and_attention() -> None:
    """GEMM: 2mkn flops, both operands and the result once; attention: 4d flops per kept pair."""
    w = gemm_work(2, 3, 4)
    assert (w.flops, w.bytes) == (48.0, 2.0 * (6 + 12 + 8))
    assert tensor_bytes((3, 5), "i64") == 120
    assert causal_pairs(4, 4) == 10 and causal_pairs(1, 8) == 8 and causal_pairs(2, 5) == 9
    full = attention_work(1, 2, 2, 4, 4, 8, causal=False)
    causal = attention_work(1, 2, 2, 4, 4, 8, causal=True)
    assert full.flops == 4 * 2 * 8 * 16 and causal.flops == 4 * 2 * 8 * 10
    assert full.bytes == causal.bytes == 2 * 8 * (2 * 2 * 4 + 2 * 2 * 4)
    gqa = attention_work(1, 32, 8, 1, 1024, 128, causal=False)
    assert gqa.bytes == 2 * 128 * (2 * 32 + 2 * 8 * 1024)


def test_limits_pick_the_binding_term() -> None:
    """The larger of flops / peak and bytes / copy bandwidth is the floor; its term names the bound."""
    big = gemm_work(8192, 8192, 8192)
    assert H200.bound(big) == "compute"
    assert H200.floor_s(big) == pytest.approx(big.flops / 1e15)
    assert H200.fraction(big, 2 * big.flops / 1e15) == pytest.approx(0.5)
    gemv = gemm_work(1, 2048, 6144)
    assert H200.bound(gemv) == "memory"
    assert H200.fraction(gemv, gemv.bytes / 4.0e12 / 0.8) == pytest.approx(0.8)
    unknown = Limits(4.0e12)
    assert unknown.bound(big) == "memory" and unknown.compute_s(big) is None
    assert H200.fraction(gemv, None) is None


def test_rotation_covers_four_l2s() -> None:
    """Inputs under 4 L2 sizes are cycled through enough sets; large ones are not; at most 64."""
    l2 = 50 * 2**20
    assert rotation_sets(8e6, l2) == 27
    assert rotation_sets(512e6, l2) == 1
    assert rotation_sets(10.0, l2) == 64
    assert rotation_sets(0.0, l2) == 1


# ---------------------------------------------------------------- goals


@dataclass
class _Row:
    peer: str | None = None
    ours_ms: float | None = 1.0
    speedup: float | None = None
    limit_fraction: float | None = None
    bytes: float = 1e9


def test_goals_say_whether_and_by_how_much() -> None:
    """Each goal judges only rows it applies to and states the shortfall."""
    at = AtLimit(0.85, min_bytes=256e6)
    assert at.judge(_Row(limit_fraction=0.73)).text == "MISS >=85% limit: 73% (-12 pts)"
    assert at.judge(_Row(limit_fraction=0.91)).text == "ok >=85% limit: 91%"
    assert at.judge(_Row(limit_fraction=0.5, bytes=1e6)) is None
    assert at.judge(_Row()).text == "MISS >=85% limit: not measured"
    beat = BeatsPeer("cuBLAS", 0.95)
    assert beat.judge(_Row(peer="torch eager", speedup=0.1)) is None
    verdict = beat.judge(_Row(peer="cuBLAS", speedup=0.8075))
    assert not verdict.met and verdict.text == "MISS >=0.95x cuBLAS: 0.81x (-15%)"
    assert beat.judge(_Row(peer="cuBLAS", speedup=1.02)).text == "ok >=0.95x cuBLAS: 1.02x"
    rate = Rate(1000, tokens=1)
    assert rate.judge(_Row(ours_ms=1000 / 612)).text == "MISS >=1000 tok/s: 612 (-39%)"
    assert Rate(1000, tokens=256).judge(_Row(ours_ms=200.0)).text == "ok >=1000 tok/s: 1280"
    assert rate.judge(_Row(ours_ms=None)).text == "MISS >=1000 tok/s: not measured"


# ---------------------------------------------------------------- timing


def test_timing_statistics() -> None:
    """Median and p20/p80 by interpolation; samples fill the sample length in whole cycles."""
    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0], calls=7, mode="graph")
    assert (t.ms, t.p20_ms, t.p80_ms, t.samples, t.calls) == (3.0, 1.8, 4.2, 5, 7)
    assert quantile([10.0], 0.8) == 10.0
    plan = TimingPlan()
    assert calls_per_sample(0.01, 4, plan) == 200
    assert calls_per_sample(5.0, 1, plan) == 1
    assert calls_per_sample(1e-6, 3, plan) == 255
    assert sample_count(10.0, 1, plan) == 15
    assert sample_count(1e-6, 1, plan) == plan.max_reps
    with pytest.raises(ValueError, match="summarize: no samples"):
        summarize([], 1, "wall")


def test_cpu_clock_times_calls_and_steps() -> None:
    """On a CPU, batches and single steps are timed by the wall clock over every input set."""
    seen = []
    plan = TimingPlan(warmup_ms=1.0, rep_ms=5.0, min_reps=3, max_reps=10)
    t = time_calls(
        lambda x: seen.append(x) or torch.randn(64, generator=torch.Generator().manual_seed(x)),
        [(0,), (1,)],
        CPU,
        plan,
    )
    assert t.mode == "wall" and t.ms > 0 and 3 <= t.samples <= 10 and set(seen) == {0, 1}
    resets = []
    step = time_each(lambda: torch.randn(64).sum(), CPU, plan, reset=lambda: resets.append(1))
    assert step.calls == 1 and step.samples >= 3 and len(resets) >= step.samples
    with pytest.raises(ValueError, match="timing: no clock for device type 'meta'; known: cuda, cpu"):
        time_calls(lambda: None, [()], torch.device("meta"), plan)


# ---------------------------------------------------------------- cases and plans


def test_cases_pattern_matches_segments_and_globs() -> None:
    """A --cases pattern is an id, whole leading segments, or a glob; a miss names the families."""
    assert matches("gemm/square/4096", "gemm") and matches("gemm/square/4096", "gemm/square/")
    assert matches("gemm/square/4096", "*/square/*") and not matches("gemm/square/4096", "gem")
    cases = PLANS["full"]()
    chosen = select(cases, ["rms_norm", "gemm/qwen3-8b/lm_head"])
    assert [c.id for c in chosen] == ["rms_norm/32768x4096"] + [
        f"gemm/qwen3-8b/lm_head/m{m}" for m in (1, 16, 128, 2048)
    ]
    with pytest.raises(
        ValueError, match=r"--cases: 'nope' matches no case of this plan; families: pointwise, "
    ):
        select(cases, ["nope"])


def test_full_plan_covers_issue_7() -> None:
    """Every family and shape the issue lists (and argmax, the greedy pick), ids unique,
    memory-bound rows at >= 256 MB but the decode step's one-row pick, a latency row."""
    cases = PLANS["full"]()
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    families = {c.id.split("/")[0] for c in cases}
    assert families == {
        "pointwise",
        "rms_norm",
        "layer_norm",
        "softmax",
        "argmax",
        "rope",
        "head_norm_rope",
        "embedding",
        "kv_update",
        "gemm",
        "attention",
        "model",
    }
    assert projections("qwen3-1.7b") == {
        "q": (2048, 2048),
        "kv": (2048, 1024),
        "o": (2048, 2048),
        "gate_up": (2048, 6144),
        "down": (6144, 2048),
        "lm_head": (2048, 151936),
    }
    gemms = [c for c in cases if c.id.startswith("gemm/qwen3")]
    assert len(gemms) == 2 * 6 * 4 and {c.id.rsplit("/m", 1)[1] for c in gemms} == {"1", "16", "128", "2048"}
    assert {
        "gemm/square/4096",
        "gemm/square/8192",
        "attention/prefill/causal/b4-h32-s4096",
        "attention/prefill/full/b4-h32-s4096",
        "attention/decode/b1-ctx1024",
        "attention/decode/b1-ctx32768",
        "model/qwen3-1.7b/decode_step/pos1024",
        "model/qwen3-1.7b/generate/128",
    } <= set(ids)
    pick = "argmax/1x151936"
    memory = [c for c in cases if c.id.split("/")[0] not in ("gemm", "attention", "model") and c.id != pick]
    assert pick in ids
    assert all(c.work.bytes >= 256e6 and H200.bound(c.work) == "memory" for c in memory)
    assert {c.kernel for c in gemms if "qwen3-1.7b/gate_up" in c.id} == {"linear/2048x6144"}


def test_qwen3_1_7b_weight_streaming_limit() -> None:
    """About 1200 tok/s at issue 7's measured 4.13 TB/s: every weight (tied table once) per token."""
    work = weight_work(config_of(QWEN3_1_7B))
    assert work.bytes == pytest.approx(2 * 1.72e9, rel=0.01)
    assert 4.13e12 / work.bytes == pytest.approx(1200, rel=0.02)


@pytest.mark.parametrize(
    "case", [c for c in PLANS["tiny"]() if isinstance(c, KernelCase)], ids=lambda c: c.id
)
def test_tiny_case_evaluator_agrees_with_its_peers(case: KernelCase) -> None:
    """The DSL function of each case computes what its torch peers compute (so ratios compare like)."""
    inputs = case.inputs(CPU, 3)
    again = case.inputs(CPU, 3)
    assert all(torch.equal(a, b) for a, b in zip(inputs, again, strict=True))
    assert not any(t.is_floating_point() and bool((t == 0).all()) for t in inputs)
    reference = case.ours()(*inputs)
    for peer in case.peers:
        if peer.key != "compile":
            assert check_against(peer.make(), inputs, reference, case.tolerance) == "pass", (
                case.id,
                peer.name,
            )


# ---------------------------------------------------------------- checks


def test_check_poisons_outputs_and_names_failures() -> None:
    """Outputs passed in are NaN; an unwritten one fails nan_inf; a structural mismatch is a FAIL."""
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))
    reference = (x * 2, x + 1)
    assert [p for p, _ in output_paths((x, (x, x)))] == ["output[0]", "output[1][0]", "output[1][1]"]

    def writes_first(a: torch.Tensor, o0: torch.Tensor, o1: torch.Tensor) -> tuple:
        o0.copy_(a * 2)
        return o0, o1

    assert check_against(poisoned(writes_first, reference), (x,), reference, 1e-3) == (
        "FAIL: output[1] rel_l2 rel_l2=nan (bound max=0.001)"
    )
    assert check_against(lambda a: (a * 2, a + 1), (x,), reference, 1e-3) == "pass"
    assert check_against(lambda a: a[:2], (x,), x, 1e-3).startswith(
        "FAIL: ValueError: check: output shape differs: candidate (2, 3), reference (4, 3)"
    )
    assert describe(ValueError("a\n  b")) == "ValueError: a b"


def test_transformers_model_holds_the_same_weights() -> None:
    """The peer model built from the config document reproduces the evaluator's prefill logits."""
    case = next(c for c in PLANS["tiny"]() if isinstance(c, ModelCase))
    cfg = config_of(case.config)
    weights = device_weights(cfg, CPU, 0)
    from tilefoundry.models import causal_lm_alias
    from tilefoundry.runtime import DictResource

    resource = DictResource(weights, alias=causal_lm_alias(cfg))
    session = Session(CPU, "cpu", H200, TimingPlan(), Builds("cpu", "tiny"))
    ref = _Reference(case, cfg, resource, session)
    assert ref.failure is None
    model = hf_model(case.config, weights, CPU)
    with torch.inference_mode():
        logits = model(input_ids=ref.ids[None]).logits[0]
    assert ref.verify_logits(logits) == "pass"
    assert ref.verify_logits(logits.flip(-1)).startswith("FAIL: output rel_l2")


# ---------------------------------------------------------------- builds


@dataclass
class _Stub:
    id: str
    kernel: str
    fail: bool = False
    calls: list = field(default_factory=list)

    def compile(self, target: str, options: dict | None = None) -> object:
        self.calls.append((target, options))
        if self.fail:
            raise RuntimeError(f"no {target} realization")
        return ("built", self.kernel)


def test_builds_time_cold_then_hit_share_kernels_and_keep_errors() -> None:
    """Without a prebuild: a cold and a hit build; a second case of the kernel shares it; errors stick."""
    builds = Builds("cpu", "tiny")
    first, second = _Stub("a/1", "k"), _Stub("a/2", "k")
    runnable, times = builds.get(first)
    assert runnable == ("built", "k") and len(first.calls) == 2 and times.cold_s >= 0 and times.hit_s >= 0
    assert builds.get(second)[1].shared_with == "a/1" and second.calls == []
    broken = _Stub("b/1", "kb", fail=True)
    with pytest.raises(BuildFailed, match=r"^RuntimeError: no cpu realization$"):
        builds.get(broken)
    with pytest.raises(BuildFailed):
        builds.get(_Stub("b/2", "kb"))
    options = {"vectorize": False}
    prebuilt = Builds("cpu", "tiny", cold={"k": 12.5}, errors={"kx": "not built: budget"}, options=options)
    again = _Stub("a/1", "k")
    assert prebuilt.get(again)[1].cold_s == 12.5 and again.calls == [("cpu", {"vectorize": False})]
    with pytest.raises(BuildFailed, match="not built: budget"):
        prebuilt.get(_Stub("c/1", "kx"))


# ---------------------------------------------------------------- rows, table, files


def _result() -> CaseResult:
    case = next(c for c in PLANS["full"]() if c.id == "gemm/qwen3-1.7b/gate_up/m1")
    seconds = case.work.bytes / H200.copy_bytes_per_s / 0.5
    ours = Measured("ours", Timing(seconds * 1e3, 0, 0, 5, 1, "graph"), check="pass")
    peer = Measured("cuBLAS", Timing(seconds * 1e3 * 0.8, 0, 0, 5, 1, "graph"), check="pass")
    return CaseResult(case, ours, [peer], CompileTimes(41.25, 0.08), rotation=9)


def test_rows_carry_ratio_fraction_and_goals() -> None:
    """One row per peer: speedup peer/ours, fraction of the binding limit, goals judged."""
    (row,) = rows_of(_result(), H200)
    assert row.speedup == pytest.approx(0.8) and row.limit_fraction == pytest.approx(0.5)
    assert row.bound == "memory" and row.rotation == 9 and row.compile_cold_s == 41.25
    assert [g["text"] for g in row.goals] == [
        "MISS >=0.95x cuBLAS: 0.80x (-16%)",
        "MISS >=85% limit: 50% (-35 pts)",
    ]
    assert goal_summary([row]) == "goals met: gemm 0/2" and goal_summary([]) == "goals met: none judged"


def test_table_has_habit_19_columns_and_numbered_notes() -> None:
    """Markdown table under the fixed columns; an error or failed check becomes a note, once."""
    result = _result()
    good = rows_of(result, H200)
    result.ours = Measured("ours", error="build failed: TargetUnavailable: cannot compile here")
    broken = rows_of(result, H200)
    skip = [Row(**r) for r in skipped(result.case, "the time budget (--budget-s) was spent", H200)]
    text = render_table([*good, *broken, *skip])
    lines = text.splitlines()
    assert [c.strip() for c in lines[0].strip("|").split("|")] == list(COLUMNS)
    assert [c.strip() for c in lines[2].strip("|").split("|")][3:9] == [
        f"{good[0].ours_ms:.3g}",
        "cuBLAS",
        f"{good[0].peer_ms:.3g}",
        "0.80x",
        "50% copy",
        "41.2/0.08",
    ]
    assert "| err [1] " in lines[3] and "| skipped [2] " in lines[4]
    assert lines[5] == (
        "[1] gemm/qwen3-1.7b/gate_up/m1 ours: build failed: TargetUnavailable: cannot compile here"
    )
    assert lines[6] == "[2] the time budget (--budget-s) was spent"


def test_files_round_trip_and_plot_is_optional(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """JSON holds the header and rows; without matplotlib the plot is skipped with a note."""
    rows = rows_of(_result(), H200)
    path = tmp_path / f"{result_stem('NVIDIA H200', '2026-11-30')}.json"
    assert path.name == "gpu-nvidia-h200-2026-11-30.json" and slug("x86_64") == "x86-64"
    write_json(path, {"machine": {"device": "NVIDIA H200"}}, rows)
    assert (
        read_rows(path) == rows
        and json.loads(path.read_text())["header"]["machine"]["device"] == "NVIDIA H200"
    )
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    note = write_plot(tmp_path / "p.png", rows, "title")
    assert note is not None and note.startswith("plot skipped: matplotlib is not importable")
    assert not (tmp_path / "p.png").exists()


def test_header_names_machine_and_limits() -> None:
    """The header gives GPU, driver, CUDA, torch, tilefoundry and the limits fractions refer to."""
    machine = Machine(
        "GPU",
        "NVIDIA H200",
        132,
        60 * 2**20,
        "580.159.04",
        "13.0",
        "2.11.0+cu130",
        "0.1.0",
        "abc1234",
        "2026-11-30",
    )
    assert header(machine, Limits(4.13e12, {"bf16": 989e12}), "NVIDIA H200").splitlines() == [
        "GPU NVIDIA H200 (132 SMs, L2 60 MiB) | driver 580.159.04 | CUDA 13.0 | torch 2.11.0+cu130 | "
        "tilefoundry 0.1.0 (git abc1234) | 2026-11-30",
        "limits: copy 4.13 TB/s (measured, read+write) | bf16 dense 989 TFLOP/s (NVIDIA H200 catalog)",
    ]


# ---------------------------------------------------------------- the command


def test_command_line_lists_and_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    """--list prints the selected ids; an unknown peer or an unmatched pattern is a usage error."""
    assert run.main(["--quick", "--list", "--cases", "gemm"]) == 0
    assert capsys.readouterr().out.split() == [
        "gemm/square/4096",
        "gemm/qwen3-1.7b/gate_up/m1",
        "gemm/qwen3-1.7b/gate_up/m2048",
    ]
    assert run.main(["--tiny", "--list", "--cases", "nope"]) == 2
    assert "--cases: 'nope' matches no case of this plan" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert run.main(["--cases", "rms_norm"]) == 2
        assert "--device cuda, but torch sees no CUDA device" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.main(["--peers", "eager,flash"])
    assert "--peers: unknown flash; known: eager, compile" in capsys.readouterr().err


def test_smoke_run_on_cpu_through_a_child_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One case built for the CPU target, checked and timed in a measuring child; table and JSON written."""
    status = run.main(
        [
            "--tiny",
            "--device",
            "cpu",
            "--target",
            "cpu",
            "--jobs",
            "0",
            "--cases",
            "softmax",
            "--peers",
            "eager",
            "--out",
            str(tmp_path),
            "--copy-mib",
            "16",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--option",
            "vectorize=False",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "note: our side built with the options {'vectorize': False}" in out
    assert out.startswith("CPU ") and "| softmax/16x64 | 16x64 | bf16 |" in out.replace("  ", " ").replace(
        "  ", " "
    )
    (path,) = tmp_path.glob("gpu-*.json")
    (row,) = read_rows(path)
    assert row.case == "softmax/16x64" and row.peer == "torch eager"
    assert row.ours_check == "pass" and row.peer_check == "pass" and row.ours_error is None
    assert row.ours_ms > 0 and row.peer_ms > 0 and math.isclose(row.speedup, row.peer_ms / row.ours_ms)
    assert row.compile_cold_s > 0 and row.compile_hit_s is not None and row.rotation > 1
    assert path.with_suffix(".md").read_text().startswith("CPU ")


def test_a_silent_measuring_process_is_killed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that sends nothing within --case-timeout-s is killed, and the run says why.

    Without --cache-dir the run builds into a fresh directory, removes it afterwards and gives the
    caller back its TILEFOUNDRY_CACHE_DIR and the shared directories it pointed into it.
    """
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    callers = {name: str(tmp_path / f"callers-{sub}") for name, sub in CACHE_VARIABLES}
    for name, value in callers.items():
        monkeypatch.setenv(name, value)
    status = run.main(
        [
            "--tiny",
            "--device",
            "cpu",
            "--target",
            "cpu",
            "--jobs",
            "0",
            "--cases",
            "softmax",
            "--out",
            str(tmp_path),
            "--case-timeout-s",
            "0.2",
        ]
    )
    assert status == 1
    assert capsys.readouterr().err.endswith(
        "bench.gpu: nothing to report: no measuring process got as far as the limits "
        "(killed: no word from the measuring process in 0.2 s; exit code -9)\n"
    )
    assert not list(tmp_path.glob("gpu-*"))
    assert not list(temp.iterdir())
    assert {name: os.environ[name] for name in callers} == callers


def test_a_runs_cache_holds_the_directories_builds_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Precompiled headers and the cuda target's shared objects go under the run's cache while it
    lasts, wherever the caller points them, so a cold build compiles every collective itself."""
    monkeypatch.setenv("TILEFOUNDRY_PCH_DIR", str(tmp_path / "elsewhere-pch"))
    monkeypatch.delenv("TILEFOUNDRY_CUDA_OBJECT_DIR", raising=False)
    with build_cache(tmp_path / "run") as cache:
        inside = {name: os.environ[name] for name, _ in CACHE_VARIABLES}
    root = (tmp_path / "run").resolve()
    assert cache == tmp_path / "run"
    assert inside == {
        "TILEFOUNDRY_CACHE_DIR": str(root),
        "TILEFOUNDRY_PCH_DIR": str(root / "pch"),
        "TILEFOUNDRY_CUDA_OBJECT_DIR": str(root / "objects" / "cuda"),
    }
    assert os.environ["TILEFOUNDRY_PCH_DIR"] == str(tmp_path / "elsewhere-pch")
    assert "TILEFOUNDRY_CUDA_OBJECT_DIR" not in os.environ


@pytest.mark.parametrize("sweep", ["bf16_round_sweep", "elementwise_sweep"])
def test_the_small_kernel_sweeps_build_with_nvcc(sweep: str, tmp_path: Path) -> None:
    """The standalone sweeps that build in seconds compile against today's runtime headers, so a
    header change that breaks them shows here rather than on the GPU machine."""
    from tilefoundry.codegen.cuda.build import nvcc
    from tilefoundry.ir.target import get_target
    from tilefoundry.runtime.headers import cutlass_include_dir, runtime_include_dir

    if not get_target("cuda").availability.can_compile:
        pytest.skip("cuda cannot compile here: " + "; ".join(get_target("cuda").availability.reasons))
    src = Path(__file__).resolve().parents[1] / "bench" / "gpu" / "kernels" / f"{sweep}.cu"
    cmd = [nvcc(), "-std=c++17", "--expt-relaxed-constexpr", "-DNDEBUG", "-c", "-gencode",
           "arch=compute_90a,code=sm_90a", "-I", str(runtime_include_dir()), "-isystem",
           str(cutlass_include_dir()), str(src), "-o", str(tmp_path / f"{sweep}.o")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr

