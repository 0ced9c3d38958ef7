"""Measuring a KernelCase: evaluator first, then ours and each peer, each checked and timed.

    result = measure_kernel(case, session)

Order: the evaluator computes the reference on the first input set; ours is built (or taken
from the builds), checked with poisoned outputs, then timed over the rotated input sets; each
peer is built (torch.compile after a dynamo reset), checked and timed the same way. Every step
that fails records its error on that callable and the rest goes on.
"""

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .builds import BuildFailed
from .cases import KernelCase
from .checking import check_against, poisoned
from .floors import rotation_sets
from .results import CaseResult, Measured, describe
from .session import Session
from .timing import time_calls


def _input_sets(case: KernelCase, s: Session) -> list[tuple]:
    count = rotation_sets(case.work.bytes, s.limits.l2_bytes) if s.limits.bound(case.work) == "memory" else 1
    return [case.inputs(s.device, s.seed + i) for i in range(count)]


def _measure(
    name: str,
    fn: Callable[..., Any],
    sets: Sequence[tuple],
    s: Session,
    verify: Callable[[Callable[..., Any]], str],
) -> Measured:
    """First call, check, then timing of one callable; the first failure ends it."""
    m = Measured(name)
    try:
        start = time.perf_counter()
        fn(*sets[0])
        s.sync()
        m.first_call_s = time.perf_counter() - start
        m.check = verify(fn)
        m.timing = time_calls(fn, sets, s.device, s.timing)
    except Exception as err:  # recorded in the row
        m.error = describe(err)
    return m


def measure_kernel(case: KernelCase, s: Session) -> CaseResult:
    """Ours and every wanted peer of `case`, each checked against the evaluator and timed."""
    sets = _input_sets(case, s)
    result = CaseResult(case, Measured("ours"), rotation=len(sets))
    try:
        reference, failure = case.ours()(*sets[0]), None
    except Exception as err:  # every callable then says why it was not checked
        reference, failure = None, f"not checked: the evaluator failed: {describe(err)}"

    def verify(fn: Callable[..., Any], *, poison: bool = False) -> str:
        if failure is not None:
            return failure
        candidate = poisoned(fn, reference) if poison else fn
        return check_against(candidate, sets[0], reference, case.tolerance)

    try:
        ours, result.compile = s.builds.get(case)
    except BuildFailed as err:
        result.ours.error = f"build failed: {err}"
    else:
        result.ours = _measure("ours", ours, sets, s, lambda fn: verify(fn, poison=True))
    torch._dynamo.reset()
    for peer in case.peers:
        if not s.wants(peer.key):
            continue
        try:
            fn = peer.make()
        except Exception as err:  # recorded in the row
            result.peers.append(Measured(peer.name, error=describe(err)))
            continue
        result.peers.append(_measure(peer.name, fn, sets, s, verify))
    return result
