"""The cuda target's catalogs: sm_80, sm_90 and sm_90a, as data.

Axes, outermost first: `cluster` (sm_90+) > `cta` (the grid, blockIdx) > `warp` > `lane`. Seed
000 §2.1's `thread` level (threadIdx) is a second child of `cta` naming the same threads as
warp × lane, flattened: the axis a Mesh over threads places work on.

Peak numbers come from the reference part of each arch (A100 SXM for sm_80, H200 SXM for
sm_90/sm_90a) unless the probe saw a GPU of that arch, whose SM count, memory and
shared-memory limit then replace the reference part's.

MMA operand layouts are CuTe's MMA_Traits (thread, value) -> coordinate layouts:

    sm80_mma_m16n8k16_f32_bf16_bf16_tn     A ((4,8),(2,2,2)):((32,1),(16,8,128))
    sm90_wgmma_m64n128k16_f32_bf16_bf16_ss A (128,(64,16)):(0,(1,64)) in smem, K-major
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tilefoundry.ir.target import (
    CopyAtom,
    ExecAxis,
    MmaAtom,
    PeakRates,
    ReductionAtom,
    Resource,
    SyncAtom,
    TargetCatalog,
)

from .probe import GpuFacts

NAME = "cuda"
DEFAULT_ARCH = "sm_90a"


@dataclass(frozen=True)
class ArchSpec:
    """Limits and features of one compute capability (CUDA programming guide, Table 21)."""

    arch: str
    smem_per_cta: int  # bytes, the opt-in maximum of dynamic shared memory per block
    max_cluster: int  # portable cluster size in CTAs; 0 without clusters
    capabilities: tuple[str, ...]


@dataclass(frozen=True)
class PartSpec:
    """A GPU part's size and published dense peak rates."""

    device: str
    sms: int
    memory_bytes: int
    l2_bytes: int
    flops_per_s: dict[str, float]
    hbm_bytes_per_s: float


_SM80_FEATURES = ("bf16", "f16", "cp_async", "ldmatrix", "mma_sync", "redux_sync")
_SM90_FEATURES = (*_SM80_FEATURES, "clusters", "distributed_smem", "fp8", "mbarrier_tx", "stmatrix", "tma")
ARCHS = {
    "sm_80": ArchSpec("sm_80", 163 * 1024, 0, _SM80_FEATURES),
    "sm_90": ArchSpec("sm_90", 227 * 1024, 8, _SM90_FEATURES),
    "sm_90a": ArchSpec("sm_90a", 227 * 1024, 8, (*_SM90_FEATURES, "setmaxnreg", "wgmma")),
}

_HOPPER_FLOPS = {"f64": 67e12, "f32": 67e12, "f16": 989e12, "bf16": 989e12, "fp8e4m3": 1979e12,
                 "fp8e5m2": 1979e12, "i8": 1979e12}
PARTS = {
    "A100": PartSpec("NVIDIA A100-SXM4-80GB", 108, 80 * 10**9, 40 * 2**20,
                     {"f64": 19.5e12, "f32": 19.5e12, "f16": 312e12, "bf16": 312e12, "i8": 624e12}, 2.039e12),
    "H100": PartSpec("NVIDIA H100 80GB HBM3", 132, 80 * 10**9, 50 * 2**20, _HOPPER_FLOPS, 3.35e12),
    "H200": PartSpec("NVIDIA H200", 132, 141 * 10**9, 50 * 2**20, _HOPPER_FLOPS, 4.8e12),
}
REFERENCE_PART = {"sm_80": "A100", "sm_90": "H200", "sm_90a": "H200"}

REGISTERS_PER_LANE = 255  # 32-bit registers one thread may hold
WARP = 32
MAX_THREADS_PER_CTA = 1024


# ---------------------------------------------------------------- atoms

# SM80_16x8x16 traits (shared by the f16 and bf16 variants).
_SM80_A = "((4,8),(2,2,2)):((32,1),(16,8,128))"
_SM80_B = "((4,8),(2,2)):((16,1),(8,64))"
_SM80_C = "((4,8),(2,2)):((32,1),(16,8))"


def _wgmma_c(n: int) -> str:
    return f"((4,8,4),(2,2,{n // 8})):((128,1,16),(64,8,512))"


def _smem_operand(rows: int, k: int) -> str:
    """GMMA::ABLayout: every one of the 128 threads sees the whole smem tile (a descriptor)."""
    return f"(128,({rows},{k})):(0,(1,{rows}))"


_WGMMA_A_RMEM_16BIT = "((4,8,4),(2,2,2)):((128,1,16),(64,8,512))"


def _mma_atoms() -> list[MmaAtom]:
    atoms = []
    for d, ab in (("f32", "bf16"), ("f32", "f16"), ("f16", "f16")):
        atoms.append(MmaAtom(
            name=f"sm80_mma_m16n8k16_{d}_{ab}_{ab}_tn", issued_by="warp", requires=("mma_sync",),
            m=16, n=8, k=16, d_dtype=d, a_dtype=ab, b_dtype=ab, c_dtype=d, a_major="K", b_major="K",
            a_storage="rmem", b_storage="rmem", a_layout=_SM80_A, b_layout=_SM80_B, c_layout=_SM80_C))
    for ab, k in (("bf16", 16), ("f16", 16), ("fp8e4m3", 32), ("fp8e5m2", 32)):
        for n in (64, 128, 256):
            sources = ("ss", "rs") if k == 16 else ("ss",)
            for src in sources:
                atoms.append(MmaAtom(
                    name=f"sm90_wgmma_m64n{n}k{k}_f32_{ab}_{ab}_{src}", issued_by="warp", participants=4,
                    requires=("wgmma",), m=64, n=n, k=k, d_dtype="f32", a_dtype=ab, b_dtype=ab, c_dtype="f32",
                    a_major="K", b_major="K", a_storage="smem" if src == "ss" else "rmem", b_storage="smem",
                    a_layout=_smem_operand(64, k) if src == "ss" else _WGMMA_A_RMEM_16BIT,
                    b_layout=_smem_operand(n, k), c_layout=_wgmma_c(n)))
    return atoms


def _copy_atoms() -> list[CopyAtom]:
    # 128-bit loads and stores of one thread, for every pair of storages they connect.
    moves = (("ld", "global", "gmem", "rmem"), ("st", "global", "rmem", "gmem"),
             ("ld", "shared", "smem", "rmem"), ("st", "shared", "rmem", "smem"))
    atoms = [CopyAtom(name=f"cuda_{verb}_{space}_16b", issued_by="lane", src=src, dst=dst, bytes=16,
                      alignment_bytes=16) for verb, space, src, dst in moves]
    atoms += [
        CopyAtom(name="sm75_ldmatrix_x4", issued_by="warp", requires=("ldmatrix",), src="smem", dst="rmem",
                 bytes=512, alignment_bytes=16),
        CopyAtom(name="sm90_stmatrix_x4", issued_by="warp", requires=("stmatrix",), src="rmem", dst="smem",
                 bytes=512, alignment_bytes=16),
        # NOTE: a TMA box moves up to 256 elements per dimension; `bytes` is its 16-byte granule,
        # and the smem side must be 128-byte aligned.
        CopyAtom(name="sm90_tma_load", issued_by="lane", requires=("tma",), src="gmem", dst="smem", bytes=16,
                 asynchronous=True, alignment_bytes=128),
        CopyAtom(name="sm90_tma_store", issued_by="lane", requires=("tma",), src="smem", dst="gmem", bytes=16,
                 asynchronous=True, alignment_bytes=128),
    ]
    atoms += [CopyAtom(name=f"sm80_cp_async_{n}b", issued_by="lane", requires=("cp_async",), src="gmem",
                       dst="smem", bytes=n, asynchronous=True, alignment_bytes=n) for n in (4, 8, 16)]
    return atoms


def _other_atoms() -> list:
    return [
        ReductionAtom(name="cuda_shfl_reduce_f32x32", issued_by="warp", dtype="f32",
                      ops=("sum", "max", "min"), width=WARP),
        ReductionAtom(name="sm80_redux_sync_i32x32", issued_by="warp", requires=("redux_sync",), dtype="i32",
                      ops=("sum", "max", "min", "and", "or", "xor"), width=WARP),
        SyncAtom(name="cuda_syncwarp", issued_by="lane", scope="warp"),
        SyncAtom(name="cuda_bar_sync", issued_by="lane", scope="cta"),
        SyncAtom(name="sm90_barrier_cluster", issued_by="lane", requires=("clusters",), scope="cluster"),
    ]


def _gemm_atoms() -> list[MmaAtom]:
    """Whole-GEMM region atoms (operands in global memory), best first: planning takes the first
    whose dtype and operand majors fit. C = A · B with A (M, K) and C (M, N) compact row-major;
    B (K, N) row-major ("rrr", B N-major) or B stored (N, K) ("rcr", B K-major: x @ w.T reading
    w in place, the canonical TN GEMM)."""
    layouts = {
        "rrr": {"b_major": "N", "b_layout": "(K,N):(N,1)"},
        "rcr": {"b_major": "K", "b_layout": "(N,K):(K,1)"},
    }
    common = {
        "a_major": "K",
        "a_storage": "gmem",
        "b_storage": "gmem",
        "a_layout": "(M,K):(K,1)",
        "c_layout": "(M,N):(N,1)",
        # atoms/gemm.cuh's gemm_group: up to four GEMMs sharing A per call (one launch when skinny)
        "shared_a_group": 4,
        # ... and applies a pointwise consumer of its results in the same launch (gemm_epilogue)
        "epilogue": True,
        # ... and computes its A from the row kernel writing it, in the same launch (a prologue)
        "prologue": True,
    }
    tiles = (
        ("sm90_gemm_tma_wgmma_128x128x64", (128, 128, 64), ("tma", "wgmma"), ("bf16", "f16")),
        ("sm80_gemm_mma_128x128x32", (128, 128, 32), ("mma_sync", "cp_async"), ("bf16", "f16")),
        ("cuda_gemm_simt_64x64x16", (64, 64, 16), (), ("f32",)),
    )
    return [
        MmaAtom(
            name=f"{stem}_{d}_{layout}",
            issued_by="cta",
            requires=req,
            m=m,
            n=n,
            k=k,
            d_dtype=d,
            a_dtype=d,
            b_dtype=d,
            c_dtype=d,
            # ... and runs, as one launch at M = 1, with the GEMM reading its epilogue's output
            # (atoms/gemm_chain.cuh: B stored (N, K), 16-bit elements)
            chain=layout == "rcr" and d != "f32",
            **common,
            **majors,
        )
        for stem, (m, n, k), req, dtypes in tiles
        for layout, majors in layouts.items()
        for d in dtypes
    ]


ATOMS = (*_copy_atoms(), *_mma_atoms(), *_gemm_atoms(), *_other_atoms())


# ---------------------------------------------------------------- catalogs


def _same_silicon(gpu: GpuFacts | None, arch: str) -> bool:
    """sm_90 and sm_90a name one chip; the "a" only unlocks arch-specific instructions."""
    return gpu is not None and gpu.arch.rstrip("a") == arch.rstrip("a")


def part_for(arch: str, gpu: GpuFacts | None) -> PartSpec:
    """The part the numbers describe: the probed GPU when it is of `arch`, else the reference part.

    A probed GPU keeps its own SM count, memory and name; its peak flops are the matching
    known part's, or the reference part's scaled by SM count.
    """
    reference = PARTS[REFERENCE_PART[arch]]
    if not _same_silicon(gpu, arch):
        return reference
    known = next((p for key, p in PARTS.items() if key in gpu.name), None)
    base = known or replace(reference, flops_per_s={d: v * gpu.sms / reference.sms
                                                     for d, v in reference.flops_per_s.items()})
    return replace(base, device=gpu.name, sms=gpu.sms, memory_bytes=gpu.memory_bytes)


def arch_catalog(arch: str, gpu: GpuFacts | None = None) -> TargetCatalog:
    """The catalog of one arch ("sm_80", "sm_90", "sm_90a"), sized from `gpu` when it matches.

    Raises:
        ValueError: `arch` has no catalog, naming the ones that do.
    """
    if arch not in ARCHS:
        raise ValueError(f"cuda: no catalog for arch {arch!r}; known: {', '.join(ARCHS)}")
    spec, part = ARCHS[arch], part_for(arch, gpu)
    smem = gpu.smem_per_cta if _same_silicon(gpu, arch) else spec.smem_per_cta
    axes = [ExecAxis(name="cta", binds=("group", "worker"), dynamic=True),
            ExecAxis(name="thread", parent="cta", binds=("worker",), max_extent=MAX_THREADS_PER_CTA,
                     granule=WARP),
            ExecAxis(name="warp", parent="cta", binds=("subgroup",), max_extent=MAX_THREADS_PER_CTA // WARP),
            ExecAxis(name="lane", parent="warp", binds=("worker",), max_extent=WARP, granule=WARP)]
    if spec.max_cluster:
        axes.insert(0, ExecAxis(name="cluster", binds=("group",), dynamic=True))
        axes[1] = axes[1].model_copy(update={"parent": "cluster", "max_extent": spec.max_cluster})
    return TargetCatalog(
        target=NAME,
        arch=arch,
        device=part.device,
        exec_axes=tuple(axes),
        resources=(
            Resource(name="global", kind="global", storage="gmem", instance="device", visibility="device",
                     capacity_bytes=part.memory_bytes, alignment_bytes=16),
            Resource(name="l2", kind="cache", storage=None, instance="device", visibility="device",
                     capacity_bytes=part.l2_bytes, alignment_bytes=128),
            Resource(name="shared", kind="shared", storage="smem", instance="cta", visibility="cta",
                     capacity_bytes=smem, alignment_bytes=16, banks=32, bank_bytes=4),
            Resource(name="registers", kind="register", storage="rmem", instance="lane", visibility="lane",
                     capacity_bytes=REGISTERS_PER_LANE * 4, alignment_bytes=4),
        ),
        atoms=tuple(a for a in ATOMS if set(a.requires) <= set(spec.capabilities)),
        capabilities=spec.capabilities,
        peak=PeakRates(flops_per_s=part.flops_per_s, bytes_per_s={"global": part.hbm_bytes_per_s}),
    )
