"""Compiled entries: calling convention, jit and its caches, refusals, dumps (seed 000 §1.2-§1.4)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tilefoundry
from tilefoundry.dsl import DimVar, Mesh, Tensor, Topology, f32, func, tf
from tilefoundry.ir.errors import PlanError, TargetUnavailable
from tilefoundry.runtime.abi import ABIError
from tilefoundry.runtime.jit import cache_key
from tilefoundry.runtime.loader import CompiledModule, load_linked_module

T = DimVar("T", 0, 17)


pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@func
def axpy(x: Tensor[(T, 8), f32], y: Tensor[(T, 8), f32]):
    return x * 2.0 + y, tf.exp(x)


@func
def scale(x: Tensor[(T, 8), f32]) -> Tensor[(T, 8), f32]:
    return x * 3.0


@pytest.fixture(scope="module")
def compiled() -> CompiledModule:
    return tilefoundry.build(axpy, target="cpu")


def test_1_2_auto_alloc_returns_outputs_from_entry_abi(compiled: CompiledModule) -> None:
    """seed 000 §1.2: with inputs only, outputs are allocated from EntryABI.output_params."""
    x, y = torch.randn(5, 8), torch.randn(5, 8)
    a, b = compiled(x, y)
    assert torch.allclose(a, x * 2 + y) and torch.allclose(b, x.exp())
    assert [p.name for p in compiled.type.output_params] == ["out0", "out1"]


def test_1_2_pre_alloc_fills_given_outputs(compiled: CompiledModule) -> None:
    """seed 000 §1.2: with every output given, they are filled and returned."""
    x, y = torch.randn(3, 8), torch.randn(3, 8)
    o1, o2 = torch.empty(3, 8), torch.empty(3, 8)
    r1, r2 = compiled(x, y, o1, o2)
    assert r1 is o1 and r2 is o2 and torch.allclose(o1, x * 2 + y)


def test_1_2_partial_outputs_are_a_type_error(compiled: CompiledModule) -> None:
    """seed 000 §1.2: some but not all outputs -> TypeError."""
    x = torch.randn(3, 8)
    with pytest.raises(TypeError, match=r"axpy: got 1 of 2 outputs; pass every output \(out0, out1\)"):
        compiled(x, x, torch.empty(3, 8))


def test_1_2_non_torch_inputs_are_a_type_error(compiled: CompiledModule) -> None:
    """seed 000 §1.2: auto-alloc is torch-only."""
    with pytest.raises(TypeError, match=r"axpy: argument 'y' must be a torch.Tensor, got list"):
        compiled(torch.randn(3, 8), [1.0])


def test_1_1_3_compiled_module_stands_for_no_module(compiled: CompiledModule) -> None:
    """seed 000 §1.1.3: a CompiledModule is a RuntimeModule named after its entry; module is None."""
    assert compiled.name == compiled.entry == "axpy" and compiled.module is None


def test_call_refuses_wrong_dtype_shape_and_range_naming_the_parameter(compiled: CompiledModule) -> None:
    """Wrong dtype, extent or DimVar range raise in Python naming the parameter, never crash."""
    x = torch.randn(3, 8)
    with pytest.raises(TypeError, match=r"axpy: parameter 'y' has dtype f64, declared f32"):
        compiled(x, x.double())
    with pytest.raises(ValueError, match=r"axpy: parameter 'y' dim 1 is 4, expected 8 = 8"):
        compiled(x, torch.randn(3, 4))
    with pytest.raises(ValueError, match=r"axpy: parameter 'x' dim 0 gives DimVar T the extent 17, outside"):
        compiled(torch.randn(17, 8), torch.randn(17, 8))
    with pytest.raises(ValueError, match=r"axpy: parameter 'y' has rank 1, declared rank 2"):
        compiled(x, torch.randn(8))


def test_call_refuses_an_output_aliasing_an_input(compiled: CompiledModule) -> None:
    """Outputs are checked noalias (the kernels rely on it): by the call, and by the entry itself."""
    x, y = torch.randn(3, 8), torch.randn(3, 8)
    with pytest.raises(TypeError, match=r"^axpy: output 'out0' overlaps parameter 'x' in memory; pass a sep"):
        compiled(x, y, x, torch.empty(3, 8))
    with pytest.raises(ValueError, match=r"output parameter 'out0' overlaps parameter 'x'"):
        compiled.fn(x, y, x, torch.empty(3, 8))


def test_exec_bridge_empty_domain_is_noop(compiled: CompiledModule) -> None:
    """seed 003, Execution bridge: an empty logical domain is a no-op, not an invalid launch."""
    a, b = compiled(torch.randn(0, 8), torch.randn(0, 8))
    assert a.shape == (0, 8) and b.shape == (0, 8)


def test_loader_refuses_another_abi_version() -> None:
    """DESIGN habit 18: the loader refuses a library of another ABI version, naming both and the path."""
    linked = tilefoundry.compile(scale, target="cpu")
    old = dataclasses.replace(linked.entry, abi_version=0)
    stale = dataclasses.replace(linked, entry=old, entries={"scale": old})
    with pytest.raises(
        ABIError, match=rf"built for ABI version 0, this runtime speaks version 1.*{linked.library}"
    ):
        load_linked_module(stale)


def test_1_3_jit_refuses_a_raw_python_function() -> None:
    """seed 000 §1.3: a raw Python function raises TypeError naming @func."""

    def plain(x):
        return x

    with pytest.raises(
        TypeError, match=r"jit takes a TileFoundry Function or Module, got function .*@func first"
    ):
        tilefoundry.jit(plain, target="cpu")


def test_1_3_jit_cache_is_keyed_by_canonical_text() -> None:
    """seed 000 §1.3: one entry per canonical text + target + options; cache_clear evicts."""
    tilefoundry.jit.cache_clear()
    assert tilefoundry.jit.cache_info() == {"size": 0}
    a = tilefoundry.jit(scale, target="cpu")
    assert tilefoundry.jit(scale, target="cpu") is a
    assert tilefoundry.jit.cache_info() == {"size": 1}
    tilefoundry.jit(scale, target="cpu", options={"vectorize": False})
    assert tilefoundry.jit.cache_info() == {"size": 2}
    mod = tilefoundry.dsl.module(type("Scale", (), {"scale": scale}))
    assert cache_key(mod, "cpu", {}) != cache_key(mod, "cpu", {"vectorize": False})
    tilefoundry.jit.cache_clear()
    assert tilefoundry.jit.cache_info() == {"size": 0}


def test_disk_cache_serves_a_second_process() -> None:
    """A second process compiling the same module reuses the library the first one built."""
    first = tilefoundry.compile(scale, target="cpu").library
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from test_compile_calls import scale; "
        "import tilefoundry; print(tilefoundry.compile(scale, target='cpu').library)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, os.path.dirname(__file__)],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ.copy(),
    )
    assert done.stdout.strip() == str(first)


def test_unknown_target_names_the_installed_ones() -> None:
    """An unknown target is refused naming the installed targets."""
    with pytest.raises(TargetUnavailable, match=r"unknown target; installed targets: .*cpu"):
        tilefoundry.compile(scale, target="tpu9")


def test_explicit_placement_the_target_lacks_fails_closed() -> None:
    """seed 003: an explicit placement that cannot be honored fails closed naming what blocked it."""
    mesh = Mesh((Topology("cta", 4),), (4,))

    @func
    def placed(x: Tensor[(T, 8), f32]):
        with mesh:
            y = x + 1.0
        return y

    with pytest.raises(
        PlanError,
        match=r"cpu: kernel k0_add .*explicit placement on 'cta' refused: the target's "
        r"execution axes are worker, vector",
    ):
        tilefoundry.compile(placed, target="cpu")


def test_explicit_vector_request_cannot_be_disabled() -> None:
    """seed 003: disabling vectorization cannot silently override an explicit vector constraint."""
    mesh = Mesh((Topology("vector", 16),), (16,))

    @func
    def lanes(x: Tensor[(T, 8), f32]):
        with mesh:
            y = x + 1.0
        return y

    with pytest.raises(PlanError, match=r"explicit vector binding refused: vectorize=False cannot override"):
        tilefoundry.compile(lanes, target="cpu", options={"vectorize": False})


def test_compile_dump_prints_each_stage(capsys: pytest.CaptureFixture[str]) -> None:
    """compile(dump=True) prints every pass with the plan's decisions and the generated source."""
    tilefoundry.compile(scale, target="cpu", dump=True)
    out = capsys.readouterr().out
    for stage in (
        "inline calls",
        "partition kernels",
        "lower to tile",
        "hoist shared values",
        "bind execution",
        "select atoms",
        "check budget",
        "generate source",
    ):
        assert f"== {stage}" in out
    assert "[candidate]" in out and "[scheduled]" in out
    assert "vector x16" in out or "vector x8" in out
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, scale_entry);" in out
    assert "#include <tilefoundry/runtime.h>" in out


I0 = DimVar("i0", 1, 70000)
V0 = DimVar("v0", 1, 9)


@func
def clash(x: Tensor[(I0, V0), f32], y: Tensor[(I0, V0), f32]):
    e = tf.exp(x)
    return tf.softmax(x * y, -1) + e * e, tf.sum(x, 0), tf.exp(tf.reshape(x, (I0 * V0,)))


def test_dimvar_named_like_a_generated_name_does_not_collide() -> None:
    """DimVars named like generated loop, value and strip-mined names (i0, v0) keep their own meaning."""
    compiled = tilefoundry.build(clash, target="cpu")
    gen = torch.Generator().manual_seed(3)
    for n, m in ((1, 1), (5, 3), (33, 8), (5000, 2)):
        x, y = torch.randn(n, m, generator=gen), torch.randn(n, m, generator=gen)
        for got, want in zip(compiled(x, y), clash(x, y), strict=True):
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def _vm_flags(address: int) -> list[str]:
    """The VmFlags of this process's mapping holding `address` (smaps; "hg" marks MADV_HUGEPAGE)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            if lo <= address < hi:
                for field in lines[i + 1 :]:
                    if field.startswith("VmFlags:"):
                        return field.split()[1:]
    return []


def _thp_allowed() -> bool:
    try:
        return "[never]" not in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not _thp_allowed(), reason="transparent huge pages are off on this host")
def test_large_outputs_are_advised_huge_pages() -> None:
    """The host entry advises 2 MiB pages (MADV_HUGEPAGE) on each output before its first touch, with
    the same values. Whether the kernel then grants huge pages depends on the host's free memory, so
    the test checks the advice on the output's mapping, not the backing."""

    @func
    def big(x: Tensor[(1024, 4096), f32]):
        return x * 2.0

    compiled = tilefoundry.build(big, target="cpu")
    x = torch.randn(1024, 4096)
    out = compiled(x)
    assert torch.equal(out, x * 2.0)
    assert "hg" in _vm_flags(out.data_ptr() + out.numel() * 2)


def test_huge_pages_option_turns_the_advice_off() -> None:
    """Option huge_pages=False leaves the default pages (no advice in the entry); a non-bool is refused."""

    @func
    def small(x: Tensor[(T, 8), f32]):
        return x + 1.0

    def source(options: dict) -> str:
        seen: dict[str, str] = {}
        tilefoundry.compile(small, target="cpu", options=options, dump=seen.__setitem__)
        return next(v for k, v in seen.items() if k.startswith("generate source"))

    on, off = source({}), source({"huge_pages": False})
    assert "prefer_huge_pages(a_out0);" in on and "prefer_huge_pages" not in off
    with pytest.raises(PlanError, match=r"cpu: option huge_pages must be True or False, got 1"):
        tilefoundry.compile(small, target="cpu", options={"huge_pages": 1})
