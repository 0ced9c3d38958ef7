"""CPU vector mapping (seed 003): the innermost independent axis really becomes vector packs with a
scalar tail, in the machine code, and the tail is exact for extents that are not multiples of the
vector width."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import torch

import tilefoundry
from tilefoundry.dsl import DimVar, Tensor, f32, func, module, tf
from tilefoundry.ir.target import get_target

N = DimVar("N", 1, 300)


pytestmark = pytest.mark.usefixtures("fresh_build_cache")


@module
class Lanes:
    @func
    def axpb(x: Tensor[(4, N), f32], y: Tensor[(4, N), f32]):
        return x * 1.5 + y

    @func
    def rows(x: Tensor[(3, N), f32]):
        return tf.sum(x, -1), tf.max(x, -1), tf.softmax(x, -1)


def _widest_lanes() -> int:
    return max(a.lanes for a in get_target("cpu").catalog.atoms_of("vector") if a.dtype == "f32")


def _disassembly(library: str, symbol_part: str) -> str:
    """The instructions of the first function in `library` whose name contains `symbol_part`."""
    text = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", "-C", library], capture_output=True, text=True, check=True
    ).stdout
    match = re.search(rf"^[0-9a-f]+ <[^>]*{symbol_part}[^>]*>:\n(.*?)\n\n", text, re.S | re.M)
    assert match, f"no function containing {symbol_part} in {library}"
    return match.group(1)


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) is not installed")
def test_vectorization_innermost_axis_becomes_vector_packs_with_a_scalar_tail() -> None:
    """seed 003, Vectorization: the pointwise kernel's machine code holds packed multiply-adds on
    vector registers of the catalog's width (packs) and scalar ones (the tail)."""
    lib = str(tilefoundry.compile(Lanes, target="cpu").library)
    code = _disassembly(lib, "axpb__k0")
    register = {16: "zmm", 8: "ymm", 4: "xmm"}[_widest_lanes()]
    packed = re.findall(rf"\bv(?:fmadd\d*|mul|add)ps\b[^\n]*%{register}", code)
    scalar = re.findall(r"\bv(?:fmadd\d*|mul|add)ss\b", code)
    assert packed, f"no packed f32 arithmetic on {register} in the kernel:\n{code}"
    assert scalar, f"no scalar tail arithmetic in the kernel:\n{code}"


@pytest.mark.parametrize("n", [1, 15, 16, 17, 63, 64, 65, 100, 299])
def test_vectorization_scalar_tail_handles_extents_off_the_vector_width(n: int) -> None:
    """seed 003, Vectorization: extents below, at and past multiples of the width (16 lanes, and
    the 4 x 16 partial carries of a reduction) give the evaluator's values; outputs are poisoned."""
    linked = tilefoundry.compile(Lanes, target="cpu")
    from tilefoundry.runtime.loader import CompiledFunction, load_linked_module

    gen = torch.Generator().manual_seed(n)
    x, y = torch.randn(4, n, generator=gen), torch.randn(4, n, generator=gen)
    axpb = CompiledFunction(load_linked_module(linked, "axpb"), False)
    out = torch.full((4, n), float("nan"))
    axpb(x, y, out)
    torch.testing.assert_close(out, Lanes.functions["axpb"](x, y), atol=0, rtol=0)
    rows = CompiledFunction(load_linked_module(linked, "rows"), True)
    outs = (torch.full((3,), float("nan")), torch.full((3,), float("nan")), torch.full((3, n), float("nan")))
    rows(x[:3].contiguous(), *outs)
    for got, want in zip(outs, Lanes.functions["rows"](x[:3].contiguous()), strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
