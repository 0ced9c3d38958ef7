"""tilefoundry.runtime.headers, the headers' layout rules, the wheel's package data, the CUTLASS pin."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
import types
import zipfile
from pathlib import Path

import pytest

from tilefoundry.ir.errors import TargetUnavailable
from tilefoundry.runtime import headers

REPO = Path(__file__).resolve().parents[3]
HEADER_ROOT = REPO / "cpp" / "runtime" / "include"
HEADER_FILES = sorted(p for p in HEADER_ROOT.rglob("*") if p.suffix in {".h", ".cuh"})
CUTLASS = REPO / "third_party" / "cutlass"


def _fake_cutlass(root: Path) -> Path:
    """An include dir shaped like CuTe/CUTLASS's: include/cute and include/cutlass."""
    for tree in ("cute", "cutlass"):
        (root / "include" / tree).mkdir(parents=True)
    return root / "include"


# ---------------------------------------------------------------- the digest


def test_the_runtime_digest_follows_every_header_byte(tmp_path, monkeypatch) -> None:
    """runtime_digest covers each header's path and bytes: a copy of the tree digests alike, and one
    changed byte, or one more header, changes it."""
    copy = tmp_path / "include"
    shutil.copytree(HEADER_ROOT / "tilefoundry", copy / "tilefoundry")
    monkeypatch.setattr(headers, "runtime_include_dir", lambda: copy)
    digest = headers.runtime_digest.__wrapped__
    same = digest()
    assert same == headers.runtime_digest()
    target = copy / "tilefoundry" / "runtime.h"
    target.write_bytes(target.read_bytes() + b" ")
    changed = digest()
    (copy / "tilefoundry" / "extra.h").write_text("#pragma once\n")
    assert len({same, changed, digest()}) == 3


# ---------------------------------------------------------------- lookups


def test_runtime_include_dir_in_a_checkout_is_cpp_runtime_include() -> None:
    """In an editable checkout the runtime headers come from cpp/runtime/include."""
    assert headers.runtime_include_dir() == HEADER_ROOT
    assert (headers.runtime_include_dir() / "tilefoundry" / "runtime.h").is_file()


def test_runtime_include_dir_missing_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without the package data or a checkout, the error names the package to reinstall."""
    monkeypatch.setattr(headers, "_PACKAGE_DIR", tmp_path / "pkg")
    monkeypatch.setattr(headers, "_REPO_ROOT", tmp_path)
    with pytest.raises(
        TargetUnavailable, match=r"TileFoundry runtime headers not found: reinstall tilefoundry-runtime"
    ):
        headers.runtime_include_dir()


def test_cutlass_include_dir_prefers_third_party(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A filled third_party/cutlass/include wins over an installed nvidia-cutlass."""
    monkeypatch.setattr(headers, "_REPO_ROOT", tmp_path)
    filled = _fake_cutlass(tmp_path / "third_party" / "cutlass")
    monkeypatch.setattr(headers, "_installed_cutlass_include", lambda: _fake_cutlass(tmp_path / "wheel"))
    assert headers.cutlass_include_dir() == filled


def test_cutlass_include_dir_falls_back_to_the_installed_wheel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without third_party headers, an installed nvidia-cutlass's source_path/include is used."""
    monkeypatch.setattr(headers, "_REPO_ROOT", tmp_path / "empty-checkout")
    source = tmp_path / "site" / "cutlass_library" / "source"
    _fake_cutlass(source)
    monkeypatch.setitem(sys.modules, "cutlass_library", types.SimpleNamespace(source_path=str(source)))
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: object() if name == "cutlass_library" else None
    )
    assert headers.cutlass_include_dir() == source / "include"


def test_cutlass_missing_error_names_the_fetch_script(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Neither source: the error says to run third_party/cutlass/fetch.py and lists what was checked."""
    monkeypatch.setattr(headers, "_REPO_ROOT", tmp_path)
    monkeypatch.setattr(headers, "_installed_cutlass_include", lambda: None)
    with pytest.raises(TargetUnavailable) as info:
        headers.cutlass_include_dir()
    assert "CuTe/CUTLASS headers not found: run `python3 third_party/cutlass/fetch.py`" in str(info.value)
    assert info.value.got == [str(tmp_path / "third_party" / "cutlass" / "include")]


def test_cuda_include_dirs_from_cuda_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """CUDA_HOME's include, then its cccl/ (libcu++ since CUDA 13)."""
    (tmp_path / "include" / "cccl").mkdir(parents=True)
    (tmp_path / "include" / "cuda_runtime_api.h").write_text("")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert headers.cuda_include_dirs() == [tmp_path / "include", tmp_path / "include" / "cccl"]


def test_cuda_include_dirs_missing_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No toolkit anywhere: the error says CuTe needs it even on the host."""
    monkeypatch.setattr(headers, "_cuda_roots", lambda: [tmp_path])
    with pytest.raises(
        TargetUnavailable, match=r"CUDA toolkit headers not found: CuTe needs cuda_runtime_api.h"
    ):
        headers.cuda_include_dirs()


# ---------------------------------------------------------------- header layout rules


@pytest.mark.parametrize(
    "path", HEADER_FILES, ids=[p.relative_to(HEADER_ROOT).as_posix() for p in HEADER_FILES]
)
def test_every_header_has_pragma_once(path: Path) -> None:
    """STYLE 16: every runtime header starts its code with #pragma once."""
    code = [line for line in path.read_text().splitlines() if line.strip() and not line.startswith("//")]
    assert code[0] == "#pragma once", f"{path.name}: first directive is {code[0]!r}"


def test_2_only_the_umbrella_reads_the_target_macro() -> None:
    """seed 000 §2: runtime.h alone reads TILEFOUNDRY_TARGET_CUDA / TILEFOUNDRY_TARGET_CPU."""
    readers = {
        p.relative_to(HEADER_ROOT).as_posix()
        for p in HEADER_FILES
        if re.search(r"TILEFOUNDRY_TARGET_(CUDA|CPU)", p.read_text())
    }
    assert readers == {"tilefoundry/runtime.h"}


def test_2_include_tree_is_target_first() -> None:
    """seed 000 §2: target surfaces at runtime/<target>/, no intermediate target/ segment."""
    assert (HEADER_ROOT / "tilefoundry" / "runtime" / "cuda" / "runtime.cuh").is_file()
    assert (HEADER_ROOT / "tilefoundry" / "runtime" / "cpu" / "runtime.h").is_file()
    assert not (HEADER_ROOT / "tilefoundry" / "runtime" / "target").exists()


# ---------------------------------------------------------------- the wheel ships them


@pytest.fixture(scope="module")
def runtime_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tilefoundry-runtime wheel, built from this checkout."""
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        pytest.skip("uv not found: building the runtime wheel needs it")
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [uv, "build", "--wheel", str(REPO / "packages" / "tilefoundry-runtime"), "-o", str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("tilefoundry_runtime-*.whl")
    return wheel


def test_runtime_wheel_ships_every_header(runtime_wheel: Path) -> None:
    """The wheel holds cpp/runtime/include as package data tilefoundry/runtime/include."""
    names = set(zipfile.ZipFile(runtime_wheel).namelist())
    expected = {f"tilefoundry/runtime/include/{p.relative_to(HEADER_ROOT).as_posix()}" for p in HEADER_FILES}
    assert expected <= names, sorted(expected - names)


def test_installed_wheel_resolves_its_own_headers(runtime_wheel: Path, tmp_path: Path) -> None:
    """headers.py inside an unpacked wheel finds tilefoundry/runtime/include next to itself."""
    zipfile.ZipFile(runtime_wheel).extractall(tmp_path)
    spec = importlib.util.spec_from_file_location(
        "installed_headers", tmp_path / "tilefoundry" / "runtime" / "headers.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = module.runtime_include_dir()
    assert found == tmp_path / "tilefoundry" / "runtime" / "include"
    assert (found / "tilefoundry" / "runtime.h").read_text() == (
        HEADER_ROOT / "tilefoundry" / "runtime.h"
    ).read_text()


# ---------------------------------------------------------------- the CUTLASS pin


def _load_fetch() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("cutlass_fetch", CUTLASS / "fetch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pin_names_nvidia_cutlass_4_2_by_sha256() -> None:
    """The pin is the nvidia-cutlass 4.2.0.0 wheel on PyPI, identified by its sha256."""
    pin = tomllib.loads((CUTLASS / "pin.toml").read_text())
    assert (pin["package"], pin["version"]) == ("nvidia-cutlass", "4.2.0.0")
    assert pin["wheel"] == "nvidia_cutlass-4.2.0.0-py3-none-any.whl"
    assert re.fullmatch(r"[0-9a-f]{64}", pin["sha256"])


def test_fetch_refuses_a_wheel_whose_hash_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """fetch.py checks the downloaded wheel against the pin and refuses a mismatch, naming both hashes."""
    fetch = _load_fetch()
    fake_pip = (
        "import sys, pathlib; d = sys.argv[sys.argv.index('-d') + 1]; "
        "pathlib.Path(d, 'fake_cutlass-0.0-py3-none-any.whl').write_bytes(b'not the pinned wheel')"
    )
    monkeypatch.setattr(fetch, "pip_command", lambda: [sys.executable, "-c", fake_pip])
    pin = {
        "package": "fake-cutlass",
        "version": "0.0",
        "wheel": "fake_cutlass-0.0-py3-none-any.whl",
        "sha256": "0" * 64,
        "include_root": "include",
    }
    with pytest.raises(
        SystemExit,
        match=r"fake_cutlass-0.0-py3-none-any.whl has sha256 [0-9a-f]{64}, "
        r"pin.toml expects 0{64}; refusing it",
    ):
        fetch.download(pin)
    assert not (CUTLASS / pin["wheel"]).exists()


def test_fetch_is_fast_when_already_filled() -> None:
    """A second run with the same pin only reads the stamp."""
    fetch = _load_fetch()
    if not fetch.is_filled(fetch.load_pin()):
        pytest.skip("third_party/cutlass/include is not filled; run python3 third_party/cutlass/fetch.py")
    run = subprocess.run(
        [sys.executable, str(CUTLASS / "fetch.py")], capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 0, run.stderr
    assert "already holds nvidia-cutlass 4.2.0.0" in run.stdout
