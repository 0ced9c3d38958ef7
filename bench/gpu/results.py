"""What measuring one case produced: ours and each peer (a time, a check verdict or an error).

A failure never leaves a hole: a callable that could not be built, checked or timed keeps its
`error`, and the table prints it as a numbered note.
"""

from dataclasses import dataclass, field
from typing import Any

from .cases import Case
from .timing import Timing

MAX_ERROR_CHARS = 400


def describe(err: BaseException) -> str:
    """One line naming an exception: "TargetUnavailable: cannot compile here: ..."."""
    text = " ".join(str(err).split())
    line = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."


@dataclass(frozen=True)
class CompileTimes:
    """Build times of a case's kernel.

    Attributes:
        cold_s: building with an empty on-disk cache (in a worker process when built ahead).
        hit_s: building again in this process once the on-disk cache holds it.
        shared_with: the case whose build this one reuses (one DimVar kernel, several sizes).
    """

    cold_s: float | None
    hit_s: float | None
    shared_with: str | None = None


@dataclass
class Measured:
    """One callable of a case: ours or a peer.

    Attributes:
        name: "ours" or the peer's table name.
        timing: per-call time, when it ran.
        check: "pass", "FAIL: <first failing predicate>", or why it was not checked.
        error: why there is no timing.
        first_call_s: the first call's wall time (torch.compile compiles in it).
    """

    name: str
    timing: Timing | None = None
    check: str = "not checked"
    error: str | None = None
    first_call_s: float | None = None

    @property
    def ms(self) -> float | None:
        return self.timing.ms if self.timing is not None else None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "timing": self.timing.to_json() if self.timing else None,
            "check": self.check,
            "error": self.error,
            "first_call_s": self.first_call_s,
        }


@dataclass
class CaseResult:
    """Everything one case measured.

    Attributes:
        case: the case.
        ours: our compiled function or twin.
        peers: each peer, in the case's order.
        compile: our build times, when a build was attempted and finished.
        rotation: how many input sets were cycled.
        skipped: why the case did not run at all (the time budget), if it did not.
    """

    case: Case
    ours: Measured
    peers: list[Measured] = field(default_factory=list)
    compile: CompileTimes | None = None
    rotation: int = 1
    skipped: str | None = None
