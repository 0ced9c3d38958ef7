"""Suite-wide test configuration.

- The `gpu` marker skips without a CUDA device.
- Builds go to one cache per session under pytest's temporary directory, shared by the xdist
  workers (unless TILEFOUNDRY_CACHE_DIR is set), never to the user's ~/.cache: a fresh clone's
  include paths key new entries, so a shared home cache would grow by every clone's builds.
  Precompiled runtime headers go to one directory for the whole session (unless
  TILEFOUNDRY_PCH_DIR is set), so the tests that make build caches of their own (cold builds,
  tuning results) do not each precompile the same header again; so do the cuda target's shared
  side objects, the sm90 collectives (unless TILEFOUNDRY_CUDA_OBJECT_DIR is set).
- The pinned CuTe/CUTLASS headers are filled before the first test (third_party/cutlass/fetch.py,
  idempotent), so `uv run pytest` alone works on a fresh clone; a machine that has the
  nvidia-cutlass wheel installed (the offline GPU machine) takes its headers from there instead.
"""

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

_FETCH = Path(__file__).resolve().parent / "third_party" / "cutlass" / "fetch.py"


def pytest_sessionstart(session: pytest.Session) -> None:
    if _FETCH.is_file() and importlib.util.find_spec("cutlass_library") is None:
        subprocess.run([sys.executable, str(_FETCH)], check=True, stdout=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def session_tmp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's temporary directory, one for all xdist workers (each worker's own lies below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session", autouse=True)
def session_build_cache(session_tmp_path: Path) -> Iterator[None]:
    mp = pytest.MonkeyPatch()
    for variable, name in (
        ("TILEFOUNDRY_CACHE_DIR", "build-cache"),
        ("TILEFOUNDRY_PCH_DIR", "pch"),
        ("TILEFOUNDRY_CUDA_OBJECT_DIR", "cuda-objects"),
    ):
        if not os.environ.get(variable):
            (session_tmp_path / name).mkdir(exist_ok=True)
            mp.setenv(variable, str(session_tmp_path / name))
    yield
    mp.undo()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
