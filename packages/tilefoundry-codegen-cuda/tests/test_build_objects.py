"""The cuda builder's side objects (build.side_object): a side source (an sm90 collective's slot
source) is compiled once for its text and flags, and every module and build cache on the machine
links that object. nvcc is replaced by a recorder here; the suite's nvcc builds link the real ones."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tilefoundry.codegen.cuda import build
from tilefoundry.codegen.cuda.resources import kernel_resources
from tilefoundry.ir.errors import TargetUnavailable
from tilefoundry.ir.target import Sources


@pytest.fixture
def nvcc_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Each nvcc command the builder runs; a compile writes `object of <source text>`."""
    monkeypatch.setenv(build.OBJECT_DIR_VARIABLE, str(tmp_path / "objects"))
    monkeypatch.setattr(build, "cuda_facts", lambda: SimpleNamespace(nvcc_version="13.0", nvcc="nvcc"))
    runs: list[list[str]] = []

    def run(cmd: list[str], what: str) -> str:
        runs.append(cmd)
        time.sleep(0.05)  # long enough for a second thread to meet the lock
        out = Path(cmd[cmd.index("-o") + 1])
        source = Path(cmd[cmd.index("-c") + 1]) if "-c" in cmd else None
        out.write_text(f"object of {source.read_text()}" if source else "library")
        return "".join(ptxas_entry(line) for line in source.read_text().splitlines()) if source else ""

    monkeypatch.setattr(build, "_run", run)
    return runs


def ptxas_entry(text: str) -> str:
    """What ptxas -v says of one sm_90a kernel, named after a source line ("slot 8" -> k_slot_8)."""
    name = "k_" + text.replace(" ", "_")
    return (
        f"ptxas info    : Compiling entry function '{name}' for 'sm_90a'\n"
        f"ptxas info    : Function properties for {name}\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        f"ptxas info    : Used {len(text) * 8} registers, used 1 barriers\n"
    )


def _source(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_side_source_compiles_once_for_every_module_that_has_it(tmp_path: Path, nvcc_runs) -> None:
    a = _source(tmp_path / "cache_a" / "m_sm90_8.cu", "slot 8")
    b = _source(tmp_path / "cache_b" / "n_sm90_8.cu", "slot 8")
    first = build.side_object("nvcc", ("-O3",), a)
    assert build.side_object("nvcc", ("-O3",), b) == first
    assert len(nvcc_runs) == 1 and first.read_text() == "object of slot 8"
    assert first.parent == tmp_path / "objects"


def test_other_flags_or_text_compile_again(tmp_path: Path, nvcc_runs) -> None:
    src = _source(tmp_path / "m_sm90_8.cu", "slot 8")
    objects = {
        build.side_object("nvcc", ("-O3",), src),
        build.side_object("nvcc", ("-O3", "--use_fast_math"), src),
        build.side_object("nvcc", ("-O3",), _source(tmp_path / "m_sm90_6.cu", "slot 6")),
    }
    assert len(objects) == 3 and len(nvcc_runs) == 3


def test_concurrent_builders_of_one_key_compile_it_once(tmp_path: Path, nvcc_runs) -> None:
    srcs = [_source(tmp_path / f"cache_{i}" / "m_sm90_3.cu", "slot 3") for i in range(4)]
    got: list[Path] = []
    threads = [
        threading.Thread(target=lambda s=s: got.append(build.side_object("nvcc", (), s))) for s in srcs
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and len(got) == 4 and len(nvcc_runs) == 1


def test_a_failed_compile_leaves_no_object_and_the_next_build_tries_again(
    tmp_path: Path, nvcc_runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _source(tmp_path / "m_sm90_8.cu", "slot 8")

    def fail(cmd: list[str], what: str) -> None:
        Path(cmd[cmd.index("-o") + 1]).write_text("half an object")
        raise TargetUnavailable(f"nvcc failed on {what}", where="cuda")

    with monkeypatch.context() as m:
        m.setattr(build, "_run", fail)
        with pytest.raises(TargetUnavailable, match=r"m_sm90_8\.cu"):
            build.side_object("nvcc", (), src)
    assert [p.name for p in (tmp_path / "objects").iterdir() if p.suffix == ".o"] == []
    assert build.side_object("nvcc", (), src).read_text() == "object of slot 8"


def _build(tmp_path: Path, module: str, files: dict[str, str]):
    return build.build(
        Sources(target="cuda", files=files, entries=(module,)), {}, tmp_path / module, "sm_90a"
    )


def _shared(text: str) -> Path:
    return build.side_object_path(build.compile_flags("sm_90a", {}), text)


def test_with_a_lane_for_each_source_sides_are_units_of_their_own_kept_for_later_modules(
    tmp_path: Path, nvcc_runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The main source compiles into the module's cache directory, each side source through
    side_object, one link takes them all; a second module links the kept side object."""
    monkeypatch.setenv(build.UNITS_VARIABLE, "4")
    lib = _build(tmp_path, "m", {"m.cu": "main m", "m_sm90_8.cu": "slot 8", "m_sm90_6.cu": "slot 6"})
    *compiles, link = nvcc_runs
    assert len(compiles) == 3 and "-shared" in link
    assert {str(tmp_path / "m" / "m.o"), str(_shared("slot 8")), str(_shared("slot 6"))} <= set(link)
    assert lib.path == tmp_path / "m" / "m.so"

    nvcc_runs.clear()
    lib = _build(tmp_path, "n", {"n.cu": "main n", "n_sm90_8.cu": "slot 8"})
    assert len(nvcc_runs) == 2 and str(_shared("slot 8")) in nvcc_runs[-1]  # n.cu, then the link
    # The kept object's ptxas report was kept with it: the library lists its kernel too.
    assert {(k.name, k.registers) for k in kernel_resources(lib.path)} == {("k_main_n", 48), ("k_slot_8", 48)}


def test_with_fewer_lanes_the_sides_join_the_main_unit_and_kept_ones_are_linked(
    tmp_path: Path, nvcc_runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One lane: a split would only add header parses, so the sides not yet kept join the main
    source's unit (no object is kept for them), and a kept side object is linked as it is."""
    monkeypatch.setenv(build.UNITS_VARIABLE, "4")
    _build(tmp_path, "m", {"m.cu": "main m", "m_sm90_8.cu": "slot 8"})
    monkeypatch.setenv(build.UNITS_VARIABLE, "1")
    nvcc_runs.clear()
    _build(tmp_path, "n", {"n.cu": "main n", "n_sm90_8.cu": "slot 8", "n_sm90_6.cu": "slot 6"})
    compile_, link = nvcc_runs
    assert (tmp_path / "n" / "n.cu").read_text() == "main n\nslot 6"
    assert {k.name for k in kernel_resources(tmp_path / "n" / "n.so")} == {"k_main_n", "k_slot_6", "k_slot_8"}
    assert str(_shared("slot 8")) in link and not _shared("slot 6").exists()
    assert compile_[compile_.index("-c") + 1] == str(tmp_path / "n" / "n.cu")
