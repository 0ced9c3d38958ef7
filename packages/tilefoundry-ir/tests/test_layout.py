"""Tests of tilefoundry.ir.layout: CuTe's worked examples, then properties over random layouts."""

import copy
import itertools
import pickle
import random

import pytest

from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.layout import (
    Layout,
    coalesce,
    compact_col_major,
    compact_row_major,
    complement,
    composition,
    crd2idx,
    flatten,
    idx2crd,
    logical_divide,
    make_layout,
    right_inverse,
    tiled_divide,
    unflatten,
    zipped_divide,
)

# ---------------------------------------------------------------- construction and text


def test_default_strides_are_column_major():
    assert Layout((2, 4)) == Layout((2, 4), (1, 2))
    assert Layout(((2, 3), 4)).stride == ((1, 2), 6)
    assert compact_row_major(((2, 3), 4)) == ((12, 4), 1)
    assert compact_col_major(8) == 1


@pytest.mark.parametrize(
    ("layout", "text"),
    [
        (Layout((2, 4), (1, 2)), "(2,4):(1,2)"),
        (Layout(8, 1), "8:1"),
        (Layout((8,), (1,)), "(8):(1)"),
        (Layout(((2, 2), 4), ((1, 4), 2)), "((2,2),4):((1,4),2)"),
        (Layout((DimVar("T", 1, 9), 16), (16, 1)), "(T,16):(16,1)"),
    ],
)
def test_str_is_cute_notation(layout, text):
    assert str(layout) == text
    assert repr(layout) == f"Layout({text})"


def test_equality_and_hash_are_structural():
    assert Layout((2, 4), (1, 2)) == Layout((2, 4))
    assert hash(Layout((2, 4), (1, 2))) == hash(Layout((2, 4)))
    assert Layout((8,), (1,)) != Layout(8, 1)
    assert len({Layout((2, 4)), Layout((2, 4), (1, 2)), Layout((2, 4), (4, 1))}) == 2


def test_size_cosize_rank_depth():
    a = Layout((4, (3, 2)), (2, (8, 1)))
    assert (a.size, a.cosize, a.rank, a.depth) == (24, 24, 2, 2)
    assert Layout(8, 0).cosize == 1
    t = DimVar("T", 1, 9)
    assert str(Layout((t, 16), (16, 1)).size) == "16*T"


@pytest.mark.parametrize(
    ("shape", "stride", "message"),
    [
        ((2, 4), (1,), "Layout: stride (1) is not congruent with shape (2,4)"),
        ((2, 0), None, "Layout: extents must be >= 1, shape (2,0) holds 0"),
        ((2, 4), (1, -2), "Layout: strides must be >= 0, stride (1,-2) holds -2"),
        ((2, 4.0), None, "Layout: shape holds ints, DimVars and tuples of them, got float 4.0"),
    ],
)
def test_bad_layouts_are_refused(shape, stride, message):
    with pytest.raises((ValueError, TypeError)) as err:
        Layout(shape, stride)
    assert str(err.value) == message


def test_layout_is_immutable_and_pickles():
    with pytest.raises(AttributeError, match="Layout is immutable"):
        Layout(4).shape = 8
    a = Layout(((2, DimVar("T", 1, 9)), 4))
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a


# ---------------------------------------------------------------- coordinates


def test_crd2idx_int_flat_and_hierarchical_coordinates():
    a = Layout((3, (2, 3)), (3, (12, 1)))
    # The same element by its int, flat-mode and hierarchical coordinate.
    assert a(16) == a(1, 5) == a((1, (1, 2))) == 3 + 12 + 2
    assert a(1, 5) == crd2idx((1, 5), a.shape, a.stride)
    assert [a(i) for i in range(6)] == [0, 3, 6, 12, 15, 18]


def test_crd2idx_extends_the_last_mode_past_the_size():
    assert Layout((2, 4), (1, 2))(9) == 1 + 4 * 2


def test_crd2idx_refuses_a_coordinate_of_the_wrong_rank():
    with pytest.raises(ValueError, match=r"coordinate \(1,2,3\) is not congruent with shape \(2,4\)"):
        Layout((2, 4))((1, 2, 3))


def test_idx2crd_inverts_crd2idx():
    shape = ((2, 3), 4)
    for i in range(24):
        assert crd2idx(idx2crd(i, shape), shape, compact_col_major(shape)) == i
    row = Layout((2, 3, 4), (12, 4, 1))
    for i in range(24):
        assert row(row.idx2crd(i)) == i
    assert idx2crd(5, (4, 8), (0, 1)) == (0, 5)


def test_flatten_unflatten_and_modes():
    a = Layout(((2, 3), 4), ((1, 2), 6))
    assert a.flatten() == Layout((2, 3, 4), (1, 2, 6))
    assert unflatten((1, 2, 8), ((2, 3), 4)) == ((1, 2), 8)
    assert a[0] == Layout((2, 3), (1, 2)) and a[1] == Layout(4, 6)
    assert list(a.modes()) == [(2, 1), (3, 2), (4, 6)]
    assert make_layout(Layout(4, 2), Layout(3, 8)) == Layout((4, 3), (2, 8))
    with pytest.raises(ValueError, match=r"unflatten: 2 leaves do not fit profile \(2\)"):
        unflatten((1, 2), (2,))


# ---------------------------------------------------------------- worked examples (CuTe docs)


def test_coalesce_examples():
    # (2,(1,6)):(1,(6,2)) -> 12:1, and by mode -> (2,6):(1,2)
    a = Layout((2, (1, 6)), (1, (6, 2)))
    assert coalesce(a) == Layout(12, 1)
    assert coalesce(a, (1, 1)) == Layout((2, 6), (1, 2))
    assert coalesce(Layout((2, 4), (1, 2))) == Layout(8, 1)
    assert coalesce(Layout((2, 4), (4, 1))) == Layout((2, 4), (4, 1))
    assert coalesce(Layout((1, 1), (3, 5))) == Layout(1, 0)


def test_composition_examples():
    # A = (6,2):(8,2), B = (4,3):(3,1) -> ((2,2),3):((24,2),8)
    assert composition(Layout((6, 2), (8, 2)), Layout((4, 3), (3, 1))) == Layout(((2, 2), 3), ((24, 2), 8))
    # (3,6,2,8):(w,x,y,z) ∘ 16:9 = (1,2,2,4):(9w,3x,y,z), coalesced
    w, x, y, z = 1, 100, 1000, 5000
    a = Layout((3, 6, 2, 8), (w, x, y, z))
    assert composition(a, Layout(16, 9)) == Layout((2, 2, 4), (300, 1000, 5000))
    assert composition(Layout(20, 2), Layout((4, 5), (1, 4))) == Layout((4, 5), (2, 8))
    assert composition(Layout((4, 8)), Layout(8, 0)) == Layout(8, 0)


def test_composition_divisibility_is_checked():
    with pytest.raises(ValueError, match=r"stride divisibility fails, stride 4 against extent 6"):
        composition(Layout((6, 2), (8, 2)), Layout(2, 4))
    with pytest.raises(ValueError, match=r"shape divisibility fails, extent 4 against extent 6"):
        composition(Layout((6, 2), (1, 7)), Layout(4, 1))


def test_complement_examples():
    assert complement(Layout(4, 2), 24) == Layout((2, 3), (1, 8))
    assert complement(Layout((2, 4), (1, 8)), 32) == Layout(4, 2)
    assert complement(Layout(3, 3), 9) == Layout(3, 1)
    assert complement(Layout(4, 1), 24) == Layout(6, 4)
    assert complement(Layout((2, 2), (0, 1)), 8) == Layout(4, 2)


def test_complement_refuses_a_non_injective_layout():
    with pytest.raises(ValueError, match=r"complement of \(2,2\):\(1,1\): stride 1 does not extend the 2"):
        complement(Layout((2, 2), (1, 1)), 8)


def test_logical_divide_examples():
    # 1-D: (4,2,3):(2,1,8) ⊘ 4:2 -> ((2,2),(2,3)):((4,1),(2,8))
    divided = logical_divide(Layout((4, 2, 3), (2, 1, 8)), Layout(4, 2))
    assert divided == Layout(((2, 2), (2, 3)), ((4, 1), (2, 8)))
    # 2-D by mode: (9,(4,8)):(59,(13,1)) ⊘ <3:3, (2,4):(1,8)>
    a = Layout((9, (4, 8)), (59, (13, 1)))
    tiler = (Layout(3, 3), Layout((2, 4), (1, 8)))
    assert logical_divide(a, tiler) == Layout(((3, 3), ((2, 4), (2, 2))), ((177, 59), ((13, 2), (26, 1))))
    assert zipped_divide(a, tiler) == Layout(((3, (2, 4)), (3, (2, 2))), ((177, (13, 2)), (59, (26, 1))))
    assert tiled_divide(a, tiler) == Layout(((3, (2, 4)), 3, (2, 2)), ((177, (13, 2)), 59, (26, 1)))


def test_logical_divide_by_int_tiles():
    # An (8,6) column-major matrix in (4,3) tiles: ((tile, tiles), (tile, tiles)).
    assert logical_divide(Layout((8, 6)), (4, 3)) == Layout(((4, 2), (3, 2)), ((1, 4), (8, 24)))


def test_right_inverse_examples():
    assert right_inverse(Layout((2, 4), (4, 1))) == Layout((4, 2), (2, 1))
    assert right_inverse(Layout(8, 1)) == Layout(8, 1)
    assert right_inverse(Layout((4, 2), (2, 8))) == Layout(1, 0)


def test_algebra_needs_static_layouts():
    t = DimVar("T", 1, 9)
    message = r"coalesce: needs static extents and strides, got \(T,16\):\(16,1\)"
    with pytest.raises(ValueError, match=message):
        coalesce(Layout((t, 16), (16, 1)))


# ---------------------------------------------------------------- properties over random layouts


def _random_bijection(rng: random.Random) -> Layout:
    """A compact layout with its modes permuted: a bijection of [0, size)."""
    shape = tuple(rng.choice((2, 3, 4)) for _ in range(rng.randint(1, 4)))
    stride = flatten(compact_col_major(shape))
    order = list(range(len(shape)))
    rng.shuffle(order)
    return Layout(tuple(shape[i] for i in order), tuple(stride[i] for i in order))


def _values(a: Layout) -> list[int]:
    return [a(i) for i in range(a.size)]


def test_coalesce_keeps_the_function():
    rng = random.Random(1)
    for _ in range(200):
        a = _random_bijection(rng)
        c = coalesce(a)
        assert c.size == a.size and c.depth <= 1
        assert _values(c) == _values(a)


def test_composition_is_function_composition():
    """For injective B (where CuTe's composition distributes over B's modes)."""
    rng = random.Random(2)
    composed = 0
    for _ in range(400):
        a = _random_bijection(rng)
        scaled = _random_bijection(rng)
        factor = rng.choice((1, 2, 3))
        b = Layout(scaled.shape, tuple(d * factor for d in flatten(scaled.stride)))
        try:
            r = composition(a, b)
        except ValueError:
            continue
        composed += 1
        assert r.size == b.size
        assert all(r(i) == a(b(i)) for i in range(b.size))
    assert composed > 100


def test_complement_fills_the_holes_of_a_tile():
    rng = random.Random(3)
    for _ in range(200):
        whole = _random_bijection(rng)
        modes = list(whole.modes())
        kept = [m for m in modes if rng.random() < 0.5] or modes[:1]
        a = Layout(tuple(s for s, _ in kept), tuple(d for _, d in kept))
        c = complement(a, whole.size)
        assert all(c(i - 1) < c(i) for i in range(1, c.size))
        assert not set(_values(a)) & {c(i) for i in range(1, c.size)}
        assert sorted(_values(make_layout(a, c))) == list(range(whole.size))


def test_logical_divide_permutes_the_elements():
    rng = random.Random(4)
    for _ in range(200):
        a = _random_bijection(rng)
        tile = rng.choice([d for d in range(1, a.size + 1) if a.size % d == 0])
        try:
            d = logical_divide(a, tile)
        except ValueError:
            continue
        assert sorted(_values(d)) == sorted(_values(a))
        assert _values(d[0]) == [a(i) for i in range(tile)]


def test_right_inverse_is_a_right_inverse():
    rng = random.Random(5)
    for _ in range(200):
        a = _random_bijection(rng)
        r = right_inverse(a)
        assert r.size == a.size
        assert all(a(r(i)) == i for i in range(r.size))


def test_idx2crd_inverts_a_compact_layout():
    rng = random.Random(6)
    for _ in range(100):
        a = _random_bijection(rng)
        assert all(a(a.idx2crd(i)) == i for i in range(a.size))
        for crd in itertools.islice(itertools.product(*(range(s) for s in flatten(a.shape))), 20):
            assert a.idx2crd(a(crd)) == crd
