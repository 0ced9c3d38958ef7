"""Definition-time diagnostics: each refused program names its file:line and what is accepted.

Every case builds one small program; the `# <marker>` comment sits on the line the error must
name. The table is the specification of the DSL's refusals.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, i32, module, tf
from tilefoundry.ir.errors import DSLError, SourceLoc

HERE = __file__
T = DimVar("T", 1, 33)
V = Tensor[(4,), f32]


def line_of(marker: str) -> int:
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if f"# {marker} " in line.rstrip() + " ":
                return i
    raise AssertionError(f"no line marked {marker!r}")


@func
def scale(x: Tensor[(T, 4), f32], g: ConstTensor[(4,), f32]):
    return x * g


# ---------------------------------------------------------------- ops and operands


def unknown_op():
    @func
    def f(x: V):
        return tf.rmsnorm(x)  # unknown-op


def missing_operand():
    @func
    def f(x: V):
        return tf.add(x)  # missing-operand


def extra_operand():
    @func
    def f(x: V):
        return tf.exp(x, x)  # extra-operand


def unknown_tensor_attribute():
    @func
    def f(x: V):
        return x.softmax(0)  # unknown-tensor-attribute


def dtype_mismatch():
    @func
    def f(x: V, y: Tensor[(4,), bf16]):
        return x + y  # dtype-mismatch


def shape_mismatch():
    @func
    def f(x: V, y: Tensor[(5,), f32]):
        return x * y  # shape-mismatch


def matmul_mismatch():
    @func
    def f(a: Tensor[(4, 8), f32], b: Tensor[(4, 8), f32]):
        return a @ b  # matmul-mismatch


def axis_out_of_range():
    @func
    def f(x: Tensor[(4, 4), f32]):
        return tf.sum(x, axis=3)  # axis-out-of-range


def scalar_cannot_adopt():
    @func
    def f(x: Tensor[(4,), i32]):
        return x + 0.5  # scalar-cannot-adopt


def reshape_count():
    @func
    def f(x: Tensor[(4, 4), f32]):
        return x.reshape(3, 5)  # reshape-count


def cast_unknown_dtype():
    @func
    def f(x: V):
        return x.to("f33")  # cast-unknown-dtype


def call_wrong_dtype():
    @func
    def f(x: Tensor[(2, 4), bf16], g: ConstTensor[(4,), f32]):
        return scale(x, g)  # call-wrong-dtype


def call_wrong_arity():
    @func
    def f(x: Tensor[(2, 4), f32]):
        return scale(x)  # call-wrong-arity


def call_out_of_range():
    @func
    def f(x: Tensor[(40, 4), f32], g: ConstTensor[(4,), f32]):
        return scale(x, g)  # call-out-of-range


# ---------------------------------------------------------------- control flow and statements


def data_dependent_if():
    @func
    def f(x: V):
        if tf.sum(x) > 0:  # data-dependent-if
            return x
        return -x


def data_dependent_loop():
    @func
    def f(x: V):
        total = x
        for v in x:  # data-dependent-loop
            total = total + v
        return total


def while_loop():
    @func
    def f(x: V):
        while True:  # while-loop
            return x


def try_except():
    @func
    def f(x: V):
        try:  # try-except
            return x
        except ValueError:
            return x


def import_statement():
    @func
    def f(x: V):
        import math  # import-statement

        return x * math.pi


def global_statement():
    @func
    def f(x: V):
        global T  # global-statement
        return x


def raise_statement():
    @func
    def f(x: V):
        raise ValueError("no")  # raise-statement


def del_statement():
    @func
    def f(x: V):
        y = x
        del y  # del-statement
        return x


def yield_statement():
    @func
    def f(x: V):
        yield x  # yield-statement


def class_statement():
    @func
    def f(x: V):
        class Local:  # class-statement
            pass

        return x


# ---------------------------------------------------------------- signatures and annotations


def unknown_dtype():
    @func
    def f(x: Tensor[(4,), "f33"]):  # unknown-dtype  # noqa: F821, UP037
        return x


def shape_not_tuple():
    @func
    def f(x: Tensor[4, f32]):  # shape-not-tuple
        return x


def bad_storage():
    @func
    def f(x: Tensor[(4,), f32, "shared"]):  # bad-storage  # noqa: F821, UP037
        return x


def missing_annotation():
    @func
    def f(x):  # missing-annotation
        return x


def not_a_tensor_annotation():
    @func
    def f(x: int):  # not-a-tensor-annotation
        return x


def star_args():
    @func
    def f(*xs: V):  # star-args
        return xs[0]


def return_mismatch():
    @func
    def f(x: V) -> Tensor[(4,), bf16]:  # return-mismatch
        return x


def returns_none():
    @func
    def f(x: V):  # returns-none
        tf.exp(x)


def dimvar_name_clash():
    other = DimVar("T", 1, 9)

    @func
    def f(x: Tensor[(T,), f32], y: Tensor[(other,), f32]):  # dimvar-name-clash
        return x


# ---------------------------------------------------------------- modules and converters


def weight_type_conflict():
    @module
    class M:
        @func
        def a(x: V, w: ConstTensor[(4,), f32]):
            return x * w

        @func
        def b(x: V, w: ConstTensor[(4,), bf16]):  # weight-type-conflict
            return x


def unknown_entry():
    @module(entry="main")
    class M:  # unknown-entry
        @func
        def a(x: V):
            return x


def duplicate_converter():
    @func
    def f(x: V, w: ConstTensor[(4,), f32]):
        return x * w

    @f.converter("w")
    def _(raw: ConstTensor[(4,), f32]):
        return raw

    @f.converter("w")
    def _(raw: ConstTensor[(4,), f32]):  # duplicate-converter
        return -raw


def converter_unknown_weight():
    @func
    def f(x: V, w: ConstTensor[(4,), f32]):
        return x * w

    @f.converter("gamma")
    def _(raw: ConstTensor[(4,), f32]):  # converter-unknown-weight
        return raw


def converter_wrong_type():
    @func
    def f(x: V, w: ConstTensor[(4, 8), f32]):
        return x @ w

    @f.converter("w")
    def _(raw: ConstTensor[(8, 4), f32]):  # converter-wrong-type
        return raw


@dataclass(frozen=True)
class Case:
    build: Callable[[], None]
    text: str  # a regex the message must match: what was wrong and what is accepted


CASES = [
    Case(unknown_op, r"unknown op tf.rmsnorm; did you mean tf.rms_norm"),
    Case(missing_operand, r"add\(\) missing 1 required positional argument: 'b'; accepted: tf.add\(a, b\)"),
    Case(extra_operand, r"exp\(\) takes 1 positional argument but 2 were given; accepted: tf.exp\(x\)"),
    Case(unknown_tensor_attribute, r"a traced tensor has no attribute 'softmax'; accepted: shape dtype ndim"),
    Case(dtype_mismatch, r"add: operands must share a dtype \(no silent promotion\), got a f32 and b bf16"),
    Case(shape_mismatch, r"mul: shapes \(4,\) and \(5,\) do not broadcast"),
    Case(matmul_mismatch, r"matmul: contracted dims must match: a \(4, 8\) has K=8, b \(4, 8\) has K=4"),
    Case(axis_out_of_range, r"axis 3 is out of range for rank 2 \(accepted -2..1\)"),
    Case(scalar_cannot_adopt, r"Python scalar 0.5 cannot adopt dtype i32 of the tensor operand"),
    Case(reshape_count, r"reshape: cannot reshape \(4, 4\) \(16 elements\) to \(3, 5\) \(15 elements\)"),
    Case(cast_unknown_dtype, r"cast: unknown dtype 'f33'; accepted: f64, f32"),
    Case(
        call_wrong_dtype,
        r"call of 'scale': argument 'x' must be \[\(T, 4\), f32\], got \[\(2, 4\), bf16\]",
    ),
    Case(call_wrong_arity, r"call of 'scale': takes 2 arguments \(x, g\), got 1"),
    Case(
        call_out_of_range,
        r"call of 'scale': argument 'x' has extent 40 for T, outside its range \[1, 33\)",
    ),
    Case(data_dependent_if, r"data-dependent control flow: the truth value .* use tf.where\(cond, a, b\)"),
    Case(data_dependent_loop, r"data-dependent control flow: iteration .* range\(x.shape\[0\]\)"),
    Case(while_loop, r"unsupported statement in @func 'f': a while loop; use a for loop over a compile-time"),
    Case(try_except, r"unsupported statement in @func 'f': try/except; use no exception handling"),
    Case(import_statement, r"unsupported statement in @func 'f': import; use an import at module level"),
    Case(global_statement, r"unsupported statement in @func 'f': global; use parameters and return values"),
    Case(raise_statement, r"unsupported statement in @func 'f': raise; use validate configuration outside"),
    Case(del_statement, r"unsupported statement in @func 'f': del; use rebinding a name"),
    Case(yield_statement, r"unsupported statement in @func 'f': yield; use return the results as a tuple"),
    Case(class_statement, r"unsupported statement in @func 'f': a class definition; use a class at module"),
    Case(unknown_dtype, r"Tensor: unknown dtype 'f33'; accepted: f64 f32 f16 bf16 fp8e4m3 fp8e5m2 i64"),
    Case(shape_not_tuple, r"Tensor: the shape must be a tuple of ints and DimVars, got int 4"),
    Case(
        bad_storage,
        r"Tensor: item 'shared' is not a storage name; accepted: 'host', 'gmem', 'smem', 'rmem'",
    ),
    Case(missing_annotation, r"@func 'f': parameter 'x' has no annotation; expected Tensor\[\(dims...\)"),
    Case(not_a_tensor_annotation, r"@func 'f': parameter 'x' has annotation <class 'int'>; expected Tensor"),
    Case(star_args, r"@func 'f': parameter \*xs: .* is not a plain positional parameter"),
    Case(
        return_mismatch,
        r"'f': result 0 has type \[\(4,\), f32\] but the return annotation declares \[\(4,\), bf16\]",
    ),
    Case(
        returns_none,
        r"@func 'f' must return a tensor of its body or a tuple of them; result 0 is NoneType",
    ),
    Case(dimvar_name_clash, r"two DimVars are named 'T', with ranges \[1, 33\) and \[1, 9\)"),
    Case(
        weight_type_conflict,
        r"module M: weight 'w' is \[\(4,\), f32\] in 'a' .* but \[\(4,\), bf16\] in 'b'",
    ),
    Case(unknown_entry, r"module M: entry 'main' is not one of its functions; accepted: a"),
    Case(duplicate_converter, r"a second converter for weight 'w' of 'f' \(the first is at .*:\d+\)"),
    Case(converter_unknown_weight, r"converter for 'gamma': 'f' has no weight of that name; accepted: w"),
    Case(
        converter_wrong_type,
        r"converter for f.w returns \[\(8, 4\), f32\]; it must return exactly .*\[\(4, 8\), f32\]",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.build.__name__ for c in CASES])
def test_refused_program_names_file_line_and_what_is_accepted(case: Case):
    with pytest.raises(DSLError) as info:
        case.build()
    err = info.value
    marker = case.build.__name__.replace("_", "-")
    assert err.where == SourceLoc(HERE, line_of(marker)), str(err)
    assert re.search(case.text, str(err)), str(err)
    assert str(err).endswith(f"({HERE}:{line_of(marker)})")


def test_the_table_covers_at_least_25_programs():
    assert len(CASES) >= 25
