"""Fixtures shared by the cross-package tests."""

from __future__ import annotations

from collections.abc import Iterator

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
