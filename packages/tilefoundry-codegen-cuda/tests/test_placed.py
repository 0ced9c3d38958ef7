"""placed.py: a Mesh over cta x thread launched as given, each instance running its local block."""

from __future__ import annotations

import shutil

import pytest

import tilefoundry
from tilefoundry.dsl import Broadcast, DimVar, Mesh, Split, Tensor, Topology, f32, func, tf
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.layout import Layout
from tilefoundry.ir.shard import ShardLayout

T = DimVar("T", 1, 300)
CTA, THREAD = Topology("cta", 4), Topology("thread", 32)
GRID = Mesh((CTA, THREAD), (4, 32))


def _pid(level: str) -> str:
    return f"static_cast<int64_t>(tilefoundry::program_id<tilefoundry::TopologyScope::{level}>())"


@func
def dynamic_rows(x: Tensor[(T, 64), f32]):
    # A Split layout needs static extents; without one, mesh axis m cuts loop m.
    with GRID:
        y = x * 2.0
    return y


@func
def nested(x: Tensor[(256, 8), f32]):
    with GRID:
        y = tf.reshard(x + 1.0, layout=GRID[Split(0), Split(0)])
    return y


def test_2_10_dynamic_extent_takes_ceil_blocks_clamped_at_the_end(cuda_source) -> None:
    """seed 000 §2.10 local, with a launch-time extent T: cta c owns rows [c*ceil(T/4), min(T, ...)),
    so every row is run once whatever T is; columns fold to static blocks of 2."""
    src = cuda_source(dynamic_rows)
    assert f"const int64_t cta_c_ = {_pid('cta')};" in src
    assert "const int64_t i0_lo0_ = (cta_c_ * ((d_T + int64_t(3LL)) / int64_t(4LL)));" in src
    assert "const int64_t i0_hi0_ = min_nan(d_T, (i0_lo0_ + ((d_T + int64_t(3LL)) / int64_t(4LL))));" in src
    assert "const int64_t i1_hi0_ = (i1_lo0_ + int64_t(2LL));" in src
    assert "launch_kernel(dynamic_rows__k0_mul, 4, 32, 0, stream_, b_x, b_out0, d_T);" in src


def test_2_10_two_axes_on_one_loop_nest_their_blocks(cuda_source) -> None:
    """seed 000 §2.10: Split(0) over cta then thread: cta's block of 64 rows, thread's 2 inside it."""
    src = cuda_source(nested)
    assert "const int64_t i0_lo0_ = (cta_c_ * int64_t(64LL));" in src
    assert "const int64_t i0_lo1_ = (i0_lo0_ + (thread_c_ * int64_t(2LL)));" in src
    assert "const int64_t i0_hi1_ = (i0_lo1_ + int64_t(2LL));" in src
    assert "for (int64_t i0 = i0_lo1_; i0 < i0_hi1_; ++i0) {" in src
    assert "for (int64_t i1 = 0; i1 < int64_t(8LL); ++i1) {" in src


def test_2_3_a_topology_over_two_mesh_axes_reads_its_sub_coordinates(cuda_source) -> None:
    """seed 000 §2.3: thread:32 over axes (8, 4) with strides (4, 1): coordinates id / 4 and id % 4;
    a Mesh without cta launches one CTA."""
    mesh = Mesh((THREAD,), (8, 4))

    @func
    def tiles(x: Tensor[(16, 8), f32]):
        with mesh:
            y = tf.exp(x)
        return y

    src = cuda_source(tiles)
    assert f"const int64_t thread0_c_ = ({_pid('thread')} / 4);" in src
    assert f"const int64_t thread1_c_ = ({_pid('thread')} % 4);" in src
    assert "launch_kernel(tiles__k0_exp, 1, 32, 0, stream_, " in src


def test_thread_extent_over_a_cta_fails_closed(cuda_source) -> None:
    """seed 003: 2048 threads cannot be one CTA; the refusal names the count and the limit."""
    mesh = Mesh((Topology("thread", 2048),), (2048,))

    @func
    def wide(x: Tensor[(2048,), f32]):
        with mesh:
            y = x + 1.0
        return y

    with pytest.raises(PlanError, match=r"explicit placement on 'thread' \(2048 threads\) refused: a CTA "
                       r"holds at most 1024 threads on sm_90a"):
        cuda_source(wide)


def test_layout_that_cuts_no_blocks_on_thread_fails_closed(cuda_source) -> None:
    """seed 003: Broadcast over thread (every thread the same rows) and a strided Split are refused."""
    mesh = Mesh((THREAD,), (32,))
    strided = ShardLayout(Layout(((32, 4), 8), ((8, 256), 1)), [Split(0)], mesh)

    @func
    def copied(x: Tensor[(128, 8), f32]):
        with mesh:
            y = tf.reshard(x * 3.0, layout=mesh[Broadcast])
        return y

    @func
    def strided_cut(x: Tensor[(128, 8), f32]):
        with mesh:
            y = tf.reshard(x - 1.0, layout=strided)
        return y

    with pytest.raises(PlanError, match=r"explicit placement of mesh axis 'thread' \(thread\) refused: its "
                       r"layout Broadcast cuts no instance loop into contiguous blocks, so every instance"):
        cuda_source(copied)
    with pytest.raises(PlanError, match=r"its layout Split\(0\) \(a strided cut of tensor axis 0, not "
                       r"contiguous blocks\) cuts no instance loop"):
        cuda_source(strided_cut)


def test_placement_without_instance_loops_fails_closed(cuda_source) -> None:
    """seed 003: a full reduction has no instance loop for the mesh axes to cut."""

    @func
    def total(x: Tensor[(64,), f32]):
        with GRID:
            y = tf.max(x)
        return y

    with pytest.raises(PlanError, match=r"placement of mesh axis 'cta' \(cta\) refused: the kernel has no "
                       r"instance loop for it to cut"):
        cuda_source(total)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_placed_kernels_with_dynamic_and_nested_blocks_compile_with_nvcc() -> None:
    """The clamped and nested block bounds are C++ nvcc accepts."""
    for fn in (dynamic_rows, nested):
        linked = tilefoundry.compile(fn, target="cuda")
        assert linked.library.is_file() and fn.name in linked.entries
