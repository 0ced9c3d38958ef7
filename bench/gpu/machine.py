"""The machine a run measures: GPU, driver, versions, and its limits (measured copy, catalog peak).

The header line of the table comes from here:

    GPU NVIDIA H200 (132 SMs, L2 60 MiB) | driver 580.159.04 | CUDA 13.0 | torch 2.11.0+cu130 | ...
"""

import datetime
import importlib.metadata
import os
import platform
import re
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from .floors import Limits

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Machine:
    """Facts printed over the table and stored in the JSON header.

    Attributes:
        kind: "GPU", or "CPU" for a smoke run.
        units: multiprocessors of a GPU, cores of a CPU.
    """

    kind: str
    device: str
    units: int
    l2_bytes: int
    driver: str
    cuda: str
    torch: str
    tilefoundry: str
    commit: str
    date: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _command(args: list[str]) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip().splitlines()[0].strip() if done.returncode == 0 and done.stdout.strip() else ""


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def probe_machine(device: torch.device) -> Machine:
    """Read the device, its driver and the software versions."""
    # A snapshot copied to the GPU machine has no .git of its own (git would answer for whatever
    # checkout encloses it): the caller names the commit in TILEFOUNDRY_COMMIT.
    commit = (
        os.environ.get("TILEFOUNDRY_COMMIT")
        or _command(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
        or "unknown"
    )
    common = {
        "torch": torch.__version__,
        "tilefoundry": _version("tilefoundry"),
        "commit": commit,
        "date": datetime.date.today().isoformat(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        driver = _command(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) or "unknown"
        return Machine(
            kind="GPU",
            device=props.name,
            units=props.multi_processor_count,
            l2_bytes=int(getattr(props, "L2_cache_size", 0)),
            driver=driver,
            cuda=torch.version.cuda or "unknown",
            **common,
        )
    return Machine(
        kind="CPU",
        device=platform.processor() or platform.machine() or "cpu",
        units=os.cpu_count() or 1,
        l2_bytes=0,
        driver="-",
        cuda="-",
        **common,
    )


def catalog_peaks(target: str) -> tuple[dict[str, float], str]:
    """The dense peak rates of `target`'s catalog by dtype, and the part it describes.

    Read through the installed plugin (`get_target(target).catalog`); an unavailable target
    gives no peaks and says why.
    """
    from tilefoundry.ir.errors import TargetUnavailable
    from tilefoundry.ir.target import get_target

    try:
        catalog = get_target(target).catalog
    except TargetUnavailable as err:
        return {}, f"no catalog: {err}"
    return dict(catalog.peak.flops_per_s), catalog.device


def slug(text: str) -> str:
    """Lower-case words joined by '-': "NVIDIA H200" -> "nvidia-h200"."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def header(machine: Machine, limits: Limits, peak_source: str) -> str:
    """The lines printed over the table: the machine, then the limits every fraction refers to."""
    l2 = f", L2 {machine.l2_bytes / 2**20:.0f} MiB" if machine.l2_bytes else ""
    units = "SMs" if machine.kind == "GPU" else "cores"
    first = (
        f"{machine.kind} {machine.device} ({machine.units} {units}{l2}) | driver {machine.driver} | "
        f"CUDA {machine.cuda} | torch {machine.torch} | "
        f"tilefoundry {machine.tilefoundry} (git {machine.commit}) | {machine.date}"
    )
    bf16 = limits.flops_per_s.get("bf16")
    peak = (
        f"bf16 dense {bf16 / 1e12:.0f} TFLOP/s ({peak_source} catalog)"
        if bf16
        else f"no bf16 peak ({peak_source})"
    )
    second = f"limits: copy {limits.copy_bytes_per_s / 1e12:.2f} TB/s (measured, read+write) | {peak}"
    return f"{first}\n{second}"
