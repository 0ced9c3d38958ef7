"""Suite-wide test configuration.

- The `gpu` marker skips without a CUDA device.
- The pinned CuTe/CUTLASS headers are filled before the first test (third_party/cutlass/fetch.py,
  idempotent), so `uv run pytest` alone works on a fresh clone; a machine that has the
  nvidia-cutlass wheel installed (the offline GPU machine) takes its headers from there instead.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

_FETCH = Path(__file__).resolve().parent / "third_party" / "cutlass" / "fetch.py"


def pytest_sessionstart(session: pytest.Session) -> None:
    if _FETCH.is_file() and importlib.util.find_spec("cutlass_library") is None:
        subprocess.run([sys.executable, str(_FETCH)], check=True, stdout=subprocess.DEVNULL)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
