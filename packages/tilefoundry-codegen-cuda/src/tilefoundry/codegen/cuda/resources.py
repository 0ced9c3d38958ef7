"""What each kernel of a built library holds on the GPU: registers, spills, stack and shared memory.

Every compile of the cuda builder asks ptxas for its resource report (nvcc `--resource-usage`).
The builder keeps each object's report beside it and writes the library's kernels, for the arch it
was built for, to `<library stem>.kernels.json` beside the `.so`; `kernel_resources` reads them
back for a compiled function, module or twin. It is the offline half of performance work: a
spill, or a register count that leaves fewer CTAs an SM than a launch was planned for, shows here
without a GPU.

    from tilefoundry.codegen.cuda.resources import kernel_resources
    for k in kernel_resources(tilefoundry.jit(fn, target="cuda")):
        print(k.identifier, k.registers, k.spills, k.threads and k.ctas_per_sm())
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from tilefoundry.runtime import RuntimeModule
from tilefoundry.runtime.loader import CompiledFunction

from .catalog import MAX_THREADS_PER_CTA, WARP

# Hopper's and Ampere's SM: 64K 32-bit registers, handed out a warp at a time in units of 256
# (8 a lane), at most 64 resident warps and 32 resident CTAs.
REGISTERS_PER_SM = 65536
REGISTER_UNIT_PER_WARP = 256
MAX_WARPS_PER_SM = 64
MAX_CTAS_PER_SM = 32

REPORT_SUFFIX = ".kernels.json"

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BOUNDS = re.compile(r"__global__\s+void\s+__launch_bounds__\((\d+)(?:,\s*(\d+))?\)\s+(\w+)\s*\(")


@dataclass(frozen=True)
class KernelResources:
    """One kernel as ptxas built it for one arch.

    Attributes:
        symbol: the kernel's mangled name; `name` is it demangled (`symbol` again where no
            demangler was found when the library was built).
        shared_bytes: static shared memory only; dynamic shared memory is sized at launch.
        threads: the CTA size its source declares (`__launch_bounds__(threads[, min_ctas])` with
            literal numbers, as the generated kernels have), else None; `min_ctas` likewise (0
            where none is asked).
    """

    symbol: str
    name: str
    arch: str
    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_bytes: int
    shared_bytes: int
    barriers: int
    threads: int | None = None
    min_ctas: int = 0

    @property
    def identifier(self) -> str:
        """The kernel's own name, without namespaces, template arguments or parameters."""
        return _identifier(self.name)

    @property
    def spills(self) -> bool:
        """Whether ptxas moved any register to local memory."""
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0

    def ctas_per_sm(self, threads: int | None = None) -> int:
        """How many CTAs of `threads` threads (default: its declared CTA size) an SM can hold by
        registers, within the SM's warp and CTA limits; shared memory is not counted.

        Raises:
            ValueError: `threads` is not in [1, 1024], or is not given for a kernel that declares
                no CTA size.
        """
        threads = threads if threads is not None else self.threads
        if threads is None:
            raise ValueError(f"{self.name}: its source declares no CTA size; pass threads")
        if not 1 <= threads <= MAX_THREADS_PER_CTA:
            raise ValueError(f"threads must be in [1, {MAX_THREADS_PER_CTA}], got {threads}")
        warps = -(-threads // WARP)
        per_warp = -(-self.registers * WARP // REGISTER_UNIT_PER_WARP) * REGISTER_UNIT_PER_WARP
        by_registers = REGISTERS_PER_SM // (warps * max(per_warp, REGISTER_UNIT_PER_WARP))
        return min(by_registers, MAX_WARPS_PER_SM // warps, MAX_CTAS_PER_SM)


def parse_ptxas_report(text: str) -> list[tuple[str, str, dict[str, int]]]:
    """(symbol, arch, figures) of each entry function in ptxas's `-v` output, in its order.

    Device functions that are not entries (ptxas lists their stack frames too) are left out.

    Raises:
        ValueError: an entry whose register line never came, naming it.
    """
    entries: list[tuple[str, str, dict[str, int]]] = []
    current: tuple[str, str] | None = None
    figures: dict[str, int] = {}
    in_properties = False
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            if current is not None:
                raise _unfinished(current)
            current, figures, in_properties = (m.group(1), m.group(2)), {}, False
        elif current is None:
            continue
        elif m := _PROPERTIES.search(line):
            in_properties = m.group(1) == current[0]
        elif in_properties and (m := _FRAME.search(line)):
            names = ("stack_bytes", "spill_store_bytes", "spill_load_bytes")
            figures |= dict(zip(names, map(int, m.groups()), strict=True))
            in_properties = False
        elif m := _USED.search(line):
            figures["registers"] = int(m.group(1))
            figures["barriers"] = int(b.group(1)) if (b := _BARRIERS.search(line)) else 0
            figures["shared_bytes"] = int(s.group(1)) if (s := _SMEM.search(line)) else 0
            entries.append((*current, figures))
            current = None
    if current is not None:
        raise _unfinished(current)
    return entries


def _unfinished(entry: tuple[str, str]) -> ValueError:
    return ValueError(f"ptxas report: entry {entry[0]!r} ({entry[1]}) has no 'Used N registers' line")


def _demangled(symbols: list[str]) -> list[str]:
    """The symbols through c++filt, one line each; unchanged where it is not installed."""
    tool = shutil.which("c++filt")
    if tool is None or not symbols:
        return symbols
    done = subprocess.run([tool], input="\n".join(symbols), capture_output=True, text=True, check=False)
    names = done.stdout.splitlines()
    return names if done.returncode == 0 and len(names) == len(symbols) else symbols


def declared_bounds(sources: Iterable[str]) -> dict[str, tuple[int, int]]:
    """(threads, min_ctas) of each kernel the sources declare with a literal `__launch_bounds__`,
    by its identifier."""
    found = (m for text in sources for m in _BOUNDS.finditer(text))
    return {m.group(3): (int(m.group(1)), int(m.group(2) or 0)) for m in found}


def _identifier(name: str) -> str:
    """A demangled kernel's own identifier: `(anonymous namespace)::f__k0(float*)` -> `f__k0`,
    `void ns::g<int, 4>(int*)` -> `g`."""
    head = name.replace("(anonymous namespace)", "").split("(", 1)[0].split("<", 1)[0]
    words = head.rsplit("::", 1)[-1].split()
    return words[-1] if words else ""


def kernels_of(reports: Iterable[str], arch: str, sources: Iterable[str] = ()) -> list[KernelResources]:
    """Every entry built for `arch` in the ptxas reports of a library's objects, by symbol (a kernel
    several objects hold, such as a collective compiled into two units, is listed once), with the
    CTA size `sources` declare for it."""
    found: dict[str, dict[str, int]] = {}
    for text in reports:
        for symbol, built_for, figures in parse_ptxas_report(text):
            if built_for == arch:
                found.setdefault(symbol, figures)
    bounds = declared_bounds(sources)
    symbols = sorted(found)
    defaults = {"stack_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0}
    kernels = []
    for s, n in zip(symbols, _demangled(symbols), strict=True):
        threads, min_ctas = bounds.get(_identifier(n), (None, 0))
        figures = defaults | found[s]
        kernels.append(KernelResources(s, n, arch, **figures, threads=threads, min_ctas=min_ctas))
    return kernels


def write_report(library: Path, kernels: list[KernelResources]) -> Path:
    """Write the library's kernels beside it; returns the report's path."""
    path = report_path(library)
    path.write_text(json.dumps([asdict(k) for k in kernels], indent=1) + "\n")
    return path


def report_path(library: Path) -> Path:
    """Where the report of `library` (a built `.so`) lies."""
    return library.with_name(library.stem + REPORT_SUFFIX)


def libraries_of(compiled: object) -> list[Path]:
    """The libraries behind `compiled`, each once: a CompiledModule's or a LinkedModule's (its
    `library`), a CompiledFunction's, every one behind a twin's functions and its children's, or a
    library path itself.

    Raises:
        TypeError: `compiled` is none of those, or holds no library.
    """
    found: dict[Path, None] = {}

    def walk(node: object) -> None:
        if isinstance(node, (str, Path)):
            found.setdefault(Path(node).resolve())
        elif isinstance(library := getattr(node, "library", None), (str, Path)):
            found.setdefault(Path(library).resolve())
        elif isinstance(node, CompiledFunction):
            walk(node.compiled)
        elif isinstance(node, RuntimeModule):
            sem = node.module
            for name in sem.functions if sem is not None else ():
                walk(getattr(type(node), name))  # the class attribute is the function's body
            for child in node.modules:
                walk(child)

    walk(compiled)
    if not found:
        raise TypeError(
            f"kernel_resources: {type(compiled).__name__} holds no compiled library (expected a "
            "CompiledModule, a LinkedModule, a CompiledFunction, a compiled twin or a library path)"
        )
    return list(found)


def kernel_resources(compiled: object) -> list[KernelResources]:
    """The kernels the cuda target built for `compiled` (anything `libraries_of` takes), library by
    library.

    Raises:
        FileNotFoundError: a library has no report beside it (not built by the cuda target, or
            built before it kept one: clear the build cache), naming the path looked at.
        TypeError: `compiled` holds no library.
    """
    kernels = []
    for library in libraries_of(compiled):
        report = report_path(library)
        if not report.is_file():
            raise FileNotFoundError(
                f"kernel_resources: no resource report at {report} (libraries built by the cuda target "
                "keep one; a build cached before they did has none: clear the build cache)"
            )
        kernels += [KernelResources(**k) for k in json.loads(report.read_text())]
    return kernels
