"""Building our side of each case once, and timing the build: cold, then from the on-disk cache.

    builds = Builds(target="cuda", plan="full", options={"gemm_tile": "128x256"})
    builds.prebuild(cases, jobs=8, deadline=time.time() + 240)   # cold builds, in parallel
    runnable, times = builds.get(case)                                 # a cache hit here

`prebuild` builds every distinct kernel once in worker processes (spawned: CUDA does not
survive a fork) sharing the run's on-disk cache ($TILEFOUNDRY_CACHE_DIR, fresh per run unless
--cache-dir names one), so cold times are whole builds measured under the parallel load the
header states. `get` then builds again in this process: that time is the cache hit. Without
`prebuild` (--jobs 0), `get` builds cold, clears jit's in-process cache and builds again. A
kernel that failed to build keeps its error; no later case retries it.
"""

import contextlib
import multiprocessing
import os
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import tilefoundry

from .cases import Case
from .results import CompileTimes, describe


class BuildFailed(RuntimeError):
    """Our side of a case could not be built; the message is the build's error."""


def _cold_build(
    plan: str, case_id: str, target: str, options: Mapping[str, Any], cache_dir: str
) -> tuple[float | None, str | None]:
    """Worker: build the kernel of `case_id` of `plan` into the shared cache; (seconds, error)."""
    os.environ["TILEFOUNDRY_CACHE_DIR"] = cache_dir
    from .cases.plans import PLANS

    case = next(c for c in PLANS[plan]() if c.id == case_id)
    start = time.perf_counter()
    try:
        case.compile(target, options)
    except Exception as err:  # reported in the case's row
        return None, describe(err)
    return time.perf_counter() - start, None


class Builds:
    """Our compiled side of every case, keyed by `case.kernel`, with its build times."""

    def __init__(
        self,
        target: str,
        plan: str,
        cold: dict[str, float] | None = None,
        errors: dict[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """Start from what a `prebuild` (maybe of another process) found: cold times and errors by kernel.

        `options` are the compile options of every case's build (`--option`; none: the defaults).
        """
        self.target = target
        self.plan = plan
        self.options: dict[str, Any] = dict(options or {})
        self.cold: dict[str, float] = dict(cold or {})
        self.errors: dict[str, str] = dict(errors or {})
        self._built: dict[str, tuple[Any, CompileTimes, str]] = {}

    def prebuild(self, cases: Sequence[Case], jobs: int, deadline: float) -> float:
        """Cold-build each distinct kernel in `jobs` processes; stop them at `deadline` (epoch seconds).

        Returns:
            The wall seconds the builds took together.
        """
        firsts: dict[str, Case] = {}
        for c in cases:
            firsts.setdefault(c.kernel, c)
        start = time.perf_counter()
        cache_dir = os.environ["TILEFOUNDRY_CACHE_DIR"]
        pool = multiprocessing.get_context("spawn").Pool(max(1, min(jobs, len(firsts))))
        pending = {
            k: pool.apply_async(_cold_build, (self.plan, c.id, self.target, self.options, cache_dir))
            for k, c in firsts.items()
        }
        try:
            for kernel, job in pending.items():
                try:
                    seconds, error = job.get(timeout=max(0.0, deadline - time.time()))
                except multiprocessing.TimeoutError:
                    self.errors[kernel] = "not built: the compile share of the time budget ran out"
                    continue
                if error is not None:
                    self.errors[kernel] = error
                else:
                    self.cold[kernel] = seconds
        finally:
            pool.terminate()
            pool.join()
        return time.perf_counter() - start

    def get(self, case: Case) -> tuple[Any, CompileTimes]:
        """The compiled function or twin of `case`, and its build times.

        Raises:
            BuildFailed: the kernel did not build (now or in `prebuild`), with the reason.
        """
        if case.kernel in self._built:
            runnable, times, first = self._built[case.kernel]
            return runnable, CompileTimes(times.cold_s, times.hit_s, shared_with=first)
        if case.kernel in self.errors:
            raise BuildFailed(self.errors[case.kernel])
        try:
            cold = self.cold.get(case.kernel)
            if cold is None:
                cold = self._timed_build(case)[1]
                tilefoundry.jit.cache_clear()
            runnable, hit = self._timed_build(case)
        except Exception as err:
            self.errors[case.kernel] = describe(err)
            raise BuildFailed(self.errors[case.kernel]) from err
        times = CompileTimes(cold, hit)
        self._built[case.kernel] = (runnable, times, case.id)
        return runnable, times

    def _timed_build(self, case: Case) -> tuple[Any, float]:
        start = time.perf_counter()
        runnable = case.compile(self.target, self.options)
        return runnable, time.perf_counter() - start


# The run's cache and the directories builds share across caches, under it: a cold build is cold
# even where the caller points these variables elsewhere, and the run's builds still share them.
CACHE_VARIABLES = (
    ("TILEFOUNDRY_CACHE_DIR", "."),
    ("TILEFOUNDRY_PCH_DIR", "pch"),
    ("TILEFOUNDRY_CUDA_OBJECT_DIR", "objects/cuda"),
)


@contextlib.contextmanager
def build_cache(given: Path | None) -> Iterator[Path]:
    """A run's TILEFOUNDRY_CACHE_DIR: `given`, or a fresh directory (cold builds) removed afterwards,
    with the precompiled headers and the cuda target's shared objects (CACHE_VARIABLES) inside it.

    The variables are restored on exit, so a caller in the same process (a test) keeps its own cache.
    """
    before = {name: os.environ.get(name) for name, _ in CACHE_VARIABLES}
    with contextlib.ExitStack() as stack:
        if given is None:
            given = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tilefoundry-bench-gpu-")))
        for name, sub in CACHE_VARIABLES:
            os.environ[name] = str((given / sub).resolve())
        try:
            yield given
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
