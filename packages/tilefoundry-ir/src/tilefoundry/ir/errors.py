"""Typed errors of the IR layer.

Each error carries `where` (a source location or a node name), `expected` and `got`, so tests
and the CLI read fields instead of parsing text. The message itself is complete on its own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """A place in the author's source: file path and 1-based line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class TileFoundryError(Exception):
    """Base of every error TileFoundry raises on purpose."""

    def __init__(self, message: str, *, where: object = None, expected: object = None, got: object = None):
        self.message = message
        self.where = where
        self.expected = expected
        self.got = got
        super().__init__(self._render())

    def _render(self) -> str:
        return f"{self.message} ({self.where})" if self.where is not None else self.message

    def at(self, where: object) -> TileFoundryError:
        """Attach a location if none is set yet; returns self for `raise err.at(loc)`."""
        if self.where is None:
            self.where = where
            self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class DSLError(TileFoundryError):
    """A definition-time error: `where` is the SourceLoc of the offending expression."""


class EvalError(TileFoundryError):
    """A run-time refusal of the evaluator (bad argument count, shape, DimVar range, ...)."""


class LoadError(TileFoundryError):
    """A weight that cannot be read or prepared as declared: `where` is its checkpoint key."""


class PlanError(TileFoundryError):
    """A compiler planning refusal: `where` names the kernel and node."""


class TargetUnavailable(TileFoundryError):
    """A target that is not installed or cannot run here: `where` is the target name."""
