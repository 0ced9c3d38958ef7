"""Tests of runtime/abi.py: ParamABI, EntryABI, param_abi_of, entry_abi_of (seed 000 §1.1.1)."""

import pytest

from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.hir import Function, Param
from tilefoundry.ir.types import TensorType
from tilefoundry.runtime import abi
from tilefoundry.runtime.abi import ABI_VERSION, ABIError, EntryABI, ParamABI, entry_abi_of, param_abi_of

T = DimVar("tokens", 1, 65)


def _mlp() -> Function:
    x = Param(TensorType((T, 16), "f32"), name="x")
    w = Param(TensorType((16, 32), "bf16", storage="gmem"), name="w", const=True)
    s = Param(TensorType((T, 32), "f32"), name="state")
    return Function("mlp", (x, w, s), body=(), results=(x,))


def test_1_1_1_param_abi_reuses_the_tensor_type():
    """seed 000 §1.1.1: dtype / shape / storage / layout all come from type; a dynamic dim is
    whatever type.shape carries (a DimVar), with no separate sentinel."""
    fn = _mlp()
    p = param_abi_of(fn.params[0])
    assert p == ParamABI("x", fn.params[0].type)
    assert p.type is fn.params[0].type
    assert p.type.shape[0] is T
    w = param_abi_of(fn.params[1])
    assert str(w.type.dtype) == "bf16" and w.type.storage.value == "gmem"


def test_1_1_1_entry_abi_slices_inputs_and_outputs():
    """seed 000 §1.1.1: params lists ALL parameters in declaration order; input_count is
    len(params) - output_count; input_params / output_params are the leading / trailing slices."""
    ps = tuple(ParamABI(n, TensorType((4,), "f32")) for n in ("a", "b", "out0", "out1"))
    e = EntryABI("k", ps, output_count=2)
    assert e.input_count == 2
    assert [p.name for p in e.input_params] == ["a", "b"]
    assert [p.name for p in e.output_params] == ["out0", "out1"]
    assert e.params == ps
    assert e.abi_version == ABI_VERSION
    assert str(e) == "k(a: [(4,), f32], b: [(4,), f32] -> out0: [(4,), f32], out1: [(4,), f32])"


def test_1_1_1_output_count_defaults_to_zero():
    """seed 000 §1.1.1: output_count: int = 0 — then every parameter is an input."""
    e = EntryABI("k", (ParamABI("a", TensorType((4,), "f32")),))
    assert e.output_count == 0 and e.input_count == 1 and e.output_params == ()


def test_1_1_1_entry_abi_of_one_param_per_declared_parameter():
    """seed 000 §1.1.1: entry_abi_of(fn) derives one ParamABI per declared parameter,
    output_count=0 (weights are parameters like any other)."""
    fn = _mlp()
    e = entry_abi_of(fn)
    assert e.name == "mlp"
    assert [p.name for p in e.params] == ["x", "w", "state"]
    assert [p.type for p in e.params] == [p.type for p in fn.params]
    assert e.output_count == 0 and e.input_params == e.params


def test_1_1_1_param_abi_of_is_the_single_derivation_site(monkeypatch):
    """seed 000 §1.1.1: param_abi_of(var) is the single ParamABI-derivation site, shared by
    entry_abi_of."""
    seen = []
    real = abi.param_abi_of

    def spy(var):
        seen.append(var.name)
        return real(var)

    monkeypatch.setattr(abi, "param_abi_of", spy)
    abi.entry_abi_of(_mlp())
    assert seen == ["x", "w", "state"]


def test_param_abi_of_refuses_a_tuple_type():
    p = Param((TensorType((4,), "f32"), TensorType((4,), "f32")), name="pair")
    with pytest.raises(ABIError, match=r"parameter 'pair': only a tensor crosses the ABI, got type"):
        param_abi_of(p)


def test_entry_abi_refuses_bad_output_count_and_duplicates():
    ps = (ParamABI("a", TensorType((4,), "f32")),)
    with pytest.raises(ABIError, match=r"entry 'k': output_count must lie in \[0, 1\], got 2"):
        EntryABI("k", ps, output_count=2)
    with pytest.raises(ABIError, match=r"entry 'k': parameter names must be unique, 'a' repeats"):
        EntryABI("k", ps + ps)


def test_entry_abi_of_takes_a_function():
    with pytest.raises(TypeError, match="entry_abi_of takes a HIR Function, got function"):
        entry_abi_of(lambda x: x)


def _cache_entry(**updates_kw):
    cache, new = TensorType((1, 2, 16, 8), "f32"), TensorType((1, 2, T, 8), "f32")
    ps = (ParamABI("k", cache), ParamABI("new", new), ParamABI("out0", cache), ParamABI("out1", new))
    return EntryABI("append", ps, output_count=2, **updates_kw)


def test_entry_abi_updates_print_compare_and_hash():
    """updates (output position -> input position) is part of the record: printed, compared, hashable."""
    e = _cache_entry(updates={0: 0})
    assert dict(e.updates) == {0: 0} and _cache_entry().updates == {}
    assert str(e) == (
        "append(k: [(1, 2, 16, 8), f32], new: [(1, 2, tokens, 8), f32] -> out0: [(1, 2, 16, 8), f32], "
        "out1: [(1, 2, tokens, 8), f32]; updates out0 <- k)"
    )
    assert e == _cache_entry(updates={0: 0}) and e != _cache_entry() and hash(e) == hash(_cache_entry())
    with pytest.raises(TypeError):
        e.updates[1] = 1  # type: ignore[index]


def test_entry_abi_refuses_updates_that_cannot_stand():
    with pytest.raises(ABIError, match=r"^entry 'append': updates maps output positions in \[0, 2\) to "
                       r"input positions in \[0, 2\), got 2 -> 0 \(append\)$"):
        _cache_entry(updates={2: 0})
    with pytest.raises(ABIError, match=r"^entry 'append': output 'out0' updates input 'new', so it must "
                       r"have its type \[\(1, 2, tokens, 8\), f32\], got \[\(1, 2, 16, 8\), f32\] "
                       r"\(append.out0\)$"):
        _cache_entry(updates={0: 1})
    with pytest.raises(ABIError, match=r"^entry 'append': input 'k' is updated by more than one output"):
        EntryABI(
            "append",
            tuple(ParamABI(n, TensorType((4,), "f32")) for n in ("k", "a", "b")),
            output_count=2,
            updates={0: 0, 1: 0},
        )
