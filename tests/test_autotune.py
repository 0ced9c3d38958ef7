"""Autotuning on the cpu target: configurations built, checked against the baseline, timed, cached."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import torch

import tilefoundry.runtime.autotuning as autotune_module
from tilefoundry.dsl import DimVar, Tensor, f32, func, tf
from tilefoundry.runtime import autotune
from tilefoundry.runtime.autotuning import device_label, shape_bucket

T = DimVar("T", 1, 257)


@func
def scaled_softmax(x: Tensor[(T, 64), f32]):
    return tf.softmax(x * 0.5, -1) + 1.0


SPACE = {"vectorize": [True, False]}


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    """Tuning results of the test's own; builds from the session's cache, where every test finds the
    same few configurations built."""
    builds = Path(os.environ["TILEFOUNDRY_CACHE_DIR"]) / "builds"
    builds.mkdir(parents=True, exist_ok=True)
    (tmp_path / "builds").symlink_to(builds, target_is_directory=True)
    monkeypatch.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path))


def _x(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, 64, generator=torch.Generator().manual_seed(seed))


def test_first_call_tunes_every_configuration_and_runs_the_fastest_correct_one() -> None:
    """Each configuration is built, agrees with the baseline and is timed; the fastest is chosen and runs."""
    tuned = autotune(scaled_softmax, target="cpu", space=SPACE)
    x = _x(5, 1)
    out = tuned(x)
    torch.testing.assert_close(out, scaled_softmax(x), rtol=1e-5, atol=1e-5)
    record = json.loads(tuned.cache_file(device_label((x,))).read_text())[shape_bucket((x,))]
    tried = record["tried"]
    assert [t["options"] for t in tried] == [{"vectorize": True}, {"vectorize": False}]
    assert all(t["seconds"] > 0 for t in tried)
    assert record["options"] == min(tried, key=lambda t: t["seconds"])["options"] == tuned.choice(x)


def test_a_configuration_that_computes_something_else_is_rejected_however_fast(monkeypatch) -> None:
    """A configuration whose outputs differ from the baseline's is recorded as rejected and never chosen."""
    real_build = autotune_module.build

    def build(mod, *, target, options):
        compiled = real_build(mod, target=target, options=options)
        if options.get("vectorize") is False:
            return lambda x: torch.zeros_like(compiled(x))  # wrong, and as fast as anything
        return compiled

    monkeypatch.setattr(autotune_module, "build", build)
    tuned = autotune(scaled_softmax, target="cpu", space=SPACE)
    x = _x(9, 2)
    torch.testing.assert_close(tuned(x), scaled_softmax(x), rtol=1e-5, atol=1e-5)
    record = json.loads(tuned.cache_file(device_label((x,))).read_text())[shape_bucket((x,))]
    rejected = record["tried"][1]
    assert rejected["options"] == {"vectorize": False}
    assert rejected["rejected"].startswith("output 0 has rel_l2 1 against the baseline, over 0.0001")
    assert record["options"] == {"vectorize": True}


def test_configurations_build_side_by_side_and_a_failed_build_is_a_rejection(monkeypatch) -> None:
    """Every configuration's build runs at once (each waits here until all have started); one whose
    build raises is recorded as rejected with the error, and the baseline still wins."""
    real_build = autotune_module.build
    space = {"vectorize": [True, False], "reassociate": [False, True]}
    started = threading.Barrier(4, timeout=60)

    def build(mod, *, target, options):
        started.wait()  # breaks unless the four builds overlap
        if options["reassociate"] and not options["vectorize"]:
            raise RuntimeError("nvcc stand-in: no such tile")
        return real_build(mod, target=target, options=options)

    monkeypatch.setattr(autotune_module, "build", build)
    monkeypatch.setattr(autotune_module.os, "cpu_count", lambda: 8)
    tuned = autotune(scaled_softmax, target="cpu", space=space)
    x = _x(6, 5)
    torch.testing.assert_close(tuned(x), scaled_softmax(x), rtol=1e-5, atol=1e-5)
    record = json.loads(tuned.cache_file(device_label((x,))).read_text())[shape_bucket((x,))]
    why = {json.dumps(t["options"], sort_keys=True): t.get("rejected") for t in record["tried"]}
    assert why == {
        '{"reassociate": false, "vectorize": true}': None,
        '{"reassociate": true, "vectorize": true}': None,
        '{"reassociate": false, "vectorize": false}': None,
        '{"reassociate": true, "vectorize": false}': "RuntimeError: nvcc stand-in: no such tile",
    }


def test_a_tuned_bucket_is_read_back_by_another_process_without_building(monkeypatch) -> None:
    """The on-disk result serves a fresh Autotuned (another process) and every input of the bucket."""
    autotune(scaled_softmax, target="cpu", space=SPACE).choice(_x(5, 3))
    builds = []
    monkeypatch.setattr(autotune_module, "build", lambda *a, **k: builds.append(k) or pytest.fail("rebuilt"))
    fresh = autotune(scaled_softmax, target="cpu", space=SPACE)
    assert fresh.choice(_x(7, 4)) in ({"vectorize": True}, {"vectorize": False})  # 5 and 7 share bucket 8
    assert builds == []


def test_a_new_shape_bucket_is_tuned_again() -> None:
    """Buckets round every dim up to a power of two; a larger input starts its own tuning."""
    tuned = autotune(scaled_softmax, target="cpu", space=SPACE)
    small, large = _x(3, 5), _x(100, 6)
    assert shape_bucket((small,)) == "(4,64)" and shape_bucket((large,)) == "(128,64)"
    tuned.choice(small)
    tuned.choice(large)
    results = json.loads(tuned.cache_file(device_label((small,))).read_text())
    assert sorted(results) == ["(128,64)", "(4,64)"]


def test_a_module_of_several_functions_is_refused_naming_them() -> None:
    """One tuned function at a time: a Module holding two is refused before anything is built."""
    from tilefoundry.dsl import module

    @module
    class Two:
        scaled_softmax = scaled_softmax

        @func
        def shifted(x: Tensor[(T, 64), f32]):
            return x + 1.0

    message = r"autotune: tunes one function; module Two has 2 \(scaled_softmax, shifted\)"
    with pytest.raises(TypeError, match=message):
        autotune(Two, target="cpu", space=SPACE)


def test_an_empty_or_fixed_option_is_refused_by_name() -> None:
    """An option with no values, or one both fixed and tuned, fails before anything is built."""
    with pytest.raises(ValueError, match=r"autotune: option 'vectorize' has no values to try"):
        autotune(scaled_softmax, target="cpu", space={"vectorize": []})
    with pytest.raises(ValueError, match=r"option 'vectorize' is both fixed \(options\) and tuned"):
        autotune(scaled_softmax, target="cpu", space=SPACE, options={"vectorize": True})


@pytest.mark.gpu
def test_the_sm90_gemm_tiles_agree_and_one_is_chosen_on_gpu() -> None:
    """On a GPU, each fixed gemm_tile computes the baseline's GEMM (none rejected); the fastest is kept."""
    from tilefoundry.codegen.cuda.options import GEMM_TILE
    from tilefoundry.dsl import ConstTensor, bf16

    M = DimVar("M", 1, 4097)

    @func
    def proj(x: Tensor[(M, 1024), bf16], w: ConstTensor[(2048, 1024), bf16]):
        return x @ tf.transpose(w, (1, 0))

    gen = torch.Generator().manual_seed(7)
    x = torch.randn(1500, 1024, generator=gen).to(torch.bfloat16).cuda()
    w = (torch.randn(2048, 1024, generator=gen) / 32).to(torch.bfloat16).cuda()
    fixed = [tile for tile in GEMM_TILE.values if tile != "auto"]
    tuned = autotune(proj, target="cuda", space={"gemm_tile": fixed})
    torch.testing.assert_close(tuned(x, w).float(), (x.float() @ w.float().t()), rtol=3e-2, atol=3e-2)
    record = json.loads(tuned.cache_file(device_label((x, w))).read_text())[shape_bucket((x, w))]
    assert [t.get("rejected") for t in record["tried"]] == [None, None, None]
    assert record["options"]["gemm_tile"] in fixed


def test_outputs_passed_in_take_no_part_in_tuning() -> None:
    """Called with its output too (pre-alloc), tuning still runs each configuration on fresh outputs."""
    tuned = autotune(scaled_softmax, target="cpu", space=SPACE)
    x = _x(6, 8)
    out = torch.full((6, 64), float("nan"))
    assert tuned(x, out) is out
    torch.testing.assert_close(out, scaled_softmax(x), rtol=1e-5, atol=1e-5)
    record = json.loads(tuned.cache_file(device_label((x,))).read_text())
    assert list(record) == [shape_bucket((x,))]
