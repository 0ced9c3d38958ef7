"""Checking a callable against the evaluator's result with tilefoundry.check, before any timing.

Every produced floating tensor is held to rel_l2 (the case's tolerance) and nan_inf, every
integer one (an argmax's indices) to equal. Our compiled functions are called with every output
passed in, poisoned with NaN (-7 for integers), so an element the kernel never wrote fails
instead of passing on leftover memory.
"""

from collections.abc import Callable
from typing import Any

import torch

from tilefoundry.check import Predicate, Report, check, equal, nan_inf, rel_l2

from .results import describe


def output_paths(value: Any, path: str = "output") -> list[tuple[str, torch.Tensor]]:
    """(path, tensor) of every leaf, named as check names them: output, output[0], output[1][0]."""
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, tuple | list):
        return [leaf for i, v in enumerate(value) for leaf in output_paths(v, f"{path}[{i}]")]
    raise TypeError(f"check: {path} is {type(value).__name__}, expected a tensor or a tuple of them")


def expect_for(reference: Any, tolerance: float) -> dict[str, list[Predicate]]:
    """rel_l2(max=tolerance) and nan_inf() on every floating output of `reference`; equal() on
    the others (an argmax's indices are right or wrong)."""
    return {
        p: [rel_l2(max=tolerance), nan_inf()] if t.is_floating_point() else [equal()]
        for p, t in output_paths(reference)
    }


def poisoned(fn: Callable[..., Any], reference: Any) -> Callable[..., Any]:
    """`fn` called with its outputs passed in, NaN-filled, shaped and typed like `reference`'s."""
    leaves = [t for _, t in output_paths(reference)]

    def call(*args: Any) -> Any:
        outs = [
            torch.full_like(t, float("nan")) if t.is_floating_point() else torch.full_like(t, -7)
            for t in leaves
        ]
        return fn(*args, *outs)

    return call


def verdict(report: Report) -> str:
    """ "pass", or "FAIL: " and the first failing measurement."""
    for out in report.outputs:
        for res in out.results:
            if not res.passed:
                measured = " ".join(f"{k}={v:.3g}" for k, v in res.values.items())
                bounds = " ".join(f"{k}={v:g}" for k, v in res.predicate.bound_values().items())
                return f"FAIL: {out.path} {res.predicate.name} {measured}" + (
                    f" (bound {bounds})" if bounds else ""
                )
    return "pass"


def check_against(candidate: Callable[..., Any], inputs: tuple, reference: Any, tolerance: float) -> str:
    """The verdict of `candidate(*inputs)` against the precomputed evaluator result `reference`."""
    try:
        report = check(candidate, lambda *_: reference, inputs, expect=expect_for(reference, tolerance))
    except Exception as err:  # a structural mismatch is a failed check, not a crash
        return f"FAIL: {describe(err)}"
    return verdict(report)
