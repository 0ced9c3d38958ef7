"""tilefoundry.check: compare a candidate with a reference against stated bounds.

>>> from tilefoundry.check import check, rel_l2, nan_inf
>>> report = check(twin, reference, (x,), expect={"output": [rel_l2(max=1e-2), nan_inf()]})
>>> report.passed, print(report)
"""

from tilefoundry.check._check import check
from tilefoundry.check._predicates import (
    PREDICATES,
    Predicate,
    allclose,
    cosine,
    equal,
    max_abs,
    max_rel,
    nan_inf,
    rel_l2,
    ulp,
)
from tilefoundry.check._report import OutputCheck, PredicateResult, Report

__all__ = [
    "PREDICATES",
    "OutputCheck",
    "Predicate",
    "PredicateResult",
    "Report",
    "allclose",
    "check",
    "cosine",
    "equal",
    "max_abs",
    "max_rel",
    "nan_inf",
    "rel_l2",
    "ulp",
]
