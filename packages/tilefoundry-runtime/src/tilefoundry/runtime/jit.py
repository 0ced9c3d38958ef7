"""jit / build / compile / twin: a semantic Module in, compiled code out (seed 000 §1.3, §1.4).

    lib = compile(mod, target="cpu", dump=True)   # LinkedModule; dump prints every stage
    f = build(mod, target="cpu")                  # CompiledModule bound to the entry
    f = jit(mod, target="cpu")                    # build, cached in-process by canonical text
    t = twin(sem, target="cpu").load(resource)    # every function compiled, weights from load

Two caches. `jit` keeps the RuntimeModule of each key, sha256(canonical module text + target +
canonical options text), in-process (`jit.cache_clear()`, `jit.cache_info()`). Every build also
goes through an on-disk cache ($TILEFOUNDRY_CACHE_DIR, default ~/.cache/tilefoundry) keyed by
that key plus the generated source, the target's catalog and its toolchain facts (compiler
version), so a second process reuses the library. A build happens in a private directory that
is renamed into place: concurrent builds of one key are safe and the first rename wins.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tilefoundry.ir.hir import Function
from tilefoundry.ir.module import Module
from tilefoundry.ir.pipeline import ScheduledModule, schedule_module
from tilefoundry.ir.printer import function_text, module_text
from tilefoundry.ir.target import get_target
from tilefoundry.ir.tile.stmt import Program
from tilefoundry.ir.types import TensorType

from .abi import ABI_VERSION, EntryABI, ParamABI
from .decorator import child_groups, runtime_module
from .loader import CompiledFunction, CompiledModule, LinkedModule, load_linked_module
from .module import RuntimeModule

DEFAULT_TARGET = "cuda"
Dump = bool | Callable[[str, str], None]


def cache_root() -> Path:
    """The on-disk build cache: $TILEFOUNDRY_CACHE_DIR, else ~/.cache/tilefoundry."""
    root = os.environ.get("TILEFOUNDRY_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "tilefoundry"


def options_text(options: Mapping[str, Any] | None) -> str:
    """Canonical text of compile options: sorted keys, JSON values."""
    return json.dumps(dict(sorted((options or {}).items())), sort_keys=True, default=str)


def cache_key(mod: Module, target: str, options: Mapping[str, Any] | None) -> str:
    """sha256 of canonical module text + target + canonical options text (seed 000 §1.3)."""
    text = "\n".join([module_text(mod), target, options_text(options)])
    return hashlib.sha256(text.encode()).hexdigest()


def _as_module(fn_or_mod: object, verb: str) -> Module:
    if isinstance(fn_or_mod, Module):
        return fn_or_mod
    if isinstance(fn_or_mod, Function):
        return Module.of(fn_or_mod)
    raise TypeError(
        f"{verb} takes a TileFoundry Function or Module, got {type(fn_or_mod).__name__} {fn_or_mod!r}; "
        f"decorate a Python function with @func first"
    )


def _dumper(dump: Dump) -> Callable[[str, str], None] | None:
    if dump is True:
        return lambda stage, text: print(f"== {stage} ==\n{text}\n", file=sys.stdout)
    return dump or None


class _Typed:
    """A name and a TensorType, as `param_abi_of`'s callers pass them."""

    def __init__(self, name: str, t: TensorType):
        self.name, self.type = name, t


def entry_abi_of_program(program: Program) -> EntryABI:
    """The compiled entry's EntryABI: the program's parameter buffers, inputs then outputs, and the
    outputs it updates in place."""
    params = tuple(ParamABI(b.name, TensorType(b.shape, b.dtype)) for b in program.params)
    return EntryABI(program.name, params, program.output_count, ABI_VERSION, program.updates)


def _library(
    scheduled: ScheduledModule,
    key: str,
    target: str,
    options: Mapping[str, Any],
    dump: Callable[[str, str], None] | None,
) -> Path:
    tgt = get_target(target)
    sources = tgt.codegen(scheduled, options)
    if dump is not None:
        for name, text in sources.files.items():
            dump(f"generate source ({name})", text)
    facts = json.dumps(tgt.availability.facts, sort_keys=True)
    blob = "\n".join([key, scheduled.catalog.model_dump_json(), facts, *sources.files.values()])
    build_dir = cache_root() / "builds" / target / hashlib.sha256(blob.encode()).hexdigest()[:32]
    lib = build_dir / "library"
    if lib.is_file():
        return Path(os.path.realpath(lib))
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=build_dir.parent))
    try:
        built = tgt.build(sources, options, tmp)
        (tmp / "library").symlink_to(built.path.name)
        try:
            os.rename(tmp, build_dir)
        except OSError:
            if not lib.is_file():  # the other builder's rename won only if its library is there
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Path(os.path.realpath(lib))


def compile(
    fn_or_mod: Function | Module,
    *,
    target: str = DEFAULT_TARGET,
    options: Mapping[str, Any] | None = None,
    dump: Dump = False,
) -> LinkedModule:
    """Compile the functions of a module node into one library (no in-process cache).

    Args:
        options: compile options, each declared by the planner or by the target (the table in
            docs/compiling.md; `get_target(target).accepted_options`).
        dump: True prints each pipeline stage (HIR, partition, Candidate TileIR, plan decisions,
            Scheduled TileIR, source); a callable receives (stage, text) instead.

    Raises:
        TypeError: fn_or_mod is not a Function or Module (a raw Python function: use @func).
        TargetUnavailable: the target is not installed (the installed ones are named) or cannot
            compile here.
        PlanError: an option neither the planner nor the target declares, or a value its
            declaration does not accept (checked first, before any work); a realization the
            author requested cannot be honored.
    """
    mod = _as_module(fn_or_mod, "compile")
    options = dict(options or {})
    tgt = get_target(target)
    tgt.check_options(options)
    tgt.require()
    catalog = tgt.catalog_for(options)
    say = _dumper(dump)
    scheduled = schedule_module(mod.name.replace(".", "_"), mod.functions, catalog, options, say)
    library = _library(scheduled, cache_key(mod, target, options), target, options, say)
    entries = {p.name: entry_abi_of_program(p) for p in scheduled.programs}
    if not entries:
        raise TypeError(f"compile: module {mod.name!r} has no functions to compile")
    entry = entries[mod.entry] if mod.entry in entries else next(iter(entries.values()))
    tuples = frozenset(n for n, f in mod.functions.items() if f.returns_tuple)
    return LinkedModule(library, entries, entry, target, tuples)


def build(
    fn_or_mod: Function | Module, *, target: str = DEFAULT_TARGET, options: Mapping[str, Any] | None = None
) -> CompiledModule:
    """Compile, load, and bind the entry: a CompiledModule (no in-process cache)."""
    return load_linked_module(compile(_as_module(fn_or_mod, "build"), target=target, options=options))


_CACHE: dict[str, RuntimeModule] = {}


def jit(
    fn_or_mod: Function | Module, *, target: str = DEFAULT_TARGET, options: Mapping[str, Any] | None = None
) -> RuntimeModule:
    """Compile `fn_or_mod` (cached in-process) and return the callable RuntimeModule.

    A bare Function becomes a single-function Module declaring no execution context.

    Raises:
        TypeError: a raw Python function or any other non-IR object (use @func first).
        PlanError: an undeclared option or a refused value, as `compile` says.
    """
    mod = _as_module(fn_or_mod, "jit")
    key = cache_key(mod, target, options)
    if key not in _CACHE:
        _CACHE[key] = build(mod, target=target, options=options)
    return _CACHE[key]


def _cache_clear() -> None:
    _CACHE.clear()


def _cache_info() -> dict[str, int]:
    return {"size": len(_CACHE)}


jit.cache_clear = _cache_clear  # type: ignore[attr-defined]
jit.cache_info = _cache_info  # type: ignore[attr-defined]


def _functions_key(node: Module, target: str, options: Mapping[str, Any] | None) -> str:
    """What a node's library depends on: its functions' text, not the node's name or place."""
    texts = [function_text(fn) for fn in node.functions.values()]
    return hashlib.sha256("\n".join([*texts, target, options_text(options)]).encode()).hexdigest()


def _distinct_nodes(node: Module, target: str, options: Mapping[str, Any] | None) -> dict[str, Module]:
    """Each node of the tree that has functions, once per functions key (first in tree order)."""
    nodes: dict[str, Module] = {}
    if node.functions:
        nodes[_functions_key(node, target, options)] = node
    for c in node.children:
        for key, n in _distinct_nodes(c, target, options).items():
            nodes.setdefault(key, n)
    return nodes


def _compile_nodes(
    nodes: Mapping[str, Module], target: str, options: Mapping[str, Any] | None
) -> dict[str, LinkedModule]:
    """Each node compiled once, side by side: a model's root and its layer node are separate
    libraries whose compilers (nvcc: minutes each) need not wait for one another."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(nodes), os.cpu_count() or 1))) as pool:
        futures = {k: pool.submit(compile, node, target=target, options=options) for k, node in nodes.items()}
        return {k: future.result() for k, future in futures.items()}


def _twin_class(
    node: Module, target: str, options: Mapping[str, Any] | None, built: Mapping[str, LinkedModule]
) -> type[RuntimeModule]:
    ns: dict[str, Any] = {}
    if node.functions:
        # NOTE: the 28 decoder layers of a model are one library, compiled once (_distinct_nodes).
        linked = built[_functions_key(node, target, options)]
        for name, fn in node.functions.items():
            ns[name] = CompiledFunction(load_linked_module(linked, name), fn.returns_tuple)
    for group, children in child_groups(node).items():
        classes = tuple(_twin_class(c, target, options, built) for c in children)
        ns[group] = classes if children[0].name != group else classes[0]
    return runtime_module(node)(builtins.type(f"Compiled_{node.name.replace('.', '_')}", (), ns))


def twin(
    sem: Module, *, target: str = DEFAULT_TARGET, options: Mapping[str, Any] | None = None
) -> RuntimeModule:
    """A runtime twin of `sem` whose every function is compiled for `target`.

    Load it like any twin (`twin(sem, target="cpu").load(resource)`) and check it against the
    semantic side with `check`. Each module node compiles to one library, the distinct ones side by
    side in threads (a model's root and its layers: two nvcc runs at once); identical nodes share
    one build.

    Raises:
        PlanError: an undeclared option or a refused value, before anything compiles.
    """
    mod = _as_module(sem, "twin")
    # NOTE: checked here too, since a tree of modules without functions compiles nothing.
    get_target(target).check_options(options or {})
    built = _compile_nodes(_distinct_nodes(mod, target, options), target, options)
    return _twin_class(mod, target, options, built)()
