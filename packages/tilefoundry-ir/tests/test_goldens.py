"""Parser goldens: each feature program's canonical text is checked in under goldens/.

Regenerate after an intended change with `TILEFOUNDRY_UPDATE_GOLDENS=1 uv run pytest <this file>`
and review the diff. Each program also evaluates like its plain-torch reference, so a golden
never records a program that computes the wrong thing.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from tilefoundry.ir.module import Module
from tilefoundry.ir.printer import module_text

GOLDENS = Path(__file__).parent / "goldens"
NAMES = sorted(p.stem for p in GOLDENS.glob("*.py"))


@functools.cache
def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"tilefoundry_golden_{name}", GOLDENS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    return program


def text_of(name: str) -> str:
    return module_text(Module.of(load(name).PROGRAM))


def test_there_are_at_least_six_feature_programs():
    assert {"norm", "mlp", "gqa_attention", "module_tree", "mesh_scopes", "dimvars"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_canonical_text_matches_the_golden(name: str):
    text, path = text_of(name), GOLDENS / f"{name}.txt"
    if os.environ.get("TILEFOUNDRY_UPDATE_GOLDENS"):
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("name", NAMES)
def test_golden_program_evaluates_like_torch(name: str):
    program = load(name)
    args = program.inputs(torch.Generator().manual_seed(NAMES.index(name)))
    got, want = program.run(*args), program.reference(*args)
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        tol = dict(atol=1e-2, rtol=1 / 128) if w.dtype == torch.bfloat16 else dict(atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(g, w, **tol)


_PRINT_ALL = """
import importlib.util, sys
from pathlib import Path
from tilefoundry.ir.module import Module
from tilefoundry.ir.printer import module_text
for name in sys.argv[2:]:
    spec = importlib.util.spec_from_file_location("g_" + name, Path(sys.argv[1]) / (name + ".py"))
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    sys.stdout.write(module_text(Module.of(program.PROGRAM)))
"""


def test_1_3_canonical_text_is_byte_identical_across_processes():
    """seed 000 §1.3: the cache key is canonical text: no object identity, hash or set order in it."""
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", _PRINT_ALL, str(GOLDENS), *NAMES], env=env, capture_output=True, check=True
        )
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0].decode() == "".join(text_of(n) for n in NAMES)
