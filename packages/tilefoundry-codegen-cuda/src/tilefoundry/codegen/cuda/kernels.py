"""The __global__ functions of realizations, one emitter per realization kind.

Every kernel takes its reads as `const T* __restrict__`, its writes as `T* __restrict__`
(outputs are checked noalias at the entry, and the element-grid admission proof rules out a
read of a written buffer), then the module's dynamic extents `d_<DimVar>`. Instances are
visited with a grid-stride loop, so any grid the launch config picks covers the domain:

    __global__ void __launch_bounds__(256) f__k0_exp(const float* __restrict__ b_x,
                                                     float* __restrict__ b_out0, int64_t d_T) {
      const int64_t work_ = (d_T * 64);
      for (int64_t lin_ = ...; lin_ < work_; lin_ += stride_) { i0, i1 from lin_; body }
    }
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype
from tilefoundry.ir.tile.expr import Const, Expr, floordiv, known_multiple, loads, mul
from tilefoundry.ir.tile.stmt import Buffer, Check, Kernel, Program, Stmt, stmt_exprs, walk_stmts

from .group import GroupCode, unflatten
from .placed import local_loops
from .realize import Realization
from .serial import SerialCode, indent, largest_count
from .vector import PackCode


@dataclass(frozen=True)
class Span:
    """The CTAs a body's grid-stride loop runs on: C++ of this CTA's index among them, and their count."""

    index: str
    count: str


WHOLE_GRID = Span("blockIdx.x", "gridDim.x")

Emitter = Callable[[Program, Realization], list[str]]
EMITTERS: dict[str, Emitter] = {}
# The body of a kernel (the lines between `pdl_begin();` and the closing brace) over a Span of
# its launch's CTAs, packed or not: the realization kinds a batch may hold (batching.py).
Body = Callable[[Program, Realization, bool, Span], list[str]]
BODIES: dict[str, Body] = {}


def emitter(kind: str) -> Callable[[Emitter], Emitter]:
    """Register the kernel emitter of a realization kind."""

    def register(fn: Emitter) -> Emitter:
        EMITTERS[kind] = fn
        return fn

    return register


def body(kind: str) -> Callable[[Body], Body]:
    """Register the body emitter of a realization kind that can share a launch with others."""

    def register(fn: Body) -> Body:
        BODIES[kind] = fn
        return fn

    return register


def dim_names(program: Program) -> dict[str, str]:
    """DimVar name -> the C++ parameter holding its extent."""
    return {b.var.name: f"d_{b.var.name}" for b in program.dims}


def kernel_params(program: Program, k: Kernel, extra: tuple[str, ...] = ()) -> str:
    """The parameter list shared by every launch of kernel `k`."""
    params = [f"const {ctype(b.dtype)}* __restrict__ {cname(b)}" for b in k.reads]
    params += [f"{ctype(b.dtype)}* __restrict__ {cname(b)}" for b in k.writes]
    params += [f"int64_t d_{d.var.name}" for d in program.dims]
    return ", ".join([*params, *extra])


def functor_name(program: Program, k: Kernel, role: str) -> str:
    """The device functor holding kernel `k`'s statements for a GEMM atom ("epilogue", "prologue").

    Named per program, as the __global__ functions are: one translation unit holds every function
    of a module, and two functions may each have a `k0_rms_norm`.
    """
    return f"{program.name}__{k.name}_{role}"


def kernel_args(program: Program, k: Kernel) -> list[str]:
    """The host's arguments for `kernel_params(program, k)`, in order."""
    return [cname(b) for b in (*k.reads, *k.writes)] + [f"d_{d.var.name}" for d in program.dims]


def work(chain_extents: list[Expr]) -> Expr:
    """The number of instances: the product of the chain's extents."""
    total: Expr = Const(1)
    for e in chain_extents:
        total = mul(total, e)
    return total


def kernel_comment(k: Kernel) -> list[str]:
    """The comment naming a kernel, its origin and its decisions."""
    lines = [f"// kernel {k.name} [{k.form}]" + (f": {', '.join(k.origin)}" if k.origin else "")]
    return lines + [f"//   {d}" for d in k.decisions]


def in_place_params(r: Realization) -> tuple[str, ...]:
    """A region-capable launch's flag parameter (in_place.py), else none."""
    return (f"bool {r.in_place.flag}",) if r.in_place is not None else ()


def in_place_args(r: Realization) -> tuple[str, ...]:
    """The host's argument for `in_place_params(r)`: its flag."""
    return (r.in_place.flag,) if r.in_place is not None else ()


def launch_bounds(threads: int, min_ctas: int = 0) -> str:
    """`__launch_bounds__(threads[, min_ctas]) ` (empty without threads): the CTA size, and the CTAs
    an SM the registers must leave room for."""
    if not threads:
        return ""
    return f"__launch_bounds__({threads}{f', {min_ctas}' if min_ctas else ''}) "


def _head(r: Realization, program: Program, extra: tuple[str, ...] = (), variant: str = "") -> list[str]:
    k = r.kernel
    extra = (*extra, *in_place_params(r))
    lines = kernel_comment(k)
    bounds = launch_bounds(r.threads, r.min_ctas if variant else 0)
    lines.append(f"__global__ void {bounds}{r.name}{variant}({kernel_params(program, k, extra)}) {{")
    lines.append("  pdl_begin();  // launched with programmatic dependent launch: wait for the inputs")
    return lines


def _grid_loop(
    r: Realization,
    cx: CExpr,
    extents: list[Expr],
    names: list[str],
    ctas: Span = WHOLE_GRID,
    per_thread: int = 1,
) -> list[str]:
    """The grid-stride loop over `extents`; a thread's `per_thread` instances are `stride_` apart."""
    region = r.in_place
    if region is not None:
        extents, names = region.extents(extents), region.names(names)
    total = cx(work(extents))
    step = "stride_" if per_thread == 1 else f"{per_thread} * stride_"
    return [
        *indent(region.before_loop(cx) if region is not None else [], 1),
        f"  const int64_t work_ = {total};",
        f"  const int64_t stride_ = static_cast<int64_t>({ctas.count}) * {r.threads};",
        f"  for (int64_t lin_ = static_cast<int64_t>({ctas.index}) * {r.threads} + threadIdx.x; "
        f"lin_ < work_; lin_ += {step}) {{",
        *indent(unflatten("lin_", [(n, cx(e)) for n, e in zip(names, extents, strict=True)]), 2),
        *indent(region.lines(cx) if region is not None else [], 2),
    ]


def _warp_in_step(r: Realization, pack_extents: list[Expr]) -> bool:
    """Whether every lane of a warp takes the same trips through a packed grid's loop: whole warps
    a CTA, a pack count that is a multiple of 32 (each warp's 32 consecutive packs are all in or
    all out), and no region test that skips single instances (in_place.py)."""
    return r.in_place is None and r.threads % 32 == 0 and known_multiple(work(pack_extents)) % 32 == 0


@body("grid")
def grid_body(program: Program, r: Realization, packed: bool, ctas: Span) -> list[str]:
    """A flat grid's grid-stride loop; `packed`: the 16-byte pack variant's."""
    serial = SerialCode(dim_names(program), r.kernel.name)
    cx = serial.cx()
    names = [c.var for c in r.chain]
    extents = [c.extent for c in r.chain]
    if not packed:
        return [*_grid_loop(r, cx, extents, names, ctas), *serial.stmt(r.body, 2, {}), "  }"]
    # The packed variant: the innermost instance axis advances a whole pack per thread.
    assert r.packs is not None
    n, last = r.packs.lanes, names[-1]
    base = f"{last}_b"
    pack_names = [*names[:-1], f"{last}_p"]
    pack_extents = [*extents[:-1], floordiv(extents[-1], n)]
    code = PackCode(r.packs, base, warp_in_step=_warp_in_step(r, pack_extents))
    out = _grid_loop(r, cx, pack_extents, pack_names, ctas, r.thread_packs)
    axes = [(v, cx(e)) for v, e in zip(pack_names, pack_extents, strict=True)]

    def pack(u: int) -> list[str]:
        """Pack u of this thread's, grid-strided: its loads, then the later packs' whole work, then
        its folds, exchanges, arithmetic and stores. Each nested scope redeclares the names it
        shadows. A later pack past the end of the domain redoes pack 0: the same bytes to the same
        place, from the same thread (a grid reads no buffer it writes). So no branch holds a later
        pack's loads back: ptxas issues them, a gather's index loads first, beside pack 0's, and the
        threads of a row shuffle in step."""
        loads, rest = code.prologue_parts(cx, r.body)
        head = [f"const int64_t {base} = {last}_p * {n};", *loads]
        tail = rest + code.lanes(r.body, cx) + code.epilogue(cx)
        if u + 1 == r.thread_packs:
            return head + tail
        lin = f"lin{u + 1}_"
        ahead = "stride_" if u == 0 else f"{u + 1} * stride_"
        later = [f"const int64_t {lin} = lin_ + {ahead} < work_ ? lin_ + {ahead} : lin_;"]
        later = [*later, *unflatten(lin, axes), *pack(u + 1)]
        return [*head, "{", *indent(later, 1), "}", *tail]

    return [*out, *indent(pack(0), 2), "  }"]


@emitter("grid")
def _grid(program: Program, r: Realization) -> list[str]:
    out = [*_head(r, program), *grid_body(program, r, False, WHOLE_GRID), "}", ""]
    if r.packs is None:
        return out
    vec = [*_head(r, program, variant=r.variant), *grid_body(program, r, True, WHOLE_GRID)]
    return out + vec + ["}", ""]


class _CheckCode(SerialCode):
    """Serial code of an index check: a violated Check reports its 1-based id with the value."""

    def __init__(self, dims: Mapping[str, str], kernel: str, messages: tuple[str, ...]):
        super().__init__(dims, kernel)
        self.ids = {m: i for i, m in enumerate(messages, 1)}

    def stmt(self, s: Stmt, depth: int, names: Mapping[str, str]) -> list[str]:
        if not isinstance(s, Check):
            return super().stmt(s, depth, names)
        cx = self.cx(names)
        report = f"report_index(verdict_, {self.ids[s.message]}, {cx(s.shown)});"
        return indent([f"if (!({cx(s.cond)})) {report}"], depth)


@body("check")
def check_body(program: Program, r: Realization, packed: bool, ctas: Span) -> list[str]:
    """Every nest of the check over `ctas`: a grid-stride loop each, rank-0 checks on their first thread."""
    code = _CheckCode(dim_names(program), r.kernel.name, r.messages)
    cx = code.cx()
    out = [f"  // check {i}: {m}".rstrip() for i, m in enumerate(r.messages, 1)]
    for chain, body in r.nests:
        if not chain:
            out += [f"  if ({ctas.index} == 0 && threadIdx.x == 0) {{", *code.stmt(body, 2, {}), "  }"]
            continue
        loop = _grid_loop(r, cx, [c.extent for c in chain], [c.var for c in chain], ctas)
        out += ["  {", *indent(loop, 1), *code.stmt(body, 3, {}), "    }", "  }"]
    return out


@emitter("check")
def _check(program: Program, r: Realization) -> list[str]:
    """Every nest of the check in one kernel of its own."""
    head = _head(r, program, ("IndexVerdict verdict_",))
    return [*head, *check_body(program, r, False, WHOLE_GRID), "}", ""]


@body("rows")
def rows_body(program: Program, r: Realization, packed: bool, ctas: Span) -> list[str]:
    """Group scratch, then a loop handing instances to the CTAs' group slots; `packed`: the variant
    whose shared loops move the 16-byte packs of `r.row_packs`."""
    serial = SerialCode(dim_names(program), r.kernel.name)
    cx = serial.cx()
    read = {id(ld.buffer) for s in walk_stmts(r.body) for e in stmt_exprs(s) for ld in loads(e)}
    group = GroupCode(serial, r.group, read, r.reassociate, packed)
    body = group.instance(r.body, 2, {})
    slots = r.threads // r.group
    out = []
    for b in _unique(group.shared):
        n = largest_count(b.shape)
        out.append(f"  __shared__ alignas(16) {ctype(b.dtype)} {cname(b)}_smem_[{slots}][{max(n or 1, 1)}];")
    for name, (t, _) in sorted(group.workspaces.items()):
        out.append(f"  __shared__ {t} {name}[32];")
    names, extents = [c.var for c in r.chain], [c.extent for c in r.chain]
    region = r.in_place
    if region is not None:  # the lanes of a row skip it together: group reductions stay whole
        extents, names = region.extents(extents), region.names(names)
    out += [
        *indent(region.before_loop(cx) if region is not None else [], 1),
        f"  const int lane_ = threadIdx.x % {r.group};",
        f"  const int slot_ = threadIdx.x / {r.group};",
        f"  const int64_t rows_ = {cx(work(extents))};",
        f"  for (int64_t row_ = static_cast<int64_t>({ctas.index}) * {slots} + slot_; row_ < rows_; "
        f"row_ += static_cast<int64_t>({ctas.count}) * {slots}) {{",
        *indent(unflatten("row_", [(n, cx(e)) for n, e in zip(names, extents, strict=True)]), 2),
        *indent(region.lines(cx) if region is not None else [], 2),
    ]
    return out + body + ["  }"]


@emitter("rows")
def _rows(program: Program, r: Realization) -> list[str]:
    """The scalar kernel, and the packed one (`r.variant`) when its shared loops have pack plans."""
    out = [*_head(r, program), *rows_body(program, r, False, WHOLE_GRID), "}", ""]
    if not r.row_packs:
        return out
    vec = [*_head(r, program, variant=r.variant), *rows_body(program, r, True, WHOLE_GRID)]
    return out + vec + ["}", ""]


@emitter("placed")
def _placed(program: Program, r: Realization) -> list[str]:
    assert r.placed is not None
    serial = SerialCode(dim_names(program), r.kernel.name)
    blocks, heads = local_loops(r.placed, r.chain, serial.cx())
    out = [*_head(r, program), *indent(blocks, 1)]
    out += [line for d, head in enumerate(heads, 1) for line in indent([head], d)]
    out += serial.stmt(r.body, len(heads) + 1, {})
    return [*out, *("  " * d + "}" for d in range(len(heads), 0, -1)), "}", ""]


def _unique(buffers: list[Buffer]) -> list[Buffer]:
    seen: dict[int, Buffer] = {}
    for b in buffers:
        seen.setdefault(id(b), b)
    return list(seen.values())


def emit_kernels(program: Program, r: Realization) -> list[str]:
    """The __global__ function(s) of one realization."""
    return EMITTERS[r.kind](program, r)
