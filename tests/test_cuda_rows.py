"""Rows kernels on cuda (codegen/cuda/kernels.py rows): the 16-byte packed variant only when aligned.

A rows realization whose shared loops move 16-byte packs comes with its scalar twin; the host
launches the packed one only when every packed tensor starts 16-byte aligned, so a tensor one
element past a boundary (a view with a storage offset, e.g. `x[1:]`) runs the scalar kernel
instead of faulting in `load_pack`. The module builds with nvcc; on a GPU (marker `gpu`) RMS norm
and softmax match the evaluator on aligned and misaligned tensors, also where a row held in
registers (row_registers.py) ends inside a lane's last pack.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, module, tf

sys.path.insert(0, os.path.dirname(__file__))
from catalogue_programs import inputs, misaligned, require_nvcc

pytestmark = pytest.mark.usefixtures("fresh_build_cache")

T = DimVar("T", 1, 33)
TOLERANCE = {torch.float32: 2e-4, torch.bfloat16: 3e-2}


@module
class Rows:
    @func
    def rms(x: Tensor[(T, 256), bf16], g: ConstTensor[(256,), bf16]):
        # a warp per row, packs of 8 bf16 in the sum of squares and the scaled store
        return tf.rms_norm(x, g)

    @func
    def softmax_wide(x: Tensor[(T, 2048), f32]):
        # a CTA per row, packs of 4 f32
        return tf.softmax(x, -1)

    @func
    def softmax_bf16(x: Tensor[(T, 128), bf16]):
        return tf.softmax(x, -1)

    @func
    def softmax_tail(x: Tensor[(T, 3072), bf16]):
        # a CTA of 256 per row: 2 packs a lane held in registers, the second only below 3072
        return tf.softmax(x, -1)

    @func
    def rms_odd(x: Tensor[(T, 63), f32], h: ConstTensor[(63,), f32]):
        # rows of 63: no packs, the scalar kernel alone
        return tf.rms_norm(x, h)

    @func
    def pick_vocab(x: Tensor[(T, 151936), bf16]):
        # a CTA of 1024 per row: each lane scans packs of 8, the candidates meet across warps
        return tf.argmax(x, -1)

    @func
    def pick_odd(x: Tensor[(T, 999), f32]):
        # a warp per row, no packs (999 is no multiple of 4)
        return tf.argmax(x, -1)


@pytest.fixture(scope="module")
def linked():
    require_nvcc()
    return tilefoundry.compile(Rows, target="cuda")


def test_rows_variants_build_with_nvcc(linked) -> None:
    """The packed and scalar rows kernels and their guarded launches compile with nvcc."""
    names = {"rms", "softmax_wide", "softmax_bf16", "softmax_tail", "rms_odd", "pick_vocab", "pick_odd"}
    assert set(linked.entries) == names
    assert linked.library.is_file()


# ---------------------------------------------------------------- on a GPU


CASES = [
    ("rms", None),
    ("rms", ("input", 0)),  # x misaligned -> the scalar kernel
    ("rms", ("input", 1)),  # the weight misaligned
    ("rms", ("output", 0)),
    ("softmax_wide", None),
    ("softmax_wide", ("input", 0)),
    ("softmax_wide", ("output", 0)),
    ("softmax_bf16", None),
    ("softmax_bf16", ("input", 0)),
    ("softmax_tail", None),
    ("softmax_tail", ("input", 0)),
    ("rms_odd", ("input", 0)),  # no packs: any alignment runs its only kernel
]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "shift"), CASES)
def test_rows_match_evaluator_aligned_and_misaligned_on_gpu(
    linked, name: str, shift: tuple[str, int] | None
) -> None:
    """Whichever variant the alignment picks, the rows kernel computes the evaluator's values (T = 1, 7, 32),
    and a misaligned tensor leaves the CUDA context usable."""
    from tilefoundry.runtime.loader import load_linked_module

    fn = Rows.functions[name]
    f = load_linked_module(linked, name)
    gen = torch.Generator().manual_seed(11)
    for n in (1, 7, 32):
        args = list(inputs(fn, n, gen, "cuda"))
        ref = fn(*args)
        refs = ref if isinstance(ref, tuple) else (ref,)
        outs = [torch.full_like(r, float("nan")) for r in refs]
        if shift is not None:
            where, i = shift
            tensors = args if where == "input" else outs
            tensors[i] = misaligned(tensors[i])
        f(*args, *outs)
        torch.cuda.synchronize()
        for i, (got, want) in enumerate(zip(outs, refs, strict=True)):
            tol = TOLERANCE[want.dtype]
            what = f"{name} output {i}, T={n}, misaligned {shift}"
            torch.testing.assert_close(got, want, atol=tol, rtol=tol, msg=lambda m, w=what: f"{w}: {m}")


def _first_max(x: torch.Tensor) -> torch.Tensor:
    """Each row's index of its first NaN, else of its first largest value (argmax's rule), found
    by comparisons alone."""
    nan = torch.isnan(x)
    largest = x.masked_fill(nan, float("-inf")).amax(-1, keepdim=True)
    top = torch.where(nan.any(-1, keepdim=True), nan, x == largest)
    index = torch.arange(x.shape[-1], device=x.device).expand_as(x)
    return torch.where(top, index, x.shape[-1]).amin(-1)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["pick_vocab", "pick_odd"])
@pytest.mark.parametrize("shift", [False, True])
def test_argmax_rows_pick_the_first_maximum_on_gpu(linked, name: str, shift: bool) -> None:
    """The lanes' shares of an argmax meet as (value, index) pairs: on random rows, rows whose
    maximum repeats (in other lanes' and warps' shares), rows with NaNs and rows all -inf, each
    row's index is the first maximum's (the first NaN's), as torch.argmax picks; `shift`: a
    misaligned row base (the scalar kernel)."""
    from tilefoundry.runtime.loader import load_linked_module

    fn = Rows.functions[name]
    f = load_linked_module(linked, name)
    gen = torch.Generator().manual_seed(5)
    (x,) = inputs(fn, 12, gen, "cuda")
    n = x.shape[-1]
    spots = torch.randperm(n, generator=gen)[:9].sort().values.tolist()
    x[1, spots] = 8.0  # a repeated maximum: the first spot wins
    x[2, spots[3]], x[2, spots[6]] = float("nan"), float("nan")  # the first NaN wins
    x[3] = float("-inf")  # every value ties: index 0
    x[4, n - 1] = 9.0  # the last element
    x[5, spots[0]], x[5, spots[1]] = 9.0, float("nan")
    x[6, :] = 1.0  # every value ties
    if shift:
        x = misaligned(x)
    out = torch.full((x.shape[0],), -1, dtype=torch.int64, device="cuda")
    f(x, out)
    torch.cuda.synchronize()
    want = _first_max(x.float())
    assert want[1] == spots[0] and want[2] == spots[3] and want[4] == n - 1 and want[5] == spots[1]
    assert torch.equal(out, want), (out - want).nonzero().flatten().tolist()
    numbers = ~torch.isnan(x).any(-1)  # where torch.argmax's choice among NaNs is not documented
    assert torch.equal(out[numbers], fn(x)[numbers])  # the evaluator
