"""`tf` in @func bodies: scalar adoption, subscripts, split, shortcuts, every family end to end.

Results of traced functions are compared with the same computation in plain torch on seeded
random inputs: f32 within 1e-5, bf16 within one bf16 ulp (rtol 1/128, atol 1e-2).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tilefoundry.dsl import ConstTensor, DimVar, Mesh, Split, Tensor, Topology, bf16, f32, func, i32, i64, tf
from tilefoundry.ir.errors import DSLError
from tilefoundry.ir.hir import Function
from tilefoundry.ir.ops import creation, movement
from tilefoundry.ir.ops.placement import evaluating_instance

T = DimVar("tokens", 1, 65)
CTA4 = Mesh((Topology("cta", 4),), (4,))
PLACED = CTA4[Split(0)]
HERE = __file__
TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.bfloat16: dict(atol=1e-2, rtol=1 / 128)}


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def at(marker: str) -> str:
    """`(file:line)` of the line of this file that ends with `# <marker>`, as a regex."""
    with open(HERE) as f:
        line = next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}"))
    return f"\\({HERE}:{line}\\)"


def ops_of(fn: Function) -> list[str]:
    return [n.op.name for n in fn.body]


# ---------------------------------------------------------------- scalars


def test_python_scalars_adopt_the_tensor_dtype():
    @func
    def f(x: Tensor[(T, 4), bf16]):
        return tf.maximum(x * 2, 0.5) - 1, tf.sub(3, x), tf.where(x > 0, x, 0.0)

    fulls = [n for n in f.body if isinstance(n.op, creation.Full)]
    assert fulls and all(n.type.dtype == bf16 and n.type.shape == () for n in fulls)
    x = rand(5, 4, dtype=torch.bfloat16, seed=1)
    a, b, c = f(x)
    torch.testing.assert_close(a, torch.maximum(x * 2, torch.tensor(0.5, dtype=torch.bfloat16)) - 1)
    torch.testing.assert_close(b, 3 - x)
    torch.testing.assert_close(c, torch.where(x > 0, x, 0.0))


def test_a_scalar_the_dtype_cannot_hold_is_refused_at_its_line():
    def body(x: Tensor[(4,), i32]):
        return x + 1.5  # float-into-int

    with pytest.raises(DSLError) as e:
        func(body)
    assert str(e.value).startswith(
        "add: Python scalar 1.5 cannot adopt dtype i32 of the tensor operand (no silent promotion)"
    )
    assert e.value.where.line and str(e.value).endswith(f"{e.value.where})")
    with pytest.raises(DSLError, match=rf"^add: Python scalar 1.5 cannot adopt .*{at('float-into-int')}$"):
        func(body)


def test_mixed_tensor_dtypes_are_refused_at_their_line():
    def body(x: Tensor[(4,), f32], y: Tensor[(4,), bf16]):
        return x * y  # mixed

    with pytest.raises(
        DSLError, match=rf"^mul: operands must share a dtype .*got a f32 and b bf16.*{at('mixed')}$"
    ):
        func(body)


def test_cast_refuses_an_unknown_dtype_name():
    def body(x: Tensor[(4,), f32]):
        return tf.cast(x, "float32")  # bad-dtype

    with pytest.raises(
        DSLError, match=rf"^cast: unknown dtype 'float32'; accepted: f64, f32, .*{at('bad-dtype')}$"
    ):
        func(body)


# ---------------------------------------------------------------- every family end to end


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pointwise_and_contraction_through_tf(dtype):
    @func
    def mlp(x: Tensor[(T, 8), f32], wg: ConstTensor[(8, 16), f32], wu: ConstTensor[(8, 16), f32]):
        h = tf.silu(tf.matmul(x, wg)) * (x @ wu)
        return tf.gelu(h, approximate="tanh") + tf.clamp(tf.exp(h), hi=2.0) + tf.rsqrt(tf.abs(h) + 1)

    @func
    def mlp16(x: Tensor[(T, 8), bf16], wg: ConstTensor[(8, 16), bf16], wu: ConstTensor[(8, 16), bf16]):
        h = tf.silu(tf.matmul(x, wg)) * (x @ wu)
        return tf.gelu(h, approximate="tanh") + tf.clamp(tf.exp(h), hi=2.0) + tf.rsqrt(tf.abs(h) + 1)

    x, wg, wu = rand(6, 8, seed=2), rand(8, 16, seed=3), rand(8, 16, seed=4)
    h = F.silu(x @ wg) * (x @ wu)
    want = F.gelu(h, approximate="tanh") + torch.exp(h).clamp(max=2.0) + torch.rsqrt(h.abs() + 1)
    fn = mlp if dtype == torch.float32 else mlp16
    out = fn(x.to(dtype), wg.to(dtype), wu.to(dtype))
    assert out.dtype == dtype
    tol = TOL[dtype] if dtype == torch.float32 else dict(atol=6e-2, rtol=4e-2)  # bf16 rounds at each op
    torch.testing.assert_close(out.float(), want, **tol)


def test_reduction_shortcuts_through_tf():
    @func
    def stats(x: Tensor[(T, 6, 5), f32]):
        return (
            tf.sum(x, -1),
            tf.mean(x, (0, 2), keepdim=True),
            tf.max(x, 1),
            tf.min(x),
            tf.reduce(x, -1, False, "absmax"),
            tf.argmax(x, axis=1),
            tf.softmax(x, -1),
            tf.log_softmax(x, axis=0),
        )

    x = rand(4, 6, 5, seed=5)
    got = stats(x)
    want = (
        x.sum(-1),
        x.mean((0, 2), keepdim=True),
        x.amax(1),
        x.amin(),
        x.abs().amax(-1),
        x.argmax(1),
        x.softmax(-1),
        x.log_softmax(0),
    )
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, **TOL[torch.float32])


def test_model_ops_through_tf():
    @func
    def block(
        x: Tensor[(1, T, 16), f32],
        g: ConstTensor[(16,), f32],
        cos: ConstTensor[(32, 4), f32],
        sin: ConstTensor[(32, 4), f32],
        cache: Tensor[(1, 2, 32, 4), f32],
        pos: Tensor[(), i64],
    ):
        h = tf.rms_norm(x, g, eps=1e-6)
        q = tf.transpose(tf.reshape(h, (1, T, 4, 4)), (0, 2, 1, 3))  # (1, 4, T, 4)
        kv = tf.split(q, 2, axis=1)[0]  # (1, 2, T, 4)
        positions = tf.arange(T) + tf.cast(pos, "i64")
        q, kv = tf.rope(q, cos, sin, positions), tf.rope(kv, cos, sin, positions)
        cache = tf.cache_update(cache, pos, kv)
        kv_len = tf.cast(pos, "i32") + T
        return tf.attention(q, cache, cache, causal=True, kv_len=kv_len), cache

    x, g = rand(1, 3, 16, seed=6), rand(16, seed=7)
    inv = 1.0 / (10000 ** (torch.arange(0, 4, 2).float() / 4))
    emb = torch.cat([torch.outer(torch.arange(32).float(), inv)] * 2, dim=-1)
    cos, sin = emb.cos(), emb.sin()
    cache, pos = rand(1, 2, 32, 4, seed=8), torch.tensor(5)
    out, new_cache = block(x, g, cos, sin, cache, pos)

    h = F.rms_norm(x, (16,), g, eps=1e-6)
    q = h.reshape(1, 3, 4, 4).permute(0, 2, 1, 3)
    kv = q[:, :2]
    p = torch.arange(3) + 5

    def rot(t):
        c, s = cos[p], sin[p]
        return t * c + torch.cat((-t[..., 2:], t[..., :2]), -1) * s

    q, kv = rot(q), rot(kv)
    want_cache = cache.clone()
    want_cache[:, :, 5:8] = kv
    mask = torch.arange(32)[None, :] <= torch.arange(3)[:, None] + 5
    want = F.scaled_dot_product_attention(q, want_cache, want_cache, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(new_cache, want_cache, **TOL[torch.float32])
    torch.testing.assert_close(out, want, **TOL[torch.float32])


def test_movement_and_creation_through_tf():
    @func
    def moves(a: Tensor[(T, 4), f32], ids: Tensor[(3,), i32], table: ConstTensor[(10, 4), f32]):
        both = tf.concat([a, a * 2], axis=-1)  # (T, 8)
        st = tf.stack([a, a], axis=0)  # (2, T, 4)
        rep = tf.repeat_interleave(a, 2, axis=1)
        sel = tf.index_select(table, 0, ids)
        gat = tf.gather(table, 1, tf.broadcast_to(tf.reshape(tf.arange(4, dtype="i64"), (1, 4)), (10, 4)))
        emb = tf.embedding(table, tf.reshape(ids, (3, 1)))
        return both, st, rep, sel, gat, emb, tf.zeros((T, 2), "bf16"), tf.full((2,), True, "bool")

    a, ids, table = rand(5, 4, seed=9), torch.tensor([9, 0, 4], dtype=torch.int32), rand(10, 4, seed=10)
    both, st, rep, sel, gat, emb, z, full = moves(a, ids, table)
    assert torch.equal(both, torch.cat([a, a * 2], -1))
    assert torch.equal(st, torch.stack([a, a]))
    assert torch.equal(rep, a.repeat_interleave(2, 1))
    assert torch.equal(sel, table[ids.long()])
    assert torch.equal(gat, table)
    assert torch.equal(emb, table[ids.long()].reshape(3, 1, 4))
    assert z.shape == (5, 2) and z.dtype == torch.bfloat16 and not z.any()
    assert full.dtype == torch.bool and full.all()


def test_reshard_and_local_through_tf():
    @func
    def part(x: Tensor[(8, 16), f32]):
        y = tf.reshard(x, layout=PLACED, storage="gmem")
        return tf.local(y) * 2

    node = next(n for n in part.body if n.op.name == "reshard")
    assert node.op.layout == PLACED.resolve((8, 16))
    x = rand(8, 16, seed=11)
    with evaluating_instance({"cta": 2}):
        torch.testing.assert_close(part(x), x[4:6] * 2)


def test_local_of_an_unplaced_value_is_refused_at_its_line():
    def body(x: Tensor[(8, 16), f32]):
        return tf.local(x)  # unplaced

    with pytest.raises(
        DSLError, match=rf"^local: x must carry a ShardLayout, got layout None; .*{at('unplaced')}$"
    ):
        func(body)


# ---------------------------------------------------------------- subscripts

KEYS = [
    1,
    -1,
    (slice(None), -1),
    (Ellipsis, slice(1, 5, 2)),
    (None, slice(None), 0),
    slice(-3, None),
    (slice(None), slice(None, None, 3)),
    (0, None, slice(2, 100)),
    (Ellipsis, None),
    slice(5, 2),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_getitem_matches_torch_indexing(key):
    def body(x: Tensor[(4, 6), f32]):
        return x[key]

    fn = func(body)
    assert set(ops_of(fn)) <= {"slice", "reshape"}
    x = rand(4, 6, seed=12)
    assert torch.equal(fn(x), x[key])


def test_getitem_on_a_dimvar_axis():
    @func
    def last(x: Tensor[(T, 6), f32]):
        return x[-1], x[1:], x[:, ::2], x[: T - 1]

    assert [n.type.shape for n in last.body if n.op.name == "slice"][:2] == [(1, 6), (T - 1, 6)]
    x = rand(5, 6, seed=13)
    for got, want in zip(last(x), (x[-1], x[1:], x[:, ::2], x[:4]), strict=True):
        assert torch.equal(got, want)


def test_full_slice_emits_nothing():
    @func
    def same(x: Tensor[(T, 6), f32]):
        return x[:, :] * 1.0

    assert "slice" not in ops_of(same) and "reshape" not in ops_of(same)


def neg_step(x: Tensor[(T, 6), f32]):
    return x[::-1]  # neg-step


def out_of_range(x: Tensor[(T, 6), f32]):
    return x[T]  # out-of-range


def too_many(x: Tensor[(T, 6), f32]):
    return x[0, 0, 0]  # too-many


def two_ellipses(x: Tensor[(T, 6), f32]):
    return x[..., ...]  # two-ellipses


def tensor_index(x: Tensor[(T, 6), f32]):
    return x[x]  # tensor-index


def past_dimvar(x: Tensor[(T, 6), f32]):
    return x[:4]  # past-dimvar


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (neg_step, r"getitem: slice step must be an int >= 1, got -1 on axis 0"),
        (out_of_range, r"getitem: index tokens is out of range for axis 0 of extent tokens"),
        (too_many, r"getitem: 3 indices for a tensor of rank 2"),
        (two_ellipses, r"getitem: at most one Ellipsis \(\.\.\.\) per subscript"),
        (
            tensor_index,
            r"getitem: index TracedTensor\[\(tokens, 6\), f32\] is not an int, slice, None or Ellipsis; "
            r"for tensor indices use tf.index_select or tf.gather",
        ),
        (past_dimvar, r"slice: bounds \[0, 4\) do not provably lie within axis 0 of extent tokens"),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_getitem_refusals_name_the_subscript_line(body, message):
    marker = body.__name__.replace("_", "-")
    with pytest.raises(DSLError, match=rf"^{message}.*{at(marker)}$"):
        func(body)


# ---------------------------------------------------------------- split, names


def test_split_by_size_and_by_sections():
    @func
    def parts(x: Tensor[(T, 10), f32]):
        a, b, c = tf.split(x, 4, axis=1)
        d, e = tf.split(x, (3, 7), axis=-1)
        f, g = tf.split(x, (1, T - 1), axis=0)
        return a, b, c, d, e, f, g

    x = rand(5, 10, seed=14)
    want = (*x.split(4, 1), *x.split([3, 7], -1), x[:1], x[1:])
    for got, w in zip(parts(x), want, strict=True):
        assert torch.equal(got, w)
    assert all(isinstance(n.op, movement.Slice) for n in parts.body)


def test_split_refusals():
    def by_size(x: Tensor[(T, 10), f32]):
        return tf.split(x, 4, axis=0)  # symbolic

    with pytest.raises(DSLError, match=rf"^split: chunks of size 4 need a static extent .*{at('symbolic')}$"):
        func(by_size)

    def sections(x: Tensor[(T, 10), f32]):
        return tf.split(x, (3, 6), axis=1)  # short

    with pytest.raises(
        DSLError, match=rf"^split: sections \(3, 6\) add up to 9, axis 1 has extent 10 {at('short')}$"
    ):
        func(sections)


def test_unknown_op_suggests_close_names():
    def body(x: Tensor[(4,), f32]):
        return tf.rmsnorm(x)  # unknown

    with pytest.raises(
        DSLError, match=rf"^unknown op tf.rmsnorm; did you mean tf.rms_norm.*{at('unknown')}$"
    ):
        func(body)
    assert not hasattr(tf, "no_such_op")
    assert tf.rms_norm.__doc__ and tf.exp.__name__ == "exp" and "e**x" in tf.exp.__doc__
