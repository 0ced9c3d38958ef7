"""What measuring a case needs from the run: device, target, limits, timing plan, builds, peers."""

from dataclasses import dataclass

import torch

from .builds import Builds
from .floors import Limits
from .timing import TimingPlan


@dataclass(frozen=True)
class Session:
    """One measuring process's settings.

    Attributes:
        device: where inputs live and everything runs.
        target: the TileFoundry target ours is built for ("cuda"; "cpu" for a smoke run).
        limits: the machine's ceilings, for input rotation.
        timing: warm-up and repetition.
        builds: our compiled side of each case.
        peers: the peer keys to run; None runs all.
        seed: the first input set's seed; rotation sets use the next ones.
    """

    device: torch.device
    target: str
    limits: Limits
    timing: TimingPlan
    builds: Builds
    peers: frozenset[str] | None = None
    seed: int = 0

    def wants(self, peer_key: str) -> bool:
        """Whether the peer of this key runs."""
        return self.peers is None or peer_key in self.peers

    def sync(self) -> None:
        """Wait for the device (a no-op on the CPU)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
