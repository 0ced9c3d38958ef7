"""Tests of runtime/function.py: RuntimeFunction (seed 000 §1.1.1)."""

import pytest
import torch

from tilefoundry.ir.types import TensorType
from tilefoundry.runtime.abi import EntryABI, ParamABI
from tilefoundry.runtime.function import RuntimeFunction

ABI = EntryABI(
    "silu_mul", (ParamABI("gate", TensorType((8,), "f32")), ParamABI("up", TensorType((8,), "f32")))
)


def test_1_1_1_base_call_raises():
    """seed 000 §1.1.1: the base __call__ raises; every usable body is a subclass."""
    with pytest.raises(NotImplementedError, match="RuntimeFunction 'silu_mul' has no body: subclass"):
        RuntimeFunction(ABI)(torch.randn(8), torch.randn(8))


def test_1_1_1_subclass_body_runs_with_its_abi():
    """seed 000 §1.1.1: a body subclasses RuntimeFunction and overrides __call__; type is its EntryABI."""

    class SiluMul(RuntimeFunction):
        def __call__(self, gate, up):
            return torch.nn.functional.silu(gate) * up

    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(8, generator=g), torch.randn(8, generator=g)
    body = SiluMul(ABI)
    assert body.type is ABI and body.name == "silu_mul"
    torch.testing.assert_close(body(a, b), torch.nn.functional.silu(a) * b)
    assert repr(body).startswith("SiluMul(silu_mul(gate: [(8,), f32]")


def test_runtime_function_type_must_be_an_entry_abi():
    with pytest.raises(
        TypeError, match=r"RuntimeFunction: type must be an EntryABI \(e.g. entry_abi_of\(fn\)\)"
    ):
        RuntimeFunction("silu_mul")
