"""The goals of issue 7, as data: each judges one table row and says whether, and by how much, it is met.

    AtLimit(0.85, min_bytes=256e6)      >= 85% of the binding limit, on cases moving >= 256 MB
    BeatsPeer("torch.compile", 1.0)     >= 1.0x the peer (judged on that peer's row only)
    Rate(1000, tokens=1)                a decode step: >= 1000 tokens per second

A verdict reads "ok >=0.95x cuBLAS: 1.02x" or "MISS >=0.95x cuBLAS: 0.81x (-15%)".

A goal that does not apply to a row (another peer's row, a case under the size threshold)
gives no verdict.
"""

from dataclasses import dataclass
from typing import Protocol


class Judged(Protocol):
    """What a goal reads off a row."""

    peer: str | None
    ours_ms: float | None
    speedup: float | None
    limit_fraction: float | None
    bytes: float


@dataclass(frozen=True)
class Verdict:
    """One goal on one row, and its text for the table."""

    goal: str
    met: bool
    text: str


def _verdict(goal: str, met: bool, shown: str, shortfall: str) -> Verdict:
    return Verdict(goal, met, f"ok {goal}: {shown}" if met else f"MISS {goal}: {shown} ({shortfall})")


def _unmeasured(goal: str) -> Verdict:
    return Verdict(goal, False, f"MISS {goal}: not measured")


@dataclass(frozen=True)
class AtLimit:
    """Ours reaches `min_fraction` of the binding limit, on cases moving at least `min_bytes`."""

    min_fraction: float
    min_bytes: float = 0.0

    @property
    def name(self) -> str:
        return f">={self.min_fraction:.0%} limit"

    def judge(self, row: Judged) -> Verdict | None:
        if row.bytes < self.min_bytes:
            return None
        if row.limit_fraction is None:
            return _unmeasured(self.name)
        gap = (self.min_fraction - row.limit_fraction) * 100
        return _verdict(self.name, gap <= 0, f"{row.limit_fraction:.0%}", f"-{gap:.0f} pts")


@dataclass(frozen=True)
class BeatsPeer:
    """Ours is at least `min_speedup` times as fast as `peer` (peer ms / ours ms)."""

    peer: str
    min_speedup: float

    @property
    def name(self) -> str:
        return f">={self.min_speedup:.2f}x {self.peer}"

    def judge(self, row: Judged) -> Verdict | None:
        if row.peer != self.peer:
            return None
        if row.speedup is None:
            return _unmeasured(self.name)
        short = 1 - row.speedup / self.min_speedup
        return _verdict(self.name, short <= 0, f"{row.speedup:.2f}x", f"-{short:.0%}")


@dataclass(frozen=True)
class Rate:
    """Ours completes `tokens` per call at `min_per_s` or more."""

    min_per_s: float
    tokens: int = 1
    unit: str = "tok/s"

    @property
    def name(self) -> str:
        return f">={self.min_per_s:g} {self.unit}"

    def judge(self, row: Judged) -> Verdict | None:
        if row.ours_ms is None or row.ours_ms <= 0:
            return _unmeasured(self.name)
        rate = self.tokens / (row.ours_ms / 1e3)
        short = 1 - rate / self.min_per_s
        return _verdict(self.name, short <= 0, f"{rate:.0f}", f"-{short:.0%}")


Goal = AtLimit | BeatsPeer | Rate
