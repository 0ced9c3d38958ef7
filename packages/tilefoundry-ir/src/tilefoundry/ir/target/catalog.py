"""`TargetCatalog`: what a target offers the planner, as versioned, serializable data.

A target plugin describes its machine here instead of in code the planner branches on
(seed 003, Target catalog): execution axes and the logical scopes that may bind to them,
the containment order of those axes, memory resources, atoms (copy, vector, MMA, reduction,
synchronization) whose names carry their facts, capabilities, and peak rates for the cost
model. Everything is frozen and refuses unknown fields; `schema_version` guards readers.

    catalog.model_dump_json()                        # -> str
    TargetCatalog.model_validate_json(text)          # -> an equal catalog
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..dtypes import DTYPES

SCHEMA_VERSION = 1

# Logical execution scopes of seed 003 that a candidate's parallel regions may request.
LogicalScope = Literal["device", "group", "subgroup", "worker", "vector"]
# Tensor storages (tilefoundry.ir.types.Storage values a resource can hold).
StorageName = Literal["host", "gmem", "smem", "rmem"]
# Instances of a resource that are not per execution axis instance.
WHOLE_DEVICE = "device"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _dtype_name(v: str) -> str:
    if v not in DTYPES:
        raise ValueError(f"unknown dtype {v!r}; accepted: {', '.join(DTYPES)}")
    return v


class ExecAxis(_Frozen):
    """One execution axis of the target and how logical parallel regions may bind to it.

    Attributes:
        parent: the axis one of whose instances contains this axis' instances (None: outermost).
        binds: the logical scopes a parallel region may bind here; any other fails closed.
        max_extent: instances per parent instance; None when only the launch bounds it.
        granule: instances run in lockstep groups of this many (a CUDA warp is 32 threads).
        dynamic: the extent is chosen at launch rather than fixed in the generated code.
    """

    name: str
    parent: str | None = None
    binds: tuple[LogicalScope, ...]
    max_extent: int | None = Field(default=None, ge=1)
    granule: int = Field(default=1, ge=1)
    dynamic: bool = False


class Resource(_Frozen):
    """A memory resource: one instance per `instance` axis instance, shared across `visibility`.

    Attributes:
        kind: what it is; caches are listed for tiling but are not addressable storage.
        storage: the tensor storage it holds (None for caches).
        instance: the axis whose every instance has its own copy, or "device".
        visibility: the axis whose instances all see one copy, or "device".
        capacity_bytes: bytes per instance.
        alignment_bytes: the alignment its fast accesses need.
        banks, bank_bytes: bank geometry (0 when it has none).
    """

    name: str
    kind: Literal["global", "shared", "register", "cache"]
    storage: StorageName | None
    instance: str
    visibility: str
    capacity_bytes: int = Field(ge=0)
    alignment_bytes: int = Field(default=1, ge=1)
    banks: int = Field(default=0, ge=0)
    bank_bytes: int = Field(default=0, ge=0)


class _Atom(_Frozen):
    """Common fields: `issued_by` axis instances issue the atom `participants` at a time."""

    name: str
    issued_by: str
    participants: int = Field(default=1, ge=1)
    requires: tuple[str, ...] = ()


class CopyAtom(_Atom):
    """Moves `bytes` per participant from `src` to `dst` storage, `asynchronous`ly or not."""

    kind: Literal["copy"] = "copy"
    src: StorageName
    dst: StorageName
    bytes: int = Field(ge=1)
    asynchronous: bool = False
    alignment_bytes: int = Field(default=1, ge=1)


class VectorAtom(_Atom):
    """`lanes` elements of `dtype` per instruction, for the element-wise `ops` listed."""

    kind: Literal["vector"] = "vector"
    dtype: str
    lanes: int = Field(ge=1)
    ops: tuple[str, ...]

    _dtype = field_validator("dtype")(_dtype_name)


class MmaAtom(_Atom):
    """D(m,n) = A(m,k) · B(n,k) + C(m,n) on a fixed tile, as CuTe's MMA_Traits state it.

    Attributes:
        a_major, b_major: the contiguous mode of A and B ("K" for both is CuTe's TN).
        a_storage, b_storage: where the operands are read from (wgmma reads smem).
        a_layout, b_layout, c_layout: CuTe (thread, value) -> coordinate layouts in
            `shape:stride` notation, over (m,k), (n,k) and (m,n) column-major.
        shared_a_group: a whole-GEMM atom's most GEMMs reading one A that one call may run
            (`ir.plan.gemm_groups`); 1 for one GEMM per call.
        epilogue: whether a whole-GEMM atom can apply an element-wise epilogue kernel to its
            results before they reach memory (`ir.plan.gemm_epilogues`).
        prologue: whether a whole-GEMM atom can compute its A itself from the row kernel that
            writes it (`ir.plan.gemm_prologues`).
        chain: whether a whole-GEMM atom can run, as one, with the GEMM that reads its epilogue's
            output (`ir.plan.gemm_chains`).
    """

    kind: Literal["mma"] = "mma"
    m: int = Field(ge=1)
    n: int = Field(ge=1)
    k: int = Field(ge=1)
    d_dtype: str
    a_dtype: str
    b_dtype: str
    c_dtype: str
    a_major: Literal["K", "M"]
    b_major: Literal["K", "N"]
    a_storage: StorageName
    b_storage: StorageName
    a_layout: str
    b_layout: str
    c_layout: str
    shared_a_group: int = Field(default=1, ge=1)
    epilogue: bool = False
    prologue: bool = False
    chain: bool = False

    _dtypes = field_validator("d_dtype", "a_dtype", "b_dtype", "c_dtype")(_dtype_name)


class ReductionAtom(_Atom):
    """Combines `width` values of `dtype` across participants or lanes with one of `ops`."""

    kind: Literal["reduction"] = "reduction"
    dtype: str
    ops: tuple[str, ...]
    width: int = Field(ge=2)

    _dtype = field_validator("dtype")(_dtype_name)


class SyncAtom(_Atom):
    """A barrier over the instances of axis `scope` (all threads of a cta, a worker team)."""

    kind: Literal["sync"] = "sync"
    scope: str


Atom = Annotated[CopyAtom | VectorAtom | MmaAtom | ReductionAtom | SyncAtom, Field(discriminator="kind")]


class PeakRates(_Frozen):
    """Hardware limits for the cost model: dense FLOP/s per dtype, bytes/s per resource name."""

    flops_per_s: dict[str, float] = {}
    bytes_per_s: dict[str, float] = {}

    @field_validator("flops_per_s")
    @classmethod
    def _known_dtypes(cls, v: dict[str, float]) -> dict[str, float]:
        for name in v:
            _dtype_name(name)
        return v


class TargetCatalog(_Frozen):
    """Everything the planner may know about a target. Built by the plugin's catalog hook.

    Attributes:
        target: the target name (its entry-point name).
        arch: the architecture the data describes (`sm_90a`, `x86_64-avx512`).
        device: the part the numbers come from (`NVIDIA H200`, a CPU model).
        capabilities: feature names atoms may require (kept sorted and unique).

    Raises:
        pydantic.ValidationError: a name refers to nothing (an axis parent, a resource's
            instance axis, an atom's axis or capability, a peak rate's resource), names
            repeat, or the axes' parents form a cycle.
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    target: str
    arch: str
    device: str = ""
    exec_axes: tuple[ExecAxis, ...]
    resources: tuple[Resource, ...] = ()
    atoms: tuple[Atom, ...] = ()
    capabilities: tuple[str, ...] = ()
    peak: PeakRates = PeakRates()

    @field_validator("capabilities")
    @classmethod
    def _sorted_unique(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(v)))

    @model_validator(mode="after")
    def _references_resolve(self) -> TargetCatalog:
        for what, names in (("exec axis", [a.name for a in self.exec_axes]),
                            ("resource", [r.name for r in self.resources]),
                            ("atom", [a.name for a in self.atoms])):
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"{self.target}: {what} names repeat: {', '.join(dup)}")
        axes = {a.name: a for a in self.exec_axes}
        for a in self.exec_axes:
            if a.parent is not None and a.parent not in axes:
                raise ValueError(f"{self.target}: exec axis '{a.name}' has unknown parent '{a.parent}'")
        self.scope_order()  # raises on a cycle
        places = {*axes, WHOLE_DEVICE}
        for r in self.resources:
            for field in ("instance", "visibility"):
                if getattr(r, field) not in places:
                    raise ValueError(f"{self.target}: resource '{r.name}' {field} '{getattr(r, field)}' "
                                     f"is not an exec axis or '{WHOLE_DEVICE}'")
        for atom in self.atoms:
            if atom.issued_by not in axes:
                raise ValueError(f"{self.target}: atom '{atom.name}' is issued by unknown axis "
                                 f"'{atom.issued_by}'")
            if isinstance(atom, SyncAtom) and atom.scope not in axes:
                raise ValueError(f"{self.target}: atom '{atom.name}' synchronizes unknown axis "
                                 f"'{atom.scope}'")
            missing = [c for c in atom.requires if c not in self.capabilities]
            if missing:
                raise ValueError(f"{self.target}: atom '{atom.name}' requires capabilities the catalog "
                                 f"lacks: {', '.join(missing)}")
        resources = {r.name for r in self.resources}
        for name in self.peak.bytes_per_s:
            if name not in resources:
                raise ValueError(f"{self.target}: peak bytes/s given for unknown resource '{name}'")
        return self

    # ---------------------------------------------------------------- queries

    def axis(self, name: str) -> ExecAxis:
        """The exec axis called `name`; KeyError names the axes there are."""
        for a in self.exec_axes:
            if a.name == name:
                return a
        names = ", ".join(a.name for a in self.exec_axes)
        raise KeyError(f"{self.target}: no exec axis '{name}'; axes: {names}")

    def scope_order(self) -> tuple[str, ...]:
        """Axis names, every parent before its children (outermost first, then declaration order)."""
        order: list[str] = []
        pending = list(self.exec_axes)
        while pending:
            ready = [a for a in pending if a.parent is None or a.parent in order]
            if not ready:
                raise ValueError(f"{self.target}: exec axes form a parent cycle: "
                                 f"{', '.join(a.name for a in pending)}")
            order.extend(a.name for a in ready)
            pending = [a for a in pending if a not in ready]
        return tuple(order)

    def contains(self, outer: str, inner: str) -> bool:
        """True when one instance of axis `outer` contains instances of axis `inner`."""
        parent = self.axis(inner).parent
        while parent is not None:
            if parent == outer:
                return True
            parent = self.axis(parent).parent
        return False

    def resource(self, kind: str) -> Resource | None:
        """The first resource of `kind` ("global", "shared", "register", "cache"), or None."""
        return next((r for r in self.resources if r.kind == kind), None)

    @property
    def smem_bytes(self) -> int:
        """Shared-memory bytes one instance may use (0 when the target has none)."""
        r = self.resource("shared")
        return r.capacity_bytes if r else 0

    def atoms_of(self, kind: str) -> tuple[Atom, ...]:
        """The atoms of one kind: "copy", "vector", "mma", "reduction" or "sync"."""
        return tuple(a for a in self.atoms if a.kind == kind)

    def atom(self, name: str) -> Atom:
        """The atom called `name`; KeyError says the target has none by that name."""
        for a in self.atoms:
            if a.name == name:
                return a
        raise KeyError(f"{self.target}: no atom '{name}'")

    def summary(self) -> str:
        """One line for `tilefoundry targets`: arch, axes, resources, atom counts, peaks."""
        axes = " > ".join(
            f"{n}(<={self.axis(n).max_extent})" if self.axis(n).max_extent else n for n in self.scope_order()
        )
        res = ", ".join(f"{r.name} {_bytes(r.capacity_bytes)}" for r in self.resources)
        kinds = ("copy", "vector", "mma", "reduction", "sync")
        atoms = ", ".join(f"{len(self.atoms_of(k))} {k}" for k in kinds if self.atoms_of(k))
        peaks = [f"{d} {v / 1e12:.4g} TFLOP/s" for d, v in self.peak.flops_per_s.items()]
        peaks += [f"{n} {v / 1e9:.4g} GB/s" for n, v in self.peak.bytes_per_s.items()]
        parts = [self.arch + (f" ({self.device})" if self.device else ""), f"axes {axes}"]
        parts += [f"resources {res}"] if res else []
        parts += [f"atoms {atoms}"] if atoms else ["no atoms"]
        parts += [f"peak {', '.join(peaks)}"] if peaks else []
        return "; ".join(parts)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"
