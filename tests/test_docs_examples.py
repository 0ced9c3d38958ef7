"""The code in the documentation runs as written: every example of an opted-in page is executed.

A page opts in with the line `<!-- doctest: run -->` at its top. Its ```python blocks then run in
page order, in one namespace (a fresh module, so a later block uses what an earlier one defined),
inside a temporary working directory; a traceback names the page and the line of the block. An
```output block shows what the python block just before it printed, and is compared with that
print-out with every number and every run of spaces normalized: measured values differ in their
last digits from one machine's BLAS to another's, and column widths follow the numbers.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
OPT_IN = "<!-- doctest: run -->"
_FENCE = re.compile(r"^```(\w*)\s*$")
# A number standing alone: not the digit of a name (rel_l2) or of a dotted path (layers.0).
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|\binf\b|\bnan\b")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its info string, its first content line (1-based), its text."""

    lang: str
    line: int
    text: str


def opts_in(page: Path) -> bool:
    """True when the page's first non-blank line is the opt-in marker."""
    for line in page.read_text().splitlines():
        if line.strip():
            return line.strip() == OPT_IN
    return False


def blocks_of(page: Path) -> list[Block]:
    """Every fenced block of a page, in order.

    Raises:
        ValueError: a fence is left open, naming the page and the line it opened on.
    """
    blocks: list[Block] = []
    lang, start, body = None, 0, []
    for n, line in enumerate(page.read_text().splitlines(), start=1):
        match = _FENCE.match(line)
        if lang is None and match:
            lang, start, body = match.group(1), n + 1, []
        elif lang is not None and line.strip() == "```":
            blocks.append(Block(lang, start, "\n".join(body) + "\n"))
            lang = None
        elif lang is not None:
            body.append(line)
    if lang is not None:
        raise ValueError(f"{page}:{start - 1}: a ``` fence opened here is never closed")
    return blocks


def normalized(text: str) -> str:
    """`text` with every number replaced by `N` and every run of whitespace by one space."""
    return " ".join(_NUMBER.sub("N", text).split())


def run_page(page: Path, workdir: Path) -> None:
    """Run the page's python blocks in order in one namespace and check its output blocks.

    Raises:
        AssertionError: an output block differs from what the python block before it printed,
            or follows no python block; the message names the page and line.
        Exception: whatever a block raises, with a traceback naming the page and line.
    """
    name = f"docs_{page.stem.replace('-', '_')}"
    namespace = types.ModuleType(name)
    namespace.__file__ = str(page)
    sys.modules[name] = namespace
    printed: str | None = None
    try:
        with contextlib.chdir(workdir):
            for block in blocks_of(page):
                if block.lang == "python":
                    printed = _run_block(page, block, namespace)
                elif block.lang == "output":
                    _compare(page, block, printed)
                    printed = None
    finally:
        del sys.modules[name]


def _run_block(page: Path, block: Block, namespace: types.ModuleType) -> str:
    # Blank lines in front put each statement on its line of the page, and the page text in
    # linecache lets tracebacks (and the DSL, which reads a function's source) find it.
    source = "\n" * (block.line - 1) + block.text
    filename = str(page)
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, filename, "exec"), namespace.__dict__)
    return out.getvalue()


def _compare(page: Path, block: Block, printed: str | None) -> None:
    where = f"{page.name}:{block.line}"
    assert printed is not None, f"{where}: an output block must follow the python block that prints it"
    assert normalized(block.text) == normalized(printed), (
        f"{where}: the output block differs from what the python block before it printed "
        f"(numbers and spacing aside).\n--- the page shows:\n{block.text}--- the block printed:\n{printed}"
    )


PAGES = sorted(p for p in DOCS.glob("*.md") if opts_in(p))


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_opted_in_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    """Every python block of the page runs, and every output block matches what was printed."""
    assert any(b.lang == "python" for b in blocks_of(page)), f"{page.name} opts in but has no python block"
    run_page(page, tmp_path)


def test_runtime_guide_opts_in() -> None:
    assert DOCS / "runtime.md" in PAGES


def test_index_links_only_to_pages_that_exist() -> None:
    index = (DOCS / "index.md").read_text()
    links = re.findall(r"\]\(([^)#]+)\)", index)
    assert links, "docs/index.md links to no page"
    assert [link for link in links if not (DOCS / link).is_file()] == []


# ---------------------------------------------------------------- the runner itself


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text)
    return page


def test_blocks_share_one_namespace_and_run_in_the_working_dir(tmp_path: Path) -> None:
    page = _page(
        tmp_path,
        f"{OPT_IN}\n# t\n```python\nimport pathlib\nx = 41\npathlib.Path('made').write_text('y')\n```\n"
        "text\n```python\nprint(x + 1, pathlib.Path('made').read_text())\n```\n```output\n42 y\n```\n",
    )
    work = tmp_path / "work"
    work.mkdir()
    run_page(page, work)
    assert (work / "made").read_text() == "y"


def test_a_failing_block_names_the_page_and_line(tmp_path: Path) -> None:
    page = _page(tmp_path, f"{OPT_IN}\n\n```python\nx = 1\nraise KeyError('w_up')\n```\n")
    with pytest.raises(KeyError) as info:
        run_page(page, tmp_path)
    frame = info.traceback[-1]
    assert (Path(frame.path).name, frame.lineno + 1) == ("page.md", 5)


def test_an_output_block_that_differs_is_reported(tmp_path: Path) -> None:
    page = _page(
        tmp_path, f"{OPT_IN}\n```python\nprint('rel_l2=0.25 PASS')\n```\n```output\nrel_l2=1e-3 FAIL\n```\n"
    )
    with pytest.raises(AssertionError, match=r"page.md:6: the output block differs"):
        run_page(page, tmp_path)


def test_numbers_and_spacing_are_normalized() -> None:
    assert normalized("x  (3, 4)  rel_l2=1.5e-07 inf\n") == normalized("x (24, 8) rel_l2=0.25   nan")
    assert normalized("rel_l2=0") != normalized("rel_l3=0")
    assert normalized("layers.0.mlp") != normalized("layers.1.mlp")
    assert normalized("PASS") != normalized("FAIL")


def test_an_unclosed_fence_is_reported(tmp_path: Path) -> None:
    page = _page(tmp_path, "# t\n\n```python\nx = 1\n")
    with pytest.raises(ValueError, match=r"page.md:3: a ``` fence opened here is never closed"):
        blocks_of(page)
