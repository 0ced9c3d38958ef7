"""What compiling for a target produces: generated sources, then a linked library."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Sources:
    """The source files a code generator wrote for one module.

    Attributes:
        target: the target that generated them.
        files: relative file name -> text, in the order they were generated.
        entries: the names the library will export, one per compiled function.
    """

    target: str
    files: Mapping[str, str] = field(default_factory=dict)
    entries: tuple[str, ...] = ()


@dataclass(frozen=True)
class LinkedLibrary:
    """A library a builder produced from `Sources`, ready for the runtime loader.

    Attributes:
        target: the target that built it.
        path: the library file.
        entries: the exported names, as in the Sources.
    """

    target: str
    path: Path
    entries: tuple[str, ...] = ()
