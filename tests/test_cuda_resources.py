"""What ptxas built for generated kernels, read back through the resource report
(tilefoundry.codegen.cuda.resources) without a GPU: option grid_ctas_per_sm's register cap holds
in the machine code, not only in the source's `__launch_bounds__`."""

from __future__ import annotations

import os
import sys

import pytest

import tilefoundry
from tilefoundry.codegen.cuda.resources import KernelResources, kernel_resources
from tilefoundry.dsl import ConstTensor, Tensor, bf16, func, i64, tf

sys.path.insert(0, os.path.dirname(__file__))
from catalogue_programs import require_nvcc

pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@func
def head_norm_rope(
    x: Tensor[(1, 2, 8, 128), bf16],
    w: ConstTensor[(128,), bf16],
    cos: Tensor[(64, 128), bf16],
    sin: Tensor[(64, 128), bf16],
    positions: Tensor[(8,), i64],
):
    # per-head RMS norm recomputed inside rope: the packed grid that holds the most registers
    return tf.rope(tf.rms_norm(x, w), cos, sin, positions)


def _rope_kernels(options: dict[str, object]) -> dict[str, KernelResources]:
    require_nvcc()
    built = tilefoundry.compile(head_norm_rope, target="cuda", options=options)
    return {k.identifier: k for k in kernel_resources(built) if "__k0_" in k.identifier}


def test_grid_ctas_per_sm_caps_the_packed_grids_registers_in_the_machine_code() -> None:
    """By default ptxas gives the packed rope more registers than 8 CTAs of 256 threads leave (32
    a thread); grid_ctas_per_sm=8 makes it fit 8 CTAs an SM, and the scalar twin keeps its count."""
    plain, capped = _rope_kernels({}), _rope_kernels({"grid_ctas_per_sm": 8})
    packed, scalar = "head_norm_rope__k0_rope_v8", "head_norm_rope__k0_rope"
    assert plain.keys() == capped.keys() == {packed, scalar}
    assert plain[packed].threads == 256 and plain[packed].min_ctas == 0
    assert plain[packed].registers > 32 and plain[packed].ctas_per_sm() < 8
    assert capped[packed].min_ctas == 8 and capped[packed].registers <= 32
    assert capped[packed].ctas_per_sm() == 8
    assert capped[scalar].registers == plain[scalar].registers and capped[scalar].min_ctas == 0
