"""Tests of tilefoundry.ir.shard: topologies, meshes, shard attributes, shard layouts, placements."""

import copy
import itertools
import pickle
import threading

import pytest
import torch

from tilefoundry.ir.dims import DimVar
from tilefoundry.ir.errors import DSLError, EvalError
from tilefoundry.ir.layout import Layout
from tilefoundry.ir.shard import (
    Broadcast,
    Dynamic,
    Mesh,
    Partial,
    Placement,
    ShardLayout,
    Split,
    Topology,
    current_mesh,
    shard_attr,
)

CTA8 = Topology("cta", 8)
THREAD32 = Topology("thread", 32)


# ---------------------------------------------------------------- topologies and meshes


def test_topology_is_named_and_sized():
    assert str(Topology("cta", 132)) == "cta:132"
    with pytest.raises(DSLError, match=r"Topology 'cta': size must be an int >= 1, got 0"):
        Topology("cta", 0)
    with pytest.raises(DSLError, match=r"Topology: name must be an identifier, got 'a b'"):
        Topology("a b", 4)


def test_2_3_axes_are_grouped_from_the_end_in_reverse_topology_order():
    """seed 000 §2.3: contiguous groups matched from the end, reverse topology order, greedy."""
    m = Mesh((CTA8, THREAD32), (2, 4, 8, 4))
    assert m.groups == ((0, 1), (2, 3))
    assert [m.topology_of(a).name for a in range(4)] == ["cta", "cta", "thread", "thread"]
    # Extent-1 axes: the thread group stops once its product is reached.
    assert Mesh((CTA8, THREAD32), (8, 1, 32)).groups == ((0, 1), (2,))
    # A size-1 topology takes no axis.
    assert Mesh((Topology("cluster", 1), CTA8), (8,)).groups == ((), (0,))


def test_2_3_grouping_refuses_when_a_topology_is_not_matched():
    """seed 000 §2.3: for each topology the product of its axes equals its device count."""
    with pytest.raises(DSLError) as err:
        Mesh((CTA8, THREAD32), (8, 16, 4))
    assert str(err.value) == (
        "Mesh (8,16,4): the trailing axes (16,4) left for topology 'thread' multiply to 64, "
        "expected its size 32"
    )
    assert (err.value.expected, err.value.got) == (32, 64)
    with pytest.raises(DSLError, match=r"Mesh \(2,8,32\): axes \(2\) are left over after matching "
                                       r"topologies cta:8, thread:32"):
        Mesh((CTA8, THREAD32), (2, 8, 32))
    with pytest.raises(DSLError, match=r"the trailing axes \(4\) left for topology 'cta' multiply to 4, "
                                       r"expected its size 8"):
        Mesh((CTA8, THREAD32), (4, 32))


def test_2_3_local_index_is_idx2crd_per_topology_concatenated():
    """seed 000 §2.3: each topology's id -> idx2crd(id, sub_shape, sub_stride), concatenated."""
    m = Mesh((CTA8, THREAD32), (2, 4, 8, 4))
    assert m.layout == Layout((2, 4, 8, 4), (4, 1, 4, 1))  # row-major within each group
    assert m.local_index({"cta": 5, "thread": 13}) == (1, 1, 3, 1)
    # Every instance gets its own coordinate, and each group's layout gives the id back.
    seen = set()
    for cta, thread in itertools.product(range(8), range(32)):
        coord = m.local_index({"cta": cta, "thread": thread})
        seen.add(coord)
        assert Layout((2, 4), (4, 1))(coord[:2]) == cta and Layout((8, 4), (4, 1))(coord[2:]) == thread
    assert len(seen) == m.size == 256


def test_2_3_local_index_follows_an_explicit_layout():
    """seed 000 §2.3: sub_stride comes from the mesh layout (here column-major per group)."""
    m = Mesh((CTA8, THREAD32), Layout((2, 4, 32), (1, 2, 1)))
    assert m.local_index({"cta": 5, "thread": 7, "other": 3}) == (1, 2, 7)


def test_mesh_refuses_a_layout_that_does_not_number_ids_once():
    with pytest.raises(DSLError) as err:
        Mesh((CTA8, THREAD32), Layout((2, 4, 32), (1, 2, 8)))
    assert str(err.value) == (
        "Mesh: the axes of topology 'thread' ((32):(8)) must number its 32 ids one to one, e.g. (32):(1)"
    )


def test_local_index_refuses_missing_or_out_of_range_ids():
    m = Mesh((CTA8, THREAD32), (8, 32))
    with pytest.raises(EvalError, match=r"no program id given for topology 'thread'"):
        m.local_index({"cta": 0})
    with pytest.raises(EvalError, match=r"program id 32 of topology 'thread' is outside \[0, 32\)"):
        m.local_index({"cta": 0, "thread": 32})


def test_mesh_names_default_and_given():
    assert Mesh((CTA8, THREAD32), (2, 4, 32)).names == ("cta0", "cta1", "thread")
    assert Mesh((CTA8,), (2, 4), names=("x", "y")).names == ("x", "y")
    with pytest.raises(DSLError, match=r"Mesh: names must be 2 identifiers, one per axis, got \('x',\)"):
        Mesh((CTA8,), (2, 4), names=("x",))
    with pytest.raises(DSLError, match=r"Mesh: axis names must be distinct, got x, x"):
        Mesh((CTA8,), (2, 4), names=("x", "x"))
    with pytest.raises(DSLError, match=r"Mesh: topology names must be distinct, got cta, cta"):
        Mesh((CTA8, CTA8), (8, 8))


def test_mesh_text_equality_and_hash():
    m = Mesh((CTA8, THREAD32), (2, 4, 32))
    assert str(m) == "Mesh((cta:8, thread:32), (2,4,32):(4,1,1), names=(cta0, cta1, thread))"
    assert m == Mesh((CTA8, THREAD32), Layout((2, 4, 32), (4, 1, 1)))
    assert hash(m) == hash(Mesh((CTA8, THREAD32), (2, 4, 32)))
    assert m != Mesh((CTA8, THREAD32), (2, 4, 32), names=("a", "b", "c"))
    assert (m.shape, m.rank, m.size) == ((2, 4, 32), 3, 256)


def test_with_mesh_scopes_nest_and_unwind():
    outer, inner = Mesh((CTA8,), (8,)), Mesh((CTA8,), (2, 4))
    assert current_mesh() is None
    with outer as m:
        assert m is outer and current_mesh() is outer
        with pytest.raises(ZeroDivisionError), inner:
            assert current_mesh() is inner
            _ = 1 / 0
        assert current_mesh() is outer
    assert current_mesh() is None


def test_mesh_scope_is_per_thread():
    seen = []
    with Mesh((CTA8,), (8,)):
        t = threading.Thread(target=lambda: seen.append(current_mesh()))
        t.start()
        t.join()
    assert seen == [None]


# ---------------------------------------------------------------- shard attributes


def test_2_5_shard_attributes():
    """seed 000 §2.5: Split along an axis, Broadcast, Partial reduction, Dynamic."""
    assert [str(a) for a in (Split(1), Broadcast(), Partial("max"), Dynamic())] == [
        "Split(1)", "Broadcast", "Partial(max)", "Dynamic"]
    assert shard_attr(Broadcast) == Broadcast() and shard_attr(Dynamic) == Dynamic()
    with pytest.raises(DSLError, match=r"Partial: reduction op must be one of sum, prod, max, min, "
                                       r"got 'mean'"):
        Partial("mean")
    with pytest.raises(DSLError, match=r"Partial needs its argument, e.g. Partial\('sum'\) or Split\(0\)"):
        shard_attr(Partial)
    with pytest.raises(DSLError, match=r"shard attribute must be Split\(k\), Broadcast, Partial\(op\) or "
                                       r"Dynamic, got 'S'"):
        shard_attr("S")


# ---------------------------------------------------------------- shard layouts


def _local_view(x: torch.Tensor, sl: ShardLayout, coord: tuple[int, ...]) -> torch.Tensor:
    """What seed 000 §2.10 local() returns, materialized: x.flat[offset + L(c)] over local coords."""
    flat, offset, local = x.reshape(-1), sl.local_offset(coord), sl.local_layout()
    extents = sl.local_extents()
    index = [offset + local(c) for c in itertools.product(*(range(e) for e in extents))]
    return flat[torch.tensor(index)].reshape(extents)


def test_2_10_local_of_a_row_split_is_the_instance_block():
    """seed 000 §2.10: offset = Σ coord[m]·S[k]; shape' = local shape; view = (ptr+offset, shape', S)."""
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    m = Mesh((Topology("cta", 4),), (4,))
    sl = m[Split(0)].resolve(x.shape)
    assert str(sl.layout) == "((2,4),16):((16,32),1)" and sl.attrs == (Split(1),)
    assert sl.local_shape() == ((2, 1), 16) and sl.local_extents() == (2, 16)
    for c in range(4):
        assert sl.local_offset((c,)) == 32 * c
        assert torch.equal(_local_view(x, sl, (c,)), x.chunk(4, dim=0)[c])


def test_2_10_two_mesh_axes_split_two_tensor_axes():
    """seed 000 §2.10: each Split(k) adds coord[m]·S[k]; other axes add nothing."""
    x = torch.randn(8, 6, generator=torch.Generator().manual_seed(1))
    m = Mesh((CTA8,), (2, 4))
    sl = m[Split(1), Split(0)].resolve(x.shape)
    assert sl.local_extents() == (2, 3)
    for c0, c1 in itertools.product(range(2), range(4)):
        expected = x.chunk(4, dim=0)[c1].chunk(2, dim=1)[c0]
        assert torch.equal(_local_view(x, sl, (c0, c1)), expected)


def test_2_10_mesh_axes_splitting_one_tensor_axis_nest_outermost_first():
    """seed 000 §2.10: two mesh axes on one tensor axis; the first mesh axis picks the larger block."""
    x = torch.randn(16, 3, generator=torch.Generator().manual_seed(2))
    m = Mesh((CTA8, THREAD32), (2, 4, 32))
    sl = m[Split(0), Split(0), Broadcast].resolve(x.shape)
    assert str(sl.layout) == "((2,4,2),3):((3,6,24),1)" and sl.attrs == (Split(2), Split(1), Broadcast())
    for c0, c1, t in itertools.product(range(2), range(4), (0, 31)):
        assert torch.equal(_local_view(x, sl, (c0, c1, t)), x.chunk(8, dim=0)[c0 * 4 + c1])


def test_2_10_broadcast_and_partial_contribute_no_offset():
    """seed 000 §2.10: A[m] ∈ {Broadcast, Partial} contributes 0 to offset."""
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(3))
    m = Mesh((CTA8,), (2, 4))
    sl = m[Partial("sum"), Broadcast].resolve(x.shape)
    assert sl.local_extents() == sl.global_extents() == (4, 4)
    for coord in itertools.product(range(2), range(4)):
        assert sl.local_offset(coord) == 0
        assert torch.equal(_local_view(x, sl, coord), x)


def test_2_10_dynamic_must_be_resolved_before_local():
    """seed 000 §2.10: A[m] = Dynamic must have been resolved before local()."""
    sl = Mesh((CTA8,), (2, 4))[Dynamic, Split(0)].resolve((8, 2))
    with pytest.raises(DSLError, match=r"local_offset of ShardLayout.*: mesh axis 'cta0' is Dynamic; "
                                       r"it must be resolved first"):
        sl.local_offset((0, 1))
    with pytest.raises(DSLError, match=r"local_shape of .*'cta0' is Dynamic"):
        sl.local_shape()


def test_2_10_3_zero_stride_split_contributes_nothing():
    """seed 000 §2.10.3: S[k] = 0 ⇒ contribution 0, one path for every storage."""
    m = Mesh((THREAD32,), (32,))
    rmem = ShardLayout(Layout(((4, 32),), ((1, 0),)), (Split(1),), m)
    assert [rmem.local_offset((t,)) for t in (0, 5, 31)] == [0, 0, 0]
    assert rmem.local_layout() == Layout(((4, 1),), ((1, 0),))


def test_canonical_form_is_enforced():
    m = Mesh((CTA8,), (2, 4))
    layout = Layout(((2, 4), 16), ((16, 32), 1))
    with pytest.raises(DSLError) as err:
        ShardLayout(layout, (Broadcast, Split(0)), m)
    assert str(err.value) == (
        "ShardLayout ((2,4),16):((16,32),1): position 0 has extent 2, canonical form needs the extent 4 "
        "of mesh axis 'cta1' that splits it"
    )
    with pytest.raises(DSLError, match=r"position 1 is split by both mesh axes 'cta0' and 'cta1'"):
        ShardLayout(Layout(((2, 4), 16), ((16, 32), 1)), (Split(1), Split(1)), Mesh((CTA8,), (4, 2)))
    with pytest.raises(DSLError, match=r"mesh axis 'cta1' splits position 3, expected a leaf position "
                                       r"in \[0, 3\)"):
        ShardLayout(layout, (Broadcast, Split(3)), m)
    with pytest.raises(DSLError, match=r"one shard attribute per mesh axis \(cta0, cta1\), "
                                       r"expected 2, got 1"):
        ShardLayout(layout, (Broadcast,), m)
    assert ShardLayout(layout, (Broadcast, Split(1)), m).split_positions() == {1: 1}


def test_shard_objects_pickle_and_copy():
    m = Mesh((CTA8, THREAD32), (2, 4, 32))
    sl = m[Split(0), Broadcast, Partial("max")].resolve((16, 4))
    assert pickle.loads(pickle.dumps(sl)) == sl and copy.deepcopy(sl) == sl
    assert pickle.loads(pickle.dumps(m[Split(1), Dynamic, Broadcast])) == m[Split(1), Dynamic, Broadcast]


def test_shard_layout_text_and_equality():
    m = Mesh((Topology("cta", 4),), (4,))
    sl = m[Split(0)].resolve((8, 16))
    assert str(sl) == "ShardLayout(((2,4),16):((16,32),1), [Split(1)], Mesh((cta:4), (4):(1), names=(cta)))"
    assert sl == m[Split(-2)].resolve((8, 16)) and hash(sl) == hash(m[Split(0)].resolve((8, 16)))


# ---------------------------------------------------------------- placements (layout sugar)


def test_placement_sugar_one_attr_per_mesh_axis():
    m = Mesh((CTA8, THREAD32), (8, 32))
    p = m[Split(0), Broadcast]
    assert isinstance(p, Placement) and p.attrs == (Split(0), Broadcast())
    assert str(p) == "Mesh((cta:8, thread:32), (8,32):(1,1), names=(cta, thread))[Split(0), Broadcast]"
    assert p == m[Split(0), Broadcast()] and hash(p) == hash(m[Split(0), Broadcast()])
    assert Mesh((CTA8,), (8,))[Split(1)].attrs == (Split(1),)
    with pytest.raises(DSLError, match=r"mesh\[\.\.\.\]: one shard attribute per mesh axis \(cta, thread\), "
                                       r"expected 2, got 1"):
        m[Split(0)]


def test_placement_resolve_keeps_dynamic_dims_unsplit():
    t = DimVar("T", 1, 65)
    sl = Mesh((Topology("cta", 4),), (4,))[Split(1)].resolve((t, 16))
    assert str(sl.layout) == "(T,(4,4)):(16,(1,4))"
    assert sl.local_extents() == (t, 4) and sl.local_offset((3,)) == 12


def test_placement_resolve_refusals():
    m = Mesh((Topology("cta", 4),), (4,))
    with pytest.raises(DSLError) as err:
        m[Split(0)].resolve((6, 16))
    assert str(err.value) == (
        "mesh[...]: tensor axis 0 has extent 6, mesh axes 'cta' split it into 4 parts; the extent must be "
        "a static multiple of 4"
    )
    with pytest.raises(DSLError, match=r"tensor axis 0 has extent T, .* static multiple of 4"):
        m[Split(0)].resolve((DimVar("T", 1, 9), 16))
    with pytest.raises(DSLError, match=r"mesh axis 'cta' splits tensor axis 2, the tensor has rank 2"):
        m[Split(2)].resolve((8, 16))
    with pytest.raises(DSLError, match=r"layout \(\(8,16\)\):\(\(1,8\)\) must have one leaf per axis"):
        m[Split(0)].resolve((8, 16), Layout(((8, 16),), ((1, 8),)))


def test_placement_resolve_with_a_given_layout():
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(4))
    xt = x.t().contiguous()  # column-major storage of x
    sl = Mesh((Topology("cta", 2),), (2,))[Split(1)].resolve((8, 4), Layout((8, 4), (1, 8)))
    assert str(sl.layout) == "(8,(2,2)):(1,(8,16))"
    for c in range(2):
        assert torch.equal(_local_view(xt, sl, (c,)), x.chunk(2, dim=1)[c])
