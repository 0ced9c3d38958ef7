"""Scheduled TileIR -> C++ for g++: one translation unit per module, one tvm-ffi entry per function.

The source includes only <tilefoundry/runtime.h> (built with -DTILEFOUNDRY_TARGET_CPU). Each
kernel is a static function over raw `__restrict__` pointers (outputs are checked noalias at the
entry) and the module's dynamic extents. Bindings become:

    worker  ->  #pragma omp parallel for collapse(n) schedule(dynamic, ~8 chunks per worker)
                if(work >= threshold)
    vector  ->  packs of W lanes (`#pragma omp simd` over a lane loop, scalars lane-private),
                then a scalar tail for the remainder
    vector reduce -> 4W, then W lane-private partial carries folded into the carry, then the tail
    atom    ->  one call into the runtime (`atoms.py`), after re-checking its proof

    void rms_entry(TensorView x, TensorView g, TensorView out0) { checks; kernels in order }
    TVM_FFI_DLL_EXPORT_TYPED_FUNC(rms, rms_entry);
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tilefoundry.ir.dims import dim_vars, format_dim
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.plan.in_place import region_nest
from tilefoundry.ir.target import Sources
from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype, entry_checks, literal, shape_text
from tilefoundry.ir.tile.expr import Const, Expr, Load, Var, free_vars
from tilefoundry.ir.tile.stmt import (
    Alloc,
    Assign,
    AtomCall,
    Check,
    For,
    If,
    Kernel,
    Let,
    Program,
    Seq,
    Stmt,
    Store,
    stmt_exprs,
    walk_stmts,
)
from tilefoundry.runtime.headers import runtime_digest

from .atoms import atom_lines
from .options import HUGE_PAGES
from .reuse import reuse_sum_terms

NAME = "cpu"
# Below this many iterations of a worker region, threads cost more than they save.
PARALLEL_WORK = 32768
# Independent partial carries per vector lane of a reassociable reduction, and the static extent
# (in vectors) below which one per lane is faster (a 128-long attention dot product: 4.0 ms with
# one, 6.1 with four, on one core here; a 4096-long row: 1.5x faster with four).
REDUCE_UNROLL = 4
REDUCE_UNROLL_MIN_VECTORS = 16
# Kernel-local scratch up to this size lives on the worker's stack.
STACK_SCRATCH_BYTES = 32768
_IDENTITY = {"add": 0.0, "max": float("-inf"), "min": float("inf")}
_COMBINE = {"add": "({} + {})", "max": "max_nan({}, {})", "min": "min_nan({}, {})"}


def _lines(items: list[str], indent: int) -> list[str]:
    return ["  " * indent + x for x in items]


class _Body:
    """Emits one kernel's statements."""

    def __init__(self, program: Program, kernel: Kernel):
        self.dims = {b.var.name: f"d_{b.var.name}" for b in program.dims}
        self.kernel = kernel

    def cx(self, extra: Mapping[str, str] | None = None) -> CExpr:
        return CExpr({**self.dims, **(extra or {})})

    # ------------------------------------------------------------ scalar statements

    def stmt(self, s: Stmt, ind: int, names: Mapping[str, str]) -> list[str]:
        cx = self.cx(names)
        if isinstance(s, Seq):
            return [x for c in s.body for x in self.stmt(c, ind, names)]
        if isinstance(s, For):
            return self.loop(s, ind, names)
        if isinstance(s, Store):
            return _lines([f"{cx(_load_target(s))} = {cx(s.value)};"], ind)
        if isinstance(s, Let):
            qual = "" if s.mutable else "const "
            return _lines([f"{qual}{ctype(s.value.dtype)} {s.name} = {cx(s.value)};"], ind)
        if isinstance(s, Assign):
            return _lines([f"{cx(Var(s.name))} = {cx(s.value)};"], ind)
        if isinstance(s, If):
            out = _lines([f"if ({cx(s.cond)}) {{"], ind) + self.stmt(s.then, ind + 1, names)
            if s.orelse is not None:
                out += _lines(["} else {"], ind) + self.stmt(s.orelse, ind + 1, names)
            return out + _lines(["}"], ind)
        if isinstance(s, Check):
            msg = s.message.replace("\\", "\\\\").replace('"', '\\"')
            return _lines(
                [f'if (!({cx(s.cond)})) TVM_FFI_THROW(IndexError) << entry << ": {msg}" << {cx(s.shown)};'],
                ind,
            )
        if isinstance(s, Alloc):
            return self.alloc(s, ind, names)
        if isinstance(s, AtomCall):
            return _lines(atom_lines(self.kernel, s, cx), ind)
        raise PlanError(f"cpu: cannot emit statement {type(s).__name__}")

    def alloc(self, s: Alloc, ind: int, names: Mapping[str, str]) -> list[str]:
        b = s.buffer
        t = ctype(b.dtype)
        n = 1
        static = all(isinstance(d, int) for d in b.shape)
        for d in b.shape:
            n = n * d if isinstance(d, int) else n
        if static and n * b.dtype.itemsize <= STACK_SCRATCH_BYTES:
            head = [f"alignas(64) {t} {cname(b)}[{max(n, 1)}];  // local scratch {shape_text(b.shape)}"]
        else:
            count = " * ".join(self.cx(names).dim(d) for d in b.shape) or "1"
            head = [
                f"Scratch<{t}> {cname(b)}_mem({count});  // local scratch {shape_text(b.shape)}",
                f"{t}* __restrict__ {cname(b)} = {cname(b)}_mem.ptr;",
            ]
        return _lines(head, ind) + self.stmt(s.body, ind, names)

    def loop(self, s: For, ind: int, names: Mapping[str, str]) -> list[str]:
        cx = self.cx(names)
        if s.binding == "worker":
            return self.worker(s, ind, names)
        if s.binding == "vector" and s.kind == "parallel":
            return self.vector(s, ind, names)
        if s.binding == "vector" and s.kind == "reduce":
            return self.vector_reduce(s, ind, names)
        head = f"for (int64_t {s.var} = 0; {s.var} < {cx(s.extent)}; ++{s.var}) {{"
        return _lines([head], ind) + self.stmt(s.body, ind + 1, names) + _lines(["}"], ind)

    def worker(self, s: For, ind: int, names: Mapping[str, str]) -> list[str]:
        chain = [s]
        while isinstance(chain[-1].body, For) and chain[-1].body.binding == "worker":
            chain.append(chain[-1].body)
        cx = self.cx(names)
        work = " * ".join(f"({cx(c.extent)})" for c in chain)
        inner = _static_work(chain[-1].body)
        collapse = f" collapse({len(chain)})" if len(chain) > 1 else ""
        chunk = f"worker_chunk({work})"
        out = _lines(
            [
                f"#pragma omp parallel for{collapse} schedule(dynamic, {chunk}) "
                f"if({work} * {inner} >= {PARALLEL_WORK})"
            ],
            ind,
        )
        for depth, c in enumerate(chain):
            out += _lines([f"for (int64_t {c.var} = 0; {c.var} < {cx(c.extent)}; ++{c.var}) {{"], ind + depth)
        out += self.stmt(chain[-1].body, ind + len(chain), names)
        for depth in reversed(range(len(chain))):
            out += _lines(["}"], ind + depth)
        return out

    # ------------------------------------------------------------ vector packs

    def vector(self, s: For, ind: int, names: Mapping[str, str]) -> list[str]:
        w, base, n = s.width, f"{s.var}_b", f"{s.var}_n"
        cx = self.cx(names)
        out = _lines(
            [
                "{",
                f"  const int64_t {n} = {cx(s.extent)};",
                f"  int64_t {base} = 0;",
                f"  for (; {base} + {w} <= {n}; {base} += {w}) {{  // packs of {w} lanes",
            ],
            ind,
        )
        out += self.lanes(s, _flat(s.body), ind + 2, names, w, base)
        out += _lines(
            [
                "  }",
                f"  for (; {base} < {n}; ++{base}) {{  // scalar tail",
                f"    const int64_t {s.var} = {base};",
            ],
            ind,
        )
        out += self.stmt(s.body, ind + 2, names)
        return out + _lines(["  }", "}"], ind)

    def lanes(
        self, loop: For, body: list[Stmt], ind: int, names: Mapping[str, str], w: int, base: str
    ) -> list[str]:
        """Lane-mode body: simple statements grouped in simd lane loops, inner loops shared by all lanes."""
        groups: list[list[Stmt] | Stmt] = []
        for c in body:
            if isinstance(c, For):
                groups.append(c)
            elif groups and isinstance(groups[-1], list):
                groups[-1].append(c)
            else:
                groups.append([c])
        arrays = _cross_group_lets(groups)
        lane_names = {**names, **{a: f"{a}[l_]" for a in arrays}}
        out: list[str] = []
        for g in groups:
            if isinstance(g, For):
                if free_vars(g.extent) & (set(arrays) | {loop.var}):
                    raise PlanError(
                        f"cpu: inner loop {g.var} of vector loop {loop.var} has a lane-dependent extent"
                    )
                out += _lines(
                    [f"for (int64_t {g.var} = 0; {g.var} < {self.cx(lane_names)(g.extent)}; ++{g.var}) {{"],
                    ind,
                )
                out += self.lanes(loop, _flat(g.body), ind + 1, lane_names, w, base)
                out += _lines(["}"], ind)
                continue
            for let in g:
                if isinstance(let, Let) and let.name in arrays:
                    out += _lines([f"{ctype(let.value.dtype)} {let.name}[{w}];"], ind)
            out += _lines(
                [
                    "#pragma omp simd",
                    f"for (int64_t l_ = 0; l_ < {w}; ++l_) {{",
                    f"  const int64_t {loop.var} = {base} + l_;",
                ],
                ind,
            )
            for c in g:
                if isinstance(c, Let) and c.name in arrays:
                    out += _lines([f"{c.name}[l_] = {self.cx(lane_names)(c.value)};"], ind + 1)
                else:
                    out += self.stmt(c, ind + 1, lane_names)
            out += _lines(["}"], ind)
        return out

    def vector_reduce(self, s: For, ind: int, names: Mapping[str, str]) -> list[str]:
        """Packs of REDUCE_UNROLL * w lane-private partials, then packs of w, then a scalar tail.

        A static extent shorter than REDUCE_UNROLL_MIN_VECTORS packs keeps one partial per lane.

        NOTE: one partial per lane alone leaves each lane a serial chain of dependent adds (4
        cycles each); REDUCE_UNROLL independent chains per vector register keep the FMA pipes busy.
        """
        w, base, n = s.width, f"{s.var}_b", f"{s.var}_n"
        short = isinstance(s.extent, Const) and int(s.extent.value) < w * REDUCE_UNROLL_MIN_VECTORS
        unroll = 1 if short else REDUCE_UNROLL
        wide = w * unroll
        cx = self.cx(names)
        partial = {acc: f"{acc}_p" for acc, _ in s.carries}
        out = _lines(["{", f"  const int64_t {n} = {cx(s.extent)};", f"  int64_t {base} = 0;"], ind)
        types = _carry_types(s)
        for acc, comb in s.carries:
            t = types[acc]
            out += _lines(
                [
                    f"  {ctype(t)} {partial[acc]}[{wide}];",
                    f"  for (int64_t l_ = 0; l_ < {wide}; ++l_) "
                    f"{partial[acc]}[l_] = {literal(_IDENTITY[comb], t)};",
                ],
                ind,
            )
        lane_names = {**names, **{a: f"{p}[l_]" for a, p in partial.items()}}
        packs = ((wide, f"{unroll} x {w} lanes"), (w, f"{w} lanes")) if unroll > 1 else ((w, f"{w} lanes"),)
        for lanes, what in packs:
            out += _lines(
                [
                    f"  for (; {base} + {lanes} <= {n}; {base} += {lanes}) {{  // packs of {what}",
                    "    #pragma omp simd",
                    f"    for (int64_t l_ = 0; l_ < {lanes}; ++l_) {{",
                    f"      const int64_t {s.var} = {base} + l_;",
                ],
                ind,
            )
            out += self.stmt(s.body, ind + 3, lane_names)
            out += _lines(["    }", "  }"], ind)
        for acc, comb in s.carries:
            # A halving tree (log2 of the partial count in vector steps), not a serial chain of
            # dependent folds: a short row (an attention dot product) would pay for the chain.
            p = partial[acc]
            tree = _COMBINE[comb].format(f"{p}[l_]", f"{p}[l_ + h_]")
            out += _lines(
                [
                    f"  for (int64_t h_ = {wide // 2}; h_ > 0; h_ /= 2) {{",
                    "    #pragma omp simd",
                    f"    for (int64_t l_ = 0; l_ < h_; ++l_) {p}[l_] = {tree};",
                    "  }",
                    f"  {acc} = {_COMBINE[comb].format(acc, f'{p}[0]')};",
                ],
                ind,
            )
        out += _lines(
            [f"  for (; {base} < {n}; ++{base}) {{  // scalar tail", f"    const int64_t {s.var} = {base};"],
            ind,
        )
        out += self.stmt(s.body, ind + 2, names)
        return out + _lines(["  }", "}"], ind)


def _flat(s: Stmt) -> list[Stmt]:
    return list(s.body) if isinstance(s, Seq) else [s]


def _cross_group_lets(groups: list[Any]) -> set[str]:
    """Lets of a lane group read outside it (or mutable) need one array element per lane."""
    out: set[str] = set()
    for gi, g in enumerate(groups):
        if not isinstance(g, list):
            continue
        for s in g:
            if not isinstance(s, Let):
                continue
            if s.mutable or any(s.name in _reads(other) for gj, other in enumerate(groups) if gj != gi):
                out.add(s.name)
    return out


def _reads(g: Any) -> set[str]:
    stmts = [g] if isinstance(g, Stmt) else g
    names: set[str] = set()
    for s in stmts:
        for x in walk_stmts(s):
            names |= {n for e in stmt_exprs(x) for n in free_vars(e)}
            if isinstance(x, Assign):
                names.add(x.name)
    return names


def _carry_types(s: For) -> dict[str, Any]:
    out = {}
    for x in walk_stmts(s.body):
        if isinstance(x, Assign):
            out[x.name] = x.value.dtype
    return out


def _static_work(s: Stmt) -> int:
    """Iterations of the loops directly under a worker region, counting symbolic extents as 64."""
    if isinstance(s, Seq):
        return max((_static_work(c) for c in s.body), default=1)
    if isinstance(s, For):
        n = s.extent.value if isinstance(s.extent, Const) else 64
        return max(1, int(n)) * _static_work(s.body)
    if isinstance(s, Alloc):
        return _static_work(s.body)
    return 1


def _load_target(s: Store) -> Expr:
    return Load(s.buffer, s.index)


def _kernel(program: Program, k: Kernel) -> list[str]:
    body = _Body(program, k)
    # NOTE: a source the kernel updates in place may be its output's very memory; each element
    # is then read before it is overwritten, by the iteration that overwrites it (ir.plan.in_place).
    params = [f"const {ctype(b.dtype)}* __restrict__ {cname(b)}" for b in k.reads]
    params += [f"{ctype(b.dtype)}* __restrict__ {cname(b)}" for b in k.writes]
    params += [f"int64_t d_{d.var.name}" for d in program.dims]
    params.append("const char* entry")
    head = [f"// kernel {k.name} [{k.form}]" + (f": {', '.join(k.origin)}" if k.origin else "")]
    head += [f"//   {d}" for d in k.decisions]
    sig = f"[[maybe_unused]] static void {program.name}__{k.name}({', '.join(params)}) {{"
    out = [*head, sig, *body.stmt(k.body, 1, {}), "}", ""]
    if not k.updates:
        return out
    region = region_nest(k, frozenset(d.var.name for d in program.dims))
    sig = f"[[maybe_unused]] static void {program.name}__{k.name}_in_place({', '.join(params)}) {{"
    note = f"// kernel {k.name} in place: only its region, run when every output it updates is its source"
    return [*out, note, sig, *body.stmt(region, 1, {}), "}", ""]


def _entry(program: Program, huge_pages: bool) -> list[str]:
    cx = CExpr({b.var.name: f"d_{b.var.name}" for b in program.dims})
    args = ", ".join(f"tvm::ffi::TensorView a_{b.name}" for b in program.params)
    out = [f"void {program.name}_entry({args}) {{", f'  const Entry e{{"{program.name}"}};']
    out += entry_checks(program, cx, "a_")
    if huge_pages:
        out += [f"  prefer_huge_pages(a_{b.name});" for b in program.outputs]
    for t in program.temps:
        count = " * ".join(cx.dim(d) for d in t.shape) or "1"
        decl = f"{shape_text(t.shape)} {t.dtype}"
        out.append(f"  Scratch<{ctype(t.dtype)}> {cname(t)}_mem({count});  // {decl}")
        if huge_pages:
            out.append(f"  prefer_huge_pages({cname(t)}_mem.ptr, ({count}) * {t.dtype.itemsize});")
    for k in program.kernels:
        args_k = [_ptr(b) for b in (*k.reads, *k.writes)]
        args_k += [f"d_{d.var.name}" for d in program.dims]
        args_k.append(f'"{program.name}"')
        call = f"{program.name}__{k.name}({', '.join(args_k)});"
        if k.updates:
            same = " && ".join(f"{_ptr(u.output)} == {_ptr(u.source)}" for u in k.updates)
            call = f"if ({same}) {program.name}__{k.name}_in_place({', '.join(args_k)}); else {call}"
        out.append(f"  {call}")
    out += ["}", f"TVM_FFI_DLL_EXPORT_TYPED_FUNC({program.name}, {program.name}_entry);", ""]
    return out


def _ptr(b: Any) -> str:
    t = ctype(b.dtype)
    if b.role == "temp":
        return f"{cname(b)}_mem.ptr"
    return f"data<{t}>(a_{b.name})"


def emit_module(name: str, programs: tuple[Program, ...], headers: str = "", huge_pages: bool = True) -> str:
    """The C++ translation unit of a module's scheduled programs.

    Args:
        headers: the runtime header digest the source is generated against; it is written in
            the first line, so build caches keyed by the source never reuse a stale library.
        huge_pages: advise 2 MiB pages on outputs and temporaries before their first touch.
    """
    for p in programs:
        for b in p.params:
            for d in b.shape:
                if dim_vars(d) - {x.var for x in p.dims}:
                    raise PlanError(
                        f"cpu: {p.name}: extent {format_dim(d)} of {b.name} has an unbound DimVar"
                    )
    lines = [
        f"// Generated by tilefoundry codegen-cpu for {name} (runtime headers {headers}). Do not edit.",
        "#include <tilefoundry/runtime.h>",
        "",
        "namespace {",
        "using namespace tilefoundry::host;",
        "",
    ]
    for p in programs:
        for k in p.kernels:
            lines += _kernel(p, k)
    lines += ["}  // namespace", ""]
    for p in programs:
        lines += _entry(p, huge_pages)
    return "\n".join(lines)


def codegen(scheduled: Any, options: Mapping[str, Any]) -> Sources:
    """The `tilefoundry_codegen` hook body: one `.cc` holding every function of the module.

    Before emission each program goes through the cpu's own realization rewrite
    (`reuse.reuse_sum_terms`); its decisions appear as comments above the kernels.
    """
    programs = tuple(reuse_sum_terms(p) for p in scheduled.programs)
    text = emit_module(scheduled.name, programs, runtime_digest(), HUGE_PAGES.read(options))
    return Sources(
        target=NAME, files={f"{scheduled.name}.cc": text}, entries=tuple(p.name for p in scheduled.programs)
    )
