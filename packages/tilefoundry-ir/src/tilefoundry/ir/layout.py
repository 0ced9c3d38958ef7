"""CuTe layouts in Python: hierarchical int tuples, layout functions and their algebra.

A `Layout` is a pair of congruent int tuples, shape and stride, read as a function from
coordinates to indices: `crd2idx(coord) = Σ coord_i * stride_i` over the leaves. Coordinates
may be an int (split colexicographically, first mode fastest), flat, or hierarchical. The
algebra follows CuTe's `include/cute/layout.hpp` and its documentation:

    # (2,(1,6)):(1,(6,2))  -> coalesce    -> 12:1
    # (6,2):(8,2) ∘ (4,3):(3,1)           -> ((2,2),3):((24,2),8)
    # complement((2,4):(1,8), 32)         -> 4:2
    # (4,2,3):(2,1,8) ⊘ 4:2               -> ((2,2),(2,3)):((4,1),(2,8))

Leaves are ints; shapes and strides may also hold DimVars (dynamic extents) for building,
printing and evaluating with full coordinates. The algebra (coalesce, composition,
complement, divide, inverse) needs static ints and says so otherwise. Strides are
non-negative: CuTe allows negative ones, nothing here needs them.
"""

from __future__ import annotations

from collections.abc import Iterator

from .dims import Dim, DimExpr, DimVar, format_dim

IntTuple = int | DimVar | DimExpr | tuple["IntTuple", ...]


# ---------------------------------------------------------------- int tuples


def is_leaf(x: object) -> bool:
    """True for an int tuple's leaf: an int (not a bool) or a symbolic dimension."""
    return isinstance(x, (int, DimVar, DimExpr)) and not isinstance(x, bool)


def _check_int_tuple(x: object, what: str) -> IntTuple:
    if is_leaf(x):
        return x
    if isinstance(x, (tuple, list)):
        return tuple(_check_int_tuple(v, what) for v in x)
    raise TypeError(f"Layout: {what} holds ints, DimVars and tuples of them, got {type(x).__name__} {x!r}")


def flatten(t: IntTuple) -> tuple[Dim, ...]:
    """The leaves of `t` in order: `flatten(((2,3),4)) == (2, 3, 4)`, `flatten(5) == (5,)`."""
    if is_leaf(t):
        return (t,)
    return tuple(leaf for mode in t for leaf in flatten(mode))


def unflatten(flat: tuple[Dim, ...], profile: IntTuple) -> IntTuple:
    """`flat` regrouped like `profile`: `unflatten((1, 2, 8), ((2,3),4)) == ((1, 2), 8)`."""
    it = iter(flat)

    def build(p: IntTuple) -> IntTuple:
        return next(it) if is_leaf(p) else tuple(build(m) for m in p)

    out = build(profile)
    if next(it, None) is not None:
        raise ValueError(f"unflatten: {len(flat)} leaves do not fit profile {format_int_tuple(profile)}")
    return out


def product(t: IntTuple) -> Dim:
    """The product of the leaves (a layout's size when `t` is its shape)."""
    out: Dim = 1
    for leaf in flatten(t):
        out = out * leaf
    return out


def rank(t: IntTuple) -> int:
    """Number of top-level modes; a leaf has rank 1."""
    return 1 if is_leaf(t) else len(t)


def depth(t: IntTuple) -> int:
    """Nesting depth: 0 for a leaf, 1 for a flat tuple."""
    return 0 if is_leaf(t) else 1 + max((depth(m) for m in t), default=0)


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """True when `a` and `b` have the same hierarchical profile."""
    if is_leaf(a) or is_leaf(b):
        return is_leaf(a) and is_leaf(b)
    return len(a) == len(b) and all(congruent(x, y) for x, y in zip(a, b, strict=True))


def compact_col_major(shape: IntTuple, start: Dim = 1) -> IntTuple:
    """Column-major strides for `shape` (CuTe's default): exclusive prefix products of the leaves."""
    flat, cur = [], start
    for s in flatten(shape):
        flat.append(cur)
        cur = cur * s
    return unflatten(tuple(flat), shape)


def compact_row_major(shape: IntTuple) -> IntTuple:
    """Row-major strides for `shape` (torch's contiguous): the last leaf varies fastest."""
    flat, cur = [], 1
    for s in reversed(flatten(shape)):
        flat.append(cur)
        cur = cur * s
    return unflatten(tuple(reversed(flat)), shape)


def format_int_tuple(t: IntTuple) -> str:
    """CuTe's text for an int tuple: `((2,3),4)`, `8`, `(8)` for a rank-1 tuple."""
    if is_leaf(t):
        return format_dim(t)
    return "(" + ",".join(format_int_tuple(m) for m in t) + ")"


def crd2idx(coord: IntTuple, shape: IntTuple, stride: IntTuple) -> Dim:
    """The index of `coord` under `shape:stride`.

    An int coordinate against a tuple mode is split colexicographically; the last mode takes
    what is left without a bound (CuTe's rule), so indices past the size extend the last mode.
    """
    if isinstance(coord, tuple):
        if is_leaf(shape) or len(coord) != len(shape):
            raise ValueError(
                f"crd2idx: coordinate {format_int_tuple(coord)} is not congruent with shape "
                f"{format_int_tuple(shape)}"
            )
        total: Dim = 0
        for c, s, d in zip(coord, shape, stride, strict=True):
            total = total + crd2idx(c, s, d)
        return total
    if is_leaf(shape):
        return coord * stride
    total = 0
    for i, (s, d) in enumerate(zip(shape, stride, strict=True)):
        if i == len(shape) - 1:
            return total + crd2idx(coord, s, d)
        n = _static(product(s), "crd2idx of an int coordinate")
        total = total + crd2idx(coord % n, s, d)
        coord = coord // n
    return total


def idx2crd(idx: int, shape: IntTuple, stride: IntTuple | None = None) -> IntTuple:
    """The coordinate of `idx`, shaped like `shape`.

    Without `stride`: the colexicographic split, inverse of `crd2idx` with compact column-major
    strides (the last mode is unbounded). With `stride`: CuTe's `(idx / stride) % shape` per
    leaf, which inverts a compact layout of any mode order; a stride-0 leaf reads 0.
    """
    if stride is not None:
        if is_leaf(shape):
            return 0 if stride == 0 else (idx // stride) % shape
        return tuple(idx2crd(idx, s, d) for s, d in zip(shape, stride, strict=True))
    if is_leaf(shape):
        return idx
    out = []
    for i, s in enumerate(shape):
        if i == len(shape) - 1:
            out.append(idx2crd(idx, s))
        else:
            n = _static(product(s), "idx2crd")
            out.append(idx2crd(idx % n, s))
            idx //= n
    return tuple(out)


def _static(x: Dim, op: str) -> int:
    if not isinstance(x, int):
        raise ValueError(f"{op}: needs static extents and strides, got {format_dim(x)}")
    return x


# ---------------------------------------------------------------- Layout


class Layout:
    """A CuTe layout `shape:stride`, a function from coordinates to indices.

    Args:
        shape: an int tuple (ints >= 1, or DimVars).
        stride: congruent with `shape`, non-negative; column-major (CuTe's default) if omitted.

    Example:
        `Layout((2, 4))` is `(2,4):(1,2)`; `Layout((2, 4), (4, 1))(1, 2) == 6`.
    """

    __slots__ = ("shape", "stride")

    shape: IntTuple
    stride: IntTuple

    def __init__(self, shape: IntTuple, stride: IntTuple | None = None):
        shape = _check_int_tuple(shape, "shape")
        stride = compact_col_major(shape) if stride is None else _check_int_tuple(stride, "stride")
        if not congruent(shape, stride):
            raise ValueError(
                f"Layout: stride {format_int_tuple(stride)} is not congruent with shape "
                f"{format_int_tuple(shape)}"
            )
        for s in flatten(shape):
            if isinstance(s, int) and s < 1:
                raise ValueError(f"Layout: extents must be >= 1, shape {format_int_tuple(shape)} holds {s}")
        for d in flatten(stride):
            if isinstance(d, int) and d < 0:
                raise ValueError(f"Layout: strides must be >= 0, stride {format_int_tuple(stride)} holds {d}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "stride", stride)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Layout is immutable")

    def __reduce__(self) -> tuple:
        # Rebuild through __init__: the default slot restore would go through __setattr__.
        return (Layout, (self.shape, self.stride))

    @property
    def size(self) -> Dim:
        """Number of coordinates (the domain's size)."""
        return product(self.shape)

    @property
    def cosize(self) -> Dim:
        """One past the largest index (the codomain's size): `1 + Σ (s-1)·d`."""
        total: Dim = 1
        for s, d in zip(flatten(self.shape), flatten(self.stride), strict=True):
            total = total + (s - 1) * d
        return total

    @property
    def rank(self) -> int:
        return rank(self.shape)

    @property
    def depth(self) -> int:
        return depth(self.shape)

    def is_static(self) -> bool:
        """True when every extent and stride is an int."""
        return all(isinstance(x, int) for x in flatten(self.shape) + flatten(self.stride))

    def modes(self) -> Iterator[tuple[Dim, Dim]]:
        """The flat `(extent, stride)` leaves, in order."""
        return zip(flatten(self.shape), flatten(self.stride), strict=True)

    def flatten(self) -> Layout:
        """The same function with the hierarchy removed: `((2,3),4):((1,2),6) -> (2,3,4):(1,2,6)`."""
        return Layout(flatten(self.shape), flatten(self.stride))

    def __getitem__(self, i: int) -> Layout:
        """Top-level mode `i` as a layout."""
        if is_leaf(self.shape):
            if i not in (0, -1):
                raise IndexError(f"Layout {self}: mode {i} out of range for rank 1")
            return self
        return Layout(self.shape[i], self.stride[i])

    def __iter__(self) -> Iterator[Layout]:
        return (self[i] for i in range(self.rank))

    def crd2idx(self, coord: IntTuple) -> Dim:
        """The index of `coord` (an int, flat, or hierarchical coordinate)."""
        return crd2idx(coord, self.shape, self.stride)

    def idx2crd(self, idx: int) -> IntTuple:
        """The coordinate that this (compact, injective) layout maps to `idx`."""
        return idx2crd(idx, self.shape, self.stride)

    def __call__(self, *coord: IntTuple) -> Dim:
        return self.crd2idx(coord[0] if len(coord) == 1 else tuple(coord))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Layout) and (self.shape, self.stride) == (other.shape, other.stride)

    def __hash__(self) -> int:
        return hash((Layout, self.shape, self.stride))

    def __str__(self) -> str:
        return f"{format_int_tuple(self.shape)}:{format_int_tuple(self.stride)}"

    def __repr__(self) -> str:
        return f"Layout({self})"


def make_layout(*layouts: Layout) -> Layout:
    """The concatenation of layouts as the modes of one: `make_layout(4:2, 3:8) -> (4,3):(2,8)`."""
    return Layout(tuple(a.shape for a in layouts), tuple(a.stride for a in layouts))


def _from_modes(modes: list[tuple[int, int]]) -> Layout:
    """A flat layout of `modes`; one mode is an integral layout, none is `1:0`."""
    if not modes:
        return Layout(1, 0)
    if len(modes) == 1:
        return Layout(*modes[0])
    return Layout(tuple(s for s, _ in modes), tuple(d for _, d in modes))


def _static_modes(a: Layout, op: str) -> list[tuple[int, int]]:
    if not a.is_static():
        raise ValueError(f"{op}: needs static extents and strides, got {a}")
    return list(a.modes())


# ---------------------------------------------------------------- coalesce


def coalesce(a: Layout, profile: IntTuple | None = None) -> Layout:
    """The same function over `[0, size)` with the fewest modes.

    Size-1 modes are dropped and `s0:d0 ++ s1:s0*d0` merges into `s0*s1:d0`. With `profile`
    (a tuple), each top-level mode is coalesced on its own: `(2,(1,6)):(1,(6,2))` by `(1,1)`
    gives `(2,6):(1,2)`.
    """
    if profile is not None and not is_leaf(profile):
        return make_layout(*(coalesce(a[i], p) for i, p in enumerate(profile)),
                           *(a[i] for i in range(len(profile), a.rank)))
    out: list[tuple[int, int]] = []
    for s, d in _static_modes(a, "coalesce"):
        if s == 1:
            continue
        if out and d == out[-1][0] * out[-1][1]:
            out[-1] = (out[-1][0] * s, out[-1][1])
        else:
            out.append((s, d))
    return _from_modes(out)


# ---------------------------------------------------------------- composition


def composition(a: Layout, b: Layout | IntTuple | tuple) -> Layout:
    """`a ∘ b`: the layout R with `R(c) == a(b(c))` for every coordinate c of b.

    `b` is a Layout (R then has b's shape profile), an int `n` (the tile `n:1`), or a tuple
    of those applied mode by mode to a's top-level modes (a CuTe Tiler).

    Raises:
        ValueError: the stride or shape divisibility condition fails (CuTe's static_asserts).
    """
    if not isinstance(b, Layout):
        if is_leaf(b):
            return composition(a, Layout(b, 1))
        if len(b) > a.rank:
            raise ValueError(f"composition: tiler {format_int_tuple(b)} has more modes than {a}")
        return make_layout(*(composition(a[i], t) for i, t in enumerate(b)),
                           *(a[i] for i in range(len(b), a.rank)))
    lhs = [m for m in coalesce(a).modes()]
    return _compose(lhs, b.shape, b.stride, a, b)


def _compose(lhs: list[tuple[int, int]], shape: IntTuple, stride: IntTuple, a: Layout, b: Layout) -> Layout:
    if not is_leaf(shape):
        return make_layout(*(_compose(lhs, s, d, a, b) for s, d in zip(shape, stride, strict=True)))
    n = _static(shape, "composition")
    r = _static(stride, "composition")
    if r == 0:
        return Layout(n, 0)
    if len(lhs) == 1:
        return Layout(n, r * lhs[0][1])
    # Divide the first r indices out of a's modes (stride), then keep n of what remains (shape).
    out: list[tuple[int, int]] = []
    rest_stride, rest_shape = r, n
    for s, d in lhs[:-1]:
        if rest_stride % s == 0:
            kept, new_d, rest_stride = 1, d, rest_stride // s
        elif s % rest_stride == 0:
            kept, new_d, rest_stride = s // rest_stride, d * rest_stride, 1
        else:
            raise ValueError(
                f"composition {a} ∘ {b}: stride divisibility fails, stride {rest_stride} against extent {s}"
            )
        if kept % rest_shape and rest_shape % kept:
            raise ValueError(
                f"composition {a} ∘ {b}: shape divisibility fails, extent {rest_shape} against extent {kept}"
            )
        take = min(kept, rest_shape)
        out.append((take, new_d))
        rest_shape //= take
    out.append((rest_shape, lhs[-1][1] * rest_stride))
    return coalesce(_from_modes(out))


# ---------------------------------------------------------------- complement and divide


def complement(a: Layout, cotarget: IntTuple) -> Layout:
    """The layout of the indices in `[0, cotarget)` that `a` does not reach, ordered.

    `make_layout(a, complement(a, M))` covers `[0, M)` (rounded up to a multiple of a's span)
    without repeats: `complement(4:2, 24) -> (2,3):(1,8)`.

    Raises:
        ValueError: `a` is not injective, or its strides do not nest (no complement exists).
    """
    modes = sorted(((s, d) for s, d in _static_modes(a, "complement") if s != 1 and d != 0),
                   key=lambda m: (m[1], m[0]))
    out: list[tuple[int, int]] = []
    covered = 1
    for s, d in modes:
        if d < covered or d % covered:
            raise ValueError(
                f"complement of {a}: stride {d} does not extend the {covered} indices already covered "
                "(the layout is not injective or its strides do not nest)"
            )
        out.append((d // covered, covered))
        covered = s * d
    total = _static(product(cotarget), "complement")
    out.append((-(-total // covered), covered))
    return coalesce(_from_modes(out))


def _tiler_layout(t: Layout | int) -> Layout:
    return t if isinstance(t, Layout) else Layout(t, 1)


def logical_divide(a: Layout, tiler: Layout | IntTuple | tuple) -> Layout:
    """`a ⊘ tiler = a ∘ (tiler, complement(tiler, size(a)))`: mode 0 one tile, mode 1 the tiles.

    A tuple tiler divides a's top-level modes one by one, so the result is
    `((tile0, rest0), (tile1, rest1), ...)`.
    """
    if not isinstance(tiler, Layout) and not is_leaf(tiler):
        if len(tiler) > a.rank:
            raise ValueError(f"logical_divide: tiler {format_int_tuple(tiler)} has more modes than {a}")
        return make_layout(*(logical_divide(a[i], t) for i, t in enumerate(tiler)),
                           *(a[i] for i in range(len(tiler), a.rank)))
    b = _tiler_layout(tiler)
    size = _static(a.size, "logical_divide")
    return composition(a, make_layout(b, complement(b, size)))


def zipped_divide(a: Layout, tiler: Layout | IntTuple | tuple) -> Layout:
    """`logical_divide` with the tiles gathered: `((tile0, tile1, ...), (rest0, rest1, ...))`."""
    if isinstance(tiler, Layout) or is_leaf(tiler):
        return logical_divide(a, tiler)
    d = logical_divide(a, tiler)
    r = len(tiler)
    tiles = make_layout(*(d[i][0] for i in range(r)))
    rests = make_layout(*(d[i][1] for i in range(r)), *(d[i] for i in range(r, d.rank)))
    return make_layout(tiles, rests)


def tiled_divide(a: Layout, tiler: Layout | IntTuple | tuple) -> Layout:
    """`zipped_divide` with the rest modes unpacked: `((tile0, tile1, ...), rest0, rest1, ...)`."""
    z = zipped_divide(a, tiler)
    return make_layout(z[0], *z[1])


def right_inverse(a: Layout) -> Layout:
    """The largest R with `a(R(i)) == i` for every i < size(R).

    Follows a's modes in stride order while each stride equals the span covered so far; a
    mode's stride in R is its position in a's column-major index space.
    """
    flat = [m for m in coalesce(a).modes() if m[1] != 0]
    positions = flatten(compact_col_major(tuple(s for s, _ in flat))) if flat else ()
    out: list[tuple[int, int]] = []
    covered = 1
    for (s, d), pos in sorted(zip(flat, positions, strict=True), key=lambda m: m[0][1]):
        if d != covered:
            break
        out.append((s, pos))
        covered = s * d
    return coalesce(_from_modes(out))
