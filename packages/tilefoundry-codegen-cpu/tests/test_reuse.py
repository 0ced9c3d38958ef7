"""reuse_sum_terms: a sum loop stores its term for a later loop to reload, only when proved."""

from __future__ import annotations

from tilefoundry.codegen.cpu.reuse import reuse_sum_terms
from tilefoundry.dsl import DimVar, Tensor, bf16, f32, func, tf
from tilefoundry.ir.pipeline import schedule_function
from tilefoundry.ir.target import get_target
from tilefoundry.ir.tile.expr import Load, walk
from tilefoundry.ir.tile.printer import format_kernel
from tilefoundry.ir.tile.stmt import For, Store, stmt_exprs, walk_stmts

T = DimVar("T", 1, 65)


@func
def soft(x: Tensor[(T, 40), f32]):
    return tf.softmax(x, -1)


@func
def soft_half(x: Tensor[(T, 40), bf16]):
    return tf.softmax(x, -1)


@func
def log_soft(x: Tensor[(T, 40), f32]):
    return tf.log_softmax(x, -1)


def _kernel(fn):
    program = schedule_function(fn, get_target("cpu").catalog, {})
    (kernel,) = reuse_sum_terms(program).kernels
    return kernel


def test_softmax_sum_loop_stores_the_exponential_for_the_write_loop() -> None:
    """The exp of the sum loop is stored in the output; the write loop reloads it (one exp each)."""
    k = _kernel(soft)
    text = "\n".join(format_kernel(k))
    note = "in out0 for loop j6 to reload (one evaluation per element)"
    assert any(d.endswith(note) for d in k.decisions), text
    loops = [s for s in walk_stmts(k.body) if isinstance(s, For)]
    sum_loop = next(s for s in loops if s.carries and s.carries[0][1] == "add")
    assert any(isinstance(s, Store) and s.buffer.name == "out0" for s in walk_stmts(sum_loop.body)), text
    write = next(s for s in walk_stmts(k.body) if isinstance(s, For) and s.var.startswith("j"))
    exprs = [e for s in walk_stmts(write) for x in stmt_exprs(s) for e in walk(x)]
    assert any(isinstance(e, Load) and e.buffer.name == "out0" for e in exprs), text
    assert "exp" not in "\n".join(format_kernel(k)).split(f"for {write.var} in")[1], text


def test_reuse_is_refused_when_the_output_would_round_or_the_write_needs_no_term() -> None:
    """A bf16 output (the stored value would round) and log_softmax (its write loop does not
    recompute the sum's term) keep both loops as they were."""
    for fn in (soft_half, log_soft):
        k = _kernel(fn)
        assert not any("to reload" in d for d in k.decisions), "\n".join(format_kernel(k))


def _hand_kernel(between: list, write_index) -> list[str]:
    """Decisions of reuse_sum_terms on a hand-built row: sum of exp(x[r] - m), then a write loop."""
    from tilefoundry.ir.dtypes import f32 as F32
    from tilefoundry.ir.tile.expr import Const, Var, binary, unary
    from tilefoundry.ir.tile.stmt import Assign, Buffer, Kernel, Let, Program, Seq

    x = Buffer("x", F32, (16,), "input")
    out = Buffer("out0", F32, (16,), "output")
    m, s = Var("m", F32), Var("s", F32)

    def term(i: str):
        return unary("exp", binary("sub", Load(x, (Var(i),)), m))

    sum_loop = For("r", Const(16), Assign("s", binary("add", s, term("r"))), "reduce", True, (("s", "add"),))
    write = For("j", Const(16), Store(out, write_index, binary("mul", term("j"), Const(2.0, F32))))
    body = Seq((Let("m", Const(0.5, F32), mutable=True), Let("s", Const(0.0, F32), mutable=True),
                sum_loop, *between, write))
    kernel = Kernel("k0_row", "row", body, (x,), (out,))
    program = Program("row", (x, out), 1, (), (kernel,), ())
    return reuse_sum_terms(program).kernels[0].decisions


def test_reuse_proof_rejects_a_changed_scalar_and_a_non_injective_store() -> None:
    """The rewrite needs every scalar of the term unchanged in between and an injective store."""
    from tilefoundry.ir.dtypes import f32 as F32
    from tilefoundry.ir.tile.expr import Const, Var
    from tilefoundry.ir.tile.stmt import Assign

    assert _hand_kernel([], (Var("j"),)) == ["r: stores exp((x[r] - m)) in out0 for loop j to reload "
                                             "(one evaluation per element)"]
    assert _hand_kernel([Assign("m", Const(1.0, F32))], (Var("j"),)) == []
    assert _hand_kernel([], (Const(0),)) == []
