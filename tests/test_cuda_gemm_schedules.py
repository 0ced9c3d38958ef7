"""Options gemm_cluster and gemm_swizzle on a GPU: every sm90 collective `Linears` holds (128 x 256,
stream-K, 64 x 64 ping-pong, 128 x 128) launched as clusters of two CTAs sharing an operand by TMA
multicast, its tiles visited in swizzled bands, computes torch's product.

A file of its own (two nvcc builds of the sm90 collectives), so the gpu suite's workers build it
beside test_cuda_linear.py's module instead of after it.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

import tilefoundry

sys.path.insert(0, os.path.dirname(__file__))
from test_cuda_linear import Linears, _cutlass_kernels


@pytest.mark.gpu
@pytest.mark.parametrize(
    "options", [{"gemm_cluster": "2x1", "gemm_swizzle": 4}, {"gemm_cluster": "1x2", "gemm_swizzle": 2}]
)
def test_clusters_of_two_ctas_and_swizzled_tiles_run_every_collective_on_gpu(tmp_path, monkeypatch, options):
    """`wide` at M = 2048 (128 x 256) and 200 (stream-K); `linear` at 64 and 37 (64 x 64 ping-pong,
    at 37 one M tile: a 2 x 1 cluster's second CTA has none) and 300 (128 x 128, three M tiles: the
    last 2 x 1 cluster holds one). Each call matches torch, and the four collectives are distinct."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the sm90 collective runs on sm_90 only")
    monkeypatch.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path))
    linked = tilefoundry.compile(Linears, target="cuda", options=options)
    kernels = [_cutlass_kernels(linked, "wide", m, 8192, 4096) for m in (2048, 200)]
    kernels += [_cutlass_kernels(linked, "linear", m, 2048, 6144) for m in (64, 37, 300)]
    assert all(len(k) == 1 for k in kernels) and len(set.union(*kernels)) == 4
    assert kernels[2] == kernels[3]
