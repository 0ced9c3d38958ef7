"""Build generated C++ into a shared library with g++, against tvm-ffi and the runtime headers.

    g++ -std=c++17 -O3 -march=native -fopenmp -fno-math-errno -ffp-contract=off -fwrapv -fPIC -shared
        -DTILEFOUNDRY_TARGET_CPU -mprefer-vector-width=<the catalog's widest level, x86>
        -I<runtime> -I<cutlass> -I<cuda> <tvm_ffi --cxxflags> module.cc -o module.so <--ldflags --libs>

`-fno-math-errno` lets math calls vectorize without changing any value; `-ffp-contract=off` keeps
`a * b + c` two roundings, as the evaluator computes it (g++ would fuse it into one FMA); `-fwrapv`
gives integer overflow torch's wrapping. The runtime header is precompiled once per flag set into a
cache directory (`$TILEFOUNDRY_PCH_DIR/<key>`, default `$TILEFOUNDRY_CACHE_DIR/pch/<key>`), so
each module compiles only its own code. The key covers the compiler, the flags and
`runtime_digest()`, the contents of the runtime headers, which the generated source also names,
so an edited header never meets a stale precompiled header or library, and build caches that
differ (one per project, one per test) can share one directory of precompiled headers.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tilefoundry.ir.errors import TargetUnavailable
from tilefoundry.ir.target import LinkedLibrary, Sources
from tilefoundry.runtime import headers
from tilefoundry.runtime.headers import (
    cuda_include_dirs,
    cutlass_include_dir,
    runtime_digest,
    runtime_include_dir,
)
from tilefoundry.runtime.jit import cache_root

from .catalog import supported_levels
from .options import ISA, VECTOR_MATH
from .probe import host_facts

NAME = "cpu"
OPT_FLAGS = (
    "-std=c++17",
    "-O3",
    "-march=native",
    "-fopenmp",
    "-fPIC",
    "-fno-math-errno",
    "-ffp-contract=off",
    "-fwrapv",
    "-DTILEFOUNDRY_TARGET_CPU",
    "-w",
)


@functools.cache
def tvm_ffi_flags() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(compile flags, link flags) of tvm-ffi for g++, its library found through an rpath."""
    ffi = headers.tvm_ffi_flags()
    link = [*ffi.link, *(f"-Wl,-rpath,{d}" for d in ffi.library_dirs)]
    if platform.machine() == "x86_64":
        link.append("-lmvec")  # glibc's vector math, declared `simd` by host_entry.h
    return ffi.compile, tuple(link)


def compiler() -> str:
    """The C++ compiler: $CXX or g++."""
    path = host_facts().compiler
    if path is None:
        raise TargetUnavailable("no C++ compiler: install g++ or set CXX", where=NAME)
    return path


def include_flags() -> tuple[str, ...]:
    """`-I` flags for the runtime headers, CuTe/CUTLASS and the CUDA headers CuTe needs."""
    dirs = [runtime_include_dir(), cutlass_include_dir(), *cuda_include_dirs()]
    return tuple(f"-I{d}" for d in dirs)


def vector_width_flags(options: Mapping[str, Any]) -> tuple[str, ...]:
    """`-mprefer-vector-width=<bits>` of the catalog's widest x86 level, so a pack of the catalog's
    lanes is one native vector: g++'s tuning for some AVX-512 hosts (`-march=native` on Rocket
    Lake or Ice Lake) otherwise prefers 256-bit vectors and splits each 16-lane pack in two."""
    levels = supported_levels(host_facts(), ISA.read(options))
    if not levels or host_facts().machine != "x86_64":
        return ()
    return (f"-mprefer-vector-width={levels[0].bits}",)


def option_flags(options: Mapping[str, Any]) -> tuple[str, ...]:
    """Flags the compile options add: the vector width of `isa` (`vector_width_flags`), and
    `vector_math=False` -> `-DTILEFOUNDRY_SCALAR_MATH`."""
    math = () if VECTOR_MATH.read(options) else ("-DTILEFOUNDRY_SCALAR_MATH",)
    return (*vector_width_flags(options), *math)


def compile_flags(options: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """Every flag of a compile, in order (also part of the on-disk cache key)."""
    cflags, _ = tvm_ffi_flags()
    return (*OPT_FLAGS, *option_flags(options or {}), *include_flags(), *cflags)


def toolchain_text(options: Mapping[str, Any] | None = None) -> str:
    """The compiler version, flags and runtime header digest, as the build cache keys them."""
    flags = compile_flags(options)
    return "\n".join([host_facts().compiler_version, *flags, *tvm_ffi_flags()[1], runtime_digest()])


PCH_DIR_VARIABLE = "TILEFOUNDRY_PCH_DIR"


def pch_root() -> Path:
    """Where precompiled headers go: $TILEFOUNDRY_PCH_DIR, else the build cache's `pch/`."""
    root = os.environ.get(PCH_DIR_VARIABLE)
    return Path(root) if root else cache_root() / "pch"


def precompiled_header(options: Mapping[str, Any] | None = None) -> Path | None:
    """A directory holding `tilefoundry/runtime.h.gch` for the options' flags, built on first use.

    Returns None when precompiling fails; the build then parses the header itself.
    """
    key = hashlib.sha256(toolchain_text(options).encode()).hexdigest()[:16]
    root = pch_root() / key
    gch = root / "tilefoundry" / "runtime.h.gch"
    if gch.is_file():
        return root
    gch.parent.mkdir(parents=True, exist_ok=True)
    header = runtime_include_dir() / "tilefoundry" / "runtime.h"
    fd, tmp = tempfile.mkstemp(suffix=".gch", dir=gch.parent)
    os.close(fd)
    cmd = [compiler(), *compile_flags(options), "-x", "c++-header", str(header), "-o", tmp]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        Path(tmp).unlink(missing_ok=True)  # g++ removes its output when it fails
        return None
    os.replace(tmp, gch)  # atomic: a concurrent builder sees the whole file or none
    return root


def build(sources: Sources, options: Mapping[str, Any], cache_dir: Path) -> LinkedLibrary:
    """The `tilefoundry_builder` hook body: one `.so` from the module's `.cc` files.

    Raises:
        TargetUnavailable: the compiler is missing or rejects the source; the message carries
            the compiler's first error lines and the path of the kept source.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    srcs = []
    for name, text in sources.files.items():
        path = cache_dir / name
        path.write_text(text)
        srcs.append(str(path))
    lib = cache_dir / f"{Path(next(iter(sources.files))).stem}.so"
    pch = precompiled_header(options)
    # The precompiled header's directory comes first so `#include <tilefoundry/runtime.h>` finds the .gch.
    pch_flags = [f"-I{pch}"] if pch is not None else []
    flags = compile_flags(options)
    cmd = [compiler(), *pch_flags, *flags, "-shared", *srcs, "-o", str(lib), *tvm_ffi_flags()[1]]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        head = "\n".join(done.stderr.splitlines()[:30])
        raise TargetUnavailable(
            f"g++ failed on {srcs[0]}:\n{head}", where=NAME, expected="a clean compile", got=done.returncode
        )
    return LinkedLibrary(target=NAME, path=lib, entries=sources.entries)
