"""The measuring process: limits first, then each case in turn, reported as messages.

    for message in measure_cases(settings): ...        # in this process (--in-process)
    Process(target=worker_main, args=(conn, settings))  # or in a child, messages over a pipe

Messages, in order:

    ("limits", Limits, Machine, src)  once, unless the settings carry them (src: the peaks' catalog)
    ("start", case_id)                before a case
    ("rows", case_id, [row dicts])    after it: its table rows (errors included)
    ("lost", case_id, reason)         the device is unusable after that case; the process stops

A case that raises is reported in its rows like any failure; the run (run.py) restarts a
fresh process for the remaining cases when one is lost, dies or hangs.
"""

import gc
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from typing import Any

import torch

from .builds import Builds
from .cases import KernelCase, ModelCase
from .cases.plans import PLANS
from .floors import Limits
from .machine import Machine, catalog_peaks, probe_machine
from .measure_kernel import measure_kernel
from .measure_model import measure_model
from .report import rows_of
from .results import CaseResult, Measured, describe
from .session import Session
from .timing import TimingPlan, copy_bandwidth

MEASURE = {KernelCase: measure_kernel, ModelCase: measure_model}

# L2 assumed where the device reports none (a CPU smoke run): only sizes input rotation.
DEFAULT_L2_BYTES = 32 * 2**20


@dataclass(frozen=True)
class WorkerSettings:
    """Everything a measuring process needs (picklable).

    Attributes:
        plan: the PLANS key the case ids come from.
        case_ids: the cases to measure, in order.
        device, target, timing, peers, seed: as Session's.
        copy_bytes: the buffer size of the copy-bandwidth measurement.
        deadline: epoch seconds after which remaining cases are skipped.
        limits, machine: measured by an earlier process; None measures them first.
        cold, build_errors: what `Builds.prebuild` found.
        options: compile options of our side (`--option`).
    """

    plan: str
    case_ids: tuple[str, ...]
    device: str
    target: str
    timing: TimingPlan
    peers: frozenset[str] | None
    seed: int
    copy_bytes: int
    deadline: float
    limits: Limits | None = None
    machine: Machine | None = None
    cold: dict[str, float] | None = None
    build_errors: dict[str, str] | None = None
    options: dict[str, Any] | None = None


def measure_limits(settings: WorkerSettings, device: torch.device) -> tuple[Limits, Machine, str]:
    """The machine, its measured copy bandwidth and its catalog peaks; the peaks' source."""
    machine = probe_machine(device)
    peaks, source = catalog_peaks(settings.target)
    bandwidth, _ = copy_bandwidth(device, settings.copy_bytes, settings.timing)
    return Limits(bandwidth, peaks, machine.l2_bytes or DEFAULT_L2_BYTES), machine, source


def skipped(case: Any, reason: str, limits: Limits) -> list[dict[str, Any]]:
    """The rows of a case that did not run, saying why."""
    return [asdict(r) for r in rows_of(CaseResult(case, Measured("ours"), skipped=reason), limits)]


def _device_error(device: torch.device) -> str | None:
    """Why the device no longer works (a sticky CUDA error), or None."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.synchronize(device)
        torch.ones(1, device=device).add_(1).item()
    except Exception as err:  # an illegal address poisons the context for good
        return describe(err)
    return None


def measure_cases(settings: WorkerSettings) -> Iterator[tuple]:
    """Measure the settings' cases in order, yielding the messages of the module docstring."""
    device = torch.device(settings.device)
    limits, machine = settings.limits, settings.machine
    if limits is None or machine is None:
        limits, machine, source = measure_limits(settings, device)
        yield ("limits", limits, machine, source)
    session = Session(
        device=device,
        target=settings.target,
        limits=limits,
        timing=settings.timing,
        builds=Builds(settings.target, settings.plan, settings.cold, settings.build_errors, settings.options),
        peers=settings.peers,
        seed=settings.seed,
    )
    by_id = {c.id: c for c in PLANS[settings.plan]()}
    for case_id in settings.case_ids:
        case = by_id[case_id]
        if time.time() > settings.deadline:
            yield ("rows", case_id, skipped(case, "the time budget (--budget-s) was spent", limits))
            continue
        yield ("start", case_id)
        try:
            result = MEASURE[type(case)](case, session)
        except Exception as err:  # a fault of the bench itself stays in its case
            result = CaseResult(case, Measured("ours", error=f"bench error: {describe(err)}"))
        yield ("rows", case_id, [asdict(r) for r in rows_of(result, limits)])
        del result
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        lost = _device_error(device)
        if lost is not None:
            yield ("lost", case_id, lost)
            return


def worker_main(conn: Connection, settings: WorkerSettings) -> None:
    """Child-process entry: send every message of `measure_cases` over `conn`."""
    try:
        for message in measure_cases(settings):
            conn.send(message)
    finally:
        conn.close()
