"""What the cpu target finds on this machine: compiler, cores, vector ISA, caches, memory."""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tilefoundry.ir.target import Availability

CPUINFO = Path("/proc/cpuinfo")
MEMINFO = Path("/proc/meminfo")
CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")
MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")


@dataclass(frozen=True)
class HostFacts:
    """The host as the catalog needs it.

    Attributes:
        flags: ISA feature flags as /proc/cpuinfo spells them (`avx2`, `avx512f`, `asimd`).
        mhz: the reported clock, None when the kernel does not say.
        caches: (name, bytes, shared by all cores) per data cache level: `("l2", 1 << 20, False)`.
        compiler: path of the C++ compiler, None when there is none.
    """

    machine: str
    model: str
    cores: int
    flags: frozenset[str]
    mhz: float | None
    memory_bytes: int
    caches: tuple[tuple[str, int, bool], ...]
    compiler: str | None
    compiler_version: str


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty off Linux)."""
    fields: dict[str, str] = {}
    if not CPUINFO.exists():
        return fields
    for line in CPUINFO.read_text().splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    return int(text[:-1]) * units[text[-1]] if text[-1:] in units else int(text)


def _caches() -> tuple[tuple[str, int, bool], ...]:
    out = []
    for index in sorted(CACHE_DIR.glob("index*")):
        kind = (index / "type").read_text().strip()
        if kind == "Instruction":
            continue
        level = (index / "level").read_text().strip()
        shared = (index / "shared_cpu_list").read_text().strip()
        name = f"l{level}d" if kind == "Data" else f"l{level}"
        out.append((name, _size((index / "size").read_text()), any(c in shared for c in ",-")))
    return tuple(out)


def _mhz(info: dict[str, str]) -> float | None:
    """The nominal clock: cpufreq's maximum, the model name's "@ 2.60GHz", or "cpu MHz".

    NOTE: "cpu MHz" is the current clock and drifts between reads, so it is the last resort
    and is rounded to 100 MHz to keep the catalog the same from one process to the next.
    """
    if MAX_FREQ.exists():
        return int(MAX_FREQ.read_text()) / 1e3
    nominal = re.search(r"@\s*([\d.]+)\s*GHz", info.get("model name", ""))
    if nominal:
        return float(nominal.group(1)) * 1e3
    return round(float(info["cpu MHz"]), -2) if "cpu MHz" in info else None


def _memory_bytes() -> int:
    if MEMINFO.exists():
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _compiler() -> tuple[str | None, str]:
    path = shutil.which(os.environ.get("CXX", "g++"))
    if path is None:
        return None, ""
    done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    return path, (done.stdout.splitlines() or [""])[0]


@functools.cache
def host_facts() -> HostFacts:
    """Read the host once per process."""
    info = _cpuinfo()
    # NOTE: aarch64 kernels name the feature list "Features", x86 "flags".
    flags = frozenset((info.get("flags") or info.get("Features") or "").split())
    compiler, version = _compiler()
    return HostFacts(
        machine=platform.machine(),
        model=info.get("model name", platform.processor() or platform.machine()),
        cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
        flags=flags,
        mhz=_mhz(info),
        memory_bytes=_memory_bytes(),
        caches=_caches() if CACHE_DIR.exists() else (),
        compiler=compiler,
        compiler_version=version,
    )


def probe(facts: HostFacts, isa: str) -> Availability:
    """The cpu target's availability: it compiles and runs wherever a C++ compiler is found."""
    reasons = () if facts.compiler else (
        f"no C++ compiler: {os.environ.get('CXX', 'g++')} is not on PATH (install g++ or set CXX)",)
    found = {"cpu": facts.model, "cores": str(facts.cores), "isa": isa}
    if facts.compiler:
        found |= {"compiler": facts.compiler, "compiler_version": facts.compiler_version}
    ok = facts.compiler is not None
    return Availability(can_compile=ok, can_run=ok, reasons=reasons, facts=found)
