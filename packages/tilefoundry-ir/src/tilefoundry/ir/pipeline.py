"""The compiler pipeline: HIR function -> Scheduled TileIR, one pass per line, in order.

Every pass takes IR and returns IR; its verb-phrase name is what a dump prints before the
text of its result, so a user sees what was decided and why:

    tilefoundry.compile(mod, target="cpu", dump=True)
    == inline calls ==          HIR with callee bodies in place
    == partition kernels ==     fusion groups around anchors
    == lower to tile ==         Candidate TileIR
    == hoist shared values ==   Candidate TileIR, shared producers named once
    == bind execution ==        worker / vector bindings with their reasons
    == select atoms ==          proved regions replaced by target atoms
    == permute stores ==        a permutation copy's writer storing at its destination
    == merge checks ==          index checks over unwritten inputs as one kernel, run first
    == group gemms ==           GEMM atoms sharing A merged into one call
    == fuse epilogues ==        a GEMM's element-wise consumer named its epilogue
    == update in place ==       outputs proved to be an input with one region rewritten
    == fuse prologues ==        the row kernel writing a GEMM's A named its prologue
    == chain gemms ==           the GEMM reading a GEMM's epilogue output named its chain
    == check budget ==          Scheduled TileIR, local scratch within capacity
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .hir import Function
from .lower import inline_calls, lower_to_tile
from .plan.atoms import select_atoms
from .plan.binding import bind_execution
from .plan.budget import check_budget
from .plan.checks import merge_checks
from .plan.gemm_chains import chain_gemms
from .plan.gemm_epilogues import fuse_epilogues
from .plan.gemm_groups import group_gemms
from .plan.gemm_prologues import fuse_prologues
from .plan.in_place import update_in_place
from .plan.partition import Partition, partition_kernels
from .plan.permuted_stores import permute_stores
from .printer import function_text
from .target.catalog import TargetCatalog
from .tile.printer import format_program
from .tile.stmt import Program
from .tile.values import hoist_shared_values

Dump = Callable[[str, str], None]


@dataclass(frozen=True)
class ScheduledModule:
    """What a target's code generator receives: one module's scheduled programs.

    Attributes:
        name: the module name (the generated translation unit is named after it).
        programs: one Scheduled TileIR program per function, in declaration order.
        catalog: the catalog the programs were planned against.
    """

    name: str
    programs: tuple[Program, ...]
    catalog: TargetCatalog


def _text(ir: object) -> str:
    if isinstance(ir, Function):
        return function_text(ir)
    if isinstance(ir, Program):
        return format_program(ir)
    assert isinstance(ir, Partition)
    lines = [f"partition of {ir.function.name}:"]
    for i, g in enumerate(ir.groups):
        ops = ", ".join(n.op.name for n in g.nodes)  # type: ignore[union-attr]
        lines.append(f"  group {i} [{g.kind}] writes {ops}" + "".join(f"\n    # {n}" for n in g.notes))
    return "\n".join(lines)


def schedule_function(
    fn: Function, catalog: TargetCatalog, options: Mapping[str, Any], dump: Dump | None = None
) -> Program:
    """Run every pass on one function; `dump(stage, text)` sees each stage's result."""

    def step(name: str, ir: Any) -> Any:
        if dump is not None:
            dump(name, _text(ir))
        return ir

    ir: Any = fn
    ir = step("inline calls", inline_calls(ir))
    ir = step("partition kernels", partition_kernels(ir))
    ir = step("lower to tile", lower_to_tile(ir))
    ir = step("hoist shared values", hoist_shared_values(ir))
    ir = step("bind execution", bind_execution(ir, catalog, options))
    ir = step("select atoms", select_atoms(ir, catalog, options))
    ir = step("permute stores", permute_stores(ir))
    ir = step("merge checks", merge_checks(ir))
    ir = step("group gemms", group_gemms(ir, catalog))
    ir = step("fuse epilogues", fuse_epilogues(ir, catalog, options))
    ir = step("update in place", update_in_place(ir))
    ir = step("fuse prologues", fuse_prologues(ir, catalog, options))
    ir = step("chain gemms", chain_gemms(ir, catalog, options))
    ir = step("check budget", check_budget(ir, catalog))
    return ir


def schedule_module(
    name: str,
    functions: Mapping[str, Function],
    catalog: TargetCatalog,
    options: Mapping[str, Any],
    dump: Dump | None = None,
) -> ScheduledModule:
    """Schedule every function of one module node."""
    programs = tuple(schedule_function(fn, catalog, options, dump) for fn in functions.values())
    return ScheduledModule(name, programs, catalog)
