"""Autotuning: pick a function's compile options per shape bucket by building, checking and timing each.

    tuned = autotune(fn, target="cuda", space={"gemm_tile": ["128x128", "128x256", "256x128"]})
    y = tuned(x, w)                 # first call in a bucket: tunes, then runs the winner
    tuned.choice(x, w)              # {"gemm_tile": "128x256"}: what runs for these inputs

The first value of every option in `space` is the baseline (normally the target's default).
On the first call whose inputs fall into a new shape bucket (every dimension rounded up to a
power of two), each combination of the space is built (side by side, through the on-disk
build cache, which serves repeats), run on the caller's inputs, and its outputs checked against
the baseline's (rel_l2 within a bound per dtype): a configuration that computes something else is rejected,
never chosen, whatever its speed. The survivors are timed (CUDA events on a GPU, the wall clock
on a CPU; median of several batches after a warm-up) and the fastest wins.

Results go to an on-disk cache, $TILEFOUNDRY_CACHE_DIR/autotune/<target>/<device>/<key>.json,
where <key> hashes the module text, the target, the base options and the space, and <device>
names the GPU (or CPU) it was measured on; each file maps shape buckets to the winner and the
timings of every configuration. A later process, or a later call in another bucket already
tuned, reads it instead of tuning again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from tilefoundry.ir.hir import Function
from tilefoundry.ir.module import Module
from tilefoundry.ir.target import get_target

from .jit import _as_module, build, cache_key, cache_root, options_text

# rel_l2 a configuration's outputs may differ from the baseline's by: reassociated sums in the
# format's own rounding, nothing more.
AGREEMENT = {torch.float32: 1e-4, torch.float64: 1e-9, torch.bfloat16: 2e-2, torch.float16: 4e-3}
WARMUP_CALLS = 3
SAMPLES = 5
SAMPLE_S = 0.02  # the length one timed batch aims for


def shape_bucket(args: Sequence[Any]) -> str:
    """Every tensor argument's dims rounded up to a power of two, as text: `(1,2048)(8192,2048)`."""
    def up(d: int) -> int:
        return 1 << max(0, math.ceil(math.log2(max(d, 1))))

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return "".join("(" + ",".join(str(up(d)) for d in t.shape) + ")" for t in tensors)


def device_label(args: Sequence[Any]) -> str:
    """What the timings were measured on: the GPU's name, else the CPU model, as a file name."""
    dev = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    if dev.type == "cuda":
        name = torch.cuda.get_device_name(dev)
    else:
        name = _cpu_model() or platform.machine() or "cpu"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-").lower()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def configurations(space: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the space's values, the baseline (all first values) first.

    Raises:
        ValueError: an option with no values, naming it.
    """
    for name, values in space.items():
        if not values:
            raise ValueError(f"autotune: option {name!r} has no values to try")
    names = list(space)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(space[n] for n in names))]


def _outputs(result: Any) -> tuple[torch.Tensor, ...]:
    return result if isinstance(result, tuple) else (result,)


def disagreement(got: Any, baseline: Any) -> str | None:
    """Why `got` does not compute `baseline`'s outputs, or None when every output agrees."""
    a, b = _outputs(got), _outputs(baseline)
    if len(a) != len(b):
        return f"{len(a)} outputs, the baseline has {len(b)}"
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"output {i} is {tuple(x.shape)} {x.dtype}, the baseline's {tuple(y.shape)} {y.dtype}"
        xf, yf = x.detach().double(), y.detach().double()
        finite = yf.isfinite()
        if not torch.equal(xf.isfinite(), finite) or not torch.equal(xf[~finite], yf[~finite]):
            return f"output {i} has non-finite values where the baseline has others"
        norm = float(torch.linalg.vector_norm(yf[finite]))
        err = float(torch.linalg.vector_norm(xf[finite] - yf[finite])) / (norm if norm > 0 else 1.0)
        bound = AGREEMENT.get(y.dtype, 0.0)
        if not err <= bound:
            return f"output {i} has rel_l2 {err:.3g} against the baseline, over {bound:g}"
    return None


def time_call(call: Callable[[], Any], device: torch.device) -> float:
    """Seconds per call: the median of SAMPLES batches sized to SAMPLE_S, after a warm-up."""
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    for _ in range(WARMUP_CALLS):
        call()
    sync()
    t0 = time.perf_counter()
    call()
    sync()
    n = max(1, min(1000, int(SAMPLE_S / max(time.perf_counter() - t0, 1e-7))))
    samples = []
    for _ in range(SAMPLES):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(n):
                call()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3 / n)
        else:
            t = time.perf_counter()
            for _ in range(n):
                call()
            samples.append((time.perf_counter() - t) / n)
    return statistics.median(samples)


class Autotuned:
    """A function whose compile options are tuned per shape bucket (see the module docstring).

    Attributes:
        mod: the module of the function (one entry).
        target: the target its configurations are built for.
        options: options every configuration shares.
        space: the options tuned, each with its values (the first is the baseline).
    """

    def __init__(
        self,
        fn: Function | Module,
        *,
        target: str,
        space: Mapping[str, Sequence[Any]],
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.mod = _as_module(fn, "autotune")
        if len(self.mod.functions) != 1:
            raise TypeError(
                f"autotune: tunes one function; module {self.mod.name} has "
                f"{len(self.mod.functions)} ({', '.join(self.mod.functions) or 'none'})"
            )
        # Tuning runs on the inputs alone, so each configuration writes outputs of its own.
        self.inputs = len(next(iter(self.mod.functions.values())).params)
        self.target = target
        self.options = dict(options or {})
        self.space = {name: list(values) for name, values in space.items()}
        clash = sorted(set(self.space) & set(self.options))
        if clash:
            raise ValueError(f"autotune: option {clash[0]!r} is both fixed (options) and tuned (space)")
        self.configs = configurations(self.space)
        # NOTE: checked now: a misspelled value would otherwise be tried and recorded as a rejection.
        for config in self.configs:
            get_target(target).check_options({**self.options, **config})
        text = "\n".join([cache_key(self.mod, target, self.options), options_text(self.space)])
        self.key = hashlib.sha256(text.encode()).hexdigest()[:32]
        self._built: dict[str, Any] = {}
        self._failed: dict[str, Exception] = {}
        self._chosen: dict[tuple[str, str], dict[str, Any]] = {}

    def cache_file(self, device: str) -> Path:
        """Where this function's tuning results for `device` live."""
        return cache_root() / "autotune" / self.target / device / f"{self.key}.json"

    def __call__(self, *args: Any) -> Any:
        return self._compiled(self.choice(*args))(*args)

    def choice(self, *args: Any) -> dict[str, Any]:
        """The tuned options for these inputs' shape bucket (tuning the bucket when it is new).

        `args` are the inputs, optionally followed by the outputs (as in a call); only the
        inputs count.
        """
        inputs = args[: self.inputs]
        device, bucket = device_label(inputs), shape_bucket(inputs)
        if (device, bucket) not in self._chosen:
            record = self._read(device).get(bucket) or self._tune(device, bucket, inputs)
            self._chosen[(device, bucket)] = record["options"]
        return dict(self._chosen[(device, bucket)])

    def _compiled(self, config: Mapping[str, Any]) -> Any:
        """The configuration's compiled function; raises what its build raised."""
        text = options_text(config)
        if text in self._failed:
            raise self._failed[text]
        if text not in self._built:
            self._built[text] = self._build(config)
        return self._built[text]

    def _build(self, config: Mapping[str, Any]) -> Any:
        return build(self.mod, target=self.target, options={**self.options, **config})

    def _build_all(self) -> None:
        """Build every configuration not yet built, side by side.

        A build is mostly its toolchain's processes (nvcc, g++), so threads overlap them: a space
        of four sm90 GEMM tiles builds in about the time of one on a many-core host. A failed
        build is kept and raised when its configuration is tried.
        """
        done = self._built.keys() | self._failed.keys()
        pending = {options_text(c): c for c in self.configs if options_text(c) not in done}
        if not pending:
            return
        with ThreadPoolExecutor(max_workers=min(len(pending), os.cpu_count() or 1)) as pool:
            builds = {text: pool.submit(self._build, config) for text, config in pending.items()}
        for text, future in builds.items():
            try:
                self._built[text] = future.result()
            except Exception as err:  # kept: _tune records it as the configuration's rejection
                self._failed[text] = err

    def _read(self, device: str) -> dict[str, Any]:
        path = self.cache_file(device)
        if not path.is_file():
            return {}
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}  # a torn or foreign file: tune again and rewrite it

    def _tune(self, device: str, bucket: str, args: Sequence[Any]) -> dict[str, Any]:
        dev = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        self._build_all()
        baseline = self._compiled(self.configs[0])(*args)
        tried: list[dict[str, Any]] = []
        for config in self.configs:
            entry: dict[str, Any] = {"options": config}
            try:
                fn = self._compiled(config)
                why = disagreement(fn(*args), baseline)
            except Exception as err:  # a configuration the target cannot build or run is skipped
                why = f"{type(err).__name__}: {err}"
            if why is None:
                entry["seconds"] = time_call(lambda fn=fn: fn(*args), dev)
            else:
                entry["rejected"] = why
            tried.append(entry)
        timed = [e for e in tried if "seconds" in e]
        best = min(timed, key=lambda e: e["seconds"])
        record = {"options": best["options"], "tried": tried}
        self._write(device, bucket, record)
        return record

    def _write(self, device: str, bucket: str, record: dict[str, Any]) -> None:
        path = self.cache_file(device)
        path.parent.mkdir(parents=True, exist_ok=True)
        results = {**self._read(device), bucket: record}
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(results, indent=1, sort_keys=True, default=str))
        tmp.replace(path)  # readers see the old file or the new one, never half of one


def autotune(
    fn: Function | Module,
    *,
    target: str,
    space: Mapping[str, Sequence[Any]],
    options: Mapping[str, Any] | None = None,
) -> Autotuned:
    """`fn` with the options of `space` tuned per shape bucket on first use (module docstring).

    Raises:
        ValueError: an option with no values, or one both fixed in `options` and tuned.
        PlanError: an option the target does not declare, or a value it does not accept.
        TypeError: `fn` is not a @func Function, or a Module holding other than one function.
    """
    return Autotuned(fn, target=target, space=space, options=options)
