"""Fixtures shared by the cross-package tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
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
def decode_attention_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, str]]:
    """The decode layer's attention program (tests/decode_layer.py) built for cuda with the default
    options, once per session in a cache of its own, and the stages it dumped.

    Several files check this one nvcc build (about 35 s on two cores), each from its own angle.
    """
    sys.path.insert(0, os.path.dirname(__file__))
    from catalogue_programs import require_nvcc
    from decode_layer import decode_attention

    import tilefoundry

    require_nvcc()
    mp = pytest.MonkeyPatch()
    mp.setenv("TILEFOUNDRY_CACHE_DIR", str(tmp_path_factory.mktemp("decode-attention-cache")))
    stages: dict[str, str] = {}
    try:
        linked = tilefoundry.compile(decode_attention(), target="cuda", dump=stages.__setitem__)
    finally:
        mp.undo()
    return linked, stages
