"""The reference evaluator: argument checks, DimVar binding, devices, calls, tuple results."""

from __future__ import annotations

import pytest
import torch

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, f32, func
from tilefoundry.dsl._trace import emit
from tilefoundry.ir.errors import EvalError
from tilefoundry.ir.evaluator import evaluate
from tilefoundry.ir.ops import contraction, movement, pointwise

T = DimVar("T", 1, 65)
S = DimVar("S", 2, 9)


def rand(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@func
def scale(x: Tensor[(T, 4), f32], g: ConstTensor[(4,), f32]) -> Tensor[(T, 4), f32]:
    return emit(pointwise.Exp(), emit(pointwise.Mul(), x, g))


@func
def proj(x: Tensor[(T, 4), f32], w: ConstTensor[(4, 8), f32], g: ConstTensor[(4,), f32]):
    y = scale(x, g)
    return y, emit(contraction.Matmul(), y, w)


@func
def doubled(x: Tensor[(2 * T, 4), f32], y: Tensor[(T, 4), f32]) -> Tensor[(T, 4), f32]:
    return emit(pointwise.Add(), emit(movement.Slice(axis=0, start=0, stop=T, step=1), x), y)


def test_evaluate_matches_torch():
    x, g = rand(5, 4, seed=1), rand(4, seed=2)
    torch.testing.assert_close(evaluate(scale, x, g), torch.exp(x * g), rtol=0, atol=0)


def test_calling_a_function_is_evaluate():
    x, g = rand(3, 4, seed=3), rand(4, seed=4)
    torch.testing.assert_close(scale(x, g), evaluate(scale, x, g), rtol=0, atol=0)


def test_calls_run_recursively_and_tuples_come_back():
    x, w, g = rand(6, 4, seed=5), rand(4, 8, seed=6), rand(4, seed=7)
    y, z = proj(x, w, g)
    torch.testing.assert_close(y, torch.exp(x * g))
    torch.testing.assert_close(z, torch.exp(x * g) @ w)


def test_dimvar_inside_arithmetic_is_solved():
    x, y = rand(6, 4, seed=8), rand(3, 4, seed=9)
    torch.testing.assert_close(doubled(x, y), x[:3] + y)


def test_wrong_argument_count_names_the_parameters():
    message = r"scale: takes 2 arguments, one per declared parameter \(x, g\), got 3"
    with pytest.raises(EvalError, match=message):
        scale(rand(2, 4), rand(4), rand(4))


def test_1_1_2_activations_alone_names_the_loaded_runner():
    """seed 000 §1.1.2: calling with the other runner's argument list names the runner it wanted."""
    with pytest.raises(EvalError, match=r"got 1; 1 is its activation count.*mod.load\(resource\).scale"):
        scale(rand(2, 4))


def test_non_tensor_argument_is_refused():
    with pytest.raises(EvalError, match=r"argument 'g' must be a torch.Tensor \[\(4,\), f32\], got list"):
        scale(rand(2, 4), [1.0, 2.0, 3.0, 4.0])


def test_dtype_mismatch_names_the_parameter():
    with pytest.raises(EvalError, match=r"argument 'x' has dtype bf16, declared f32"):
        scale(rand(2, 4, dtype=torch.bfloat16), rand(4))


def test_rank_mismatch_names_the_parameter():
    message = r"argument 'x' has shape \(8,\) \(rank 1\), declared \[\(T, 4\), f32\]"
    with pytest.raises(EvalError, match=message):
        scale(rand(8), rand(4))


def test_static_extent_mismatch():
    with pytest.raises(EvalError, match=r"argument 'x' has shape \(2, 5\).*dim 1 is 5, expected 4"):
        scale(rand(2, 5), rand(4))


def test_dimvar_out_of_range_names_dimvar_range_and_parameter():
    message = r"argument 'x' dim 0 gives DimVar T the extent 65, outside its range \[1, 65\)"
    with pytest.raises(EvalError, match=message):
        scale(rand(65, 4), rand(4))


@func
def pair(x: Tensor[(T, 4), f32], y: Tensor[(T, 4), f32]) -> Tensor[(T, 4), f32]:
    return emit(pointwise.Add(), x, y)


def test_dimvar_occurrences_must_agree():
    message = r"pair: DimVar T is 3 from argument 'x' dim 0 but 4 from argument 'y' dim 0"
    with pytest.raises(EvalError, match=message):
        pair(rand(3, 4), rand(4, 4))


def test_arithmetic_extent_must_match_its_binding():
    with pytest.raises(EvalError, match=r"argument 'x' has shape \(7, 4\).*dim 0 is 7, expected 2\*T = 6"):
        doubled(rand(7, 4), rand(3, 4))


def test_evaluate_refuses_a_module():
    with pytest.raises(EvalError, match=r"evaluate takes a Function, got str"):
        evaluate("scale", rand(2, 4), rand(4))  # type: ignore[arg-type]


def test_devices_must_agree():
    x, g = rand(2, 4), rand(4).to("meta")
    with pytest.raises(EvalError, match=r"arguments sit on different devices \(x on cpu, g on meta\)"):
        scale(x, g)


@pytest.mark.gpu
def test_runs_on_the_arguments_cuda_device():
    x, g = rand(3, 4).cuda(), rand(4).cuda()
    out = scale(x, g)
    assert out.device == x.device
    torch.testing.assert_close(out.cpu(), torch.exp(x.cpu() * g.cpu()))
