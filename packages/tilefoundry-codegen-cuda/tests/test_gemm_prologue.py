"""gemm_prologue.py: which row kernels fold into a GEMV's K loop, and the functor that does it."""

from __future__ import annotations

from tilefoundry.codegen.cuda.gemm_prologue import row_scale
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, tf
from tilefoundry.ir.tile.expr import Cast, Const, Fold, Load, Var, free_vars, walk
from tilefoundry.ir.tile.stmt import AtomCall, Kernel

T = DimVar("T", 1, 9)


@func
def rms_linear(x: Tensor[(T, 64), bf16], g: ConstTensor[(64,), bf16], w: ConstTensor[(128, 64), bf16]):
    return tf.rms_norm(x, g, eps=1e-6) @ tf.transpose(w, (1, 0))


@func
def layer_linear(
    x: Tensor[(T, 64), bf16],
    g: ConstTensor[(64,), bf16],
    b: ConstTensor[(64,), bf16],
    w: ConstTensor[(128, 64), bf16],
):
    return tf.layer_norm(x, g, b) @ tf.transpose(w, (1, 0))


def _norm(sched, fn) -> Kernel:
    """The row kernel the GEMM atom of `fn` takes as its prologue."""
    p = sched(fn, {"gemm_fusion": "all"})
    (atom,) = [k.body for k in p.kernels if isinstance(k.body, AtomCall) and k.body.prologue is not None]
    return atom.prologue


def test_an_rms_norm_is_a_row_scale_over_its_sum_of_squares_times_x_g(sched) -> None:
    """rsqrt(mean(x^2) + eps) * x * g: the scale holds the one Fold (x^2 over the whole row) and
    no column; the element map is x[i, j] * g[j], rounded to A's dtype as the kernel's store is."""
    norm = _norm(sched, rms_linear)
    rs = row_scale(norm, "i", "j", Const(64), bf16)
    assert not isinstance(rs, str), rs
    (fold,) = rs.folds
    assert fold.op == "add" and fold.extent == Const(64) and "j" not in free_vars(rs.scale)
    assert [x for x in walk(rs.scale) if isinstance(x, Fold)] == [fold]
    assert isinstance(rs.element, Cast) and rs.element.dtype is bf16
    loads = {(ld.buffer.name, ld.index) for ld in walk(rs.element) if isinstance(ld, Load)}
    assert loads == {("x", (Var("i"), Var("j"))), ("g", (Var("j"),))}
    assert not any(isinstance(x, Fold) for x in walk(rs.element))


def test_a_row_kernel_that_is_no_row_scale_does_not_fold(sched) -> None:
    """Layer norm offers no element (its row mean is subtracted before the scale); a row length
    other than the statistic's extent is refused too."""
    assert row_scale(_norm(sched, layer_linear), "i", "j", Const(64), bf16) == (
        "k0_layer_norm offers no element expression over (row, column)"
    )
    half = row_scale(_norm(sched, rms_linear), "i", "j", Const(32), bf16)
    assert half == "k0_rms_norm folds a statistic other than a sum over the whole row"


def test_the_folded_functor_packs_x_and_g_and_the_host_folds_only_aligned_rows(cuda_source) -> None:
    """The functor loads a 16-byte pack of x and of g, rounds x * g into a_ (one 16-bit multiply,
    cexpr.py's mul_rn) and adds x^2 into its sum; its scale is rsqrt(sum / 64 + eps). The host
    folds only where both bases are aligned."""
    source = cuda_source(rms_linear, {"gemm_fusion": "all"})
    functor = source[source.index("struct rms_linear__k0_rms_norm_prologue {") :]
    functor = functor[: functor.index("\n};\n")]
    assert "static constexpr int kFolds = 1;" in functor
    assert "load_pack<8>(b_x + (i0) * int64_t(64LL) + jb_, gl0_);" in functor
    assert "gs0_[l_] = mul_rn(gl0_[l_], gl1_[l_]);" in functor
    assert "q0_ = (q0_ + (cast<float>(gl0_[l_]) * cast<float>(gl0_[l_])));" in functor
    assert "return rsqrt(((f_[0] / 64.0f) + 1e-06f));" in functor
    assert (
        "k0_rms_norm_staged_ = aligned16({b_x, b_g}) && gemm_stages_prologue<GemmLayout::rcr, 0>(" in source
    )
    assert "const rms_linear__k0_rms_norm_prologue pro_{b_g, b_x, b_t0, d_T};" in source
