"""`Availability`: what a target's probe found on this machine, and why it cannot do more."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Availability(BaseModel):
    """The answer of a target's availability probe.

    Attributes:
        can_compile: generated code can be built into a library here.
        can_run: such a library can be loaded and run here.
        reasons: why not, one sentence each (empty when both hold).
        facts: what the probe found, for `tilefoundry targets` (compiler version, device, cores).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    can_compile: bool
    can_run: bool
    reasons: tuple[str, ...] = ()
    facts: dict[str, str] = {}
