"""lower/function.py: a kernel under a Mesh scope carries its placement, mesh axis by mesh axis."""

from __future__ import annotations

from tilefoundry.dsl import Broadcast, Mesh, Split, Tensor, Topology, f32, func, tf
from tilefoundry.ir.layout import Layout
from tilefoundry.ir.lower import inline_calls, lower_to_tile
from tilefoundry.ir.plan.partition import partition_kernels
from tilefoundry.ir.shard import ShardLayout
from tilefoundry.ir.tile.printer import format_kernel
from tilefoundry.ir.tile.stmt import Kernel, MeshCut, Program

CTA, THREAD = Topology("cta", 4), Topology("thread", 32)
GRID = Mesh((CTA, THREAD), (4, 32))


def _lower(fn) -> Program:
    return lower_to_tile(partition_kernels(inline_calls(fn)))


def _kernel(fn, op: str) -> Kernel:
    return next(k for k in _lower(fn).kernels if k.name.endswith(op))


def test_2_10_split_layout_says_which_instance_loop_each_mesh_axis_cuts() -> None:
    """seed 000 §2.10: Split(0) over cta and Split(1) over thread of a (128, 64) value: cta cuts
    loop 0 and thread loop 1 (the canonical layout names leaves 1 and 3)."""

    @func
    def placed(x: Tensor[(128, 64), f32]):
        with GRID:
            y = tf.relu(tf.reshard(x * 2.0, layout=GRID[Split(0), Split(1)]))
        return y

    k = _kernel(placed, "relu")
    assert k.request == ("cta", "thread")
    assert k.placement == (
        MeshCut("cta", "cta", 4, 1, 0, 0, "Split(1)"),
        MeshCut("thread", "thread", 32, 1, 1, 0, "Split(3)"),
    )
    assert any(d.startswith("placement: the layout of reshard@") for d in k.decisions)
    assert "    placed: cta:4 cuts loop 0 [Split(1)], thread:32 cuts loop 1 [Split(3)]" in format_kernel(k)


def test_2_10_two_mesh_axes_splitting_one_tensor_axis_nest_their_blocks() -> None:
    """seed 000 §2.10: Split(0) on both cta and thread: cta takes the large blocks (depth 0),
    thread the blocks inside them (depth 1)."""

    @func
    def rows(x: Tensor[(256, 8), f32]):
        with GRID:
            y = tf.reshard(x + 1.0, layout=GRID[Split(0), Split(0)])
        return y

    (k,) = _lower(rows).kernels
    assert [(c.axis, c.loop, c.depth) for c in k.placement] == [("cta", 0, 0), ("thread", 0, 1)]


def test_mesh_scope_without_a_sharded_value_cuts_loop_m_by_mesh_axis_m() -> None:
    """No value of the kernel carries a layout on its Mesh: mesh axis m cuts instance loop m,
    axes past the kernel's rank the last loop, nested; the decision says so."""
    mesh = Mesh((CTA, THREAD), (4, 8, 4))

    @func
    def plain(x: Tensor[(64, 16), f32]):
        with mesh:
            y = tf.exp(x)
        return y

    (k,) = _lower(plain).kernels
    assert [(c.axis, c.topology, c.extent, c.stride, c.loop, c.depth) for c in k.placement] == [
        ("cta", "cta", 4, 1, 0, 0),
        ("thread0", "thread", 8, 4, 1, 0),
        ("thread1", "thread", 4, 1, 1, 1),
    ]
    assert any("mesh axis m cuts instance loop m, as the layout mesh[Split(0), Split(1), Split(1)]" in d
               for d in k.decisions)


def test_layout_that_cuts_no_blocks_is_recorded_not_guessed() -> None:
    """Broadcast, and a Split of a leaf below an unsplit one (a strided cut), cut no loop into
    blocks: the cut says so and the target decides (cuda refuses)."""
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

    (k,) = _lower(copied).kernels
    assert k.placement == (MeshCut("thread", "thread", 32, 1, None, 0, "Broadcast"),)
    (k,) = _lower(strided_cut).kernels
    (cut,) = k.placement
    assert cut.loop is None and cut.attr == "Split(0) (a strided cut of tensor axis 0, not contiguous blocks)"


def test_kernel_outside_a_mesh_scope_has_no_placement() -> None:
    """No `with Mesh(...)`: no request, no placement."""

    @func
    def free(x: Tensor[(8, 8), f32]):
        return tf.exp(x)

    (k,) = _lower(free).kernels
    assert k.request == () and k.placement == ()
    assert not any(line.strip().startswith("placed:") for line in format_kernel(k))
