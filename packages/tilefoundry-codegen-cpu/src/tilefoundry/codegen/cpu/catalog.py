"""The cpu target's catalog, built from the host's facts.

Axes: `worker` (one per core, bound by logical worker regions) containing `vector` (SIMD
lanes, bound by logical vector regions). Atoms come from every vector ISA level the host
supports, widest first, so a planner can pick a narrower pack for a short axis:

    cpu_avx512_f32x16, cpu_avx2_f32x8, cpu_sse2_f32x4, ...   vector arithmetic
    cpu_avx2_load_32b / cpu_avx2_store_32b                    memory <-> vector registers
    cpu_avx2_reduce_f32x8                                     horizontal sum/max/min
    cpu_avx512_gemm_6x64_f32_rrr, ..._bf16_rrr                a whole GEMM region (gemm.h)
    cpu_worker_barrier                                        worker team barrier
"""

from __future__ import annotations

from dataclasses import dataclass

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

from .probe import HostFacts

NAME = "cpu"


@dataclass(frozen=True)
class IsaLevel:
    """A vector ISA level: the flags that must all be present, vector width, register count."""

    name: str
    flags: tuple[str, ...]
    bits: int
    registers: int
    fma_units: int


# Widest first. FMA units per core are the common server figure (2 on AVX-512 and AVX2 parts
# since Skylake-SP and Zen 2); the cost model uses peaks only to rank candidates.
ISA_LEVELS = (
    IsaLevel("avx512", ("avx512f", "avx512bw", "avx512vl", "fma"), 512, 32, 2),
    IsaLevel("avx2", ("avx2", "fma"), 256, 16, 2),
    IsaLevel("sse2", ("sse2",), 128, 16, 1),
    IsaLevel("neon", ("asimd",), 128, 32, 2),
)

FLOAT_OPS = ("add", "sub", "mul", "div", "fma", "max", "min", "sqrt", "abs", "neg")
INT_OPS = ("add", "sub", "mul", "max", "min", "and", "or", "xor", "shl", "shr")
VECTOR_DTYPES = (("f32", 32, FLOAT_OPS), ("f64", 64, FLOAT_OPS), ("i32", 32, INT_OPS),
                 ("i16", 16, INT_OPS), ("i8", 8, INT_OPS))
REDUCE_OPS = ("sum", "max", "min")
# Sustained DRAM bandwidth is not discoverable without measuring; ~10 GB/s per core up to a
# memory-controller limit is a typical STREAM figure for servers.
DRAM_BYTES_PER_S_PER_CORE = 10e9
DRAM_BYTES_PER_S_MAX = 200e9
DEFAULT_GHZ = 2.0
# Host flags worth a planner's attention beyond the ISA level, listed as capabilities.
EXTRA_CAPABILITIES = ("fma", "f16c", "avx512_bf16", "avx512_fp16", "avx512_vnni")


def supported_levels(facts: HostFacts, isa: str | None = None) -> tuple[IsaLevel, ...]:
    """The ISA levels the host supports, widest first; `isa` caps them at that level.

    Raises:
        ValueError: `isa` names no known level, or one the host lacks.
    """
    levels = tuple(lv for lv in ISA_LEVELS if set(lv.flags) <= facts.flags)
    if isa is None:
        return levels
    names = [lv.name for lv in levels]
    if isa not in names:
        known = ", ".join(lv.name for lv in ISA_LEVELS)
        here = ", ".join(names) or "none"
        raise ValueError(f"cpu: isa {isa!r} is not available here (host supports: {here}; known: {known})")
    return levels[names.index(isa):]


# Whole-GEMM region atoms: (ISA level, atom). The runtime realizes each in
# tilefoundry/runtime/cpu/gemm.h; the tile is the micro-kernel's (6 rows x 64 columns per k step)
# and "rrr" says A (M,K), B (K,N) and C (M,N) are compact row-major in memory. bf16 operands are
# widened to f32 as they are packed; sums are f32, each result rounded to bf16 once.
GEMM_ATOMS = tuple(
    ("avx512", MmaAtom(name=f"cpu_avx512_gemm_6x64_{d}_rrr", issued_by="worker", requires=("avx512",),
                       m=6, n=64, k=1, d_dtype=d, a_dtype=d, b_dtype=d, c_dtype=d,
                       a_major="K", b_major="N", a_storage="gmem", b_storage="gmem",
                       a_layout="(M,K):(K,1)", b_layout="(K,N):(N,1)", c_layout="(M,N):(N,1)"))
    for d in ("f32", "bf16")
)


def _atoms(levels: tuple[IsaLevel, ...]) -> list:
    atoms: list = []
    for lv in levels:
        width = lv.bits // 8
        atoms.append(CopyAtom(name=f"cpu_{lv.name}_load_{width}b", issued_by="worker", requires=(lv.name,),
                              src="gmem", dst="rmem", bytes=width))
        atoms.append(CopyAtom(name=f"cpu_{lv.name}_store_{width}b", issued_by="worker", requires=(lv.name,),
                              src="rmem", dst="gmem", bytes=width))
        for dtype, bits, ops in VECTOR_DTYPES:
            lanes = lv.bits // bits
            atoms.append(VectorAtom(name=f"cpu_{lv.name}_{dtype}x{lanes}", issued_by="worker",
                                    requires=(lv.name,), dtype=dtype, lanes=lanes, ops=ops))
        for dtype, bits, _ in VECTOR_DTYPES[:2]:
            lanes = lv.bits // bits
            atoms.append(ReductionAtom(name=f"cpu_{lv.name}_reduce_{dtype}x{lanes}", issued_by="worker",
                                       requires=(lv.name,), dtype=dtype, ops=REDUCE_OPS, width=lanes))
    names = {lv.name for lv in levels}
    atoms += [atom for level, atom in GEMM_ATOMS if level in names]
    atoms.append(SyncAtom(name="cpu_worker_barrier", issued_by="worker", scope="worker"))
    return atoms


def host_catalog(facts: HostFacts, isa: str | None = None) -> TargetCatalog:
    """The cpu catalog for a host; `isa` ("avx2", ...) describes a narrower vector ISA."""
    levels = supported_levels(facts, isa)
    widest = levels[0] if levels else None
    resources = [Resource(name="memory", kind="global", storage="gmem", instance="device",
                          visibility="device", capacity_bytes=facts.memory_bytes, alignment_bytes=64)]
    if widest:
        resources.append(Resource(name="vector_registers", kind="register", storage="rmem", instance="worker",
                                  visibility="worker", capacity_bytes=widest.registers * widest.bits // 8,
                                  alignment_bytes=widest.bits // 8))
    for name, size, shared in facts.caches:
        where = "device" if shared else "worker"
        resources.append(Resource(name=name, kind="cache", storage=None, instance=where, visibility=where,
                                  capacity_bytes=size, alignment_bytes=64))
    flops: dict[str, float] = {}
    if widest:
        cycles = facts.cores * (facts.mhz / 1e3 if facts.mhz else DEFAULT_GHZ) * 1e9
        for dtype, bits in (("f32", 32), ("f64", 64)):
            flops[dtype] = cycles * (widest.bits // bits) * 2 * widest.fma_units
    bandwidth = min(facts.cores * DRAM_BYTES_PER_S_PER_CORE, DRAM_BYTES_PER_S_MAX)
    extra = sorted(f for f in EXTRA_CAPABILITIES if f in facts.flags)
    return TargetCatalog(
        target=NAME,
        arch=f"{facts.machine}-{widest.name}" if widest else facts.machine,
        device=facts.model,
        exec_axes=(
            ExecAxis(name="worker", binds=("worker",), max_extent=facts.cores, dynamic=True),
            ExecAxis(name="vector", parent="worker", binds=("vector",)),
        ),
        resources=tuple(resources),
        atoms=tuple(_atoms(levels)),
        capabilities=(*(lv.name for lv in levels), *extra),
        peak=PeakRates(flops_per_s=flops, bytes_per_s={"memory": bandwidth}),
    )
