"""Execution topologies, meshes over them, shard attributes and shard layouts (seed 000 §2.3-§2.10).

A `Mesh` is a layout whose axes are grouped onto program topology levels (cta, thread, ...).
A `ShardLayout` says, for each mesh axis, what that axis does with a tensor: split one of its
layout positions (`Split(k)`), replicate it (`Broadcast`), hold a partial reduction
(`Partial(op)`), or decide at run time (`Dynamic`). Authors write placements as sugar,
`mesh[Split(0), Broadcast]`, where `Split(k)` names a *tensor axis*; `Placement.resolve`
turns that into the canonical `ShardLayout`, where `Split(k)` names a *layout position*.

    with Mesh((Topology("cta", 4),), (4,)) as m:
        m[Split(0)].resolve((8, 16))
        # ShardLayout(((2,4),16):((16,32),1), [Split(1)], ...): instance c owns rows 2c, 2c+1
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .dims import Dim, format_dim
from .errors import DSLError, EvalError
from .layout import IntTuple, Layout, compact_row_major, flatten, format_int_tuple, is_leaf, unflatten

# ---------------------------------------------------------------- topologies and meshes


@dataclass(frozen=True)
class Topology:
    """A program topology level with a fixed number of instances: `Topology("cta", 132)`."""

    name: str
    size: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise DSLError(f"Topology: name must be an identifier, got {self.name!r}")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise DSLError(f"Topology {self.name!r}: size must be an int >= 1, got {self.size!r}")

    def __str__(self) -> str:
        return f"{self.name}:{self.size}"


_MESHES: contextvars.ContextVar[tuple[Mesh, ...]] = contextvars.ContextVar("tilefoundry_meshes", default=())


def current_mesh() -> Mesh | None:
    """The innermost `with Mesh(...)` scope of this context, or None."""
    stack = _MESHES.get()
    return stack[-1] if stack else None


def _group_axes(shape: tuple[int, ...], topologies: tuple[Topology, ...]) -> tuple[tuple[int, ...], ...]:
    """Seed 000 §2.3: contiguous axis groups matched from the end, in reverse topology order."""
    groups: list[tuple[int, ...]] = []
    end = len(shape)
    for topo in reversed(topologies):
        start, prod = end, 1
        while prod < topo.size and start > 0:
            start -= 1
            prod *= shape[start]
        if prod != topo.size:
            taken = format_int_tuple(shape[start:end])
            raise DSLError(
                f"Mesh {format_int_tuple(shape)}: the trailing axes {taken} left for topology "
                f"'{topo.name}' multiply to {prod}, expected its size {topo.size}",
                expected=topo.size, got=prod,
            )
        groups.append(tuple(range(start, end)))
        end = start
    if end:
        raise DSLError(
            f"Mesh {format_int_tuple(shape)}: axes {format_int_tuple(shape[:end])} are left over after "
            f"matching topologies {', '.join(str(t) for t in topologies)}",
            expected=0, got=end,
        )
    return tuple(reversed(groups))


def _numbers_ids_once(shape: tuple[int, ...], stride: tuple[int, ...], size: int) -> bool:
    """True when `shape:stride` maps `[0, size)` one-to-one onto `[0, size)` (a compact layout)."""
    covered = 1
    for s, d in sorted(((s, d) for s, d in zip(shape, stride, strict=True) if s != 1), key=lambda m: m[1]):
        if d != covered:
            return False
        covered *= s
    return covered == size


class Mesh:
    """A device mesh: a layout whose axes map to program topology levels.

    Args:
        topologies: the levels it spans, outermost first (e.g. cta, then thread).
        layout: a `Layout` over the mesh axes, or just their shape. A shape gets row-major
            strides within each topology's group, so under 256 threads `(8, 32)` is 8 warps
            of 32 lanes. A given layout's strides must number each group's ids one to one.
        names: one identifier per axis; defaults to the topology's name for a group of one
            axis, else the name with the axis' index in the group (`cta0`, `cta1`).

    Axes (the flattened layout's leaves) are grouped as seed 000 §2.3 states; `with mesh:`
    scopes DSL code to it.
    """

    def __init__(self, topologies: Sequence[Topology], layout: Layout | IntTuple,
                 names: Sequence[str] | None = None):
        topologies = tuple(topologies)
        if not topologies or not all(isinstance(t, Topology) for t in topologies):
            raise DSLError(f"Mesh: topologies must be a non-empty sequence of Topology, got {topologies!r}")
        seen = [t.name for t in topologies]
        if len(set(seen)) != len(seen):
            raise DSLError(f"Mesh: topology names must be distinct, got {', '.join(seen)}")
        given = layout if isinstance(layout, Layout) else Layout(layout, _zeros_like(layout))
        if not given.is_static():
            raise DSLError(f"Mesh: the layout must be static, got {given}")
        shape = flatten(given.shape)
        self.topologies = topologies
        self.groups = _group_axes(shape, topologies)
        if isinstance(layout, Layout):
            self.layout = layout
            stride = flatten(layout.stride)
            for topo, axes in zip(topologies, self.groups, strict=True):
                sub_shape, sub_stride = tuple(shape[a] for a in axes), tuple(stride[a] for a in axes)
                if not _numbers_ids_once(sub_shape, sub_stride, topo.size):
                    got = f"{format_int_tuple(sub_shape)}:{format_int_tuple(sub_stride)}"
                    compact = Layout(sub_shape, compact_row_major(sub_shape))
                    raise DSLError(
                        f"Mesh: the axes of topology '{topo.name}' ({got}) must number its {topo.size} ids "
                        f"one to one, e.g. {compact}", expected=str(compact), got=got,
                    )
        else:
            stride = tuple(
                d for axes in self.groups for d in compact_row_major(tuple(shape[a] for a in axes))
            )
            self.layout = Layout(given.shape, unflatten(stride, given.shape))
        self.names = self._names(names)

    def _names(self, names: Sequence[str] | None) -> tuple[str, ...]:
        if names is None:
            return tuple(
                topo.name if len(axes) == 1 else f"{topo.name}{j}"
                for topo, axes in zip(self.topologies, self.groups, strict=True)
                for j in range(len(axes))
            )
        names = tuple(names)
        if len(names) != self.rank or not all(isinstance(n, str) and n.isidentifier() for n in names):
            raise DSLError(f"Mesh: names must be {self.rank} identifiers, one per axis, got {names!r}")
        if len(set(names)) != len(names):
            raise DSLError(f"Mesh: axis names must be distinct, got {', '.join(names)}")
        return names

    @property
    def shape(self) -> tuple[int, ...]:
        """The extent of each axis (the layout's leaves)."""
        return flatten(self.layout.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of instances: the product of the topologies' sizes."""
        out = 1
        for t in self.topologies:
            out *= t.size
        return out

    def topology_of(self, axis: int) -> Topology:
        """The topology that mesh axis `axis` belongs to."""
        for topo, axes in zip(self.topologies, self.groups, strict=True):
            if axis in axes:
                return topo
        raise IndexError(f"Mesh {self}: axis {axis} out of range for rank {self.rank}")

    def local_index(self, program_ids: Mapping[str, int]) -> tuple[int, ...]:
        """The full mesh coordinate of the instance with these program ids (seed 000 §2.3).

        Each topology's id becomes sub-coordinates by `idx2crd(id, sub_shape, sub_stride)`;
        the groups are concatenated in axis order. Ids of topologies the mesh does not span
        are ignored.
        """
        shape, stride = self.shape, flatten(self.layout.stride)
        coord: list[int] = []
        for topo, axes in zip(self.topologies, self.groups, strict=True):
            if topo.name not in program_ids:
                raise EvalError(f"Mesh {self}: no program id given for topology '{topo.name}'",
                                expected=topo.name, got=tuple(program_ids))
            pid = program_ids[topo.name]
            if not 0 <= pid < topo.size:
                raise EvalError(f"Mesh {self}: program id {pid} of topology '{topo.name}' is outside "
                                f"[0, {topo.size})", expected=topo.size, got=pid)
            coord.extend((pid // stride[a]) % shape[a] for a in axes)
        return tuple(coord)

    def __getitem__(self, attrs: object) -> Placement:
        """Layout sugar: `mesh[Split(0), Broadcast]`, one attribute per mesh axis."""
        return Placement(self, attrs if isinstance(attrs, tuple) else (attrs,))

    def __enter__(self) -> Mesh:
        _MESHES.set((*_MESHES.get(), self))
        return self

    def __exit__(self, *exc: object) -> None:
        stack = _MESHES.get()
        # NOTE: scopes nest, so the innermost mesh is the one leaving.
        if not stack or stack[-1] is not self:
            raise RuntimeError(f"Mesh {self}: left a `with` scope it did not enter last")
        _MESHES.set(stack[:-1])

    def _key(self) -> tuple:
        return (self.topologies, self.layout, self.names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        topos = ", ".join(str(t) for t in self.topologies)
        return f"Mesh(({topos}), {self.layout}, names=({', '.join(self.names)}))"

    __repr__ = __str__


def _zeros_like(t: IntTuple) -> IntTuple:
    return 0 if is_leaf(t) else tuple(_zeros_like(m) for m in t)


# ---------------------------------------------------------------- shard attributes


@dataclass(frozen=True)
class Split:
    """Split along `axis`: a tensor axis in a `Placement`, a layout position in a `ShardLayout`."""

    axis: int

    def __post_init__(self) -> None:
        if isinstance(self.axis, bool) or not isinstance(self.axis, int):
            raise DSLError(f"Split: axis must be an int, got {self.axis!r}")

    def __str__(self) -> str:
        return f"Split({self.axis})"


@dataclass(frozen=True)
class Broadcast:
    """Every instance along the mesh axis holds the whole tensor."""

    def __str__(self) -> str:
        return "Broadcast"


PARTIAL_OPS = ("sum", "prod", "max", "min")


@dataclass(frozen=True)
class Partial:
    """Every instance holds a partial result; combining them with `op` gives the tensor."""

    op: str

    def __post_init__(self) -> None:
        if self.op not in PARTIAL_OPS:
            raise DSLError(f"Partial: reduction op must be one of {', '.join(PARTIAL_OPS)}, got {self.op!r}",
                           expected=PARTIAL_OPS, got=self.op)

    def __str__(self) -> str:
        return f"Partial({self.op})"


@dataclass(frozen=True)
class Dynamic:
    """Decided at run time (data-dependent); must be resolved before `local()`."""

    def __str__(self) -> str:
        return "Dynamic"


ShardAttr = Split | Broadcast | Partial | Dynamic


def shard_attr(x: object) -> ShardAttr:
    """`x` as a shard attribute; the bare classes `Broadcast` and `Dynamic` stand for instances."""
    if x is Broadcast or x is Dynamic:
        return x()
    if isinstance(x, (Split, Broadcast, Partial, Dynamic)):
        return x
    if x is Partial or x is Split:
        raise DSLError(f"{x.__name__} needs its argument, e.g. Partial('sum') or Split(0)")
    raise DSLError(f"shard attribute must be Split(k), Broadcast, Partial(op) or Dynamic, got {x!r}", got=x)


def _attrs_for(mesh: Mesh, attrs: Sequence[object], what: str) -> tuple[ShardAttr, ...]:
    out = tuple(shard_attr(a) for a in attrs)
    if len(out) != mesh.rank:
        raise DSLError(
            f"{what}: one shard attribute per mesh axis ({', '.join(mesh.names)}), "
            f"expected {mesh.rank}, got {len(out)}",
            expected=mesh.rank, got=len(out),
        )
    return out


# ---------------------------------------------------------------- shard layouts


class ShardLayout:
    """A tensor layout distributed over a mesh, in canonical form (seed 000 §2.4, §2.10).

    Canonical means: `attrs` has one attribute per mesh axis; `Split(k)` names leaf `k` of the
    flattened layout; that leaf's extent equals the extent of the mesh axis splitting it (so a
    step along the mesh axis is a step along the leaf); and no leaf is split twice. Anything
    else is refused with the reason. Build one from a tensor shape with `mesh[...].resolve`.

    Args:
        layout: the global layout, strides storage-physical (0 where the storage holds one part).
        attrs: one shard attribute per mesh axis.
        mesh: the mesh the attributes index.
    """

    __slots__ = ("attrs", "layout", "mesh")

    def __init__(self, layout: Layout, attrs: Sequence[object], mesh: Mesh):
        if not isinstance(layout, Layout):
            raise DSLError(f"ShardLayout: layout must be a Layout, got {type(layout).__name__} {layout!r}")
        if not isinstance(mesh, Mesh):
            raise DSLError(f"ShardLayout: mesh must be a Mesh, got {type(mesh).__name__} {mesh!r}")
        self.layout, self.mesh = layout, mesh
        self.attrs = _attrs_for(mesh, attrs, f"ShardLayout {layout}")
        extents = flatten(layout.shape)
        owner: dict[int, int] = {}
        for m, a in enumerate(self.attrs):
            if not isinstance(a, Split):
                continue
            if not 0 <= a.axis < len(extents):
                raise DSLError(
                    f"ShardLayout {layout}: mesh axis '{mesh.names[m]}' splits position {a.axis}, "
                    f"expected a leaf position in [0, {len(extents)})", expected=len(extents), got=a.axis,
                )
            if a.axis in owner:
                raise DSLError(
                    f"ShardLayout {layout}: position {a.axis} is split by both mesh axes "
                    f"'{mesh.names[owner[a.axis]]}' and '{mesh.names[m]}'; canonical form splits a "
                    "position once (give each mesh axis its own leaf)",
                )
            owner[a.axis] = m
            if extents[a.axis] != mesh.shape[m]:
                raise DSLError(
                    f"ShardLayout {layout}: position {a.axis} has extent {format_dim(extents[a.axis])}, "
                    f"canonical form needs the extent {mesh.shape[m]} of mesh axis '{mesh.names[m]}' "
                    "that splits it", expected=mesh.shape[m], got=extents[a.axis],
                )

    def _resolved(self, what: str) -> None:
        for m, a in enumerate(self.attrs):
            if isinstance(a, Dynamic):
                raise DSLError(f"{what} of {self}: mesh axis '{self.mesh.names[m]}' is Dynamic; "
                               "it must be resolved first")

    def split_positions(self) -> dict[int, int]:
        """Leaf position -> the mesh axis that splits it."""
        return {a.axis: m for m, a in enumerate(self.attrs) if isinstance(a, Split)}

    def local_shape(self) -> IntTuple:
        """Seed 000 §2.10 `shard_layout_local_shape`: the layout's shape, split leaves set to 1."""
        self._resolved("local_shape")
        split = self.split_positions()
        leaves = tuple(1 if i in split else s for i, s in enumerate(flatten(self.layout.shape)))
        return unflatten(leaves, self.layout.shape)

    def local_layout(self) -> Layout:
        """The layout one instance holds: `Layout(local_shape(), S)`."""
        return Layout(self.local_shape(), self.layout.stride)

    def local_offset(self, coord: Sequence[int]) -> Dim:
        """Seed 000 §2.10: `Σ coord[m]·S[k]` over the mesh axes m with `attrs[m] = Split(k)`."""
        self._resolved("local_offset")
        if len(coord) != self.mesh.rank:
            raise EvalError(f"local_offset of {self}: coordinate {tuple(coord)} needs {self.mesh.rank} "
                            "entries, one per mesh axis", expected=self.mesh.rank, got=len(coord))
        strides = flatten(self.layout.stride)
        total: Dim = 0
        for c, a in zip(coord, self.attrs, strict=True):
            if isinstance(a, Split):
                total = total + c * strides[a.axis]
        return total

    def global_extents(self) -> tuple[Dim, ...]:
        """The tensor's shape: the size of each top-level layout mode."""
        return tuple(_mode_sizes(self.layout.shape))

    def local_extents(self) -> tuple[Dim, ...]:
        """The shape of the tensor one instance holds (what `local(x)` has)."""
        return tuple(_mode_sizes(self.local_shape()))

    def _key(self) -> tuple:
        return (self.layout, self.attrs, self.mesh)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShardLayout) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return f"ShardLayout({self.layout}, [{', '.join(map(str, self.attrs))}], {self.mesh})"

    __repr__ = __str__


def _mode_sizes(shape: IntTuple) -> list[Dim]:
    modes = (shape,) if is_leaf(shape) else shape
    out = []
    for m in modes:
        size: Dim = 1
        for leaf in flatten(m):
            size = size * leaf
        out.append(size)
    return out


class Placement:
    """Layout sugar `mesh[attr, ...]`: shard attributes whose `Split(k)` names tensor axis k.

    The DSL accepts it as the layout item of `Tensor[shape, dtype, placement]` and in
    `tf.reshard(x, layout=placement)`; `resolve(shape)` gives the canonical ShardLayout.
    """

    __slots__ = ("attrs", "mesh")

    def __init__(self, mesh: Mesh, attrs: Sequence[object]):
        self.mesh = mesh
        self.attrs = _attrs_for(mesh, attrs, "mesh[...]")

    def resolve(self, shape: Sequence[Dim], layout: Layout | None = None) -> ShardLayout:
        """The canonical ShardLayout of a tensor of `shape` placed this way.

        Each split tensor axis k of extent e, cut by mesh axes m1 < m2 < ... (outermost
        first), becomes the mode `(e/P, e_m_last, ..., e_m1)` of its layout (P the product
        of their extents): instance coordinates pick contiguous blocks, m1 the largest.

        Args:
            shape: the tensor's shape; a split extent must be static and divisible by P.
            layout: the tensor's layout, one leaf per axis; row-major (torch's) if omitted.
        """
        shape = tuple(shape)
        base = Layout(shape, compact_row_major(shape)) if layout is None else layout
        if base.rank != len(shape) or base.depth > 1 or flatten(base.shape) != shape:
            raise DSLError(f"mesh[...].resolve: layout {base} must have one leaf per axis of shape "
                           f"{format_int_tuple(shape)}")
        cuts: dict[int, list[int]] = {}
        for m, a in enumerate(self.attrs):
            if isinstance(a, Split):
                k = a.axis + len(shape) if a.axis < 0 else a.axis
                if not 0 <= k < len(shape):
                    raise DSLError(
                        f"mesh[...]: mesh axis '{self.mesh.names[m]}' splits tensor axis {a.axis}, "
                        f"the tensor has rank {len(shape)}", expected=len(shape), got=a.axis,
                    )
                cuts.setdefault(k, []).append(m)
        modes_shape, modes_stride, leaf_of = [], [], {}
        leaf = 0
        for k, (e, d) in enumerate(zip(shape, flatten(base.stride), strict=True)):
            ms = cuts.get(k, [])
            if not ms:
                modes_shape.append(e)
                modes_stride.append(d)
                leaf += 1
                continue
            parts = 1
            for m in ms:
                parts *= self.mesh.shape[m]
            if not isinstance(e, int) or e % parts:
                names = ", ".join(f"'{self.mesh.names[m]}'" for m in ms)
                raise DSLError(
                    f"mesh[...]: tensor axis {k} has extent {format_dim(e)}, mesh axes {names} split it "
                    f"into {parts} parts; the extent must be a static multiple of {parts}",
                    expected=f"a multiple of {parts}", got=e,
                )
            sub_shape, sub_stride, step = [e // parts], [d], d * (e // parts)
            for m in reversed(ms):
                leaf_of[m] = leaf + len(sub_shape)
                sub_shape.append(self.mesh.shape[m])
                sub_stride.append(step)
                step = step * self.mesh.shape[m]
            modes_shape.append(tuple(sub_shape))
            modes_stride.append(tuple(sub_stride))
            leaf += len(sub_shape)
        attrs = tuple(Split(leaf_of[m]) if isinstance(a, Split) else a for m, a in enumerate(self.attrs))
        return ShardLayout(Layout(tuple(modes_shape), tuple(modes_stride)), attrs, self.mesh)

    def _key(self) -> tuple:
        return (self.mesh, self.attrs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placement) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return f"{self.mesh}[{', '.join(map(str, self.attrs))}]"

    __repr__ = __str__
