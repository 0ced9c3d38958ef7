"""What the cuda target finds on this machine: nvcc and its version, and the GPU torch sees."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

from tilefoundry.ir.target import Availability

OLDEST_ARCH = (8, 0)


@dataclass(frozen=True)
class GpuFacts:
    """One GPU as torch reports it; `arch` is the nvcc target name ("sm_90a" on Hopper)."""

    name: str
    arch: str
    sms: int
    memory_bytes: int
    smem_per_cta: int


@dataclass(frozen=True)
class CudaFacts:
    """The toolkit and devices found; `nvcc` is None when no compiler is installed."""

    nvcc: str | None
    nvcc_version: str
    gpu: GpuFacts | None
    capability: tuple[int, int] | None


def arch_name(major: int, minor: int) -> str:
    """The nvcc arch for a compute capability; Hopper code targets sm_90a for wgmma."""
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


def toolkit_places(tool: str) -> list[Path]:
    """Where a CUDA toolkit program is looked for when it is not on PATH: $CUDA_HOME/bin (or
    $CUDA_PATH/bin), then /usr/local/cuda/bin."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    return [*([Path(home) / "bin" / tool] if home else []), Path("/usr/local/cuda/bin") / tool]


def find_toolkit_program(tool: str, *more: Path) -> str | None:
    """A CUDA toolkit program (`nvcc`, `cuobjdump`): on PATH, else the first executable of
    `toolkit_places(tool)` and then `more`."""
    found = shutil.which(tool)
    if found:
        return found
    places = [*toolkit_places(tool), *more]
    return next((str(c) for c in places if c.is_file() and os.access(c, os.X_OK)), None)


def _nvcc_version(nvcc: str) -> str:
    done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=False)
    match = re.search(r"release (\d+\.\d+)", done.stdout)
    return match.group(1) if match else done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def _gpu() -> tuple[GpuFacts | None, tuple[int, int] | None]:
    if not torch.cuda.is_available():
        return None, None
    props = torch.cuda.get_device_properties(0)
    smem = getattr(props, "shared_memory_per_block_optin", 0)
    gpu = GpuFacts(name=props.name, arch=arch_name(props.major, props.minor), sms=props.multi_processor_count,
                   memory_bytes=props.total_memory, smem_per_cta=smem)
    return gpu, (props.major, props.minor)


@functools.cache
def cuda_facts() -> CudaFacts:
    """Look for nvcc and a GPU once per process."""
    nvcc = find_toolkit_program("nvcc")
    gpu, capability = _gpu()
    version = _nvcc_version(nvcc) if nvcc else ""
    return CudaFacts(nvcc=nvcc, nvcc_version=version, gpu=gpu, capability=capability)


def probe(facts: CudaFacts) -> Availability:
    """Compiling needs nvcc; running needs that and a GPU of compute capability 8.0 or newer."""
    reasons = []
    found = {"torch_cuda": torch.version.cuda or "none"}
    if facts.nvcc:
        found |= {"nvcc": facts.nvcc, "nvcc_version": facts.nvcc_version}
    else:
        reasons.append("nvcc not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin "
                       "(install the CUDA toolkit)")
    if facts.gpu is None:
        reasons.append("no CUDA GPU: torch.cuda.is_available() is False")
    else:
        found |= {"gpu": facts.gpu.name, "arch": facts.gpu.arch, "sms": str(facts.gpu.sms)}
        if facts.capability < OLDEST_ARCH:
            reasons.append(f"GPU {facts.gpu.name} is {facts.gpu.arch}; the oldest supported arch is sm_80")
    gpu_ok = facts.gpu is not None and facts.capability >= OLDEST_ARCH
    return Availability(can_compile=facts.nvcc is not None, can_run=facts.nvcc is not None and gpu_ok,
                        reasons=tuple(reasons), facts=found)
