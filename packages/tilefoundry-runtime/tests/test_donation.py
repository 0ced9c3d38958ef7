"""Tests of runtime/donation.py: which tensors a `donate` block gives up, and for how long."""

import pytest
import torch

from tilefoundry.runtime import donate
from tilefoundry.runtime.donation import donated, take
from tilefoundry.runtime.graphs import distinct_tensors


def test_a_tensor_is_donated_inside_its_block_only():
    a, b = torch.randn(3), torch.randn(3)
    assert not donated(a)
    with donate(a):
        assert donated(a) and not donated(b) and not donated(a.view(3))
    assert not donated(a)


def test_taking_a_tensor_ends_its_donation_in_every_enclosing_block():
    a = torch.randn(3)
    with donate(a), donate(a):
        take(a)
        assert not donated(a)


def test_nested_blocks_add_up():
    a, b = torch.randn(3), torch.randn(3)
    with donate(a):
        with donate(b):
            assert donated(a) and donated(b)
        assert donated(a) and not donated(b)


def test_donate_refuses_what_is_not_a_tensor():
    with pytest.raises(TypeError, match=r"^donate: argument 0 must be a torch.Tensor, got int$"), donate(3):
        pass


def test_caches_sharing_memory_are_not_offered():
    """A runner donates only cache tensors that share memory with no other leaf."""
    a, b, c = torch.randn(4), torch.randn(2, 2), torch.randn(4)
    shared = b.view(4)
    assert [id(t) for t in distinct_tensors([a, b, 3, shared, c])] == [id(a), id(c)]
