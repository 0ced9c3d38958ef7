"""The predicates: one comparison each, with its bounds as keyword arguments.

Every measure except `equal` and `nan_inf` computes in f64 on the candidate's device, whatever
the output dtype, so the measurement adds no rounding of its own. A difference is taken as 0
where candidate and reference are equal (infinities of one sign included), so matching
infinities never turn into NaN; NaN anywhere else propagates into the measure and fails it.
Maxima over an empty tensor are 0.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import torch

from tilefoundry.check._report import PredicateResult

_INF = math.inf
_REGISTRY: dict[str, type[Predicate]] = {}


@dataclass(frozen=True, kw_only=True)
class Predicate(ABC):
    """One comparison and its bound.

    Subclasses are frozen dataclasses whose fields are their bounds; a bound is a finite
    number inside the range the predicate states, else construction fails naming it.
    """

    name: ClassVar[str]
    bounds: ClassVar[tuple[str, ...]]
    needs_reference: ClassVar[bool]
    discrete: ClassVar[bool]
    # (lowest, highest) accepted value of each bound, in `bounds` order.
    _ranges: ClassVar[tuple[tuple[float, float], ...]] = ()

    def __post_init__(self) -> None:
        for bound, (lo, hi) in zip(self.bounds, self._ranges, strict=True):
            value = getattr(self, bound)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{self.name}: bound {bound} must be a number, got {type(value).__name__}")
            if not (math.isfinite(value) and lo <= value <= hi):
                raise ValueError(
                    f"{self.name}: bound {bound} must be a finite number in [{lo}, {hi}], got {value}"
                )
            object.__setattr__(self, bound, float(value))

    def bound_values(self) -> dict[str, float]:
        """The bounds of this instance, by bound name."""
        return {bound: getattr(self, bound) for bound in self.bounds}

    @abstractmethod
    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
        """Measure `candidate` (against `reference`, same shape, dtype and device) and judge it.

        `reference` is None only for a predicate whose `needs_reference` is false.
        """


def _registered(cls: type[Predicate]) -> type[Predicate]:
    _REGISTRY[cls.name] = cls
    return cls


def _f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float64)


def _amax(t: torch.Tensor) -> float:
    return float(t.max()) if t.numel() else 0.0


def _abs_diff(c: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    # Equal elements differ by exactly 0, so inf - inf never becomes NaN.
    return torch.where(c == r, 0.0, (c - r).abs())


def _norm(t: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(t.flatten()))


@_registered
@dataclass(frozen=True, kw_only=True)
class allclose(Predicate):
    """Elementwise |c - r| <= atol + rtol * |r| (torch.isclose's rule; NaN is never close).

    Measures `max_abs` (the largest |c - r|) and `mismatches` (elements outside the bound);
    passes when there are no mismatches.
    """

    name = "allclose"
    bounds = ("atol", "rtol")
    needs_reference = True
    discrete = False
    _ranges = ((0.0, _INF), (0.0, _INF))
    atol: float
    rtol: float

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
        c, r = _f64(candidate), _f64(reference)
        diff = _abs_diff(c, r)
        close = (c == r) | (diff <= self.atol + self.rtol * r.abs())
        mismatches = int((~close).sum())
        values = {"max_abs": _amax(diff), "mismatches": float(mismatches)}
        return PredicateResult(self, values, mismatches == 0)


@_registered
@dataclass(frozen=True, kw_only=True)
class rel_l2(Predicate):
    """Relative L2 distance ||c - r||_2 / ||r||_2 <= max, over the whole tensor.

    When ||r||_2 is 0 the ratio has no meaning: the absolute distance ||c - r||_2 is measured
    (as `abs_l2`) and held to `max` instead, and the note says so.
    """

    name = "rel_l2"
    bounds = ("max",)
    needs_reference = True
    discrete = False
    _ranges = ((0.0, _INF),)
    max: float

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
        c, r = _f64(candidate), _f64(reference)
        dist, ref_norm = _norm(_abs_diff(c, r)), _norm(r)
        if ref_norm == 0.0:
            note = "reference norm is 0: measured the absolute L2 distance ||c - r|| against max"
            return PredicateResult(self, {"abs_l2": dist}, dist <= self.max, note)
        rel = dist / ref_norm
        return PredicateResult(self, {"rel_l2": rel}, rel <= self.max)


@_registered
@dataclass(frozen=True, kw_only=True)
class cosine(Predicate):
    """Cosine similarity <c, r> / (||c|| ||r||) >= min, the tensors taken as flat vectors.

    A zero vector has no direction: when either norm is 0 both norms are measured instead
    (`cand_norm`, `ref_norm`) and the result passes only when both are 0; the note says so.
    """

    name = "cosine"
    bounds = ("min",)
    needs_reference = True
    discrete = False
    _ranges = ((-1.0, 1.0),)
    min: float

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
        c, r = _f64(candidate).flatten(), _f64(reference).flatten()
        c_norm, r_norm = _norm(c), _norm(r)
        if c_norm == 0.0 or r_norm == 0.0:
            both = c_norm == r_norm
            zero = "both vectors are" if both else ("candidate" if c_norm == 0.0 else "reference") + " is"

            note = f"{zero} 0: no direction to compare; measured the norms, passing only when both are 0"
            return PredicateResult(self, {"cand_norm": c_norm, "ref_norm": r_norm}, both, note)
        cos = float(torch.dot(c, r)) / (c_norm * r_norm)
        return PredicateResult(self, {"cosine": cos}, cos >= self.min)


@_registered
@dataclass(frozen=True, kw_only=True)
class equal(Predicate):
    """Exact equality of every element, compared as stored (NaN equals nothing).

    The one exact comparison: meaningful on integer and boolean outputs. Measures
    `mismatches`, the count of differing elements.
    """

    name = "equal"
    bounds = ()
    needs_reference = True
    discrete = True

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
        mismatches = int((candidate != reference).sum())
        return PredicateResult(self, {"mismatches": float(mismatches)}, mismatches == 0)


def _spacing(magnitude: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The gap from each |r| to the next larger value of `dtype`: its ulp there.

    Below the smallest normal the gap is the constant subnormal spacing, so a zero reference
    has a well-defined ulp. # 1.5 in f32 -> 2**0 * 2**-23; 0 in f32 -> 2**-126 * 2**-23
    """
    info = torch.finfo(dtype)
    _, exp = torch.frexp(magnitude)  # magnitude = m * 2**exp, m in [0.5, 1)
    normal = torch.ldexp(torch.full_like(magnitude, info.eps), exp - 1)
    return torch.where(magnitude < info.tiny, info.tiny * info.eps, normal)


@_registered
@dataclass(frozen=True, kw_only=True)
class ulp(Predicate):
    """Largest |c - r| in units of the output dtype's spacing at the reference value <= max.

    The unit at r is the gap from |r| to the next larger value of the output dtype (the
    subnormal spacing below the smallest normal). Measures `max_ulp`.
    """

    name = "ulp"
    bounds = ("max",)
    needs_reference = True
    discrete = False
    _ranges = ((0.0, _INF),)
    max: float

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
        c, r = _f64(candidate), _f64(reference)
        err = _abs_diff(c, r) / _spacing(r.abs(), candidate.dtype)
        worst = _amax(err)
        return PredicateResult(self, {"max_ulp": worst}, worst <= self.max)


@_registered
@dataclass(frozen=True, kw_only=True)
class max_abs(Predicate):
    """Largest elementwise |c - r| <= max. Measures `max_abs`."""

    name = "max_abs"
    bounds = ("max",)
    needs_reference = True
    discrete = False
    _ranges = ((0.0, _INF),)
    max: float

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
        worst = _amax(_abs_diff(_f64(candidate), _f64(reference)))
        return PredicateResult(self, {"max_abs": worst}, worst <= self.max)


@_registered
@dataclass(frozen=True, kw_only=True)
class max_rel(Predicate):
    """Largest elementwise |c - r| / |r| <= max, over the elements where r is not 0.

    Where r is 0 the ratio has no meaning: the absolute error there is measured (as
    `max_abs_at_zero_ref`) and held to `max` instead, and the note counts those elements.
    """

    name = "max_rel"
    bounds = ("max",)
    needs_reference = True
    discrete = False
    _ranges = ((0.0, _INF),)
    max: float

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
        c, r = _f64(candidate), _f64(reference)
        diff, zero = _abs_diff(c, r), r == 0
        values: dict[str, float] = {}
        note = None
        if not zero.all() or r.numel() == 0:
            values["max_rel"] = _amax(diff[~zero] / r.abs()[~zero])
        if zero.any():
            values["max_abs_at_zero_ref"] = _amax(diff[zero])
            note = (
                f"{int(zero.sum())} of {r.numel()} reference elements are 0: measured the absolute "
                "error there (max_abs_at_zero_ref) against max"
            )
        return PredicateResult(self, values, all(v <= self.max for v in values.values()), note)


@_registered
@dataclass(frozen=True, kw_only=True)
class nan_inf(Predicate):
    """No NaN and no infinity in the candidate; the reference is not consulted.

    Measures the counts `nan` and `inf`. Not discrete: integers hold neither, so on an integer
    output it would pass without measuring anything.
    """

    name = "nan_inf"
    bounds = ()
    needs_reference = False
    discrete = False

    def measure(self, candidate: torch.Tensor, reference: torch.Tensor | None) -> PredicateResult:
        nans, infs = int(torch.isnan(candidate).sum()), int(torch.isinf(candidate).sum())
        return PredicateResult(self, {"nan": float(nans), "inf": float(infs)}, nans == 0 and infs == 0)


PREDICATES: Mapping[str, type[Predicate]] = MappingProxyType(_REGISTRY)
"""Every built-in predicate class, by name."""
