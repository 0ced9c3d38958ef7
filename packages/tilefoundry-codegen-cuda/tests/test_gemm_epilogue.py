"""gemm_atom.py's epilogue functors: which of an epilogue's reads may leave before its results."""

from __future__ import annotations

from tilefoundry.codegen.cuda.gemm_atom import early_reads
from tilefoundry.ir.dtypes import bf16
from tilefoundry.ir.tile.expr import Load, Var, add
from tilefoundry.ir.tile.stmt import Buffer, If, Let, Seq, Store

I, J = Var("i0"), Var("i1")
COORDS = {"i0", "i1"}
RESULT = Var("c_0", bf16)


def _buffers() -> tuple[Buffer, Buffer, Buffer]:
    """x (the residual), g (a gain over the columns) and out."""
    return (Buffer("x", bf16, (4, 8), "input"), Buffer("g", bf16, (8,), "input"),
            Buffer("out", bf16, (4, 8), "output"))


def test_a_residual_read_at_the_outputs_coordinates_leaves_early() -> None:
    """out = x[i, j] + g[j] + c: both reads need no result and index only the coordinates."""
    x, g, out = _buffers()
    body = Store(out, (I, J), add(add(Load(x, (I, J)), Load(g, (J,))), RESULT))
    early = early_reads(body, COORDS)
    assert [(ld.buffer.name, v.name) for ld, v in early.items()] == [("x", "e0"), ("g", "e1")]


def test_reads_that_depend_on_a_result_or_on_what_the_body_stores_stay() -> None:
    """A read indexed by a value the results feed stays, and so does a read of a buffer the body
    also stores to (an in-place add: another output's store may come first)."""
    x, g, out = _buffers()
    by_result = Seq((Let("t", RESULT), Store(out, (I, J), add(Load(g, (Var("t"),)), RESULT))))
    assert early_reads(by_result, COORDS) == {}
    in_place = Store(x, (I, J), add(Load(x, (I, add(J, 1))), RESULT))
    assert early_reads(in_place, COORDS) == {}


def test_a_branching_body_keeps_its_reads_and_names_do_not_clash() -> None:
    """Under an If a read may be guarded, so nothing leaves early; the early values' names skip
    the names the body binds itself."""
    x, _, out = _buffers()
    guarded = If(RESULT, Store(out, (I, J), Load(x, (I, J))))
    assert early_reads(guarded, COORDS) == {}
    bound = Seq((Let("e0", RESULT), Store(out, (I, J), add(Load(x, (I, J)), Var("e0")))))
    assert [v.name for v in early_reads(bound, COORDS).values()] == ["e1"]
