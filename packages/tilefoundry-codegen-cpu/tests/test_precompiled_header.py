"""The runtime header's precompiled form: a failed precompile leaves nothing and builds go on without it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tilefoundry.codegen.cpu import build


def test_a_failed_precompile_returns_none_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like g++, the fake compiler removes its output when it fails; the temporary file is gone, no raise."""
    fake = tmp_path / "failing-cxx"
    fake.write_text('#!/bin/sh\nwhile [ "$#" -gt 1 ]; do [ "$1" = -o ] && rm -f "$2"; shift; done\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(build, "compiler", lambda: str(fake))
    monkeypatch.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path / "cache"))

    assert build.precompiled_header() is None
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []
