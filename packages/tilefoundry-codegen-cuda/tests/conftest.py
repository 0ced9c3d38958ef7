"""Helpers of the cuda codegen tests: schedule a function against an arch's catalog."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tilefoundry.codegen.cuda.catalog import arch_catalog
from tilefoundry.codegen.cuda.emit import emit_module
from tilefoundry.ir.hir import Function
from tilefoundry.ir.pipeline import schedule_function
from tilefoundry.ir.tile.stmt import Program


def schedule(fn: Function, options: Mapping[str, Any] | None = None, arch: str = "sm_90a") -> Program:
    """Scheduled TileIR of `fn` for the cuda catalog of `arch`."""
    return schedule_function(fn, arch_catalog(arch), dict(options or {}))


def source(fn: Function, options: Mapping[str, Any] | None = None, arch: str = "sm_90a") -> str:
    """The CUDA translation unit of one function."""
    opts = dict(options or {})
    return emit_module(fn.name, (schedule(fn, opts, arch),), arch_catalog(arch), opts)


@pytest.fixture
def sched():
    return schedule


@pytest.fixture
def cuda_source():
    return source
