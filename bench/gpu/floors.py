"""Floors: the matrix flops and fewest bytes of a case, and the limits they are held to.

A case's floor is the larger of two times: its matrix flops at the dense peak of their dtype
(the target catalog's figure) and its fewest bytes at the measured device-to-device copy
bandwidth (bytes read plus bytes written). The larger term names the bound; the fraction of the
limit a measured time reaches is floor / measured.

    limits = Limits(copy_bytes_per_s=4.13e12, flops_per_s={"bf16": 989e12}, l2_bytes=50 * 2**20)
    limits.fraction(gemm_work(8192, 8192, 8192), 1.49e-3)   # -> 0.75, compute-bound

Only matrix-unit work counts as flops: elementwise arithmetic in the memory-bound cases runs
far under the vector rate and is left out.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

ITEMSIZE = {
    "f64": 8,
    "f32": 4,
    "f16": 2,
    "bf16": 2,
    "fp8e4m3": 1,
    "fp8e5m2": 1,
    "i64": 8,
    "i32": 4,
    "i16": 2,
    "i8": 1,
    "u8": 1,
    "bool": 1,
}

# Working sets at least this many L2s deep are not cached between calls.
L2_DEPTH = 4
MAX_ROTATION_SETS = 64


def tensor_bytes(shape: Sequence[int], dtype: str) -> int:
    """Bytes of a dense tensor of `shape` and the dtype named `dtype` ("bf16", "i64", ...)."""
    return math.prod(shape) * ITEMSIZE[dtype]


@dataclass(frozen=True)
class Work:
    """What one call must do at the least.

    Attributes:
        flops: matrix-unit operations (a multiply-add counts two).
        bytes: each input read once and each output written once, through device memory.
        dtype: the operand dtype of the flops, which picks the peak they are held to.
    """

    flops: float
    bytes: float
    dtype: str = "bf16"

    def times(self, n: int) -> "Work":
        """The work of `n` such calls."""
        return Work(self.flops * n, self.bytes * n, self.dtype)

    def __add__(self, other: "Work") -> "Work":
        return Work(self.flops + other.flops, self.bytes + other.bytes, self.dtype)


@dataclass(frozen=True)
class Limits:
    """The ceilings of the machine a run measures.

    Attributes:
        copy_bytes_per_s: measured device-to-device copy, read plus write.
        flops_per_s: dense matrix peak by dtype name, from the target catalog; a dtype it
            lacks has no compute limit.
        l2_bytes: the last-level cache, for sizing input rotation.
    """

    copy_bytes_per_s: float
    flops_per_s: Mapping[str, float] = field(default_factory=dict)
    l2_bytes: int = 50 * 2**20

    def memory_s(self, work: Work) -> float:
        """Seconds to move the fewest bytes at copy bandwidth."""
        return work.bytes / self.copy_bytes_per_s

    def compute_s(self, work: Work) -> float | None:
        """Seconds for the flops at the dense peak, or None when the peak is unknown."""
        peak = self.flops_per_s.get(work.dtype)
        return work.flops / peak if peak and work.flops else None

    def bound(self, work: Work) -> str:
        """ "compute" when the flops take longer than the bytes, else "memory"."""
        compute = self.compute_s(work)
        return "compute" if compute is not None and compute > self.memory_s(work) else "memory"

    def floor_s(self, work: Work) -> float:
        """The floor: no version runs much faster than this."""
        return max(self.memory_s(work), self.compute_s(work) or 0.0)

    def fraction(self, work: Work, seconds: float | None) -> float | None:
        """Floor over measured time: the fraction of the binding limit reached, or None."""
        if seconds is None or seconds <= 0 or work.bytes <= 0:
            return None
        return self.floor_s(work) / seconds


def rotation_sets(footprint_bytes: float, l2_bytes: int) -> int:
    """How many input sets to cycle so no call finds its operands in L2.

    Each set is touched again only after L2_DEPTH cache sizes of other sets went through.

        rotation_sets(8e6, 50 * 2**20)   # -> 27 sets of an 8 MB GEMV
        rotation_sets(512e6, 50 * 2**20) # -> 1
    """
    if footprint_bytes <= 0:
        return 1
    return max(1, min(MAX_ROTATION_SETS, math.ceil(L2_DEPTH * l2_bytes / footprint_bytes)))


# ---------------------------------------------------------------- work of the case families


def gemm_work(m: int, k: int, n: int, dtype: str = "bf16") -> Work:
    """(m, k) @ (k, n) -> (m, n): 2mkn flops; both operands read, the result written."""
    size = ITEMSIZE[dtype]
    return Work(2.0 * m * k * n, float(size * (m * k + k * n + m * n)), dtype)


def causal_pairs(sq: int, skv: int) -> int:
    """(query, key) pairs a causal mask keeps when the last query aligns with the last key.

    causal_pairs(4, 4)   # -> 10 (1 + 2 + 3 + 4)
    causal_pairs(1, 8)   # -> 8, one query sees every key
    """
    offset = skv - sq
    return sum(max(0, min(skv, offset + i + 1)) for i in range(sq))


def attention_work(
    b: int, hq: int, hkv: int, sq: int, skv: int, d: int, *, causal: bool, dtype: str = "bf16"
) -> Work:
    """Attention: QK^T and PV over the kept pairs (4d flops each); q, k, v read, o written."""
    pairs = causal_pairs(sq, skv) if causal else sq * skv
    size = ITEMSIZE[dtype]
    moved = size * d * (2 * b * hq * sq + 2 * b * hkv * skv)
    return Work(4.0 * b * hq * d * pairs, float(moved), dtype)
