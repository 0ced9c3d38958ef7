"""Tests of Report, OutputCheck and PredicateResult, and of the str(report) table."""

import dataclasses

import pytest
import torch

from tilefoundry.check import (
    OutputCheck,
    PredicateResult,
    Report,
    check,
    cosine,
    equal,
    max_rel,
    nan_inf,
    rel_l2,
)


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _report() -> Report:
    x = _x(4, 8)
    return check(
        lambda t: (t + 1e-2, (t.argmax(-1),)),
        lambda t: (t, (t.argmax(-1),)),
        (x,),
        expect={"output[0]": [rel_l2(max=1e-1), max_rel(max=1e-6)], "output[1][0]": [equal()]},
    )


def test_str_report_is_a_table_with_verdicts():
    text = str(_report())
    lines = text.splitlines()
    assert lines[0] == "check: FAIL (1 of 3 predicates failed) over 2 output(s)"
    assert lines[1].split() == [
        "path", "shape", "dtype", "ref_norm", "predicate", "measured", "bound", "verdict", "note",
    ]  # fmt: skip
    first, second, third = lines[2:]
    assert first.split()[:5] == ["output[0]", "(4,", "8)", "f32", first.split()[4]]
    assert "rel_l2" in first and "max=0.1" in first and first.rstrip().endswith("PASS")
    assert second.startswith(" ") and "max_rel" in second and "max=1e-06" in second and "FAIL" in second
    assert third.startswith("output[1][0]") and "(4,)" in third and "i64" in third and "mismatches=0" in third
    # The columns line up: every row puts its predicate where the header does.
    col = lines[1].index("predicate")
    assert [ln[col:].split()[0] for ln in lines[2:]] == ["rel_l2", "max_rel", "equal"]


def test_str_report_shows_notes_and_missing_reference():
    x = _x(5)
    text = str(check(torch.zeros_like, torch.zeros_like, (x,), expect={"output": [cosine(min=0.5)]}))
    assert text.splitlines()[0] == "check: PASS over 1 output(s)"
    assert text.splitlines()[2].endswith(
        "both vectors are 0: no direction to compare; measured the norms, passing only when both are 0"
    )
    bare = str(check(torch.exp, None, (x,), expect={"output": [nan_inf()]}))
    row = bare.splitlines()[2].split()
    assert row[3] == "-" and row[4:] == ["nan_inf", "nan=0", "inf=0", "-", "PASS"]


def test_printed_measure_never_reads_as_its_bound():
    """A cosine of 0.99995 against min=0.99999 prints enough digits to show why it failed."""
    ref = _x(1000)
    noise = _x(1000, seed=1)
    cand = ref + 0.01 * noise
    report = check(lambda t: cand, lambda t: ref, (ref,), expect={"output": [cosine(min=0.99999)]})
    res = report.outputs[0].results[0]
    assert 0.9999 < res.values["cosine"] < 0.99999 and not res.passed
    row = str(report).splitlines()[2]
    measured = float(row.split("cosine=")[1].split()[0])
    bound = float(row.split("min=")[1].split()[0])
    assert measured < bound


def test_passed_is_derived_and_results_are_read_only():
    report = _report()
    out = report.outputs[0]
    assert not out.passed and report.outputs[1].passed and not report.passed
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.passed = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        out.results[0].values["rel_l2"] = 0.0  # type: ignore[index]
    fresh = OutputCheck("output", (2,), "f32", 1.0, (PredicateResult(equal(), {"mismatches": 0.0}, True),))
    assert fresh.passed and Report((fresh,)).passed and Report((fresh, out)).passed is False


def test_bound_prints_exactly_as_given() -> None:
    """A bound with more than four significant digits is printed as written, never rounded."""
    torch.manual_seed(7)
    ref = torch.randn(64, dtype=torch.float64)
    cand = ref + 0.05 * torch.randn(64, dtype=torch.float64)
    report = check(lambda x: cand, lambda x: ref, (ref,), expect={"output": [cosine(min=0.99999)]})
    text = str(report)
    assert "min=0.99999" in text
    assert "min=1 " not in text and not text.rstrip().endswith("min=1")
