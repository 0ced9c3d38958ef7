"""The cpu target: its entry point, its catalog built from host facts, and its probe."""

from dataclasses import replace
from importlib.metadata import entry_points

import pytest

import tilefoundry.codegen.cpu.plugin as cpu_plugin
from tilefoundry.codegen.cpu.catalog import ISA_LEVELS, host_catalog, supported_levels
from tilefoundry.codegen.cpu.probe import HostFacts, host_facts, probe
from tilefoundry.ir.errors import TargetUnavailable
from tilefoundry.ir.target import GROUP, TargetCatalog, get_target

AVX2_HOST = HostFacts(
    machine="x86_64", model="Test CPU", cores=4, flags=frozenset({"sse2", "avx2", "fma"}), mhz=3000.0,
    memory_bytes=16 << 30, caches=(("l1d", 32 << 10, False), ("l3", 8 << 20, True)),
    compiler="/usr/bin/g++", compiler_version="g++ 12",
)
AVX512_FLAGS = frozenset({"sse2", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"})


def test_entry_point_loads_the_plugin_module():
    (ep,) = [ep for ep in entry_points(group=GROUP) if ep.name == "cpu"]
    assert ep.value == "tilefoundry.codegen.cpu.plugin"
    assert ep.load() is cpu_plugin


def test_registry_loads_a_valid_catalog_of_this_host():
    t = get_target("cpu")
    assert TargetCatalog.model_validate_json(t.catalog.model_dump_json()) == t.catalog
    facts = host_facts()
    assert t.catalog.axis("worker").max_extent == facts.cores >= 1
    assert t.probe.can_compile == (facts.compiler is not None)
    assert t.availability.facts["cores"] == str(facts.cores)
    compiles = t.implements("tilefoundry_codegen") and t.implements("tilefoundry_builder")
    assert t.can_compile == (t.probe.can_compile and compiles)


def test_avx2_host_catalog():
    c = host_catalog(AVX2_HOST)
    assert c.arch == "x86_64-avx2" and c.capabilities == ("avx2", "fma", "sse2")
    vector = {a.name: a for a in c.atoms_of("vector")}
    assert vector["cpu_avx2_f32x8"].lanes == 8 and vector["cpu_avx2_f32x8"].requires == ("avx2",)
    assert "cpu_sse2_f32x4" in vector and not any("avx512" in name for name in vector)
    assert c.atom("cpu_avx2_load_32b").bytes == 32 and c.atom("cpu_avx2_reduce_f64x4").width == 4
    assert c.resource("register").capacity_bytes == 16 * 32
    caches = [(r.name, r.instance) for r in c.resources if r.kind == "cache"]
    assert caches == [("l1d", "worker"), ("l3", "device")]
    # 4 cores * 3 GHz * 8 lanes * 2 (FMA) * 2 FMA units
    assert c.peak.flops_per_s["f32"] == pytest.approx(4 * 3e9 * 8 * 2 * 2)
    assert c.scope_order() == ("worker", "vector") and c.axis("vector").binds == ("vector",)


def test_avx512_host_lists_every_level_and_isa_caps_it():
    host = replace(AVX2_HOST, flags=AVX512_FLAGS)
    c = host_catalog(host)
    assert c.atom("cpu_avx512_f32x16").lanes == 16 and c.atom("cpu_avx2_f32x8").lanes == 8
    assert "avx512_bf16" in c.capabilities
    gemm = c.atom("cpu_avx512_gemm_6x64_f32_rrr")
    assert (gemm.m, gemm.n, gemm.a_dtype, gemm.b_major, gemm.a_storage) == (6, 64, "f32", "N", "gmem")
    assert gemm.requires == ("avx512",) and c.atom("cpu_avx512_gemm_6x64_bf16_rrr").d_dtype == "bf16"
    assert [a.name for a in c.atoms_of("mma")] == [gemm.name, "cpu_avx512_gemm_6x64_bf16_rrr"]
    capped = host_catalog(host, isa="avx2")
    assert capped.arch == "x86_64-avx2" and not any("avx512" in a.name for a in capped.atoms)
    assert capped.atoms_of("mma") == ()
    with pytest.raises(ValueError, match=r"cpu: isa 'avx512' is not available here \(host supports: avx2, "
                                         r"sse2; known: avx512, avx2, sse2, neon\)"):
        host_catalog(AVX2_HOST, isa="avx512")


def test_arm_and_scalar_hosts():
    arm = host_catalog(replace(AVX2_HOST, machine="aarch64", flags=frozenset({"fp", "asimd"})))
    assert arm.arch == "aarch64-neon" and arm.atom("cpu_neon_f32x4").lanes == 4
    scalar = host_catalog(replace(AVX2_HOST, flags=frozenset(), mhz=None))
    assert scalar.arch == "x86_64" and scalar.atoms_of("vector") == () and scalar.peak.flops_per_s == {}


def test_unknown_isa_option_is_reported_through_the_registry():
    """An ISA no level names is refused by its declaration; one the host lacks, by the catalog."""
    refusal = r"option isa must be one of avx512, avx2, sse2, neon, None, got 'avx9'"
    with pytest.raises(TargetUnavailable, match=rf"tilefoundry_target_catalog raised PlanError: {refusal}"):
        get_target("cpu").catalog_for({"isa": "avx9"})
    here = {level.name for level in supported_levels(host_facts())}
    missing = next(level.name for level in ISA_LEVELS if level.name not in here)
    with pytest.raises(TargetUnavailable, match=rf"tilefoundry_target_catalog raised ValueError: "
                                                rf"cpu: isa '{missing}' is not available here"):
        get_target("cpu").catalog_for({"isa": missing})


def test_probe_without_a_compiler_says_why(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    a = probe(replace(AVX2_HOST, compiler=None, compiler_version=""), "avx2")
    assert (a.can_compile, a.can_run) == (False, False)
    assert a.reasons == ("no C++ compiler: g++ is not on PATH (install g++ or set CXX)",)
    assert a.facts == {"cpu": "Test CPU", "cores": "4", "isa": "avx2"}
    ok = probe(AVX2_HOST, "avx2")
    assert ok.can_compile and ok.can_run and ok.facts["compiler_version"] == "g++ 12"
