"""Merged index checks (ir/plan/checks.py): one check kernel, each violation named by its own message.

On cpu the merged kernel runs here; for cuda the decode layer's attention program is emitted
(one check launch, one verdict naming the violated check), built with nvcc, and run on a GPU
(marker `gpu`) with a bad positions, pos and kv_len in turn.
"""

from __future__ import annotations

import os
import re
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.check import allclose, check
from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.emit import emit_module
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, f32, func, i64, tf
from tilefoundry.ir.pipeline import schedule_function

sys.path.insert(0, os.path.dirname(__file__))
from decode_layer import attention_args, decode_attention

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

T = DimVar("T", 1, 33)
IDS = "embedding: ids holds a value outside [0, V) of the table: "
POSITIONS = "rope: positions holds a value outside [0, P) of the cos table: "
POS = "cache_update: pos + new's extent does not fit the cache; pos = "
KV_LEN = "attention: kv_len holds a value outside [0, Skv]: "


@func
def step(
    table: ConstTensor[(50, 16), f32],
    ids: Tensor[(T,), i64],
    cos: ConstTensor[(32, 16), f32],
    sin: ConstTensor[(32, 16), f32],
    positions: Tensor[(T,), i64],
    cache: Tensor[(1, 1, 64, 16), f32],
    pos: Tensor[(), i64],
):
    x = tf.reshape(tf.softmax(tf.embedding(table, ids), -1), (1, 1, T, 16))
    return tf.cache_update(cache, pos, tf.rope(x, cos, sin, positions))


def _step_args(n: int, gen: torch.Generator) -> list[torch.Tensor]:
    return [
        torch.randn(50, 16, generator=gen),
        torch.randint(0, 50, (n,), generator=gen),
        torch.randn(32, 16, generator=gen),
        torch.randn(32, 16, generator=gen),
        torch.randint(0, 32, (n,), generator=gen),
        torch.randn(1, 1, 64, 16, generator=gen),
        torch.tensor(int(torch.randint(0, 65 - n, (), generator=gen))),
    ]


def _spoil(args: list[torch.Tensor], where: int, bad: int) -> None:
    """Put `bad` into argument `where`: one element of an index vector, or the whole scalar."""
    if args[where].dim():
        args[where][1] = bad
    else:
        args[where].fill_(bad)


# (argument, bad value, message): 60 + 5 new rows do not fit the 64-row cache.
STEP_CASES = [(1, 50, IDS), (4, 32, POSITIONS), (6, 60, POS), (1, -3, IDS), (4, -1, POSITIONS), (6, -2, POS)]


def test_merged_checks_name_the_violated_check_on_cpu() -> None:
    """Bad ids, positions and pos each raise IndexError with their own check's message and value."""
    f = tilefoundry.build(step, target="cpu")
    gen = torch.Generator().manual_seed(11)
    for where, bad, message in STEP_CASES:
        args = _step_args(5, gen)
        _spoil(args, where, bad)
        with pytest.raises(IndexError, match=re.escape(f"step: {message}{bad}")):
            f(*args)


def test_merged_checks_pass_good_inputs_and_match_the_evaluator_on_cpu() -> None:
    """Inputs inside every bound run through the merged check and match the evaluator at T = 1, 5, 32."""
    f = tilefoundry.build(step, target="cpu")
    gen = torch.Generator().manual_seed(12)
    for n in (1, 5, 32):
        args = tuple(_step_args(n, gen))
        report = check(f, step, args, expect={"output": [allclose(atol=1e-5, rtol=1e-5)]})
        assert report.passed, f"T={n}:\n{report}"


def test_decode_attention_launches_one_check_kernel() -> None:
    """k7 (positions), k8 (pos, positions, pos) and k9 (kv_len) become one check with one verdict,
    launched with the RMS norm (which reads none of them) and read before anything that indexes."""
    fn = decode_attention()
    catalog = arch_catalog("sm_90a")
    text = emit_module(fn.name, (schedule_function(fn, catalog, {}),), catalog, {})
    assert len(re.findall(r"launch_kernel\(attention__\w*check", text)) == 2  # packed and scalar variants
    assert text.count("IndexCheck check_(e, stream_);") == 1
    messages = ", ".join(f'"{m}"' for m in (POSITIONS, POS, KV_LEN))
    entry = text[text.index("void attention_entry(") :]
    first = entry.index("launch_kernel(attention__checks_k0_batch,")
    verdict = entry.index(f"check_.raise_if_violated({{{messages}}});")
    assert first < verdict < entry.index("gemm_group<") < entry.index("launch_kernel(attention__k7_k8_batch")
    for i in (1, 2, 3):
        assert f"report_index(verdict_, {i}, " in text


def test_decode_attention_with_merged_checks_builds_with_nvcc(decode_attention_build) -> None:
    """The attention program's source, its one check kernel included, compiles with nvcc (no GPU needed)."""
    linked, _ = decode_attention_build
    assert linked.library.is_file() and "attention" in linked.entries


@pytest.mark.gpu
def test_decode_attention_names_each_violated_check_on_gpu() -> None:
    """Bad positions, pos or kv_len each raise IndexError with their own message and value; good ones pass."""
    fn = decode_attention()
    f = tilefoundry.build(fn, target="cuda")
    gen = torch.Generator().manual_seed(13)
    args = attention_args(3, gen)
    f(*args)
    torch.cuda.synchronize()
    for where, bad, message in [(3, 128, POSITIONS), (4, 126, POS), (5, 129, KV_LEN), (4, -1, POS)]:
        args = attention_args(3, gen)
        _spoil(args, where, bad)
        with pytest.raises(IndexError, match=re.escape(f"attention: {message}{bad}")):
            f(*args)
