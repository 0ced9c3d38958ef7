"""ir.plan.permuted_stores on the cpu target: attention storing (B, S, H, D) runs as the evaluator says.

The attention output goes through transpose (+ reshape) to an output projection; after the pass
the attention kernel stores each row where the copy would have put it and the copy kernel is
gone. Compiled for cpu (whose attention is the reference loop, now storing at the new index), it
must give the evaluator's values.
"""

from __future__ import annotations

import pytest
import torch

import tilefoundry
from tilefoundry.check import allclose, check
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, f32, func, module, tf
from tilefoundry.runtime.loader import CompiledFunction, load_linked_module

T = DimVar("T", 1, 80)

pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@module
class Attend:
    @func
    def project(
        q: Tensor[(2, 4, T, 32), f32],
        k: Tensor[(2, 2, T, 32), f32],
        v: Tensor[(2, 2, T, 32), f32],
        w: ConstTensor[(48, 128), f32],
    ):
        o = tf.attention(q, k, v, causal=True)
        heads = tf.transpose(tf.attention(q, k, v, scale=0.3), (0, 2, 1, 3))
        return tf.reshape(tf.transpose(o, (0, 2, 1, 3)), (2 * T, 128)) @ tf.transpose(w, (1, 0)), heads


def _final_text() -> str:
    seen = {}
    tilefoundry.compile(Attend, target="cpu", dump=lambda stage, text: seen.__setitem__(stage, text))
    return seen["check budget"]


def test_attention_stores_where_the_copy_put_its_rows() -> None:
    """Both copies (transpose + reshape to (2T, 128), transpose to (2, T, 4, 32)) are folded into
    the attention kernels' stores: no reshape or transpose kernel of the attention outputs is left."""
    text = _final_text()
    assert "  kernel k3_reshape  [" not in text and "  kernel k2_transpose  [" not in text, text
    assert "at t2[((x0 * T) + x2), ((x1 * 32) + x3)]: kernel k3_reshape was exactly" in text
    assert "at out1[x0, x2, x1, x3]: kernel k2_transpose was exactly" in text
    assert "out1[i0, i2, i1, e15] = " in text


def test_folded_attention_matches_the_evaluator_on_cpu() -> None:
    """The compiled program (stores permuted) against the evaluator (the copies as written) at
    T = 1, 7 and 79, fresh random inputs."""
    linked = tilefoundry.compile(Attend, target="cpu")
    fn = Attend.functions["project"]
    body = CompiledFunction(load_linked_module(linked, "project"), fn.returns_tuple)
    gen = torch.Generator().manual_seed(3)
    for n in (1, 7, 79):
        args = tuple(
            torch.randn(tuple(n if not isinstance(d, int) else d for d in p.type.shape), generator=gen)
            for p in fn.params
        )
        expect = {f"output[{i}]": [allclose(atol=1e-5, rtol=1e-5)] for i in range(2)}
        report = check(body, fn, args, expect=expect)
        assert report.passed, f"T={n}:\n{report}"
