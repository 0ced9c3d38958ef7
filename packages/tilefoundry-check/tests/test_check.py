"""Tests of check(): every rule of seed 000 §1.6."""

import inspect

import pytest
import torch

from tilefoundry.check import (
    PREDICATES,
    OutputCheck,
    Report,
    allclose,
    check,
    cosine,
    equal,
    max_abs,
    max_rel,
    nan_inf,
    rel_l2,
    ulp,
)


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _message(err: pytest.ExceptionInfo) -> str:
    return str(err.value)


def test_1_6_check_runs_candidate_and_reference_on_inputs():
    """seed 000 §1.6: check runs candidate(*inputs) and reference(*inputs) and measures each output."""
    calls = []
    x, w = _x(4, 8), _x(8, 3, seed=1)

    def cand(a, b):
        calls.append(("cand", a, b))
        return (a @ b).to(torch.float32)

    def ref(a, b):
        calls.append(("ref", a, b))
        return (a.double() @ b.double()).float()

    report = check(cand, ref, (x, w), expect={"output": [rel_l2(max=1e-5)]})
    assert [c[0] for c in calls] == ["cand", "ref"]
    assert all(c[1] is x and c[2] is w for c in calls)
    assert isinstance(report, Report) and report.passed
    (out,) = report.outputs
    assert isinstance(out, OutputCheck)
    assert (out.path, out.shape, out.dtype) == ("output", (4, 3), "f32")
    assert out.ref_norm == pytest.approx(float(ref(x, w).double().norm()))


def test_1_6_neither_reference_nor_expect_has_a_default():
    """seed 000 §1.6: neither reference nor expect has a default."""
    params = inspect.signature(check).parameters
    assert params["reference"].default is inspect.Parameter.empty
    assert params["expect"].default is inspect.Parameter.empty
    assert params["expect"].kind is inspect.Parameter.KEYWORD_ONLY
    x = _x(3)
    with pytest.raises(TypeError, match="expect"):
        check(torch.neg, torch.neg, (x,))  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="inputs"):
        check(torch.neg, (x,), expect={"output": [nan_inf()]})  # type: ignore[call-arg]


def test_1_6_input_may_be_nested_tuple_of_tensors():
    """seed 000 §1.6: an input may be a bare tensor or an arbitrarily nested tuple of tensors."""
    x, a, b = _x(5), _x(5, seed=1), _x(5, seed=2)

    def fn(t, pair):
        (p, (q,)) = pair
        return t + p * q

    report = check(fn, fn, (x, (a, (b,))), expect={"output": [equal()]})
    assert report.passed


def test_1_6_every_input_leaf_must_be_a_tensor():
    """seed 000 §1.6: every leaf of an input must be a tensor."""
    with pytest.raises(TypeError) as err:
        check(torch.add, torch.add, (_x(3), (_x(3), 2.0)), expect={"output": [equal()]})
    assert _message(err) == "check: input inputs[1][1] is float, expected a torch.Tensor or a tuple of them"
    with pytest.raises(TypeError) as err:
        check(torch.add, torch.add, ([_x(3)],), expect={"output": [equal()]})
    assert _message(err) == "check: input inputs[0] is list, expected a torch.Tensor or a tuple of them"


def test_inputs_must_be_a_tuple():
    with pytest.raises(TypeError) as err:
        check(torch.neg, torch.neg, _x(3), expect={"output": [equal()]})  # type: ignore[arg-type]
    assert _message(err) == (
        "check: inputs must be a tuple of positional arguments, got Tensor; wrap a single argument as (x,)"
    )


def test_1_6_result_may_be_nested_tuple_flattened_with_paths():
    """seed 000 §1.6: a result may be a nested tuple (logits, past_key_values), flattened with paths."""
    x = _x(2, 6)

    def step(t):
        return t.softmax(-1), ((t * 2, t - 1), (t.sum(-1),))

    expect = {
        "output[0]": [allclose(atol=1e-6, rtol=1e-6)],
        "output[1][0][0]": [max_abs(max=0.0)],
        "output[1][0][1]": [ulp(max=0)],
        "output[1][1][0]": [rel_l2(max=1e-6)],
    }
    report = check(step, step, (x,), expect=expect)
    assert [o.path for o in report.outputs] == list(expect)
    assert [o.shape for o in report.outputs] == [(2, 6), (2, 6), (2, 6), (2,)]
    assert report.passed


def test_1_6_result_leaf_must_be_a_tensor():
    """seed 000 §1.6: every leaf of a result must be a tensor."""
    with pytest.raises(TypeError) as err:
        check(lambda t: (t, [t]), lambda t: (t, (t,)), (_x(3),), expect={"output[0]": [equal()]})
    assert (
        _message(err)
        == "check: candidate result output[1] is list, expected a torch.Tensor or a tuple of them"
    )
    with pytest.raises(TypeError) as err:
        check(lambda t: t, lambda t: None, (_x(3),), expect={"output": [equal()]})
    assert (
        _message(err)
        == "check: reference result output is NoneType, expected a torch.Tensor or a tuple of them"
    )


def test_1_6_structure_mismatch_rejected():
    """seed 000 §1.6: a candidate whose flattened structure differs from the reference's is rejected."""
    x = _x(4)
    with pytest.raises(ValueError) as err:
        check(
            lambda t: (t, t),
            lambda t: ((t,), t),
            (x,),
            expect={"output[0]": [equal()], "output[1]": [equal()]},
        )
    assert _message(err) == (
        "check: candidate result structure differs from the reference's: candidate produced output[0], "
        "output[1]; reference produced output[0][0], output[1]"
    )


def test_1_6_shape_mismatch_rejected_naming_path():
    """seed 000 §1.6: a shape mismatch with the reference is rejected, naming the path."""
    x = _x(4, 6)
    with pytest.raises(ValueError) as err:
        check(
            lambda t: (t, t.T),
            lambda t: (t, t),
            (x,),
            expect={"output[0]": [equal()], "output[1]": [equal()]},
        )
    assert _message(err) == "check: output[1] shape differs: candidate (6, 4), reference (4, 6)"


def test_1_6_dtype_mismatch_rejected_naming_path():
    """seed 000 §1.6: a dtype mismatch with the reference is rejected, naming the path."""
    x = _x(4)
    with pytest.raises(ValueError) as err:
        check(lambda t: t.bfloat16(), lambda t: t, (x,), expect={"output": [rel_l2(max=1e-2)]})
    assert _message(err) == "check: output dtype differs: candidate bf16, reference f32"


def test_1_6_every_produced_tensor_needs_a_predicate_list():
    """seed 000 §1.6: every produced tensor must have exactly one non-empty list of predicates."""
    x = _x(4)
    with pytest.raises(ValueError) as err:
        check(lambda t: (t, t + 1), lambda t: (t, t + 1), (x,), expect={"output[0]": [equal()]})
    assert _message(err) == (
        "check: output[1] has no predicates; expect must give every produced tensor a non-empty list "
        "(produced: output[0], output[1])"
    )


def test_1_6_empty_predicate_list_rejected():
    """seed 000 §1.6: a produced tensor's list of predicates must be non-empty."""
    with pytest.raises(ValueError) as err:
        check(torch.neg, torch.neg, (_x(3),), expect={"output": []})
    assert _message(err) == "check: expect['output'] is empty; give at least one predicate"


def test_expect_entries_of_the_wrong_kind_rejected():
    x = _x(3)
    with pytest.raises(TypeError) as err:
        check(torch.neg, torch.neg, (x,), expect={"output": equal()})
    assert _message(err) == "check: expect['output'] must be a list of predicates, got equal"
    with pytest.raises(TypeError) as err:
        check(torch.neg, torch.neg, (x,), expect={"output": [allclose]})
    assert _message(err) == (
        "check: expect['output'] holds the class allclose; instantiate it with its bounds: "
        "allclose(atol=..., rtol=...)"
    )
    with pytest.raises(TypeError) as err:
        check(torch.neg, torch.neg, (x,), expect={"output": ["equal"]})
    assert _message(err) == "check: expect['output'] holds str, expected a Predicate"
    with pytest.raises(TypeError) as err:
        check(torch.neg, torch.neg, (x,), expect=[("output", [equal()])])  # type: ignore[arg-type]
    assert _message(err) == "check: expect must be a mapping from output path to predicates, got list"


def test_1_6_unknown_path_rejected():
    """seed 000 §1.6: a path expect names that was not produced is rejected."""
    x = _x(3)
    with pytest.raises(ValueError) as err:
        check(torch.neg, torch.neg, (x,), expect={"output": [equal()], "output[0]": [equal()]})
    assert _message(err) == "check: expect names 'output[0]', which was not produced; produced: output"


def test_1_6_empty_result_is_an_error():
    """seed 000 §1.6: a result that flattens to nothing is an error rather than a pass."""
    with pytest.raises(ValueError) as err:
        check(lambda t: ((), ()), lambda t: ((), ()), (_x(3),), expect={})
    assert (
        _message(err) == "check: the candidate's result flattens to no tensors; an empty result cannot pass"
    )
    with pytest.raises(ValueError, match="flattens to no tensors"):
        check(lambda t: (), None, (_x(3),), expect={})


def test_1_6_no_reference_admits_only_reference_free_predicates():
    """seed 000 §1.6: reference=None admits only predicates whose needs_reference is false."""
    x = _x(3)
    for cls in PREDICATES.values():
        if not cls.needs_reference:
            continue
        pred = cls(**{b: 0.5 for b in cls.bounds})
        with pytest.raises(ValueError) as err:
            check(torch.neg, None, (x,), expect={"output": [nan_inf(), pred]})
        assert _message(err) == (
            f"check: expect['output'] uses {cls.name}, which needs a reference, but reference is None; "
            "without a reference only reference-free predicates apply (nan_inf)"
        )


def test_1_6_no_reference_has_no_ref_norm():
    """seed 000 §1.6: with reference=None, ref_norm is absent, having nothing to measure."""
    x = _x(3, 3)
    report = check(torch.exp, None, (x,), expect={"output": [nan_inf()]})
    (out,) = report.outputs
    assert out.ref_norm is None and report.passed
    bad = check(lambda t: t / 0.0, None, (x,), expect={"output": [nan_inf()]})
    assert not bad.passed and bad.outputs[0].results[0].values["inf"] == 9.0


_INEXACT = [cls for cls in PREDICATES.values() if not cls.discrete]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.bool])
@pytest.mark.parametrize("cls", _INEXACT, ids=lambda c: c.name)
def test_1_6_inexact_predicate_refused_on_integer_output(cls, dtype):
    """seed 000 §1.6: a non-discrete predicate is rejected on an integer or boolean output, naming equal."""
    x = _x(4)
    pred = cls(**{b: 0.5 for b in cls.bounds})
    reference = None if not cls.needs_reference else (lambda t: (t > 0).to(dtype))
    name = {torch.int64: "i64", torch.int32: "i32", torch.uint8: "u8", torch.bool: "bool"}[dtype]
    with pytest.raises(ValueError) as err:
        check(lambda t: (t > 0).to(dtype), reference, (x,), expect={"output": [pred]})
    assert _message(err) == (
        f"check: output is {name}; {cls.name} is not meaningful on integer or boolean outputs, "
        "use exact comparison: equal()"
    )


def test_1_6_equal_accepted_on_integer_output():
    """seed 000 §1.6: the discrete predicate (equal) judges integer and boolean outputs."""
    x = _x(4, 10)
    report = check(
        lambda t: (t.argmax(-1), t > 0),
        lambda t: (t.argmax(-1), t > 0),
        (x,),
        expect={"output[0]": [equal()], "output[1]": [equal()]},
    )
    assert report.passed and [o.dtype for o in report.outputs] == ["i64", "bool"]
    wrong = check(lambda t: t.argmin(-1), lambda t: t.argmax(-1), (x,), expect={"output": [equal()]})
    assert not wrong.passed and wrong.outputs[0].results[0].values["mismatches"] == 4.0


def test_1_6_zero_reference_noted_for_relative_measures():
    """seed 000 §1.6: a relative measure against a zero reference states in its note what it measured."""
    x = _x(6)
    report = check(
        lambda t: t * 1e-4,
        lambda t: torch.zeros_like(t),
        (x,),
        expect={"output": [rel_l2(max=1e-2), max_rel(max=1e-2)]},
    )
    l2, rel = report.outputs[0].results
    assert l2.values == {"abs_l2": pytest.approx(float((x.double() * 1e-4).norm()), rel=1e-6)}
    assert l2.note == "reference norm is 0: measured the absolute L2 distance ||c - r|| against max"
    assert rel.values == {"max_abs_at_zero_ref": pytest.approx(float(x.abs().max() * 1e-4), rel=1e-6)}
    assert (
        rel.note
        == "6 of 6 reference elements are 0: measured the absolute error there (max_abs_at_zero_ref) "
        "against max"
    )
    assert report.passed and report.outputs[0].ref_norm == 0.0


def test_1_6_zero_vectors_noted_for_cosine():
    """seed 000 §1.6: a direction between two zero vectors is no number: the note says what was measured."""
    x = _x(5)
    report = check(torch.zeros_like, torch.zeros_like, (x,), expect={"output": [cosine(min=0.99)]})
    (res,) = report.outputs[0].results
    assert res.values == {"cand_norm": 0.0, "ref_norm": 0.0} and res.passed
    assert (
        res.note
        == "both vectors are 0: no direction to compare; measured the norms, passing only when both are 0"
    )


def test_1_6_passed_is_all_parts_at_both_levels():
    """seed 000 §1.6: passed is all of its parts, at both levels."""
    x = _x(8, 8)
    report = check(
        lambda t: (t + 1e-3, t),
        lambda t: (t, t),
        (x,),
        expect={"output[0]": [cosine(min=0.9), max_abs(max=1e-4)], "output[1]": [equal()]},
    )
    first, second = report.outputs
    assert [r.passed for r in first.results] == [True, False]
    assert not first.passed and second.passed and not report.passed
    assert report.passed == all(o.passed for o in report.outputs)
    assert all(o.passed == all(r.passed for r in o.results) for o in report.outputs)


def test_1_6_any_callable_works():
    """seed 000 §1.6: candidate and reference may be bound methods, raw torch callables or closures."""
    x = _x(3, 5)
    lin = torch.nn.Linear(5, 2)
    with torch.no_grad():
        lin.weight.copy_(_x(2, 5, seed=3))
        lin.bias.copy_(_x(2, seed=4))
    w, b = lin.weight.detach(), lin.bias.detach()
    report = check(lin.forward, lambda t: t @ w.T + b, (x,), expect={"output": [rel_l2(max=1e-6)]})
    assert report.passed
    assert check(
        torch.tanh, lambda t: t.double().tanh().float(), (x,), expect={"output": [ulp(max=2)]}
    ).passed


def test_callables_must_be_callable():
    x = _x(3)
    with pytest.raises(TypeError) as err:
        check(x, torch.neg, (x,), expect={"output": [equal()]})
    assert _message(err) == "check: candidate must be callable, got Tensor"
    with pytest.raises(TypeError) as err:
        check(torch.neg, 3, (x,), expect={"output": [equal()]})
    assert _message(err) == "check: reference must be callable or None, got int"


def test_measured_on_detached_tensors():
    x = _x(4).requires_grad_()
    report = check(lambda t: t * 2, lambda t: t + t, (x,), expect={"output": [max_abs(max=0.0)]})
    assert report.passed


def test_complex_output_refused():
    x = _x(4)
    with pytest.raises(ValueError) as err:
        check(torch.fft.fft, torch.fft.fft, (x,), expect={"output": [max_abs(max=1e-5)]})
    assert _message(err) == "check: output is complex64; complex outputs are not supported"
