"""batching.py: which consecutive kernels share one launch, the batch kernel, and its host launch."""

from __future__ import annotations

import dataclasses
import re

from tilefoundry.codegen.cuda.batching import Batch, plan_batches
from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.realize import STATIC_SMEM_BYTES, realize_kernel
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, tf

T = DimVar("T", 1, 65)
CATALOG = arch_catalog("sm_90a")


@func
def head_norms(
    q: Tensor[(T, 4, 64), bf16],
    k: Tensor[(T, 2, 64), bf16],
    gq: ConstTensor[(64,), bf16],
    gk: ConstTensor[(64,), bf16],
):
    return tf.rms_norm(q, gq), tf.rms_norm(k, gk)


@func
def grids(a: Tensor[(T, 64), f32], b: Tensor[(T, 5), f32], c: Tensor[(T, 3, 32), bf16]):
    # a and c take 16-byte packs (4 f32, 8 bf16); b's rows of 5 do not.
    return tf.exp(a) * 2.0, tf.tanh(b), c + c


@func
def chained(x: Tensor[(T, 64), f32], g: ConstTensor[(64,), f32], h: ConstTensor[(64,), f32]):
    return tf.rms_norm(tf.rms_norm(x, g), h)


@func
def mixed(x: Tensor[(T, 64), f32], g: ConstTensor[(64,), f32], y: Tensor[(T, 64), f32]):
    return tf.rms_norm(x, g), tf.exp(y)


def _plan(program, options=None, conditional=frozenset()):
    opts = dict(options or {})
    rs = [r for k in program.kernels for r in realize_kernel(program.name, k, CATALOG, opts)]
    return plan_batches(program, rs, CATALOG, opts, set(conditional))


def _entry(text: str, name: str) -> str:
    return text[text.index(f"void {name}_entry(") :]


def test_independent_row_norms_share_one_launch(cuda_source) -> None:
    """Two row norms reading and writing disjoint buffers: one __global__, CTAs split at end0_."""
    text = cuda_source(head_norms)
    assert re.findall(r"launch_kernel\((\w+),", text) == [
        "head_norms__k0_k1_batch_packed",
        "head_norms__k0_k1_batch",
    ]
    assert "__global__ void __launch_bounds__(128) head_norms__k0_k1_batch(" in text
    assert "int64_t d_T, int64_t end0_) {" in text
    assert "  if (cta_ < end0_) {  // k0_rms_norm: CTAs [0, end0_)" in text
    assert "  } else {  // k1_rms_norm: CTAs [end0_, gridDim.x)" in text
    # each member keeps its own loop, over its own range of CTAs (in the packed and the scalar batch)
    assert text.count("row_ += static_cast<int64_t>(spans_) * 4) {") == 4
    assert "cuda: one launch for kernels k0_rms_norm, k1_rms_norm (rows of 128 threads, 32 lanes" in text
    assert "independent, none reads or writes a buffer another writes (k0_rms_norm writes out0; " in text
    assert "cuda: launched with k1_rms_norm as head_norms__k0_k1_batch, member 0 of its CTA ranges" in text


def test_batch_ctas_are_each_members_own_launch_geometry(cuda_source) -> None:
    """The host sizes each range as the member's own launch would: grid_blocks(its work, its per-CTA)."""
    entry = _entry(cuda_source(head_norms), "head_norms")
    entry = entry[entry.index("} else {") :]  # the scalar batch's launch
    lines = [
        "const int64_t work0_ = (d_T * int64_t(4LL));",
        "const int64_t end0_ = (work0_ > 0 ? min_nan<int64_t>(grid_blocks(work0_, 4), 1073741823) : 0);",
        "const int64_t end1_ = end0_ + (work1_ > 0 ? min_nan<int64_t>(grid_blocks(work1_, 4), ",
        "if (end1_ > 0) {",
        "launch_kernel(head_norms__k0_k1_batch, static_cast<unsigned>(end1_), 128, 0, stream_, ",
        'e.launched("k0_rms_norm + k1_rms_norm");',
    ]
    positions = [entry.index(x) for x in lines]
    assert positions == sorted(positions)


def test_dependent_consecutive_kernels_are_not_batched(cuda_source) -> None:
    """The second norm reads the first's result: two launches, the reason printed above the second."""
    text = cuda_source(chained)
    assert re.findall(r"launch_kernel\((\w+),", text) == [
        "chained__k0_rms_norm_v4",
        "chained__k0_rms_norm",
        "chained__k1_rms_norm_v4",
        "chained__k1_rms_norm",
    ]
    assert "// batch " not in text
    assert "//   cuda: not launched together with k0_rms_norm: it reads t0, which k0_rms_norm writes" in text


def test_other_geometry_is_not_batched(cuda_source) -> None:
    """A row norm (128 threads, a warp per row) and an element grid (256 threads) keep their launches."""
    text = cuda_source(mixed)
    assert "// batch " not in text
    assert (
        "cuda: not launched together with k0_rms_norm: grid of 256 threads, not rows of 128 threads, "
        "32 lanes per instance" in text
    )


def test_packed_members_run_packed_only_when_every_one_is_aligned(cuda_source) -> None:
    """Grids a and c have packed variants, b none: the packed batch runs when a, c and their outputs are
    16-byte aligned (b stays scalar in it), else the scalar batch runs all three."""
    text = cuda_source(grids)
    entry = _entry(text, "grids")
    assert re.findall(r"launch_kernel\((\w+),", entry) == [
        "grids__k0_k1_k2_batch_packed",
        "grids__k0_k1_k2_batch",
    ]
    assert "if (aligned16({b_a, b_c, b_out0, b_out2})) {" in entry
    packed = entry[: entry.index("} else {")]
    assert "const int64_t work0_ = (d_T * int64_t(16LL));" in packed  # a: 64 f32 per row, packs of 4
    assert "const int64_t work1_ = (d_T * int64_t(5LL));" in packed  # b: scalar in both
    assert "const int64_t work2_ = ((d_T * int64_t(3LL)) * int64_t(4LL));" in packed  # c: packs of 8 bf16
    kernel = text[text.index("grids__k0_k1_k2_batch_packed(") :]
    kernel = kernel[: kernel.index("\n}\n")]
    assert "  } else if (cta_ < end1_) {  // k1_tanh: CTAs [end0_, end1_)" in kernel
    assert kernel.count("store_pack<") == 2 and "b_out1[" in kernel
    assert "cuda: grids__k0_k1_k2_batch_packed runs k0_mul, k2_add in 16-byte packs when every packed" in text


def test_batch_launches_off_launches_every_kernel_alone(cuda_source) -> None:
    """Option batch_launches=False: the source is what each kernel emits alone."""
    text = cuda_source(head_norms, {"batch_launches": False})
    assert re.findall(r"launch_kernel\((\w+),", text) == [
        "head_norms__k0_rms_norm_v8",
        "head_norms__k0_rms_norm",
        "head_norms__k1_rms_norm_v8",
        "head_norms__k1_rms_norm",
    ]
    assert "// batch " not in text


def test_mesh_scoped_and_conditional_kernels_keep_their_launch(sched) -> None:
    """A kernel with a Mesh scope, or a GEMM epilogue launched only when its atom did not apply it,
    is never a member; its independent neighbours still share a launch."""
    p = sched(grids)
    p.kernels[0].request = ("cta",)
    launches = _plan(p)
    assert [type(x).__name__ for x in launches] == ["Realization", "Batch"]
    assert [r.kernel.name for r in launches[1].members] == ["k1_tanh", "k2_add"]
    p = sched(grids)
    launches = _plan(p, conditional={id(p.kernels[1])})
    assert [type(x).__name__ for x in launches] == ["Realization", "Realization", "Realization"]


def test_shared_memory_of_a_batch_stays_within_the_static_budget(sched) -> None:
    """Members' static shared memory adds up in one kernel: over 48 KiB they keep separate launches."""
    p = sched(head_norms)
    rs = [r for k in p.kernels for r in realize_kernel(p.name, k, CATALOG, {})]
    big = [dataclasses.replace(r, smem_bytes=STATIC_SMEM_BYTES // 2 + 8) for r in rs]
    assert [type(x).__name__ for x in plan_batches(p, big, CATALOG, {}, set())] == ["Realization"] * 2
    need = 2 * (STATIC_SMEM_BYTES // 2 + 8)
    assert p.kernels[1].decisions[-1] == (
        f"cuda: not launched together with k0_rms_norm: together they need {need} B of static shared "
        f"memory, over the {STATIC_SMEM_BYTES} B budget"
    )
    (batch,) = plan_batches(p, rs, CATALOG, {}, set())
    assert isinstance(batch, Batch) and batch.name == "head_norms__k0_k1_batch"


@func
def rows_mixed(x: Tensor[(T, 64), f32], g: ConstTensor[(64,), f32], y: Tensor[(T, 63), f32]):
    # a packed row norm (64 f32) and a softmax over rows of 63 (no packs) side by side
    return tf.rms_norm(x, g), tf.softmax(y, -1)


def test_batched_rows_run_packed_only_when_every_packed_member_is_aligned(cuda_source) -> None:
    """Rows members with packs: the packed batch is guarded by all their packed buffers; a rows member
    without packs runs its scalar body in both batches."""
    text = cuda_source(head_norms)
    entry = _entry(text, "head_norms")
    assert "if (aligned16({b_gk, b_gq, b_k, b_out0, b_out1, b_q})) {" in entry
    assert "cuda: head_norms__k0_k1_batch_packed runs k0_rms_norm, k1_rms_norm in 16-byte packs" in text
    mixed_text = cuda_source(rows_mixed)
    assert re.findall(r"launch_kernel\((\w+),", mixed_text) == [
        "rows_mixed__k0_k1_batch_packed",
        "rows_mixed__k0_k1_batch",
    ]
    assert "if (aligned16({b_g, b_out0, b_x})) {" in mixed_text
    kernel = mixed_text[mixed_text.index("rows_mixed__k0_k1_batch_packed(") :]
    kernel = kernel[: kernel.index("\n}\n")]
    member1 = kernel[kernel.index("} else {  // k1_softmax") :]
    assert "store_pack<4>(b_out0 + " in kernel and "_pack" not in member1
