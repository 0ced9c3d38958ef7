"""Rows, the printed table, the JSON file and the plot of one run.

One row per (case, peer): ours against that peer, with the fraction of the binding limit ours
reaches and issue 7's goals judged on it. The table prints under the header line as Markdown
(habit 19's columns, then `goal`); errors, failed checks and skips become numbered notes
under it, so a row never loses its place.
"""

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .cases import family
from .floors import Limits
from .results import CaseResult

COLUMNS = (
    "case",
    "shape",
    "dtype",
    "ours ms",
    "peer",
    "peer ms",
    "speedup (peer/ours)",
    "% of limit",
    "compile s",
    "goal",
)
LIMIT_NAMES = {"memory": "copy", "compute": "peak"}


@dataclass(frozen=True)
class Row:
    """One table row; plain data, as the JSON file stores it."""

    case: str
    family: str
    shape: str
    dtype: str
    kernel: str
    peer: str | None
    ours_ms: float | None
    peer_ms: float | None
    speedup: float | None
    limit_fraction: float | None
    peer_limit_fraction: float | None
    bound: str
    floor_ms: float
    flops: float
    bytes: float
    rotation: int
    compile_cold_s: float | None = None
    compile_hit_s: float | None = None
    compile_shared_with: str | None = None
    ours_check: str = "not checked"
    peer_check: str | None = None
    ours_error: str | None = None
    peer_error: str | None = None
    ours_timing: dict[str, Any] | None = None
    peer_timing: dict[str, Any] | None = None
    ours_first_call_s: float | None = None
    peer_first_call_s: float | None = None
    skipped: str | None = None
    goals: list[dict[str, Any]] = field(default_factory=list)


def rows_of(result: CaseResult, limits: Limits) -> list[Row]:
    """The rows of one case: one per peer (one with no peer when it has none)."""
    case, ours = result.case, result.ours
    work = case.work
    seconds = ours.ms / 1e3 if ours.ms is not None else None
    compile_ = result.compile
    rows = []
    for peer in result.peers or [None]:
        peer_ms = peer.ms if peer is not None else None
        speedup = peer_ms / ours.ms if ours.ms and peer_ms else None
        row = Row(
            case=case.id,
            family=family(case),
            shape=case.shape,
            dtype=case.dtype,
            kernel=case.kernel,
            peer=peer.name if peer is not None else None,
            ours_ms=ours.ms,
            peer_ms=peer_ms,
            speedup=speedup,
            limit_fraction=limits.fraction(work, seconds),
            peer_limit_fraction=limits.fraction(work, peer_ms / 1e3 if peer_ms else None),
            bound=limits.bound(work),
            floor_ms=limits.floor_s(work) * 1e3,
            flops=work.flops,
            bytes=work.bytes,
            rotation=result.rotation,
            compile_cold_s=compile_.cold_s if compile_ else None,
            compile_hit_s=compile_.hit_s if compile_ else None,
            compile_shared_with=compile_.shared_with if compile_ else None,
            ours_check=ours.check,
            ours_error=ours.error,
            ours_timing=ours.timing.to_json() if ours.timing else None,
            ours_first_call_s=ours.first_call_s,
            skipped=result.skipped,
        )
        if peer is not None:
            row = replace(
                row,
                peer_check=peer.check,
                peer_error=peer.error,
                peer_first_call_s=peer.first_call_s,
                peer_timing=peer.timing.to_json() if peer.timing else None,
            )
        verdicts = [v for g in case.goals if (v := g.judge(row)) is not None]
        rows.append(replace(row, goals=[asdict(v) for v in verdicts]))
    return rows


# ---------------------------------------------------------------- the table


class _Notes:
    """Numbered notes under the table; one number per distinct text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def ref(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"


def _ms(value: float | None) -> str:
    return f"{value:.3g}" if value is not None else "-"


def _timed_cell(ms: float | None, error: str | None, check: str | None, who: str, notes: _Notes) -> str:
    if error is not None:
        return f"err {notes.ref(f'{who}: {error}')}"
    cell = _ms(ms)
    if check is not None and check.startswith("FAIL"):
        cell += f" FAIL {notes.ref(f'{who} check: {check}')}"
    return cell


def _compile_cell(row: Row) -> str:
    if row.compile_hit_s is None:
        return "-"
    if row.compile_shared_with:
        return f"shared/{row.compile_hit_s:.2g}"
    cold = f"{row.compile_cold_s:.3g}" if row.compile_cold_s is not None else "?"
    return f"{cold}/{row.compile_hit_s:.2g}"


def _cells(row: Row, notes: _Notes) -> tuple[str, ...]:
    if row.skipped is not None:
        skip = f"skipped {notes.ref(row.skipped)}"
        return (row.case, row.shape, row.dtype, skip, row.peer or "-", "-", "-", "-", "-", "-")
    ours = _timed_cell(row.ours_ms, row.ours_error, row.ours_check, f"{row.case} ours", notes)
    peer = (
        _timed_cell(row.peer_ms, row.peer_error, row.peer_check, f"{row.case} {row.peer}", notes)
        if row.peer
        else "-"
    )
    speedup = f"{row.speedup:.2f}x" if row.speedup is not None else "-"
    limit = f"{row.limit_fraction:.0%} {LIMIT_NAMES[row.bound]}" if row.limit_fraction is not None else "-"
    goals = "; ".join(g["text"] for g in row.goals) or "-"
    return (
        row.case,
        row.shape,
        row.dtype,
        ours,
        row.peer or "-",
        peer,
        speedup,
        limit,
        _compile_cell(row),
        goals,
    )


def render_table(rows: Sequence[Row]) -> str:
    """The rows as an aligned Markdown table, then the numbered notes its cells refer to."""
    notes = _Notes()
    body = [_cells(r, notes) for r in rows]
    widths = [max(len(line[c]) for line in (COLUMNS, *body)) for c in range(len(COLUMNS))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(COLUMNS), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *(line(b) for b in body)]
    out += [f"[{i}] {text}" for i, text in enumerate(notes.texts, 1)]
    return "\n".join(out)


def goal_summary(rows: Sequence[Row]) -> str:
    """One line: goals met over goals judged, per family ("goals met: gemm 3/98, model 0/2")."""
    met: dict[str, list[bool]] = {}
    for r in rows:
        for g in r.goals:
            met.setdefault(r.family, []).append(g["met"])
    if not met:
        return "goals met: none judged"
    return "goals met: " + ", ".join(f"{fam} {sum(v)}/{len(v)}" for fam, v in met.items())


# ---------------------------------------------------------------- files


def result_stem(device: str, date: str) -> str:
    """The file name stem of a run's results: gpu-<device slug>-<date>."""
    from .machine import slug

    return f"gpu-{slug(device)}-{date}"


def write_json(path: Path, header: dict[str, Any], rows: Sequence[Row]) -> None:
    """The run's header and every row, as one JSON document."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"header": header, "rows": [asdict(r) for r in rows]}, indent=1) + "\n")


def read_rows(path: Path) -> list[Row]:
    """The rows a `write_json` file holds."""
    return [Row(**r) for r in json.loads(path.read_text())["rows"]]


def write_plot(path: Path, rows: Sequence[Row], title: str) -> str | None:
    """Speedup per row and fraction of limit per case, as a PNG; None, or why it was skipped.

    matplotlib is optional: without it the plot is skipped and the note says so.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        return f"plot skipped: matplotlib is not importable ({err})"
    timed = [r for r in rows if r.speedup is not None]
    cases = list(dict.fromkeys(r.case for r in rows if r.limit_fraction is not None))
    fraction = {r.case: r.limit_fraction for r in rows if r.limit_fraction is not None}
    height = 1.5 + 0.2 * max(len(timed), len(cases), 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(16, height))
    peers = list(dict.fromkeys(r.peer for r in timed))
    colors = {p: f"C{i}" for i, p in enumerate(peers)}
    left.barh(
        [f"{r.case} vs {r.peer}" for r in timed],
        [r.speedup for r in timed],
        color=[colors[r.peer] for r in timed],
    )
    left.axvline(1.0, color="black", linewidth=0.8)
    left.set_xscale("log")
    left.set_xlabel("speedup (peer ms / ours ms)")
    left.invert_yaxis()
    right.barh(cases, [fraction[c] * 100 for c in cases], color="C7")
    right.set_xlabel("% of limit (copy bandwidth or bf16 peak)")
    right.invert_yaxis()
    for ax in (left, right):
        ax.tick_params(axis="y", labelsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
