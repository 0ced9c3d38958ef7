"""reshard and local: layouts and storage in the type, values unchanged, local blocks per instance."""

from __future__ import annotations

import itertools

import pytest
import torch

from tilefoundry.ir import ops as _ops  # noqa: F401  (fills the registries)
from tilefoundry.ir.dtypes import bf16, f32
from tilefoundry.ir.errors import DSLError
from tilefoundry.ir.layout import Layout
from tilefoundry.ir.ops.base import evaluate, infer
from tilefoundry.ir.ops.placement import Local, Reshard, evaluating_instance
from tilefoundry.ir.shard import Broadcast, Mesh, Split, Topology
from tilefoundry.ir.types import Storage, TensorType

CTA4 = Mesh((Topology("cta", 4),), (4,))
GRID = Mesh((Topology("cta", 2), Topology("thread", 4)), (2, 4))


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def test_reshard_puts_layout_and_storage_in_the_type():
    x = TensorType((8, 16), f32)
    sl = CTA4[Split(0)].resolve((8, 16))
    assert infer(Reshard(layout=CTA4[Split(0)]), x) == TensorType((8, 16), f32, layout=sl)
    assert infer(Reshard(layout=sl, storage="smem"), x) == TensorType((8, 16), f32, layout=sl, storage="smem")
    placed = TensorType((8, 16), f32, layout=sl)
    assert infer(Reshard(storage=Storage.GMEM), placed) == TensorType((8, 16), f32, layout=sl, storage="gmem")
    plain = Layout((8, 16), (1, 8))
    assert infer(Reshard(layout=plain), x).layout == plain


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reshard_leaves_values_unchanged(dtype):
    x = rand(8, 16, dtype=dtype, seed=1)
    assert torch.equal(evaluate(Reshard(layout=CTA4[Split(0)], storage="gmem"), x), x)


def test_reshard_refuses_bad_requests():
    x = TensorType((4, 16), f32)
    with pytest.raises(DSLError, match=r"^reshard: give layout=, storage= or both, got neither$"):
        infer(Reshard(), x)
    with pytest.raises(DSLError) as e:
        infer(Reshard(layout=CTA4[Split(0)].resolve((8, 16))), x)
    assert str(e.value).startswith("reshard: layout ShardLayout(")
    assert str(e.value).endswith("covers a tensor of shape (8, 16), x has (4, 16)")
    with pytest.raises(
        DSLError, match=r"^reshard: layout must be a Layout, a ShardLayout or a placement mesh"
    ):
        infer(Reshard(layout="rowmajor"), x)
    with pytest.raises(DSLError, match=r"tensor axis 0 has extent 6, mesh axes 'cta' split it into 4 parts"):
        infer(Reshard(layout=CTA4[Split(0)]), TensorType((6, 16), f32))


def test_local_infers_the_per_instance_shape():
    sl = GRID[Split(0), Split(1)].resolve((4, 8))
    t = infer(Local(layout=sl), TensorType((4, 8), bf16, layout=sl))
    assert t.shape == (2, 2) and t.dtype == bf16 and t.layout == sl.local_layout()
    sb = GRID[Broadcast, Split(1)].resolve((4, 8))
    assert infer(Local(layout=sb), TensorType((4, 8), bf16, layout=sb)).shape == (4, 2)


def test_local_refuses_a_value_without_its_shard_layout():
    with pytest.raises(DSLError) as e:
        infer(Local(layout=None), TensorType((4, 8), f32))
    assert str(e.value) == (
        "local: x must carry a ShardLayout, got layout None; "
        "place x first with tf.reshard(x, layout=mesh[...])"
    )
    sl = CTA4[Split(0)].resolve((8, 16))
    with pytest.raises(DSLError, match=r"^local: x has layout None, the op cuts ShardLayout\("):
        infer(Local(layout=sl), TensorType((8, 16), f32))


@pytest.mark.parametrize("cta", range(4))
def test_local_cuts_the_block_of_the_instance(cta):
    sl = CTA4[Split(0)].resolve((8, 16))
    x = rand(8, 16, seed=2)
    with evaluating_instance({"cta": cta}):
        out = evaluate(Local(layout=sl), x)
    assert torch.equal(out, x[2 * cta : 2 * cta + 2])


def test_local_defaults_to_instance_zero():
    sl = CTA4[Split(1)].resolve((3, 8))
    x = rand(3, 8, seed=3)
    assert torch.equal(evaluate(Local(layout=sl), x), x[:, 0:2])


def test_2_10_local_offset_and_local_layout_pick_the_block():
    """seed 000 §2.10: local(t) = t.engine.data() + Σ coord[m]·S[k], viewed by Layout(shape', S)."""
    sl = GRID[Split(0), Split(1)].resolve((4, 8))
    x = rand(4, 8, seed=4)
    flat = x.reshape(-1)
    for c, t in itertools.product(range(2), range(4)):
        with evaluating_instance({"cta": c, "thread": t}):
            out = evaluate(Local(layout=sl), x)
        coord = sl.mesh.local_index({"cta": c, "thread": t})
        base, local = sl.local_offset(coord), sl.local_layout()
        want = torch.stack([flat[base + local(a, b)] for a in range(2) for b in range(2)]).reshape(2, 2)
        assert torch.equal(out, want), (c, t)
