"""The runtime header's precompiled form: a failed precompile leaves nothing and builds go on without it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tilefoundry.codegen.cpu import build


def _fake_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_output: str, status: int) -> None:
    """A compiler that runs `on_output "<its -o path>"`, logs each run to tmp_path/runs, exits `status`."""
    fake = tmp_path / "fake-cxx"
    loop = f'while [ "$#" -gt 1 ]; do [ "$1" = -o ] && {on_output} "$2"; shift; done'
    fake.write_text(f"#!/bin/sh\necho run >> {tmp_path / 'runs'}\n{loop}\nexit {status}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(build, "compiler", lambda: str(fake))


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_a_failed_precompile_returns_none_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like g++, the fake compiler removes its output when it fails; the temporary file is gone, no raise."""
    _fake_compiler(tmp_path, monkeypatch, "rm -f", 1)
    monkeypatch.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILEFOUNDRY_PCH_DIR", str(tmp_path / "pch"))

    assert build.precompiled_header() is None
    assert _files(tmp_path / "cache") == _files(tmp_path / "pch") == []


@pytest.mark.parametrize("pch_dir", [None, "shared-pch"])
def test_the_precompiled_header_goes_to_tilefoundry_pch_dir_else_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pch_dir: str | None
) -> None:
    """One precompile per key; with TILEFOUNDRY_PCH_DIR set, a call under another build cache finds it too."""
    _fake_compiler(tmp_path, monkeypatch, "echo gch >", 0)
    monkeypatch.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path / "cache"))
    if pch_dir is None:
        monkeypatch.delenv("TILEFOUNDRY_PCH_DIR", raising=False)
        expected = tmp_path / "cache" / "pch"
    else:
        monkeypatch.setenv("TILEFOUNDRY_PCH_DIR", str(tmp_path / pch_dir))
        expected = tmp_path / pch_dir

    first = build.precompiled_header()
    assert first is not None and first.parent == expected
    assert (first / "tilefoundry" / "runtime.h.gch").read_text() == "gch\n"
    if pch_dir is not None:
        monkeypatch.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path / "another-cache"))
    assert build.precompiled_header() == first
    assert (tmp_path / "runs").read_text() == "run\n"
