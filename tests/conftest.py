"""Fixtures shared by the cross-package tests."""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def fresh_build_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A build cache of the test module's own, so its builds are measured and checked cold.

    Opt in with `pytestmark = pytest.mark.usefixtures("fresh_build_cache")`.
    """
    mp = pytest.MonkeyPatch()
    mp.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path_factory.mktemp("tilefoundry-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def decode_attention_build(session_tmp_path: Path) -> tuple[Any, dict[str, str]]:
    """The decode layer's attention program (tests/decode_layer.py) built for cuda with the default
    options, once per session in a cache of its own, and the stages it dumped.

    Several files check this one nvcc build (about 100 s on a busy core), each from its own angle;
    xdist workers share the cache, and a lock makes a second worker wait for the first's build
    instead of building it beside it.
    """
    sys.path.insert(0, os.path.dirname(__file__))
    from catalogue_programs import require_nvcc
    from decode_layer import decode_attention

    import tilefoundry

    require_nvcc()
    cache = session_tmp_path / "decode-attention-cache"
    cache.mkdir(exist_ok=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("TILEFOUNDRY_CACHE_DIR", str(cache))
    stages: dict[str, str] = {}
    try:
        with open(cache / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            linked = tilefoundry.compile(decode_attention(), target="cuda", dump=stages.__setitem__)
    finally:
        mp.undo()
    return linked, stages
