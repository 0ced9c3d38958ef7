"""Scheduled TileIR -> CUDA C++: one translation unit per module, one tvm-ffi entry per function.

The source includes only <tilefoundry/runtime.h> (built with -DTILEFOUNDRY_TARGET_CUDA). Each
kernel is realized (realize.py), consecutive independent ones are batched into one launch
(batching.py), emitted as __global__ functions (kernels.py), and launched by the function's
host entry with the geometry `_derive_launch_config` derived here (a batch: per member), on the
caller's stream (`TVMFFIEnvGetStream`: torch's current stream, so torch streams and CUDA-graph
capture see the work). The host entry checks every argument before any launch:

    void rms_entry(TensorView t_x, TensorView t_g, TensorView t_out0) {
      const Entry e{"rms"};
      e.tensor(t_x, "x", dtype<bf16>(), 2, "(T, 64) bf16");     // CUDA device, dtype, rank, contiguity
      const int64_t d_T = e.bind(t_x, "x", 0, "T", 1, 65);       // DimVar range
      ...
      { const int64_t work_ = d_T;                               // empty domain: no launch
        if (work_ > 0) { launch_kernel(k, grid_blocks(work_, 4), 128, 0, stream_, ...); e.launched("k0"); } }
    }

Kernels open with `pdl_begin()` and launch through `launch_kernel` (launch.cuh): on Hopper each
may start launching while its predecessor finishes (programmatic dependent launch).
    TVM_FFI_DLL_EXPORT_TYPED_FUNC(rms, rms_entry);
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tilefoundry.ir.dims import dim_vars, format_dim
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.target import Sources, TargetCatalog
from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype, entry_checks, shape_text
from tilefoundry.ir.tile.expr import floordiv, maximum
from tilefoundry.ir.tile.stmt import AtomCall, Buffer, Program
from tilefoundry.runtime.headers import runtime_digest

from . import atoms, attention_atom, gemm_atom  # the atom families register themselves
from .batching import MAX_CTAS, Batch, Launch, batch_args, emit_batch, plan_batches
from .gemm_atom import epilogue_flag
from .gemm_prologue import gates, staged_flag
from .kernels import dim_names, emit_kernels, in_place_args, kernel_args, work
from .options import GEMM_CLUSTER, GEMM_SWIZZLE, GEMM_TILE
from .realize import Realization, realize_kernel

NAME = "cuda"


@dataclass(frozen=True)
class LaunchConfig:
    """The geometry of one launch, as the host entry computes it.

    Attributes:
        work: C++ of the instance count (packs for a packed grid); 0 means no launch.
        threads: threads per CTA.
        per_block: instances one CTA covers per grid-stride step.
        smem_bytes: dynamic shared memory (static shared memory is in the kernel).
        ctas: a fixed CTA count (a placed kernel's Mesh), else None: enough CTAs for the work.
    """

    work: str
    threads: int
    per_block: int
    smem_bytes: int = 0
    ctas: int | None = None

    @property
    def grid(self) -> str:
        return str(self.ctas) if self.ctas is not None else f"grid_blocks(work_, {self.per_block})"


def _derive_launch_config(r: Realization, cx: CExpr, packed: bool = False) -> LaunchConfig:
    """Launch geometry of a realization: instances from its chain, CTAs of `r.threads`.

    A grid or check runs one instance per thread (a packed grid `thread_packs` packs a thread); rows run
    `threads / group` instances per CTA. Kernels stride over instances, so the grid is capped
    at the hardware limit and any extent is covered. A placed kernel launches its Mesh as given.
    """
    extents = [c.extent for c in r.chain]
    if r.in_place is not None:  # its flag set, the axis loop counts only the region
        extents = r.in_place.extents(extents)
    if r.placed is not None:
        return LaunchConfig(cx(work(extents)), r.threads, r.threads, ctas=r.placed.ctas)
    per_block = r.threads // r.group if r.kind == "rows" else r.threads
    if packed and r.packs is not None:  # a packed grid's thread takes its packs; packed rows keep their rows
        extents[-1] = floordiv(extents[-1], r.packs.lanes)
        per_block *= r.thread_packs
    return LaunchConfig(cx(work(extents)), r.threads, per_block)


def _launch(program: Program, r: Realization, cx: CExpr) -> list[str]:
    """Host lines that launch one realization, skipping an empty domain."""
    if r.kind == "atom":
        return atoms.launch(program, r, cx)
    cfg = _check_launch_config(r, cx) if r.kind == "check" else _derive_launch_config(r, cx)
    args = ", ".join([*kernel_args(program, r.kernel), *in_place_args(r)])
    kname = r.kernel.name
    out = ["{", f"  const int64_t work_ = {cfg.work};", "  if (work_ > 0) {"]
    if r.kind == "check":
        out += [
            "    IndexCheck check_(e, stream_);",
            f"    {_call(r.name, cfg, args + ', check_.verdict()')}",
            f'    e.launched("{kname}");',
            f"    {_raise(r)}",
        ]
    elif r.packed_buffers:
        vcfg = _derive_launch_config(r, cx, packed=True)
        ptrs = ", ".join(cname(b) for b in r.packed_buffers)
        work = [f"      const int64_t work_ = {vcfg.work};"] if vcfg.work != cfg.work else []
        out += [
            f"    if (aligned16({{{ptrs}}})) {{",
            *work,
            f"      {_call(r.name + r.variant, vcfg, args)}",
            "    } else {",
            f"      {_call(r.name, cfg, args)}",
            "    }",
            f'    e.launched("{kname}");',
        ]
    else:
        out += [f"    {_call(r.name, cfg, args)}", f'    e.launched("{kname}");']
    return [*out, "  }", "}"]


def _raise(check: Realization) -> str:
    """The host line reading an index check's verdict, raising the violated check's message."""
    msgs = ", ".join('"' + m.replace("\\", "\\\\").replace('"', '\\"') + '"' for m in check.messages)
    return f"check_.raise_if_violated({{{msgs}}});"


def _launch_batch(program: Program, b: Batch, cx: CExpr) -> list[str]:
    """Host lines that launch a batch: each member's CTA range sized by its own work (batching.py);
    an index check among them has its verdict cleared before and read after."""
    args = ", ".join(batch_args(program, b))
    n = len(b.members)
    cap = MAX_CTAS // n

    def variant(name: str, packed: bool) -> list[str]:
        out = []
        for i, r in enumerate(b.members):
            cfg = _check_launch_config(r, cx) if r.kind == "check" else _derive_launch_config(r, cx, packed)
            ctas = f"(work{i}_ > 0 ? min_nan<int64_t>(grid_blocks(work{i}_, {cfg.per_block}), {cap}) : 0)"
            start = f"end{i - 1}_ + " if i else ""
            out += [f"const int64_t work{i}_ = {cfg.work};", f"const int64_t end{i}_ = {start}{ctas};"]
        call = f"launch_kernel({name}, static_cast<unsigned>(end{n - 1}_), {b.threads}, 0, stream_, {args});"
        return [*out, f"if (end{n - 1}_ > 0) {{", f"  {call}", f'  e.launched("{b.label}");', "}"]

    out = [f"{{  // {b.name}: {b.label} in one launch"]
    out += ["  IndexCheck check_(e, stream_);"] if b.check is not None else []
    if b.packed_buffers:
        ptrs = ", ".join(cname(x) for x in b.packed_buffers)
        out += [f"  if (aligned16({{{ptrs}}})) {{", *("    " + x for x in variant(f"{b.name}_packed", True))]
        out += ["  } else {", *("    " + x for x in variant(b.name, False)), "  }"]
    else:
        out += ["  " + x for x in variant(b.name, False)]
    out += [f"  {_raise(b.check)}"] if b.check is not None else []
    return [*out, "}"]


def _check_launch_config(r: Realization, cx: CExpr) -> LaunchConfig:
    """One launch for every nest of a check: threads for the largest, each nest striding over its own."""
    works = dict.fromkeys(work([c.extent for c in chain]) for chain, _ in r.nests)
    return LaunchConfig(cx(functools.reduce(maximum, works)), r.threads, r.threads)


def _call(name: str, cfg: LaunchConfig, args: str) -> str:
    """One launch on the caller's stream, overlapping its predecessor where PDL works (launch.cuh)."""
    return f"launch_kernel({name}, {cfg.grid}, {cfg.threads}, {cfg.smem_bytes}, stream_, {args});"


def _conditional(program: Program) -> set[int]:
    """Ids of the kernels launched only when their GEMM atom does not apply them (its epilogue or
    prologue)."""
    atoms_ = [k.body for k in program.kernels if isinstance(k.body, AtomCall)]
    return {id(k) for a in atoms_ for k in (a.epilogue, a.prologue) if k is not None}


def _entry(program: Program, launches: list[Launch]) -> list[str]:
    cx = CExpr(dim_names(program))
    args = ", ".join(f"tvm::ffi::TensorView t_{b.name}" for b in program.params)
    out = [f"void {program.name}_entry({args}) {{", f'  const Entry e{{"{program.name}"}};']
    out += entry_checks(program, cx, "t_")
    out += ["  const DeviceGuard guard_(e.device());", "  cudaStream_t stream_ = e.stream();"]
    for b in program.params:
        qual = "const " if b.role == "input" else ""
        out.append(f"  {qual}{ctype(b.dtype)}* {cname(b)} = data<{ctype(b.dtype)}>(t_{b.name});")
    for t in program.temps:
        count = " * ".join(cx.dim(d) for d in t.shape) or "1"
        out.append(f"  DeviceScratch<{ctype(t.dtype)}> {cname(t)}_mem(e, {count}, stream_);  // {_decl(t)}")
        out.append(f"  {ctype(t.dtype)}* {cname(t)} = {cname(t)}_mem.ptr;")
    for r in launches:  # every output of an in-place kernel passed as its very source?
        for m in r.members if isinstance(r, Batch) else (r,):
            if m.in_place is not None:
                out.append(f"  {m.in_place.host_flag()}")
    epilogues = {id(k.body.epilogue) for k in program.kernels if isinstance(k.body, AtomCall)}
    prologues = gates(program, [r for r in launches if isinstance(r, Realization) and r.kind == "atom"], cx)
    for r in launches:
        if isinstance(r, Batch):
            out += ["  " + x for x in _launch_batch(program, r, cx)]
            continue
        lines = _launch(program, r, cx)
        if id(r.kernel) in epilogues:  # runs only where its GEMM atom did not apply it
            lines = [f"if (!{epilogue_flag(r.kernel)}) {{", *("  " + x for x in lines), "}"]
        if id(r.kernel) in prologues:  # runs only where its GEMM atom will not compute A itself
            flag = staged_flag(r.kernel)
            lines = [*prologues[id(r.kernel)], f"if (!{flag}) {{", *("  " + x for x in lines), "}"]
        out += ["  " + x for x in lines]
    return [*out, "}", ""]


def _decl(b: Buffer) -> str:
    return f"{shape_text(b.shape)} {b.dtype}"


def emit_module(
    name: str, programs: tuple[Program, ...], catalog: TargetCatalog, options: Mapping[str, Any]
) -> str:
    """The main CUDA translation unit of a module's scheduled programs."""
    return module_sources(name, programs, catalog, options)[f"{name}.cu"]


def module_sources(
    name: str, programs: tuple[Program, ...], catalog: TargetCatalog, options: Mapping[str, Any]
) -> dict[str, str]:
    """The CUDA sources of a module's scheduled programs, main first: `<name>.cu` with every kernel
    and entry, and where it runs the sm90 GEMM collective, `<name>_sm90_<slot>.cu` for each
    collective it may take (gemm_sm90.cuh's with_sm90_gemm slots), which the builder compiles side by
    side (a CUTLASS collective costs ~20-30 s of nvcc; one source would build them in turn)."""
    for p in programs:
        for b in p.params:
            for d in b.shape:
                if dim_vars(d) - {x.var for x in p.dims}:
                    raise PlanError(
                        f"cuda: {p.name}: extent {format_dim(d)} of {b.name} has an unbound DimVar"
                    )
    launches = {
        p.name: plan_batches(
            p,
            [r for k in p.kernels for r in realize_kernel(p.name, k, catalog, options)],
            catalog,
            options,
            _conditional(p),
        )
        for p in programs
    }
    body: list[str] = []
    for p in programs:
        for r in launches[p.name]:
            if isinstance(r, Batch):
                body += emit_batch(p, r)
            else:
                body += atoms.emit_device(p, r) if r.kind == "atom" else emit_kernels(p, r)
    for p in programs:
        body += _entry(p, launches[p.name])
    called = [r for rs in launches.values() for r in rs if isinstance(r, Realization) and r.kind == "atom"]
    features = sorted({f for r in called for f in atoms.features(r)})
    # The GEMM options are read (and checked) whether or not a GEMM takes them.
    tile, schedule = gemm_tile(options), _sm90_schedule_defines(options)
    defines = [f"#define {f} 1" for f in features]
    sm90 = gemm_atom.SM90_GEMM_MACRO in features
    variants: list[str] = []
    # The collectives' own shape (a fixed tile, the cluster, the swizzle): the slot sources carry
    # these alone, so a slot's source reads the same in every module that reaches it.
    shape = [*_sm90_tile_size_defines(tile), *schedule]
    if sm90:
        variants = [*_sm90_variant_defines(tile, GEMM_CLUSTER.read(options) == "auto", called), *shape]
        defines += [*variants, "#define TILEFOUNDRY_SM90_SPLIT 1"]
    defines += attention_atom.attention_defines(options, called, catalog)
    kinds = gemm_atom.sm90_operand_types(called) if sm90 else []
    slots = gemm_atom.sm90_slots(variants) if sm90 else []
    # The slot sources instantiate the collectives; declaring them here keeps this source (and a
    # translation unit the builder makes of it and some slot sources) from instantiating the rest.
    extern = [line for slot in slots for line in _sm90_instantiations("extern template", slot, kinds)]
    lines = [
        f"// Generated by tilefoundry codegen-cuda for module {name} ({catalog.arch}, runtime headers "
        f"{runtime_digest()}). Do not edit.",
        *defines,
        "#include <tilefoundry/runtime.h>",
        *extern,
        "",
        "namespace {",
        "using namespace tilefoundry::atoms;",
        "",
        *body,
        "}  // namespace",
        "",
    ]
    lines += [f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({p.name}, {p.name}_entry);" for p in programs]
    files = {f"{name}.cu": "\n".join([*lines, ""])}
    for slot in slots:
        files[f"{name}_sm90_{slot}.cu"] = _sm90_slot_source(slot, shape, kinds)
    return files


def _sm90_instantiations(prefix: str, slot: int, kinds: list[tuple[str, bool]]) -> list[str]:
    """`<prefix> struct Sm90Ops<...>;` for slot `slot`'s collective (gemm_sm90.cuh's
    Sm90SlotCollective) and each operand kind that slot serves."""
    detail = "tilefoundry::atoms::detail"
    lines = []
    for t, b_k_major in kinds:
        if slot in gemm_atom.SM90_B_K_MAJOR_SLOTS and not b_k_major:
            continue
        element = f"tilefoundry::atoms::{t}"
        collective = f"{detail}::Sm90SlotCollective<{slot}, {element}, {str(b_k_major).lower()}>::type"
        lines.append(f"{prefix} struct {detail}::Sm90Ops<{collective}, {element}>;")
    return lines


def _sm90_slot_source(slot: int, shape: list[str], kinds: list[tuple[str, bool]]) -> str:
    """The source that builds slot `slot`'s collective for each operand kind it serves. It names no
    module and carries only the macros that shape the collective (`shape`: a fixed tile, the
    cluster, the swizzle); the variant macros pick slots in the main source and change no
    collective (Sm90SlotCollective), so modules reaching the same slot share its object (build.py)."""
    return "\n".join(
        [
            f"// Generated by tilefoundry codegen-cuda: the sm90 GEMM collective of slot {slot} "
            f"(atoms/gemm_sm90.cuh), built beside a module's main source (runtime headers "
            f"{runtime_digest()}). Do not edit.",
            f"#define {gemm_atom.SM90_GEMM_MACRO} 1",
            *shape,
            "#include <tilefoundry/runtime/cuda/atoms/scalar.cuh>",
            "#include <tilefoundry/runtime/cuda/atoms/gemm_sm90.cuh>",
            "#include <tilefoundry/runtime/cuda/atoms/gemm_sm90_ops.cuh>",
            "",
            *_sm90_instantiations("template", slot, kinds),
            "",
        ]
    )


def gemm_tile(options: Mapping[str, Any]) -> tuple[int, int] | None:
    """The sm90 GEMM collective's CTA tile (M, N) that option "gemm_tile" fixes; None for "auto".

    Raises:
        PlanError: a value that is not one of the declared tiles, naming them.
    """
    value = GEMM_TILE.read(options)
    if value == "auto":
        return None
    m, n = value.split("x")
    return int(m), int(n)


def _sm90_schedule_defines(options: Mapping[str, Any]) -> list[str]:
    """The macros of options gemm_cluster and gemm_swizzle (atoms/gemm_sm90.cuh) where they differ
    from CUTLASS's defaults (a 1 x 1 cluster, no swizzle); gemm_cluster "auto" sets no module-wide
    cluster (the wide tile's own comes with its variant, _sm90_variant_defines).

    Raises:
        PlanError: a value that is not one of an option's declared values, naming them.
    """
    cluster = GEMM_CLUSTER.read(options)
    m, n = (1, 1) if cluster == "auto" else (int(extent) for extent in cluster.split("x"))
    swizzle = GEMM_SWIZZLE.read(options)
    defines = []
    if (m, n) != (1, 1):
        defines += [f"#define TILEFOUNDRY_SM90_CLUSTER_M {m}", f"#define TILEFOUNDRY_SM90_CLUSTER_N {n}"]
    if swizzle != 1:
        defines.append(f"#define TILEFOUNDRY_SM90_SWIZZLE {swizzle}")
    return defines


def _sm90_tile_size_defines(tile: tuple[int, int] | None) -> list[str]:
    """The macros of a fixed tile other than the collective's own 128 x 128 (atoms/gemm_sm90.cuh)."""
    if tile is None or tile == (128, 128):
        return []
    return [f"#define TILEFOUNDRY_SM90_TILE_{axis} {n}" for axis, n in zip("MN", tile, strict=True)]


def _sm90_variant_defines(
    tile: tuple[int, int] | None, auto_cluster: bool, called: list[Realization]
) -> list[str]:
    """The macros that add the collective's variants under gemm_tile "auto" (atoms/gemm_sm90.cuh):
    the 128 x 256 (as a 2 x 1 cluster under `auto_cluster`), 64 x 64, 64 x 96, stream-K and swapped
    (64 x 16, as 4 x 1 clusters or alone by N, and 64 x 32) variants where a GEMM may take them
    (each is one more CUTLASS instantiation to compile); none under a fixed tile."""
    if tile is not None:
        return []
    defines = []
    if auto_cluster:
        if any(gemm_atom.may_take_wide_pair(r) for r in called):
            defines.append("#define TILEFOUNDRY_SM90_WIDE_PAIR 1")
    elif any(gemm_atom.may_take_wide_tile(r) for r in called):
        defines.append("#define TILEFOUNDRY_SM90_WIDE_TILE 1")
    if any(gemm_atom.may_take_small_tile(r) for r in called):
        defines.append("#define TILEFOUNDRY_SM90_SMALL_TILE 1")
    if any(gemm_atom.may_take_small_wide(r) for r in called):
        defines.append("#define TILEFOUNDRY_SM90_SMALL_WIDE 1")
    if any(gemm_atom.may_take_stream_k(r) for r in called):
        defines.append("#define TILEFOUNDRY_SM90_STREAM_K 1")
    swapped = set().union(*(gemm_atom.swapped_forms(r) for r in called))
    if swapped:
        defines.append("#define TILEFOUNDRY_SM90_SWAPPED 1")
        if len(swapped) == 1:
            defines.append(f"#define TILEFOUNDRY_SM90_SWAPPED_{swapped.pop().upper()}_ONLY 1")
    if any(gemm_atom.may_take_swapped_mid(r) for r in called):
        defines.append("#define TILEFOUNDRY_SM90_SWAPPED_MID 1")
    return defines


def codegen(scheduled: Any, options: Mapping[str, Any]) -> Sources:
    """The `tilefoundry_codegen` hook body: the module's `.cu` sources (module_sources), main first."""
    files = module_sources(scheduled.name, scheduled.programs, scheduled.catalog, options)
    return Sources(target=NAME, files=files, entries=tuple(p.name for p in scheduled.programs))
