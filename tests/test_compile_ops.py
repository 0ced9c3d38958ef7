"""Every catalogue op compiled for "cpu" matches the evaluator under `check`, across DimVar values.

Functions are batched into a few Modules (one library each) so the suite builds little; the
build cache lives in one directory for the session.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.dsl import module

sys.path.insert(0, os.path.dirname(__file__))
import catalogue_programs as cat

# f32 work stays f32; bf16 outputs round to its 8-bit mantissa.
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2}


pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@module
class Pointwise:
    unary, binary, halves = cat.pointwise(20, 20)
    logic = cat.logic


@module
class Reductions:
    reduce = cat.reduce
    norms = cat.norms
    matmuls = cat.matmuls


@module
class Movement:
    shapes = cat.shapes
    indexing = cat.indexing
    cache = cat.cache


@module
class Model:
    rope = cat.rope
    attend = cat.attend


def _run(mod, fn_name: str, sizes: tuple[int, ...], make=None) -> None:
    linked = tilefoundry.compile(mod, target="cpu")
    cat.check_compiled(linked, mod.functions[fn_name], sizes, device="cpu", tolerance=TOLERANCE, make=make)


@pytest.mark.parametrize("name", ["unary", "binary", "halves", "logic"])
def test_pointwise_ops_match_evaluator(name: str) -> None:
    """Pointwise ops at T = 1 (the lower bound), 7 and 32 (the upper bound)."""
    _run(Pointwise, name, (1, 7, 32))


@pytest.mark.parametrize("name", ["reduce", "norms", "matmuls"])
def test_reduction_and_contraction_ops_match_evaluator(name: str) -> None:
    """Reductions, norms and matmul (f32, bf16, batched, 1-D) across T."""
    _run(Reductions, name, (1, 5, 32))


def test_movement_ops_match_evaluator() -> None:
    """Reshape, transpose, slices, concat, stack, repeat, broadcast, full, arange, identity result."""
    _run(Movement, "shapes", (1, 9, 32))


def test_indexing_ops_match_evaluator() -> None:
    """index_select, gather and embedding with in-range data-dependent indices."""

    def make(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(n, 8, generator=gen),
            torch.randint(0, 8, (5,), generator=gen),
            torch.randint(0, min(n, 8), (n, 3), generator=gen),
        )

    _run(Movement, "indexing", (1, 6, 32), make)


def test_cache_update_matches_evaluator() -> None:
    """cache_update at a position read from a tensor."""

    def make(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(2, 16, 4, generator=gen),
            torch.tensor(16 - min(n, 16), dtype=torch.int32),
            torch.randn(2, n, 4, generator=gen),
        )

    _run(Movement, "cache", (1, 5, 16), make)


def test_rope_and_attention_match_evaluator() -> None:
    """rope, and attention (grouped-query, causal, scaled, kv_len) across T."""

    def rope_in(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(2, 3, n, 8, generator=gen),
            torch.randn(40, 8, generator=gen),
            torch.randn(40, 8, generator=gen),
            torch.randint(0, 40, (n,), generator=gen),
        )

    def attn_in(n: int, gen: torch.Generator) -> tuple:
        return (
            torch.randn(2, 4, n, 8, generator=gen),
            torch.randn(2, 2, n, 8, generator=gen),
            torch.randn(2, 2, n, 8, generator=gen),
            torch.tensor([n, max(n - 2, 0)], dtype=torch.int32),
        )

    _run(Model, "rope", (1, 4, 32), rope_in)
    _run(Model, "attend", (1, 4, 32), attn_in)
