"""The attention region: proof that a kernel is exactly the attention lowering over buffers in memory.

The lowering of `attention` (ir/lower/nn.py) writes each query row as an online softmax over
its visible keys. A kernel whose final body is *exactly* that nest over compact buffers may
run as the flash atom (runtime atoms/attention.cuh). The proof reads the facts off the body
(buffers, names, scale, group, causal form, kv_len), rebuilds the nest those facts imply with
the same expression builders, and compares the two statement by statement. Anything else, a
rewritten or partly fused body included, keeps the reference loop (or fails closed when the
author asked for the atom with option "attention": "atom").

    for b, h, i: alloc acc (Dv,):  len; m = -inf; l = 0; acc = 0
      for j in 0..max(visible, 0): s = scale * q[b, h, i, :] . k[b, h / g, j, :]; online update
      out[b, h, i, :] = l > 0 ? acc / l : 0

out is the lowering's compact (B, Hq, Sq, Dv), or the same rows in (B, Sq, Hq, Dv) order: the
stores `ir.plan.permuted_stores` moved in from the `reshape(transpose(o, (0, 2, 1, 3)), (B·Sq, Hq·Dv))`
copy, `out[b * Sq + i, h * Dv + d]` (or `out[b, i, h, d]` without the reshape). The region
records which (`out_bshd`) and the atom writes each row there.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from tilefoundry.ir.dims import dims_equal
from tilefoundry.ir.dtypes import f32, i64
from tilefoundry.ir.tile.expr import (
    Bin,
    Cast,
    Const,
    Expr,
    Load,
    Select,
    Var,
    binary,
    cast,
    const,
    dim_expr,
    floordiv,
    loads,
    unary,
)
from tilefoundry.ir.tile.stmt import (
    Alloc,
    Assign,
    AtomCall,
    Buffer,
    For,
    Kernel,
    Let,
    Seq,
    Stmt,
    Store,
    statements,
)

ATOM_DTYPES = ("f32", "bf16", "f16")
HEAD_DIMS = range(32, 257, 32)


@dataclass(frozen=True)
class AttentionRegion:
    """A proved attention kernel: out = softmax(scale · q kᵀ, masked) v."""

    q: Buffer
    k: Buffer
    v: Buffer
    out: Buffer
    kv_len: Buffer | None
    scale: float
    causal: bool
    head_dim: int
    out_bshd: bool = False


def same(a: object, b: object) -> bool:
    """Structural equality of statements (buffers by identity, expressions by value)."""
    if isinstance(a, Buffer) or isinstance(b, Buffer):
        return a is b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Stmt) and isinstance(b, Stmt):
        if type(a) is not type(b):
            return False
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


class _Shape(Exception):
    """The body does not have the attention nest's shape (the message says where)."""


def _expect(cond: bool, why: str) -> None:
    if not cond:
        raise _Shape(why)


def _rebuild(
    chain: tuple[For, ...],
    acc: Buffer,
    names: dict[str, str],
    q: Load,
    k: Load,
    v: Load,
    out: Buffer,
    out_index: tuple[Expr, ...],
    length: Expr,
    scale: float,
    group: int,
    causal: bool,
) -> Stmt:
    """The attention nest the facts imply, written with the lowering's builders."""
    b, h, i = (Var(c.var) for c in chain)
    sq = chain[2].extent
    ln, m, l_, j = Var(names["len"]), Var(names["m"], f32), Var(names["l"], f32), Var(names["j"])
    hk = floordiv(h, dim_expr(group))
    visible: Expr = ln
    if causal:
        visible = binary("min", ln, i + ln - sq + 1)
    d, dv = q.buffer.shape[3], acc.shape[0]
    r, e_scan, e_zero, e_fin = (Var(names[x]) for x in ("r", "e_scan", "e_zero", "e_fin"))
    accv = Var(names["acc"], f32)
    s, mn, c, p = (Var(names[x], f32) for x in ("s", "mn", "c", "p"))
    product = binary("mul", cast(Load(q.buffer, (b, h, i, r)), f32), cast(Load(k.buffer, (b, hk, j, r)), f32))
    dot = For(
        names["r"],
        dim_expr(d),
        Assign(names["acc"], binary("add", accv, product)),
        "reduce",
        True,
        ((names["acc"], "add"),),
        binding="serial",
    )
    update = binary(
        "add",
        binary("mul", Load(acc, (e_scan,)), c),
        binary("mul", p, cast(Load(v.buffer, (b, hk, j, e_scan)), f32)),
    )
    step = Seq(
        (
            Let(names["acc"], const(0.0, f32), mutable=True),
            dot,
            Let(names["s"], binary("mul", accv, const(scale, f32))),
            Let(names["mn"], binary("max", m, s)),
            Let(names["c"], unary("exp", binary("sub", m, mn))),
            Let(names["p"], unary("exp", binary("sub", s, mn))),
            Assign(names["l"], binary("add", binary("mul", l_, c), p)),
            For(names["e_scan"], dim_expr(dv), Store(acc, (e_scan,), update), binding="serial"),
            Assign(names["m"], mn),
        )
    )
    carries = ((names["m"], "online_max"), (names["l"], "online_sum"))
    scan = For(
        names["j"], binary("max", visible, dim_expr(0)), step, "serial", False, carries, binding="serial"
    )
    finished = cast(
        Select(binary("gt", l_, const(0.0, f32)), binary("div", Load(acc, (e_fin,)), l_), const(0.0, f32)),
        out.dtype,
    )
    return Seq(
        (
            Let(names["len"], length),
            Let(names["m"], const(-math.inf, f32), mutable=True),
            Let(names["l"], const(0.0, f32), mutable=True),
            For(names["e_zero"], dim_expr(dv), Store(acc, (e_zero,), const(0.0, f32)), binding="serial"),
            scan,
            For(names["e_fin"], dim_expr(dv), Store(out, out_index, finished), binding="serial"),
        )
    )


def _load_of(e: Expr) -> Load:
    inner = e.a if isinstance(e, Cast) else e
    _expect(isinstance(inner, Load), "an operand is an inlined expression, not a buffer in memory")
    return inner  # type: ignore[return-value]


def match_attention(k: Kernel) -> AttentionRegion | str:
    """The attention region of a kernel, or the reason it is not one."""
    try:
        return _match(k)
    except _Shape as why:
        return str(why)
    except AttributeError:  # a statement of another kind where the nest has a Let, For or Store
        return "the body is not the attention nest"


def _out_layouts(
    chain: tuple[For, ...], q: Buffer, acc: Buffer, out: Buffer, e: Var
) -> list[tuple[bool, tuple[Expr, ...]]]:
    """(out_bshd, index of out's element (b, h, i, e)) for each layout out's shape admits."""
    b, h, i = (Var(c.var) for c in chain)
    nb, nh, ns = q.shape[:3]
    dv = acc.shape[0]
    shape = out.shape
    found = []
    if out.rank == 4 and all(dims_equal(x, y) for x, y in zip(shape, (nb, nh, ns, dv), strict=True)):
        found.append((False, (b, h, i, e)))
    if out.rank == 4 and all(dims_equal(x, y) for x, y in zip(shape, (nb, ns, nh, dv), strict=True)):
        found.append((True, (b, i, h, e)))
    if out.rank == 2 and dims_equal(shape[0], nb * ns) and dims_equal(shape[1], nh * dv):
        found.append((True, (b * chain[2].extent + i, h * dim_expr(dv) + e)))
    return found


def _rows(body: Stmt) -> tuple[tuple[For, ...], Stmt]:
    chain: list[For] = []
    while isinstance(body, For) and body.binding == "worker":
        chain.append(body)
        body = body.body
    return tuple(chain), body


def _match(k: Kernel) -> AttentionRegion:
    _expect(k.form == "attention", f"the kernel is a {k.form}, not an attention")
    chain, inner = _rows(k.body)
    _expect(
        len(chain) == 3 and isinstance(inner, Alloc), "the body is not (b, h, i) rows around one scratch row"
    )
    acc = inner.buffer  # type: ignore[union-attr]
    top = statements(inner.body)  # type: ignore[union-attr]
    _expect(
        len(top) == 6 and isinstance(top[4], For) and isinstance(top[5], For), "the row is not one key scan"
    )
    let_len, let_m, let_l, zero, scan, fin = top
    step = statements(scan.body)  # type: ignore[union-attr]
    _expect(
        len(step) == 9 and isinstance(step[1], For) and isinstance(step[7], For),
        "the key step is not one score, one online update and one accumulator update",
    )
    dot = step[1]
    _expect(
        isinstance(dot.body, Assign)
        and isinstance(dot.body.value, Bin)  # type: ignore[union-attr]
        and isinstance(dot.body.value.b, Bin),
        "the score is not one dot product",
    )  # type: ignore[union-attr]
    product = dot.body.value.b  # type: ignore[union-attr]
    q, kk = _load_of(product.a), _load_of(product.b)  # type: ignore[union-attr]
    v = next((x for x in loads(step[7].body.value) if x.buffer is not acc), None)  # type: ignore[union-attr]
    _expect(v is not None and isinstance(fin.body, Store), "the accumulator update reads no v")
    out = fin.body.buffer  # type: ignore[union-attr]
    _expect(
        all(isinstance(s, Let) for s in (let_len, let_m, let_l))
        and isinstance(step[2], Let)
        and isinstance(step[2].value.b, Const),
        "the row's scalars are not the online softmax's",
    )  # type: ignore[union-attr]
    scale = float(step[2].value.b.value)  # type: ignore[union-attr]
    hq, hkv = q.buffer.shape[1], kk.buffer.shape[1]
    _expect(
        isinstance(hq, int) and isinstance(hkv, int) and hkv > 0 and hq % hkv == 0,
        "the head counts are not static with Hq a multiple of Hkv",
    )
    extents = tuple(c.extent for c in chain)
    _expect(
        tuple(dim_expr(x) for x in q.buffer.shape[:3]) == extents
        and dim_expr(kk.buffer.shape[0]) == extents[0]
        and dim_expr(kk.buffer.shape[2]) == dim_expr(v.buffer.shape[2]),
        "the operand shapes are not (B, H, S, D) over the row loops",
    )
    layouts = _out_layouts(chain, q.buffer, acc, out, Var(fin.var))  # type: ignore[union-attr]
    stored = fin.body.index  # type: ignore[union-attr]
    layout = next(((bshd, index) for bshd, index in layouts if same(stored, index)), None)
    _expect(layout is not None, "out is not stored compact in (B, Hq, Sq, D) or (B, Sq, Hq, D) order")
    out_bshd, out_index = layout  # type: ignore[misc]
    length = let_len.value  # type: ignore[union-attr]
    kv_len = None
    if isinstance(length, (Cast, Load)):  # an i64 kv_len is read without a cast
        ld = _load_of(length)
        kv_len = ld.buffer
        b = Var(chain[0].var)
        _expect(ld.index in ((), (b,)) and length.dtype is i64, "kv_len is not read per batch")
    else:
        _expect(length == dim_expr(kk.buffer.shape[2]), "the scan does not cover k's keys")
    names = {
        "len": let_len.name,
        "m": let_m.name,
        "l": let_l.name,
        "j": scan.var,  # type: ignore[union-attr]
        "acc": step[0].name,
        "r": dot.var,
        "s": step[2].name,
        "mn": step[3].name,  # type: ignore[union-attr]
        "c": step[4].name,
        "p": step[5].name,
        "e_scan": step[7].var,
        "e_zero": zero.var,  # type: ignore[union-attr]
        "e_fin": fin.var,  # type: ignore[union-attr]
    }
    facts = (chain, acc, names, q, kk, v, out, out_index, length, scale, hq // hkv)
    for causal in (False, True):
        if same(inner.body, _rebuild(*facts, causal)):  # type: ignore[union-attr, arg-type]
            d = q.buffer.shape[3]
            _expect(isinstance(d, int), "the head dim is not static")
            return AttentionRegion(q.buffer, kk.buffer, v.buffer, out, kv_len, scale, causal, d, out_bshd)  # type: ignore[arg-type]
    raise _Shape("the body differs from the attention nest over its buffers")


def atom_blocker(region: AttentionRegion) -> str | None:
    """Why the flash atom cannot take a proved region, or None."""
    bufs = (region.q, region.k, region.v, region.out)
    if len({b.dtype for b in bufs}) != 1 or region.q.dtype.name not in ATOM_DTYPES:
        return f"q, k, v and out must share one dtype of {', '.join(ATOM_DTYPES)}"
    if region.v.shape[3] != region.head_dim:
        return "v's head dim differs from q's"
    if region.head_dim not in HEAD_DIMS:
        return f"head dim {region.head_dim} is not a multiple of 32 up to 256"
    if any(b.role == "local" for b in bufs):
        return "an operand is kernel scratch"
    return None


def atom_call(region: AttentionRegion, replaces: Stmt) -> AtomCall:
    """The AtomCall standing for the region (operands q, k, v, out[, kv_len])."""
    q = region.q
    operands = (region.q, region.k, region.v, region.out) + ((region.kv_len,) if region.kv_len else ())
    params = {
        "batch": dim_expr(q.shape[0]),
        "heads": dim_expr(q.shape[1]),
        "kv_heads": dim_expr(region.k.shape[1]),
        "sq": dim_expr(q.shape[2]),
        "skv": dim_expr(region.k.shape[2]),
        "scale": const(region.scale, f32),
        "causal": Const(int(region.causal)),
        "out_bshd": Const(int(region.out_bshd)),
    }
    name = f"cuda_attention_flash_d{region.head_dim}_{q.dtype.name}"
    return AtomCall(name, operands, params, replaces)
