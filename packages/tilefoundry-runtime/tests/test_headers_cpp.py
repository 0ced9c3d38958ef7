"""The C++ runtime headers, compiled: g++ host tests that run, nvcc kernels, negative compiles.

Sources live in tests/cpp/ (negative cases in tests/cpp/negative/, each naming the error it
expects on its first line). CuTe makes every compile slow, so each build is cached on disk
under .tilefoundry-cache/header-tests/, keyed by compiler, its version, flags, source text and
every runtime header; session fixtures share one build between the tests that read it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import tvm_ffi.libinfo

from tilefoundry.ir.errors import TargetUnavailable
from tilefoundry.runtime.headers import cuda_include_dirs, cutlass_include_dir, runtime_include_dir

REPO = Path(__file__).resolve().parents[3]
CPP_TESTS = REPO / "tests" / "cpp"
CACHE = REPO / ".tilefoundry-cache" / "header-tests"
HEADER_ROOT = REPO / "cpp" / "runtime" / "include"
HEADERS = sorted(
    p.relative_to(HEADER_ROOT).as_posix() for p in HEADER_ROOT.rglob("*") if p.suffix in {".h", ".cuh"}
)
NEGATIVE = sorted((CPP_TESTS / "negative").glob("*.c*"))
# Headers with device code: ops/ and the CUDA target's own, compiled by nvcc.
DEVICE_PREFIXES = ("tilefoundry/ops/", "tilefoundry/runtime/cuda/")
# Builds unused this long are dropped: every header edit keys a new set of builds.
MAX_AGE_S = 7 * 24 * 3600
# Intermediates nvcc --keep leaves (large preprocessed files); the cache drops them.
DROPPED_SUFFIXES = {".ii", ".c", ".cpp", ".gpu", ".cubin", ".fatbin", ".module_id"}


@dataclass(frozen=True)
class Build:
    """One cached compile: exit status, compiler output, and the directory of its artifacts."""

    rc: int
    log: str
    out: Path


@cache
def _tool_version(tool: str) -> str:
    return subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout


@cache
def _headers_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(HEADER_ROOT.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(HEADER_ROOT).as_posix().encode())
            digest.update(path.read_bytes())
    stamp = cutlass_include_dir() / ".pin-sha256"
    digest.update(stamp.read_bytes() if stamp.is_file() else b"")
    return digest.hexdigest()


@cache
def _prune_cache() -> None:
    """Drops cached builds not used for MAX_AGE_S (a hit refreshes the age)."""
    if not CACHE.is_dir():
        return
    now = time.time()
    for entry in CACHE.iterdir():
        rc = entry / "rc"
        if rc.is_file() and now - rc.stat().st_mtime > MAX_AGE_S:
            shutil.rmtree(entry, ignore_errors=True)


def build(tool: str, flags: list[str], source: str, suffix: str) -> Build:
    """Compiles `source` (text) with `tool`, or returns the cached result of the same compile.

    `{src}` and `{out}` in `flags` stand for the source file and the artifact directory.
    """
    key = hashlib.sha256(
        json.dumps([tool, flags, _tool_version(tool), source, suffix, _headers_digest()]).encode()
    ).hexdigest()[:32]
    final = CACHE / key
    _prune_cache()
    if (final / "rc").is_file():
        (final / "rc").touch()
        return Build(int((final / "rc").read_text()), (final / "log").read_text(), final)
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=CACHE, prefix="tmp-"))
    src = work / f"test{suffix}"
    src.write_text(source)
    cmd = [tool, *(f.replace("{src}", str(src)).replace("{out}", str(work)) for f in flags)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=900)
    for leftover in work.iterdir():
        if leftover.suffix in DROPPED_SUFFIXES and leftover != src:
            leftover.unlink()
    (work / "log").write_text(proc.stdout + proc.stderr)
    (work / "rc").write_text(str(proc.returncode))
    try:
        work.rename(final)
    except OSError:  # a concurrent run stored the same build first
        shutil.rmtree(work, ignore_errors=True)
    return Build(proc.returncode, proc.stdout + proc.stderr, final)


def _require(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        pytest.skip(f"{tool} not found: the C++ header tests need it on PATH")
    return found


@pytest.fixture(scope="session")
def gxx_flags() -> list[str]:
    """g++ flags of the CPU target: runtime, CuTe, CUDA toolkit (CuTe's host needs) and tvm-ffi headers."""
    _require("g++")
    try:
        cuda = cuda_include_dirs()
    except TargetUnavailable as err:
        pytest.skip(str(err))
    system = [cutlass_include_dir(), *cuda, Path(tvm_ffi.libinfo.find_include_path())]
    return [
        "-std=c++17",
        "-DTILEFOUNDRY_TARGET_CPU",
        "-I",
        str(runtime_include_dir()),
        *(arg for d in system for arg in ("-isystem", str(d))),
        "-I",
        str(CPP_TESTS),
    ]


@pytest.fixture(scope="session")
def nvcc_flags() -> list[str]:
    """nvcc flags of the CUDA target, as the CUDA builder passes them (tvm-ffi for the host entries)."""
    _require("nvcc")
    return [
        "-std=c++17",
        "--expt-relaxed-constexpr",
        "-DNDEBUG",
        "-arch=sm_90a",
        "-DTILEFOUNDRY_TARGET_CUDA",
        "-I",
        str(runtime_include_dir()),
        "-isystem",
        str(cutlass_include_dir()),
        "-isystem",
        tvm_ffi.libinfo.find_include_path(),
    ]


# ---------------------------------------------------------------- host tests, run


@pytest.fixture(scope="session")
def host_groups(gxx_flags: list[str]) -> dict[str, tuple[int, int]]:
    """Builds and runs tests/cpp/test_host_runtime.cpp; `[group] N passed, M failed` per group."""
    source = (CPP_TESTS / "test_host_runtime.cpp").read_text()
    result = build(
        "g++", [*gxx_flags, "-Wall", "-Wextra", "-Werror", "{src}", "-o", "{out}/host_test"], source, ".cpp"
    )
    assert result.rc == 0, result.log
    return _run_groups(result.out / "host_test")


def _run_groups(binary: Path) -> dict[str, tuple[int, int]]:
    """Runs a host test binary; `[group] N passed, M failed` per group (check.h's lines)."""
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    groups = {
        m["name"]: (int(m["passed"]), int(m["failed"]))
        for m in re.finditer(
            r"^\[(?P<name>\w+)\] (?P<passed>\d+) passed, (?P<failed>\d+) failed$", run.stdout, re.M
        )
    }
    assert groups, run.stdout
    return groups


HOST_GROUPS = [
    ("topology", "seed 000 §2.2: static levels are constants, launch-provided ones read the host loop's ids"),
    ("mesh_local_index", "seed 000 §2.3: local_index() converts each level's id over its trailing axes"),
    ("mesh_cta_only", "seed 000 §2.3: a launch-provided level takes every remaining axis"),
    ("shard_layout_local_shape", "DESIGN §4: the local shape sets every split position to 1"),
    ("local_offsets", "seed 000 §2.10.2: offset = Σ coord[m] · S[k] over Split(k) axes"),
    ("local_ir_example", "DESIGN §4: local() computes what tilefoundry.ir.shard computes"),
    ("local_broadcast_and_partial", "seed 000 §2.10.2: Broadcast and Partial contribute 0"),
    ("local_rmem_split_stride_zero", "seed 000 §2.10.3: a zero split stride contributes 0 (one path)"),
    ("local_keeps_gmem_residency", "seed 000 §2.6: local() keeps the engine's residency tag"),
    ("shard_partition", "seed 000 §3.3: shard_partition gives local()'s view with a plain layout"),
    ("copy_both_directions", "seed 000 §2.8: copy moves the full tensor shard -> plain and plain -> shard"),
]


@pytest.mark.parametrize(("group", "rule"), HOST_GROUPS, ids=[g for g, _ in HOST_GROUPS])
def test_2_host_runtime_group_passes(host_groups: dict[str, tuple[int, int]], group: str, rule: str) -> None:
    """seed 000 §2: each host-run group of test_host_runtime.cpp checks its rule (see `rule`)."""
    passed, failed = host_groups[group]
    assert (passed, failed) != (0, 0), f"{group} ran no check ({rule})"
    assert failed == 0, f"{group}: {failed} checks failed ({rule})"


def test_2_10_ir_agrees_with_the_host_checks() -> None:
    """DESIGN §4: the IR's ShardLayout and Mesh give the numbers the C++ host checks assert.

    test_host_runtime.cpp's `local_ir_example` and `mesh_local_index` groups hard-code these.
    """
    from tilefoundry.ir.shard import Mesh, Split, Topology

    sl = Mesh((Topology("cta", 4),), (4,))[Split(0)].resolve((8, 16))
    assert str(sl.layout) == "((2,4),16):((16,32),1)"
    assert sl.local_shape() == ((2, 1), 16)
    assert [sl.local_offset((c,)) for c in range(4)] == [0, 32, 64, 96]
    mesh = Mesh((Topology("cta", 2), Topology("thread", 4)), (2, 4))
    assert str(mesh.layout) == "(2,4):(1,1)"
    assert mesh.local_index({"cta": 1, "thread": 2}) == (1, 2)


ATTENTION_GROUPS = [
    ("attention_emulator", "the ldmatrix/mma emulator reproduces x2 layouts earlier kernels ran on a GPU"),
    ("attention_scores", "S = Q Kᵀ through the kernel's Q and K ldmatrix offsets equals the plain product"),
    ("attention_values", "O = P V through p_operand and V's ldmatrix.trans offsets equals the plain product"),
    ("attention_mask_limits", "the per-element mask test keeps exactly the keys below a row's limit"),
    ("attention_bank_groups", "each ldmatrix phase reads 8 distinct 16-byte bank groups of the padded rows"),
    ("attention_split_keys", "split-KV chunks: enough for the target CTAs, step multiples, none empty"),
    ("attention_cluster_split_keys", "the cluster path's splits: at most the cluster size, same chunk rules"),
    ("attention_rows_tier", "the prefill config per call without the wgmma tier; each tier's plan facts"),
    ("attention_wgmma_layout", "wgmma tier: swizzled tiles are conflict-free bijections; descriptor fields"),
    ("attention_merge_orders_agree", "the cluster merge folds as the merge kernel, bit for bit, near f64"),
    ("attention_merge_empty_splits", "empty splits (m = -inf, l = 0) change nothing; a row nobody saw is 0"),
    ("attention_block_rows", "a (batch, kv head) block's rows land where the call's row numbering puts them"),
]


@pytest.fixture(scope="session")
def attention_groups(nvcc_flags: list[str]) -> dict[str, tuple[int, int]]:
    """Builds tests/cpp/test_attention_fragments.cu with nvcc and runs it on the host (no GPU)."""
    source = (CPP_TESTS / "test_attention_fragments.cu").read_text()
    flags = [*nvcc_flags, "-I", str(CPP_TESTS), "{src}", "-o", "{out}/attention_test"]
    result = build("nvcc", flags, source, ".cu")
    assert result.rc == 0, result.log
    return _run_groups(result.out / "attention_test")


@pytest.mark.parametrize(("group", "rule"), ATTENTION_GROUPS, ids=[g for g, _ in ATTENTION_GROUPS])
def test_attention_fragment_group_passes(
    attention_groups: dict[str, tuple[int, int]], group: str, rule: str
) -> None:
    """The attention tensor-core tier's fragment bookkeeping, emulated on the host (see `rule`)."""
    passed, failed = attention_groups[group]
    assert (passed, failed) != (0, 0), f"{group} ran no check ({rule})"
    assert failed == 0, f"{group}: {failed} checks failed ({rule})"


# ---------------------------------------------------------------- CUDA kernels, compiled


@pytest.fixture(scope="session")
def cuda_build(nvcc_flags: list[str]) -> Build:
    """tests/cpp/test_cuda_runtime.cu compiled to an object, its PTX kept."""
    source = (CPP_TESTS / "test_cuda_runtime.cu").read_text()
    flags = [
        *nvcc_flags,
        "-Werror",
        "all-warnings",
        "-c",
        "{src}",
        "-o",
        "{out}/test.o",
        "--keep",
        "--keep-dir",
        "{out}",
    ]
    return build("nvcc", flags, source, ".cu")


def _ptx_entries(out: Path) -> dict[str, str]:
    """PTX text per kernel entry of the sm_90a PTX nvcc kept."""
    (ptx,) = out.glob("*compute_90a.ptx")
    text = ptx.read_text()
    return {m["name"]: m["body"] for m in re.finditer(r"\.entry (?P<name>\w+)\((?P<body>.*?)\n}", text, re.S)}


def test_3_cuda_kernels_compile_warning_free(cuda_build: Build) -> None:
    """seed 000 §3: every op family's public entry compiles for sm_90a, with its tier static_asserts."""
    assert cuda_build.rc == 0, cuda_build.log


@pytest.mark.parametrize(
    ("kernel", "instruction"),
    [
        ("kernel_copy_async", "cp.async.cg.shared.global"),
        ("kernel_copy_async", "cp.async.wait_group"),
        ("kernel_mma", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
        ("kernel_reduce_sharded", "shfl.sync.bfly.b32"),
        ("kernel_reduce_sharded", "bar.sync"),
        ("kernel_sync", "atom.global.add.u32"),
        ("kernel_sync", "nanosleep.u32"),
        ("kernel_elementwise", "st.global.v4"),
    ],
)
def test_3_selected_tier_emits_its_instruction(cuda_build: Build, kernel: str, instruction: str) -> None:
    """seed 000 §3: the tier chosen at compile time is in the code (cp.async, mma.sync, shuffles, ...)."""
    assert cuda_build.rc == 0, cuda_build.log
    entries = {name: body for name, body in _ptx_entries(cuda_build.out).items() if kernel in name}
    assert entries, f"no PTX entry for {kernel}"
    (body,) = entries.values()
    assert instruction in body, f"{kernel}: expected {instruction} in its PTX"


# ---------------------------------------------------------------- every header on its own


def _self_contained(header: str, gxx_flags: list[str], nvcc_flags: list[str]) -> Build:
    source = f"#include <{header}>\n#include <{header}>\n"  # twice: #pragma once holds
    if header.startswith(DEVICE_PREFIXES):
        # Both front ends parse the header, for the PTX alone: no second device pass nor ptxas.
        flags = [f for f in nvcc_flags if f != "-arch=sm_90a"]
        flags += ["-gencode", "arch=compute_90a,code=compute_90a", "--cuda", "{src}", "-o", "{out}/test.ii"]
        return build("nvcc", flags, source, ".cu")
    return build("g++", [*gxx_flags, "-fsyntax-only", "{src}"], source, ".cpp")


@pytest.fixture(scope="session")
def self_contained_builds(
    request: pytest.FixtureRequest, gxx_flags: list[str], nvcc_flags: list[str]
) -> Iterator[dict[str, Build]]:
    """The selected headers, each compiled alone, two compiles at a time."""
    selected = {
        item.callspec.params["header"]
        for item in request.session.items
        if hasattr(item, "callspec") and "header" in item.callspec.params
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {h: pool.submit(_self_contained, h, gxx_flags, nvcc_flags) for h in sorted(selected)}
        yield {h: f.result() for h, f in futures.items()}


@pytest.mark.parametrize("header", HEADERS)
def test_header_is_self_contained(self_contained_builds: dict[str, Build], header: str) -> None:
    """STYLE 16: every header compiles on its own (and twice, through #pragma once)."""
    result = self_contained_builds[header]
    assert result.rc == 0, f"{header} does not compile alone:\n{result.log}"


# ---------------------------------------------------------------- refused at compile time


def _expected_error(source: Path) -> str:
    first = source.read_text().splitlines()[0]
    assert first.startswith("// expect-error: "), f"{source.name}: first line must name the expected error"
    return first.removeprefix("// expect-error: ")


@pytest.mark.parametrize("source", NEGATIVE, ids=[p.name for p in NEGATIVE])
def test_refused_at_compile_time_with_message(source: Path, request: pytest.FixtureRequest) -> None:
    """seed 000 §2-3: an ill-formed use stops at a static_assert / #error whose text names the entry."""
    if source.suffix == ".cu":
        flags = [*request.getfixturevalue("nvcc_flags"), "--cuda", "{src}", "-o", "{out}/test.ii"]
        result = build("nvcc", flags, source.read_text(), ".cu")
    else:
        flags = [*request.getfixturevalue("gxx_flags"), "-fsyntax-only", "{src}"]
        result = build("g++", flags, source.read_text(), ".cpp")
    assert result.rc != 0, f"{source.name} compiled; it must be refused"
    assert _expected_error(source) in result.log
