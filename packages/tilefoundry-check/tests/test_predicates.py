"""Tests of the predicates: what each measures, its bounds, and its class facts."""

import dataclasses
import math

import pytest
import torch

from tilefoundry.check import (
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


def _pair(shape=(16, 32), noise=1e-3, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(shape, generator=g).to(dtype)
    cand = (ref.double() + noise * torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype)
    return cand, ref


def test_1_6_predicates_named_as_spec():
    """seed 000 §1.6: PREDICATES maps allclose rel_l2 cosine equal ulp max_abs max_rel nan_inf to classes."""
    assert set(PREDICATES) == {
        "allclose",
        "rel_l2",
        "cosine",
        "equal",
        "ulp",
        "max_abs",
        "max_rel",
        "nan_inf",
    }
    for name, cls in PREDICATES.items():
        assert issubclass(cls, Predicate) and cls.name == name
    assert PREDICATES["allclose"] is allclose
    facts = {n: (c.bounds, c.needs_reference, c.discrete) for n, c in PREDICATES.items()}
    assert facts == {
        "allclose": (("atol", "rtol"), True, False),
        "rel_l2": (("max",), True, False),
        "cosine": (("min",), True, False),
        "equal": ((), True, True),
        "ulp": (("max",), True, False),
        "max_abs": (("max",), True, False),
        "max_rel": (("max",), True, False),
        "nan_inf": ((), False, False),
    }


def test_predicates_mapping_is_read_only():
    with pytest.raises(TypeError):
        PREDICATES["mine"] = equal  # type: ignore[index]


def test_bounds_are_keyword_only_and_required():
    with pytest.raises(TypeError, match="positional"):
        rel_l2(1e-2)  # type: ignore[misc]
    with pytest.raises(TypeError, match="rtol"):
        allclose(atol=1e-3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: allclose(atol=-1.0, rtol=0.0),
            "allclose: bound atol must be a finite number in [0.0, inf], got -1.0",
        ),
        (lambda: rel_l2(max=math.nan), "rel_l2: bound max must be a finite number in [0.0, inf], got nan"),
        (lambda: cosine(min=1.5), "cosine: bound min must be a finite number in [-1.0, 1.0], got 1.5"),
        (lambda: ulp(max=math.inf), "ulp: bound max must be a finite number in [0.0, inf], got inf"),
    ],
)
def test_bound_out_of_range_rejected_naming_it(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == message


def test_bound_of_wrong_kind_rejected_naming_it():
    with pytest.raises(TypeError) as err:
        max_abs(max="0.1")  # type: ignore[arg-type]
    assert str(err.value) == "max_abs: bound max must be a number, got str"
    with pytest.raises(TypeError, match="max_rel: bound max must be a number, got bool"):
        max_rel(max=True)


def test_predicates_are_frozen_values():
    p = rel_l2(max=1)
    assert p.max == 1.0 and isinstance(p.max, float)
    assert p == rel_l2(max=1.0) and p != max_abs(max=1.0)
    assert repr(p) == "rel_l2(max=1.0)"
    assert p.bound_values() == {"max": 1.0}
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.max = 2.0  # type: ignore[misc]


def test_allclose_follows_isclose():
    cand, ref = _pair(noise=1e-3)
    res = allclose(atol=1e-3, rtol=1e-3).measure(cand, ref)
    expected = int((~torch.isclose(cand.double(), ref.double(), atol=1e-3, rtol=1e-3)).sum())
    assert expected > 0
    assert res.values["mismatches"] == expected and not res.passed
    assert res.values["max_abs"] == pytest.approx(float((cand.double() - ref.double()).abs().max()))
    assert allclose(atol=1e-2, rtol=0.0).measure(cand, ref).passed


def test_matching_infinities_are_not_nan():
    cand, ref = _pair()
    cand[0, 0] = ref[0, 0] = math.inf
    cand[0, 1] = ref[0, 1] = -math.inf
    for pred in (allclose(atol=1e-2, rtol=0), max_abs(max=1e-2), max_rel(max=1e9), ulp(max=1e9)):
        res = pred.measure(cand, ref)
        assert res.passed and all(not math.isnan(v) for v in res.values.values()), pred


def test_nan_in_candidate_fails_every_measure():
    cand, ref = _pair()
    cand[3, 3] = math.nan
    for pred in (allclose(atol=1.0, rtol=1.0), rel_l2(max=1.0), max_abs(max=1.0), ulp(max=1e9), equal()):
        assert not pred.measure(cand, ref).passed, pred


def test_rel_l2_measures_relative_l2_distance():
    cand, ref = _pair(noise=1e-2)
    res = rel_l2(max=1.0).measure(cand, ref)
    c, r = cand.double(), ref.double()
    assert res.values["rel_l2"] == pytest.approx(float((c - r).norm() / r.norm()), rel=1e-12)
    assert res.note is None
    assert not rel_l2(max=res.values["rel_l2"] / 2).measure(cand, ref).passed


def test_cosine_measures_direction():
    cand, ref = _pair(noise=0.5)
    c, r = cand.double().flatten(), ref.double().flatten()
    res = cosine(min=0.0).measure(cand, ref)
    assert res.values["cosine"] == pytest.approx(float(c @ r / (c.norm() * r.norm())), rel=1e-12)
    assert cosine(min=0.5).measure(3.0 * ref, ref).passed
    assert not cosine(min=0.0).measure(-ref, ref).passed


def test_cosine_one_zero_vector_fails_with_note():
    _, ref = _pair()
    res = cosine(min=0.0).measure(torch.zeros_like(ref), ref)
    assert not res.passed
    assert res.values["cand_norm"] == 0.0 and res.values["ref_norm"] == pytest.approx(
        float(ref.double().norm())
    )
    assert (
        res.note
        == "candidate is 0: no direction to compare; measured the norms, passing only when both are 0"
    )


def test_equal_compares_stored_values_exactly():
    big = torch.tensor([2**62 + 1, 5, -7], dtype=torch.int64)
    other = big.clone()
    other[0] -= 1  # differs only beyond f64's 53-bit mantissa
    assert equal().measure(big, big.clone()).passed
    res = equal().measure(other, big)
    assert res.values == {"mismatches": 1.0} and not res.passed
    nan = torch.tensor([math.nan])
    assert not equal().measure(nan, nan.clone()).passed


def test_ulp_in_units_of_the_output_dtype_at_the_reference():
    _, ref = _pair()
    one_up = torch.nextafter(ref, torch.full_like(ref, math.inf))
    assert ulp(max=1.0).measure(one_up, ref).values["max_ulp"] == 1.0
    ref16 = ref.to(torch.bfloat16)
    up16 = (ref16.double() + ref16.double().abs() * 2.0**-7).to(torch.bfloat16)  # 1 to 2 bf16 steps
    assert 1.0 <= ulp(max=2.0).measure(up16, ref16).values["max_ulp"] <= 2.0


def test_ulp_spacing_is_taken_upward_from_the_reference():
    ref = torch.tensor([1.0, 0.0], dtype=torch.float32)
    below_one = torch.nextafter(ref[:1], torch.zeros(1))
    # Below a power of two the steps are half as wide, so one step down is half an ulp of 1.0.
    assert ulp(max=1.0).measure(below_one, ref[:1]).values["max_ulp"] == 0.5
    tiniest = torch.nextafter(ref[1:], torch.ones(1))
    assert ulp(max=1.0).measure(tiniest, ref[1:]).values["max_ulp"] == 1.0


def test_max_abs_and_max_rel_elementwise():
    cand, ref = _pair(noise=1e-2)
    c, r = cand.double(), ref.double()
    assert max_abs(max=1.0).measure(cand, ref).values["max_abs"] == float((c - r).abs().max())
    res = max_rel(max=1e9).measure(cand, ref)
    assert res.values == {"max_rel": pytest.approx(float(((c - r).abs() / r.abs()).max()))}
    assert res.note is None


def test_max_rel_zero_reference_elements_measured_absolutely():
    cand, ref = _pair(noise=1e-2)
    ref[0, :4] = 0.0
    res = max_rel(max=1e9).measure(cand, ref)
    c, r = cand.double(), ref.double()
    assert res.values["max_abs_at_zero_ref"] == float(c[0, :4].abs().max())
    nz = r != 0
    assert res.values["max_rel"] == pytest.approx(float(((c - r).abs()[nz] / r.abs()[nz]).max()))
    assert res.note == (
        "4 of 512 reference elements are 0: measured the absolute error there (max_abs_at_zero_ref) "
        "against max"
    )


def test_nan_inf_counts_candidate_alone():
    cand, _ = _pair()
    cand[1, 1], cand[2, 2], cand[3, 3] = math.nan, math.inf, -math.inf
    res = nan_inf().measure(cand, None)
    assert res.values == {"nan": 1.0, "inf": 2.0} and not res.passed
    assert nan_inf().measure(torch.randn(8), None).passed


def test_empty_tensor_measures_zero():
    empty = torch.randn(0, 4)
    for pred in (allclose(atol=0, rtol=0), max_abs(max=0), max_rel(max=0), ulp(max=0), equal()):
        assert pred.measure(empty, empty.clone()).passed, pred
