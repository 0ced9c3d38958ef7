"""What each kernel's machine code does before its first global load: SASS read back, no GPU.

resources.py says what ptxas allotted (registers, spills); this says what it emitted, from
`cuobjdump -sass` of a built library. The figures are the ones the decode step's latency-bound
kernels have been judged by: how many instructions a kernel issues between the programmatic
dependent launch's wait (`griddepcontrol.wait`, SASS `ACQBULK`) and its first global load, how
many loads it issues before that wait (settled weights), the subroutine calls on that way (a
64-bit division by a run-time value calls one unless both operands fit 32 bits), and the
local-memory accesses (a stack copy or a spill) and convergence tests (`MATCH`: shuffles under a
mask ptxas cannot prove whole) on its way.

    from tilefoundry.codegen.cuda.sass import kernel_sass
    for k in kernel_sass(library_path):
        print(k.symbol, k.instructions, k.wait_to_load)
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .probe import find_toolkit_program, toolkit_places

# Global loads: plain and non-coherent LDG, cp.async (LDGSTS), bulk copies and TMA loads.
_GLOBAL_LOAD = re.compile(r"^(?:LDG|LDGSTS|UBLKCP|UTMALDG)\b")
_LOCAL = re.compile(r"^(?:LDL|STL)\b")
_WAIT = "ACQBULK"  # griddepcontrol.wait
_FUNCTION = re.compile(r"^\s*Function : (\S+)")
_ARCH = re.compile(r"^(?:arch = |\s*code for )(sm_\w+)")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


@dataclass(frozen=True)
class KernelSass:
    """One kernel's SASS for one arch, in program order (padding NOPs left out).

    Attributes:
        instructions: how many the function holds (every path, not one thread's trace).
        waits: its `griddepcontrol.wait` instructions. A skinny GEMV has two: one taken only when
            its weights may still be written, then the one every thread passes.
        wait_at: the index of the last of them, None where it has none.
        loads_before_wait: global loads placed before that last wait (reads of settled data).
        wait_to_load: instructions from the last wait to the first global load after it (from the
            function's start where there is no wait); None where no global load follows.
        calls_to_load: CALL instructions among those (0 where no global load follows).
        local_accesses: LDL and STL: a stack copy or a spill.
        convergence_tests: MATCH instructions.
    """

    symbol: str
    arch: str
    instructions: int
    waits: int
    wait_at: int | None
    loads_before_wait: int
    wait_to_load: int | None
    calls_to_load: int
    local_accesses: int
    convergence_tests: int


def cuobjdump() -> Path:
    """The cuobjdump to disassemble with: where nvcc is looked for (probe.py), else the one the
    triton wheel (a dependency of torch's CUDA builds) carries.

    Raises:
        FileNotFoundError: none of those has it, naming each place looked at.
    """
    spec = importlib.util.find_spec("triton")
    triton = None if spec is None or spec.origin is None else Path(spec.origin).parent
    bundled = [] if triton is None else [triton / "backends" / "nvidia" / "bin" / "cuobjdump"]
    found = find_toolkit_program("cuobjdump", *bundled)
    if found is None:
        looked = ", ".join(["PATH", *map(str, toolkit_places("cuobjdump")), *map(str, bundled)])
        raise FileNotFoundError(f"sass: no cuobjdump found (looked in {looked})")
    return Path(found)


def parse_sass(text: str) -> list[KernelSass]:
    """Every function of `cuobjdump -sass` output, for each arch it lists; a function that several
    cubins hold (a collective in two units) is listed once an arch."""
    functions: dict[tuple[str, str], list[str]] = {}
    arch, current = "", None
    for line in text.splitlines():
        if m := _ARCH.match(line):
            if m.group(1) != arch:
                arch, current = m.group(1), None
        elif m := _FUNCTION.match(line):
            key = (m.group(1), arch)
            current = [] if key not in functions else None
            if current is not None:
                functions[key] = current
        elif current is not None and (m := _INSTRUCTION.match(line)) and m.group(1) != "NOP":
            current.append(m.group(1))
    return [_figures(symbol, a, ops) for (symbol, a), ops in functions.items()]


def _figures(symbol: str, arch: str, ops: list[str]) -> KernelSass:
    waits = [i for i, op in enumerate(ops) if op == _WAIT]
    wait = waits[-1] if waits else None
    start = 0 if wait is None else wait
    loads = [i for i, op in enumerate(ops) if _GLOBAL_LOAD.match(op)]
    after = next((i for i in loads if wait is None or i > wait), None)
    return KernelSass(
        symbol=symbol,
        arch=arch,
        instructions=len(ops),
        waits=len(waits),
        wait_at=wait,
        loads_before_wait=sum(1 for i in loads if wait is not None and i < wait),
        wait_to_load=None if after is None else after - start,
        calls_to_load=0 if after is None else sum(1 for op in ops[start:after] if op.startswith("CALL")),
        local_accesses=sum(1 for op in ops if _LOCAL.match(op)),
        convergence_tests=sum(1 for op in ops if op.startswith("MATCH")),
    )


def kernel_sass(library: Path, arch: str | None = None) -> list[KernelSass]:
    """The SASS figures of every kernel in a built library (a `.so` or a cubin), for `arch` alone
    when given.

    Raises:
        FileNotFoundError: the library is missing, or no cuobjdump is found.
        RuntimeError: cuobjdump fails, with its message.
    """
    library = Path(library)
    if not library.is_file():
        raise FileNotFoundError(f"sass: no library at {library}")
    command = [str(cuobjdump()), "-sass", str(library)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"sass: cuobjdump -sass {library} failed: {done.stderr.strip()}")
    kernels = parse_sass(done.stdout)
    return [k for k in kernels if arch is None or k.arch == arch]
