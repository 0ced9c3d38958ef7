"""Lower a partitioned function to a Candidate TileIR `Program`.

Parameters become input buffers, results become output buffers (the entry's out-params),
other materialized values become temporaries. Each group becomes one kernel built by the
lowering rules, with operands bound per kernel: a materialized value written by another kernel
is a Load of its buffer; anything else is its producer's expression, inlined (memoized per
index so a value used twice is one expression).

    results that are parameters, or one value returned twice, get a copy kernel.
"""

from __future__ import annotations

from ..dims import Dim, DimVar, dim_vars, dims_equal, format_dim
from ..dtypes import i64
from ..errors import PlanError
from ..hir import Function, Node, Param, Value
from ..layout import flatten, is_leaf
from ..plan.partition import Group, Partition, node_origin
from ..shard import Mesh, ShardLayout, Split
from ..tile.expr import Expr, Load, Var, binary, cast, dim_expr, loads
from ..tile.stmt import (
    Buffer,
    Check,
    DimBinding,
    Kernel,
    MeshCut,
    Program,
    RegionUpdate,
    Stmt,
    Store,
    StoredElement,
    seq,
    stmt_exprs,
    walk_stmts,
)
from ..types import TensorType
from .core import Compute, Index, IndexCheck, Nest, NestContext, Operand, loop_nest, lower


def _dim_bindings(fn: Function, params: tuple[Buffer, ...]) -> tuple[DimBinding, ...]:
    """Each DimVar read from the first parameter extent that is exactly that DimVar."""
    found: dict[DimVar, DimBinding] = {}
    for pi, p in enumerate(params):
        for axis, d in enumerate(p.shape):
            if isinstance(d, DimVar) and d not in found:
                found[d] = DimBinding(d, pi, axis, d)
    for p in fn.params:
        for d in p.type.shape:  # type: ignore[union-attr]
            if not isinstance(d, int):
                missing = [v for v in dim_vars(d) if v not in found]
                if missing:
                    raise PlanError(
                        f"{fn.name}: DimVar {missing[0].name} appears only inside the extent "
                        f"{format_dim(d)} of "
                        f"parameter {p.name!r}; a compiled entry reads each DimVar from an extent that is "
                        f"exactly that DimVar",
                        where=fn.name,
                        expected=f"an extent equal to {missing[0].name}",
                        got=format_dim(d),
                    )
    return tuple(found.values())


class _KernelBuilder:
    """Operand binding for one kernel: buffers for values outside it, inlined producers inside."""

    def __init__(self, part: Partition, buffers: dict[Value, Buffer], own: set[Value], ctx: NestContext):
        self.part = part
        self.buffers = buffers
        self.own = own
        self.ctx = ctx
        self.memo: dict[tuple[int, Index], Expr] = {}
        self.computes: dict[Node, Compute] = {}
        self.origin: list[str] = []

    def operand(self, v: Value) -> Operand:
        t: TensorType = v.type  # type: ignore[assignment]
        if v in self.buffers and (v not in self.own or isinstance(v, Param)):
            buf = self.buffers[v]
            return Operand(t, lambda idx: Load(buf, idx), buf)
        assert isinstance(v, Node)
        return Operand(t, lambda idx: self.element(v, idx))

    def rule(self, n: Node) -> Compute | Nest:
        return lower(n.op, n.type, *(self.operand(a) for a in n.args))

    def element(self, n: Node, idx: Index) -> Expr:
        key = (id(n), idx)
        if key not in self.memo:
            if n not in self.computes:
                form = self.rule(n)
                if isinstance(form, Nest) and n in self.part.recomputed:
                    assert form.recompute is not None, n.op
                    form = Compute(form.recompute)
                assert isinstance(form, Compute), n.op
                self.computes[n] = form
                self.origin.append(node_origin(n))
            self.memo[key] = self.computes[n].expr(idx)
        return self.memo[key]

    def checks(self) -> list[IndexCheck]:
        return [c for f in self.computes.values() for c in f.checks]


def _check_stmt(ctx: NestContext, check: IndexCheck) -> Stmt:
    def body(idx: Index) -> Stmt:
        v = cast(check.operand.at(idx), i64)
        ok = binary("and", binary("ge", v, dim_expr(check.lo)), binary("lt", v, dim_expr(check.hi)))
        return Check(ok, check.message, v)

    return loop_nest(ctx, check.operand.shape, body, kind="serial", stem="c")


def _mesh(nodes: list[Node]) -> Mesh | None:
    """The Mesh scope a kernel runs under: its first node's."""
    return next((n.mesh for n in nodes if isinstance(n.mesh, Mesh)), None)


def _request(nodes: list[Node]) -> tuple[str, ...]:
    mesh = _mesh(nodes)
    return tuple(t.name for t in mesh.topologies) if mesh is not None else ()


def _laid_out(nodes: list[Node], mesh: Mesh, domain: tuple[Dim, ...]) -> Node | None:
    """The first node whose type is sharded over `mesh` with the kernel's domain as its shape."""
    for n in nodes:
        layout = n.type.layout  # type: ignore[union-attr]
        if (
            isinstance(layout, ShardLayout)
            and layout.mesh == mesh
            and len(n.type.shape) == len(domain)  # type: ignore[union-attr]
            and all(dims_equal(a, b) for a, b in zip(n.type.shape, domain, strict=True))  # type: ignore[union-attr]
        ):
            return n
    return None


def _placement(nodes: list[Node], domain: tuple[Dim, ...]) -> tuple[tuple[MeshCut, ...], str | None]:
    """The mesh axes of a kernel's Mesh scope and the instance loop each cuts, with the reason.

    The layout of the first value of the kernel sharded over that mesh says which tensor axis
    (= instance loop; the kernel's loops run over that value's shape) each mesh axis splits;
    without one, mesh axis m cuts loop m, the last loop for axes beyond the kernel's rank.
    """
    mesh = _mesh(nodes)
    if mesh is None:
        return (), None
    strides = flatten(mesh.layout.stride)
    axes = [(name, mesh.topology_of(m).name, mesh.shape[m], strides[m]) for m, name in enumerate(mesh.names)]
    laid = _laid_out(nodes, mesh, domain)
    if laid is None:
        loops = [min(m, len(domain) - 1) if domain else None for m in range(mesh.rank)]
        depths = [loops[:m].count(loops[m]) for m in range(mesh.rank)]
        cuts = tuple(
            MeshCut(n, t, e, s, loop, depth, "")
            for (n, t, e, s), loop, depth in zip(axes, loops, depths, strict=True)
        )
        if not domain:
            return cuts, "placement: the kernel has no instance loop for its Mesh axes to cut"
        why = (
            f"placement: no value of the kernel is sharded over its Mesh; mesh axis m cuts instance "
            f"loop m, as the layout mesh[{', '.join(f'Split({c.loop})' for c in cuts)}] would"
        )
        return cuts, why
    layout: ShardLayout = laid.type.layout  # type: ignore[union-attr]
    shape = layout.layout.shape
    modes = (shape,) if is_leaf(shape) else shape
    where: dict[int, tuple[int, int, int]] = {}  # leaf -> (mode, position in mode, leaves in mode)
    for d, mode in enumerate(modes):
        leaves = len(flatten(mode))
        for j in range(leaves):
            where[len(where)] = (d, j, leaves)
    split = layout.split_positions()
    cuts = []
    for (name, topo, extent, stride), attr in zip(axes, layout.attrs, strict=True):
        loop, depth, text = None, 0, str(attr)
        if isinstance(attr, Split):
            d, j, leaves = where[attr.axis]
            mode_leaves = list(range(attr.axis - j, attr.axis - j + leaves))
            cut = [p for p in mode_leaves if p in split]
            # Contiguous blocks only when the split leaves are the mode's last (slowest-moving) ones.
            if cut == mode_leaves[leaves - len(cut):]:
                loop, depth = d, cut[::-1].index(attr.axis)
            else:
                text += f" (a strided cut of tensor axis {d}, not contiguous blocks)"
        cuts.append(MeshCut(name, topo, extent, stride, loop, depth, text))
    return tuple(cuts), f"placement: the layout of {node_origin(laid)}, {layout}"


def dim_var_names(fn: Function) -> frozenset[str]:
    """Names of every DimVar in `fn`'s parameter and value types (reserved from generated names)."""
    types = [p.type for p in fn.params] + [n.type for n in fn.body]
    return frozenset(
        v.name for t in types if isinstance(t, TensorType) for d in t.shape for v in dim_vars(d)
    )


def _kernels(
    part: Partition, g: Group, index: int, buffers: dict[Value, Buffer], reserved: frozenset[str]
) -> list[Kernel]:
    """The kernel of group `g`, preceded by an index-check kernel when it reads through data."""
    ctx = NestContext(prefix=f"k{index}_", reserved=reserved)
    kb = _KernelBuilder(part, buffers, set(g.nodes), ctx)
    checks: list[IndexCheck] = []
    if g.kind == "anchor":
        (n,) = g.nodes
        form = kb.rule(n)
        assert isinstance(form, Nest)
        kb.origin.insert(0, node_origin(n))
        body = form.build(buffers[n], ctx)
        checks += form.checks
        name, kind = f"k{index}_{n.op.name}", form.form  # type: ignore[union-attr]
        stored = _stored_element(form, len(n.type.shape))  # type: ignore[union-attr]
    else:
        outs = [buffers[n] for n in g.nodes]

        def element(idx: Index) -> Stmt:
            return seq(*(Store(b, idx, kb.element(n, idx)) for n, b in zip(g.nodes, outs, strict=True)))

        body = loop_nest(ctx, g.domain, element)
        name, kind = f"k{index}_{g.nodes[-1].op.name}", "element grid"  # type: ignore[union-attr]
        stored = None
    checks += kb.checks()
    writes = tuple(buffers[n] for n in g.nodes)
    placement, why = _placement([*g.nodes, *kb.computes], g.domain)
    kernel = Kernel(
        name, kind, body, _reads(body, writes), writes, tuple(kb.origin), _request(g.nodes), placement,
        updates=_updates(g, kb, buffers), element=stored,
    )
    kernel.decisions.extend(g.notes)
    kernel.decisions.extend(part.recomputed[n] for n in kb.computes if n in part.recomputed)
    if why is not None:
        kernel.decisions.append(why)
    if not checks:
        return [kernel]
    check_body = seq(*(_check_stmt(ctx, c) for c in checks))
    check = Kernel(f"k{index}_check", "index check", check_body, _reads(check_body, ()), (), tuple(kb.origin))
    return [check, kernel]


def _stored_element(form: Nest, rank: int) -> StoredElement | None:
    """The anchor's output element over fresh index variables, where its rule offers one."""
    if form.element is None:
        return None
    index = tuple(Var(f"e{k}_") for k in range(rank))
    return StoredElement(index, form.element(index))


def _updates(g: Group, kb: _KernelBuilder, buffers: dict[Value, Buffer]) -> tuple[RegionUpdate, ...]:
    """The element grid's stored results that equal a buffer outside a region (cache_update)."""
    if g.kind == "anchor":
        return ()
    found = []
    for n in g.nodes:
        u = kb.computes[n].update
        if u is not None and u.source.buffer is not None:
            found.append(RegionUpdate(buffers[n], u.source.buffer, u.axis, u.start, u.length))
    return tuple(found)


def _reads(body: Stmt, writes: tuple[Buffer, ...]) -> tuple[Buffer, ...]:
    found = {ld.buffer for ld in _all_loads(body)} - set(writes)
    return tuple(sorted(found, key=lambda b: b.name))


def _all_loads(body: Stmt) -> list[Load]:
    return [
        ld for s in walk_stmts(body) for e in stmt_exprs(s) for ld in loads(e) if ld.buffer.role != "local"
    ]


def _copy_kernel(index: int, src: Buffer, dst: Buffer, reserved: frozenset[str]) -> Kernel:
    ctx = NestContext(prefix=f"k{index}_", reserved=reserved)
    body = loop_nest(ctx, dst.shape, lambda idx: Store(dst, idx, Load(src, idx)))
    return Kernel(f"k{index}_copy", "element grid", body, (src,), (dst,), (f"copy {src.name} -> {dst.name}",))


def lower_to_tile(part: Partition) -> Program:
    """Candidate TileIR for a partitioned function."""
    fn = part.function
    buffers: dict[Value, Buffer] = {}
    inputs = tuple(Buffer(p.name, p.type.dtype, p.type.shape, "input") for p in fn.params)  # type: ignore[union-attr]
    buffers.update(zip(fn.params, inputs, strict=True))
    outputs: list[Buffer] = []
    copies: list[tuple[Buffer, Buffer]] = []
    for i, r in enumerate(fn.results):
        t: TensorType = r.type  # type: ignore[assignment]
        name = f"out{i}"
        while name in {p.name for p in fn.params}:
            name += "_"
        out = Buffer(name, t.dtype, t.shape, "output")
        outputs.append(out)
        if r in buffers:
            copies.append((buffers[r], out))
        else:
            buffers[r] = out
    temps = []
    for g in part.groups:
        for n in g.nodes:
            if n not in buffers:
                t = n.type  # type: ignore[assignment]
                buffers[n] = Buffer(f"t{len(temps)}", t.dtype, t.shape, "temp")
                temps.append(buffers[n])
    for v in part.materialized:
        if v not in buffers:
            raise PlanError(f"{fn.name}: value {v} is materialized but no kernel writes it", where=fn.name)
    reserved = dim_var_names(fn)
    kernels = [k for i, g in enumerate(part.groups) for k in _kernels(part, g, i, buffers, reserved)]
    kernels += [
        _copy_kernel(len(kernels) + i, src, dst, reserved) for i, (src, dst) in enumerate(copies)
    ]
    params = inputs + tuple(outputs)
    dims = _dim_bindings(fn, params)
    constants = frozenset(p.name for p in fn.weights)
    return Program(fn.name, params, len(outputs), tuple(temps), tuple(kernels), dims, constants=constants)
