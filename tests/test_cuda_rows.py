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


@pytest.fixture(scope="module")
def linked():
    require_nvcc()
    return tilefoundry.compile(Rows, target="cuda")


def test_rows_variants_build_with_nvcc(linked) -> None:
    """The packed and scalar rows kernels and their guarded launches compile with nvcc."""
    assert set(linked.entries) == {"rms", "softmax_wide", "softmax_bf16", "softmax_tail", "rms_odd"}
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
