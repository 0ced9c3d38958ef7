"""Tests of tilefoundry.runtime.measure: the spec's name for check."""

import torch

import tilefoundry.check
from tilefoundry.check import rel_l2
from tilefoundry.runtime import measure


def test_1_6_measure_check_is_the_check_function():
    """seed 000 §1.6: measure.check is tilefoundry.check.check, the same function object."""
    assert measure.check is tilefoundry.check.check
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    assert measure.check(
        torch.sigmoid, lambda t: 1 / (1 + torch.exp(-t)), (x,), expect={"output": [rel_l2(max=1e-6)]}
    ).passed
