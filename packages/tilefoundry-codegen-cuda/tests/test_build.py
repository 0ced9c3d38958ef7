"""build.py: nvcc flags per arch, and a build that fails names nvcc's error."""

from __future__ import annotations

import shutil

import pytest

from tilefoundry.codegen.cuda import build
from tilefoundry.ir.errors import TargetUnavailable
from tilefoundry.ir.target import Sources


def test_hopper_builds_sm90a_never_plain_sm90() -> None:
    """HOPPER.md: wgmma and setmaxnreg need sm_90a; plain sm_90 turns them into traps."""
    assert build.arch_flags("sm_90a", {}) == ("-gencode", "arch=compute_90a,code=[sm_90a,compute_90a]")
    assert build.arch_flags("sm_80", {}) == ("-gencode", "arch=compute_80,code=[sm_80,compute_80]")


def test_portable_option_adds_sm80_code() -> None:
    """Option portable=True adds sm_80 code beside the catalog arch (the atoms' portable tiers run there)."""
    flags = build.arch_flags("sm_90a", {"portable": True})
    assert flags == (
        "-gencode",
        "arch=compute_90a,code=[sm_90a,compute_90a]",
        "-gencode",
        "arch=compute_80,code=[sm_80,compute_80]",
    )


def test_compile_flags_follow_the_issue() -> None:
    """-std=c++17 --expt-relaxed-constexpr -DNDEBUG, the target macro, runtime/CuTe headers, tvm-ffi flags."""
    flags = build.compile_flags("sm_90a", {})
    for flag in ("-std=c++17", "--expt-relaxed-constexpr", "-DNDEBUG", "-DTILEFOUNDRY_TARGET_CUDA", "-O3"):
        assert flag in flags
    assert any(f.startswith("-I") and "tvm_ffi" in f for f in flags)
    assert flags[flags.index("-isystem") + 1].endswith("include")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_rejected_source_raises_with_nvccs_message(tmp_path) -> None:
    """A source nvcc rejects raises TargetUnavailable carrying nvcc's first error lines and the kept path."""
    sources = Sources(
        "cuda", {"broken.cu": "#include <tilefoundry/runtime.h>\nint x = undefined_name;\n"}, ("x",)
    )
    with pytest.raises(TargetUnavailable, match=r"nvcc failed on .*broken\.cu:\n(.|\n)*undefined_name"):
        build.build(sources, {}, tmp_path, "sm_80")
    assert (tmp_path / "broken.cu").is_file()
