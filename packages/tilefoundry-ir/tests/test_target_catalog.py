"""Tests of tilefoundry.ir.target.catalog: the TargetCatalog schema, its checks and queries."""

import json

import pytest
from pydantic import ValidationError

from tilefoundry.ir.target import (
    CopyAtom,
    ExecAxis,
    MmaAtom,
    PeakRates,
    ReductionAtom,
    Resource,
    SyncAtom,
    TargetCatalog,
    VectorAtom,
)


def _catalog(**changes) -> TargetCatalog:
    fields = dict(
        target="toy",
        arch="toy1",
        device="Toy Part",
        exec_axes=(
            ExecAxis(name="block", binds=("group", "worker"), dynamic=True),
            ExecAxis(name="warp", parent="block", binds=("subgroup",), max_extent=4),
            ExecAxis(name="lane", parent="warp", binds=("worker",), max_extent=8, granule=8),
        ),
        resources=(
            Resource(name="global", kind="global", storage="gmem", instance="device", visibility="device",
                     capacity_bytes=1 << 30, alignment_bytes=16),
            Resource(name="shared", kind="shared", storage="smem", instance="block", visibility="block",
                     capacity_bytes=64 << 10, alignment_bytes=16, banks=32, bank_bytes=4),
        ),
        atoms=(
            CopyAtom(name="toy_async_copy_16b", issued_by="lane", requires=("async",), src="gmem", dst="smem",
                     bytes=16, asynchronous=True, alignment_bytes=16),
            VectorAtom(name="toy_f32x4", issued_by="lane", dtype="f32", lanes=4, ops=("add", "fma")),
            MmaAtom(name="toy_mma_m8n8k4_f32_f16_f16_tn", issued_by="warp", m=8, n=8, k=4, d_dtype="f32",
                    a_dtype="f16", b_dtype="f16", c_dtype="f32", a_major="K", b_major="K", a_storage="rmem",
                    b_storage="rmem", a_layout="(8,4):(4,1)", b_layout="(8,4):(4,1)", c_layout="(8,8):(8,1)"),
            ReductionAtom(name="toy_shfl_sum_f32x8", issued_by="warp", dtype="f32", ops=("sum",), width=8),
            SyncAtom(name="toy_barrier", issued_by="lane", scope="block"),
        ),
        capabilities=("zeta", "async", "async"),
        peak=PeakRates(flops_per_s={"f32": 1e12, "f16": 8e12}, bytes_per_s={"global": 5e11}),
    )
    fields.update(changes)
    return TargetCatalog(**fields)


def test_json_round_trip_is_exact():
    c = _catalog()
    text = c.model_dump_json()
    back = TargetCatalog.model_validate_json(text)
    assert back == c
    assert back.model_dump_json() == text
    data = json.loads(text)
    assert data["schema_version"] == 1
    assert [a["kind"] for a in data["atoms"]] == ["copy", "vector", "mma", "reduction", "sync"]
    assert isinstance(back.atoms[2], MmaAtom) and back.atoms[2].c_layout == "(8,8):(8,1)"


def test_catalog_is_frozen_and_capabilities_sorted():
    c = _catalog()
    assert c.capabilities == ("async", "zeta")
    with pytest.raises(ValidationError, match="frozen"):
        c.arch = "other"


def test_unknown_fields_and_versions_are_refused():
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        _catalog(cores=4)
    data = json.loads(_catalog().model_dump_json())
    data["schema_version"] = 2
    with pytest.raises(ValidationError, match="schema_version"):
        TargetCatalog.model_validate(data)
    data["schema_version"] = 1
    data["atoms"][0]["kind"] = "teleport"
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        TargetCatalog.model_validate(data)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(exec_axes=(ExecAxis(name="a", binds=("worker",)), ExecAxis(name="a", binds=("vector",)))),
         "toy: exec axis names repeat: a"),
        (dict(exec_axes=(ExecAxis(name="a", parent="b", binds=("worker",)),)),
         "toy: exec axis 'a' has unknown parent 'b'"),
        (dict(exec_axes=(ExecAxis(name="a", parent="b", binds=("worker",)),
                         ExecAxis(name="b", parent="a", binds=("worker",)))),
         "toy: exec axes form a parent cycle: a, b"),
        (dict(atoms=(SyncAtom(name="s", issued_by="thread", scope="block"),)),
         "toy: atom 's' is issued by unknown axis 'thread'"),
        (dict(atoms=(SyncAtom(name="s", issued_by="lane", scope="grid"),)),
         "toy: atom 's' synchronizes unknown axis 'grid'"),
        (dict(capabilities=()),
         "toy: atom 'toy_async_copy_16b' requires capabilities the catalog lacks: async"),
        (dict(peak=PeakRates(bytes_per_s={"hbm": 1e12})),
         "toy: peak bytes/s given for unknown resource 'hbm'"),
    ],
)
def test_references_must_resolve(changes, message):
    with pytest.raises(ValidationError) as err:
        _catalog(**changes)
    assert message in str(err.value)


def test_field_checks_name_what_is_accepted():
    with pytest.raises(ValidationError, match=r"unknown dtype 'f33'; accepted: f64, f32"):
        VectorAtom(name="v", issued_by="lane", dtype="f33", lanes=4, ops=("add",))
    with pytest.raises(ValidationError, match=r"unknown dtype 'tf32'"):
        PeakRates(flops_per_s={"tf32": 1.0})
    with pytest.raises(ValidationError, match=r"Input should be 'device', 'group', 'subgroup', 'worker' "
                                              r"or 'vector'"):
        ExecAxis(name="a", binds=("cooperative",))


def test_queries_answer_from_the_data():
    c = _catalog()
    assert c.scope_order() == ("block", "warp", "lane")
    assert c.contains("block", "lane") and not c.contains("lane", "block")
    assert c.axis("warp").max_extent == 4
    with pytest.raises(KeyError, match="toy: no exec axis 'grid'; axes: block, warp, lane"):
        c.axis("grid")
    assert c.smem_bytes == 64 << 10
    assert _catalog(resources=(), peak=PeakRates()).smem_bytes == 0
    assert [a.name for a in c.atoms_of("mma")] == ["toy_mma_m8n8k4_f32_f16_f16_tn"]
    assert c.atom("toy_f32x4").lanes == 4
    with pytest.raises(KeyError, match="toy: no atom 'nope'"):
        c.atom("nope")


def test_summary_line():
    assert _catalog().summary() == (
        "toy1 (Toy Part); axes block > warp(<=4) > lane(<=8); resources global 1 GiB, shared 64 KiB; "
        "atoms 1 copy, 1 vector, 1 mma, 1 reduction, 1 sync; "
        "peak f32 1 TFLOP/s, f16 8 TFLOP/s, global 500 GB/s"
    )
