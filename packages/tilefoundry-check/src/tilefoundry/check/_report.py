"""What check returns: one PredicateResult per predicate, one OutputCheck per tensor, one Report.

`passed` of an OutputCheck and of a Report is derived from their parts on every read, so a
verdict can never disagree with the measurements printed beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tilefoundry.check._predicates import Predicate


@dataclass(frozen=True)
class PredicateResult:
    """One predicate measured on one output.

    Attributes:
        predicate: the predicate, with its bounds.
        values: what it measured, by measure name (counts are whole floats).
        passed: whether the measured values are within the predicate's bounds.
        note: set when the measure changed meaning at these values (a zero reference for a
            relative measure, two zero vectors for cosine) and says what was measured instead.
    """

    predicate: Predicate
    values: Mapping[str, float]
    passed: bool
    note: str | None = None

    def __post_init__(self) -> None:
        # Read-only, so a result cannot be edited after its verdict was taken.
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))


@dataclass(frozen=True)
class OutputCheck:
    """Every predicate measured on one produced tensor.

    Attributes:
        path: where the tensor sits in the result: "output", "output[0]", "output[1][0]", ...
        shape: the candidate's shape (equal to the reference's).
        dtype: the element type, by TileFoundry name ("f32", "bf16", "i64", ...).
        ref_norm: the reference's L2 norm in f64, or None when there is no reference.
        results: one result per predicate, in the order expect gave them.
    """

    path: str
    shape: tuple[int, ...]
    dtype: str
    ref_norm: float | None
    results: tuple[PredicateResult, ...]

    @property
    def passed(self) -> bool:
        """True when every predicate on this output passed."""
        return all(r.passed for r in self.results)


@dataclass(frozen=True)
class Report:
    """The outcome of one check: every output, in result order.

    `str(report)` is a table with one row per predicate: path, shape, dtype, reference norm,
    predicate, measured values, bound, PASS/FAIL and note.
    """

    outputs: tuple[OutputCheck, ...]

    @property
    def passed(self) -> bool:
        """True when every output passed."""
        return all(o.passed for o in self.outputs)

    def __str__(self) -> str:
        return render(self)


_HEADER = ("path", "shape", "dtype", "ref_norm", "predicate", "measured", "bound", "verdict", "note")


def _number(v: float, digits: int = 4) -> str:
    return f"{v:.{digits}g}"


def _exact(v: float) -> str:
    """A bound as the caller wrote it: the shortest text that reads back as the same number."""
    return str(v) if isinstance(v, int) else repr(float(v))


def _digits(measured: Iterable[float], bounds: Iterable[float]) -> int:
    """The fewest significant digits (at least 4) that print each measured value unlike each bound.

    So a measured 0.99995 against min=0.99999 never prints as "1" or "0.99999" beside "FAIL".
    """
    pairs = [(v, b) for v in measured for b in bounds if v != b]
    for digits in range(4, 17):
        if all(_number(v, digits) != _exact(b) for v, b in pairs):
            return digits
    return 17


def _row(out: OutputCheck, res: PredicateResult, first: bool) -> tuple[str, ...]:
    # The output's own columns are printed once, on its first predicate's row.
    lead = (
        (out.path, str(tuple(out.shape)), out.dtype, "-" if out.ref_norm is None else _number(out.ref_norm))
        if first
        else ("", "", "", "")
    )
    pred = res.predicate
    bounds = pred.bound_values()
    digits = _digits(res.values.values(), bounds.values())
    measured = " ".join(f"{k}={_number(v, digits)}" for k, v in res.values.items())
    bound = " ".join(f"{k}={_exact(v)}" for k, v in bounds.items()) or "-"
    verdict = "PASS" if res.passed else "FAIL"
    return (*lead, pred.name, measured, bound, verdict, res.note or "")


def render(report: Report) -> str:
    """The report as an aligned text table under a one-line verdict."""
    rows = [_row(out, res, i == 0) for out in report.outputs for i, res in enumerate(out.results)]
    failed = sum(not res.passed for out in report.outputs for res in out.results)
    total = sum(len(out.results) for out in report.outputs)
    verdict = "PASS" if report.passed else f"FAIL ({failed} of {total} predicates failed)"
    head = f"check: {verdict} over {len(report.outputs)} output(s)"
    widths = [max(len(r[c]) for r in (_HEADER, *rows)) for c in range(len(_HEADER))]
    lines = [head]
    for r in (_HEADER, *rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)
