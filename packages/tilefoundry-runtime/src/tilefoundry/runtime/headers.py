"""Where the C++ headers a build needs live: the TileFoundry runtime, CuTe/CUTLASS, the CUDA toolkit,
and the flags of the tvm-ffi library every built module links to.

Builders put these on the include path (`-I`) so that generated code compiles with only
`#include <tilefoundry/runtime.h>`. Each lookup works both from an installed wheel and from an
editable checkout of the repository, and fails with an error saying how to provide what is missing.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from tilefoundry.ir.errors import TargetUnavailable

_PACKAGE_DIR = Path(__file__).resolve().parent
# packages/tilefoundry-runtime/src/tilefoundry/runtime/headers.py -> the repository root. An
# installed wheel sits shallower (site-packages/tilefoundry/runtime); it then has no checkout root.
_IN_CHECKOUT = _PACKAGE_DIR.parents[1].name == "src"
_REPO_ROOT = _PACKAGE_DIR.parents[4] if _IN_CHECKOUT else _PACKAGE_DIR
FETCH_SCRIPT = "third_party/cutlass/fetch.py"


def runtime_include_dir() -> Path:
    """The directory holding `tilefoundry/runtime.h`.

    Returns:
        The wheel's package data `tilefoundry/runtime/include` when installed, else the
        checkout's `cpp/runtime/include`.

    Raises:
        TargetUnavailable: neither location holds `tilefoundry/runtime.h`.
    """
    candidates = [_PACKAGE_DIR / "include", _REPO_ROOT / "cpp" / "runtime" / "include"]
    for candidate in candidates:
        if (candidate / "tilefoundry" / "runtime.h").is_file():
            return candidate
    raise TargetUnavailable(
        "TileFoundry runtime headers not found: reinstall tilefoundry-runtime (its wheel ships them)",
        where="tilefoundry-runtime",
        expected="tilefoundry/runtime.h under one of the candidates",
        got=[str(c) for c in candidates],
    )


@functools.cache
def runtime_digest() -> str:
    """sha256 (16 hex digits) over the path and bytes of every runtime header, read once per process.

    Generated sources name it in their first line, so a build cache keyed by the source never
    reuses a library built against other headers.
    """
    root = runtime_include_dir()
    h = hashlib.sha256()
    for path in sorted(p for p in (root / "tilefoundry").rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _installed_cutlass_include() -> Path | None:
    """`cutlass_library.source_path/include` of an installed nvidia-cutlass wheel, if any."""
    if importlib.util.find_spec("cutlass_library") is None:
        return None
    import cutlass_library

    return Path(cutlass_library.source_path) / "include"


def cutlass_include_dir() -> Path:
    """The directory holding `cute/` and `cutlass/`.

    Returns:
        The checkout's `third_party/cutlass/include` when filled, else the include directory of
        an installed nvidia-cutlass wheel.

    Raises:
        TargetUnavailable: neither is there; the message names the fetch script.
    """
    candidates = [_REPO_ROOT / "third_party" / "cutlass" / "include"]
    if (installed := _installed_cutlass_include()) is not None:
        candidates.append(installed)
    for candidate in candidates:
        if (candidate / "cute").is_dir() and (candidate / "cutlass").is_dir():
            return candidate
    raise TargetUnavailable(
        f"CuTe/CUTLASS headers not found: run `python3 {FETCH_SCRIPT}` in the repository "
        "(fills third_party/cutlass/include from the pinned nvidia-cutlass wheel) or "
        "`pip install nvidia-cutlass`",
        where="cutlass",
        expected="include/cute and include/cutlass under one of the candidates",
        got=[str(c) for c in candidates],
    )


def _cuda_roots() -> list[Path]:
    """Candidate CUDA toolkit roots, most specific first."""
    roots = [Path(os.environ[var]) for var in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(var)]
    if nvcc := shutil.which("nvcc"):
        roots.append(Path(nvcc).resolve().parent.parent)
    roots += [Path("/usr/local/cuda"), Path("/opt/cuda")]
    return roots


def cuda_include_dirs() -> list[Path]:
    """The CUDA toolkit include directories CuTe needs, on the host (g++) too.

    CuTe includes `cuda_runtime_api.h` and the CUDA numeric types even in host code; since
    CUDA 13 the libcu++ headers (`cuda/std/...`) sit in `include/cccl`, listed second when present.

    Returns:
        `[<toolkit>/include]`, plus `<toolkit>/include/cccl` when it exists.

    Raises:
        TargetUnavailable: no toolkit root (CUDA_HOME, CUDA_PATH, nvcc's, /usr/local/cuda,
            /opt/cuda) has `include/cuda_runtime_api.h`.
    """
    roots = _cuda_roots()
    for root in roots:
        include = root / "include"
        if (include / "cuda_runtime_api.h").is_file():
            cccl = include / "cccl"
            return [include, cccl] if cccl.is_dir() else [include]
    raise TargetUnavailable(
        "CUDA toolkit headers not found: CuTe needs cuda_runtime_api.h even for host code; "
        "install the CUDA toolkit or set CUDA_HOME",
        where="cuda-toolkit",
        expected="include/cuda_runtime_api.h under one of the candidates",
        got=[str(r) for r in roots],
    )


class TvmFfiFlags(NamedTuple):
    """tvm-ffi's build flags, as `python -m tvm_ffi.config` reports them (a NamedTuple, not a
    dataclass: a wheel's copy of this file loads without a module entry, test_headers.py).

    Attributes:
        compile: its include flags, without its `-std=` (each builder sets its own standard).
        link: its `-L` and `-l` flags.
        library_dirs: the directories of its `-L` flags, for the builder's rpath (spelled
            differently by g++ and nvcc), so a module finds libtvm_ffi without LD_LIBRARY_PATH.
    """

    compile: tuple[str, ...]
    link: tuple[str, ...]
    library_dirs: tuple[str, ...]


@functools.cache
def tvm_ffi_flags() -> TvmFfiFlags:
    """tvm-ffi's build flags (one query of its config module a process)."""

    def ask(*what: str) -> list[str]:
        command = [sys.executable, "-m", "tvm_ffi.config", *what]
        done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
        return shlex.split(done.stdout)

    link = ask("--ldflags") + ask("--libs")
    return TvmFfiFlags(
        compile=tuple(f for f in ask("--cxxflags") if not f.startswith("-std=")),
        link=tuple(link),
        library_dirs=tuple(f[2:] for f in link if f.startswith("-L")),
    )
