"""Build generated CUDA C++ into a shared library with nvcc, against tvm-ffi and the runtime headers.

    nvcc -std=c++17 --expt-relaxed-constexpr -DNDEBUG -O3 -DTILEFOUNDRY_TARGET_CUDA [--use_fast_math]
         --resource-usage -gencode arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared
         -I<runtime> -isystem <cutlass> <tvm_ffi --cxxflags> module.cu -o module.so <--ldflags --libs>

The code is built for the catalog's arch (`arch` option, else the GPU's, else sm_90a). Hopper
code is built as sm_90a, never plain sm_90, which turns wgmma and setmaxnreg into traps. Option
"portable": True adds sm_80 code (plus its PTX) beside it, so one library also runs on Ampere,
where the atoms' runtime dispatch takes their portable tiers. Source files compile in parallel
(one nvcc per file, `--threads` across the gencode targets) and link once; the on-disk build
cache in front of this builder (`tilefoundry.runtime.jit`) keys on the source, the catalog and
the toolchain facts, so an unchanged module is never rebuilt, and the objects of side sources
(the sm90 collectives' slot sources, which name no module) are shared between modules
(`$TILEFOUNDRY_CUDA_OBJECT_DIR`, default `$TILEFOUNDRY_CACHE_DIR/objects/cuda`). Each object's
ptxas report is kept beside it, and the library's kernels beside the `.so` (resources.py).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tilefoundry.ir.errors import TargetUnavailable
from tilefoundry.ir.target import LinkedLibrary, Sources
from tilefoundry.runtime import headers
from tilefoundry.runtime.headers import cutlass_include_dir, runtime_include_dir
from tilefoundry.runtime.jit import cache_root

from . import resources
from .options import FAST_MATH, PORTABLE
from .probe import cuda_facts

NAME = "cuda"
BASE_FLAGS = (
    "-std=c++17",
    "--expt-relaxed-constexpr",
    "-DNDEBUG",
    "-O3",
    "-DTILEFOUNDRY_TARGET_CUDA",
    "-Xcompiler",
    "-fPIC",
    # Only the tvm-ffi entries are exported: the runtime's host helpers keep per-module caches
    # (what the module's code was built for), which must not be shared with, or interposed by,
    # another loaded module built for another arch.
    "-Xcompiler",
    "-fvisibility=hidden",
    # CUTLASS and CuTe are third-party headers: their warnings are not the generated code's.
    "-w",
    # ptxas's report of each kernel's registers, spills and shared memory (resources.py).
    "--resource-usage",
)
PORTABLE_ARCH = "sm_80"


@functools.cache
def tvm_ffi_flags() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(compile flags, link flags) of tvm-ffi for nvcc, its library found through an rpath."""
    ffi = headers.tvm_ffi_flags()
    return ffi.compile, (*ffi.link, *(f"-Xlinker=-rpath,{d}" for d in ffi.library_dirs))


def gencode(arch: str) -> tuple[str, ...]:
    """`-gencode` flags of one arch: its machine code and its PTX (`sm_90a` keeps the `a`)."""
    number = arch.removeprefix("sm_")
    return ("-gencode", f"arch=compute_{number},code=[sm_{number},compute_{number}]")


def arch_flags(arch: str, options: Mapping[str, Any]) -> tuple[str, ...]:
    """Every `-gencode` of a build for the catalog's `arch` under `options`."""
    flags = gencode(arch)
    if PORTABLE.read(options) and arch != PORTABLE_ARCH:
        flags += gencode(PORTABLE_ARCH)
    return flags


def nvcc() -> str:
    """The nvcc the probe found.

    Raises:
        TargetUnavailable: there is none, saying where it was looked for.
    """
    path = cuda_facts().nvcc
    if path is None:
        raise TargetUnavailable(
            "cuda: nvcc not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin "
            "(install the CUDA toolkit)",
            where=NAME,
        )
    return path


def compile_flags(arch: str, options: Mapping[str, Any]) -> tuple[str, ...]:
    """Every flag of one source's compile, in order."""
    includes = ("-I", str(runtime_include_dir()), "-isystem", str(cutlass_include_dir()))
    math = ("--use_fast_math",) if FAST_MATH.read(options) else ()
    return (*BASE_FLAGS, *math, *arch_flags(arch, options), "--threads", "0", *includes, *tvm_ffi_flags()[0])


def _run(cmd: list[str], what: str) -> str:
    """Run nvcc; returns what it printed (ptxas's resource report on a compile)."""
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        head = "\n".join((done.stderr or done.stdout).splitlines()[:40])
        raise TargetUnavailable(
            f"nvcc failed on {what}:\n{head}", where=NAME, expected="a clean compile", got=done.returncode
        )
    return done.stdout + done.stderr


# nvcc's peak for one translation unit holding several CUTLASS collectives is 6-8 GB: a build takes
# one unit for each 16 GB of memory at most, so it fits beside another build (pytest's workers).
UNIT_MEMORY_BYTES = 16 * 2**30


UNITS_VARIABLE = "TILEFOUNDRY_NVCC_UNITS"


def unit_count() -> int:
    """How many translation units a build may compile at once here: one a core, within memory,
    or the positive integer in TILEFOUNDRY_NVCC_UNITS (where several builds share the machine,
    as pytest's workers do).

    Raises:
        ValueError: TILEFOUNDRY_NVCC_UNITS is set to anything but a positive integer.
    """
    if (fixed := os.environ.get(UNITS_VARIABLE)) is not None:
        if not fixed.strip().isdigit() or int(fixed) < 1:
            raise ValueError(
                f"{UNITS_VARIABLE} must be a positive integer (units a build compiles at once), got {fixed!r}"
            )
        return int(fixed)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, min(os.cpu_count() or 1, memory // UNIT_MEMORY_BYTES))


def translation_units(files: Mapping[str, str], count: int) -> dict[str, str]:
    """The sources as at most `count` translation units, main first: source i joins unit
    i mod `count`, appended to it (the code generator's sources may follow one another in one
    unit). Each unit parses the runtime and CUTLASS headers and builds its CUTLASS collectives
    (on 2 cores a module of five collectives took 108 s as one unit, 246 s as six), so units
    only pay where they run side by side."""
    names = list(files)
    count = max(1, min(count, len(names)))
    return {names[u]: "\n".join(files[n] for n in names[u::count]) for u in range(count)}


OBJECT_DIR_VARIABLE = "TILEFOUNDRY_CUDA_OBJECT_DIR"


def object_root() -> Path:
    """Where the objects of side sources go: $TILEFOUNDRY_CUDA_OBJECT_DIR, else the build cache's
    `objects/cuda`."""
    root = os.environ.get(OBJECT_DIR_VARIABLE)
    return Path(root) if root else cache_root() / "objects" / NAME


def object_key(flags: tuple[str, ...], text: str) -> str:
    """The key of a side source's object: nvcc's version, every compile flag and the source."""
    text = "\n".join([cuda_facts().nvcc_version, *flags, text])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def side_object_path(flags: tuple[str, ...], text: str) -> Path:
    """Where the shared object of a side source with `text` under `flags` lies (or will)."""
    return object_root() / f"{object_key(flags, text)}.o"


def ptxas_report_path(obj: Path) -> Path:
    """Where ptxas's resource report of object `obj` is kept."""
    return obj.with_suffix(".ptxas.txt")


def side_object(compiler: str, flags: tuple[str, ...], src: Path) -> Path:
    """The object of side source `src`, compiled once for every module and build cache that has the
    same text under the same flags (an sm90 collective's slot source reads the same in each
    module that reaches it). A lock makes a second builder of the key wait for the first. Its
    ptxas report is kept beside it, written before the object appears."""
    obj = side_object_path(flags, src.read_text())
    if obj.is_file():
        return obj
    obj.parent.mkdir(parents=True, exist_ok=True)
    with open(obj.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not obj.is_file():
            fd, tmp = tempfile.mkstemp(suffix=".o", dir=obj.parent)
            os.close(fd)
            try:
                report = _run([compiler, *flags, "-c", str(src), "-o", tmp], str(src))
                ptxas_report_path(obj).write_text(report)
                os.replace(tmp, obj)  # atomic: a reader without the lock sees the whole object or none
            finally:
                Path(tmp).unlink(missing_ok=True)
    return obj


def build(sources: Sources, options: Mapping[str, Any], cache_dir: Path, arch: str) -> LinkedLibrary:
    """The `tilefoundry_builder` hook body: one `.so` from the module's `.cu` files.

    The first source is the module's own; the others are side sources (the sm90 collectives' slot
    sources, which name no module), whose objects are shared between modules (side_object): the
    bench's GEMM modules reach 11 distinct collectives 61 times, at ~20-30 s of nvcc each. A side
    object already built is linked as it is. Where the build may compile every other source side by
    side (unit_count), each is a unit of its own and the side objects are kept for later modules;
    else they join the main source's units as before (translation_units), since a split would only
    add header parses on the same cores.

    Args:
        arch: the catalog arch the sources were generated for.

    Raises:
        TargetUnavailable: nvcc is missing or rejects a source; the message carries nvcc's first
            error lines and the path of the kept source.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    compiler = nvcc()
    flags = compile_flags(arch, options)
    main, *side = sources.files
    # Looked up once: an object another builder finishes meanwhile is then compiled here too,
    # never left out of the link.
    kept = {n: o for n in side if (o := side_object_path(flags, sources.files[n])).is_file()}
    own = {n: sources.files[n] for n in (main, *(n for n in side if n not in kept))}
    lanes = unit_count()
    split = len(own) <= lanes
    units = own if split else translation_units(own, lanes)
    for name, text in units.items():
        (cache_dir / name).write_text(text)

    def compile_unit(name: str) -> Path:
        src = cache_dir / name
        if split and name != main:
            return side_object(compiler, flags, src)
        obj = src.with_suffix(".o")
        ptxas_report_path(obj).write_text(_run([compiler, *flags, "-c", str(src), "-o", str(obj)], str(src)))
        return obj

    with ThreadPoolExecutor(len(units)) as pool:
        objects = [*pool.map(compile_unit, units), *kept.values()]
    lib = cache_dir / f"{Path(main).stem}.so"
    link = [
        compiler,
        *arch_flags(arch, options),
        "-shared",
        *(str(o) for o in objects),
        "-o",
        str(lib),
        *tvm_ffi_flags()[1],
    ]
    _run(link, f"linking {lib}")
    reports = (ptxas_report_path(o).read_text() for o in objects)
    resources.write_report(lib, resources.kernels_of(reports, arch, sources.files.values()))
    return LinkedLibrary(target=NAME, path=lib, entries=sources.entries)
