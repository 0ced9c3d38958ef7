"""bench/models/profile_decode.py without a GPU: a replayed step's busy time and per-kernel marginal time."""

import random
import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.models.profile_decode import launch_chain, marginal_table, step_boundary, step_busy


def _chain(rng: random.Random, lo: float) -> tuple[list[tuple[str, float, float]], float]:
    """Three kernels launched PDL-style (each starts before its predecessor ends) then a gap and a fourth."""
    a_end = lo + rng.uniform(5, 10)
    b_start, b_end = a_end - rng.uniform(1, 2), a_end + rng.uniform(3, 4)
    c_start, c_end = b_end - rng.uniform(0.5, 1), b_end + rng.uniform(1, 2)
    d_start = c_end + rng.uniform(0.5, 1)
    d_end = d_start + rng.uniform(2, 3)
    return [("a", lo, a_end), ("b", b_start, b_end), ("c", c_start, c_end), ("d", d_start, d_end)], d_end


def test_marginal_times_sum_to_the_span_and_charge_overlap_to_no_one() -> None:
    rng = random.Random()
    steps = []
    lo = rng.uniform(0, 100)
    for _ in range(3):
        events, end = _chain(rng, lo)
        hi = end + rng.uniform(1, 5)
        steps.append((lo, hi, events))
        lo = hi
    rows = {name: (us, dur, n) for name, us, dur, n in marginal_table(steps)}
    span = sum(max(b for _, _, b in ev) - lo for lo, _, ev in steps) / 3
    assert sum(us for us, _, _ in rows.values()) == pytest.approx(span)
    # b's overlap with a is not its own: only the time past a's end counts; d carries the idle gap before it
    expect_b = sum(ev[1][2] - ev[0][2] for _, _, ev in steps) / 3
    assert rows["b"][0] == pytest.approx(expect_b)
    assert rows["b"][1] > rows["b"][0]
    assert rows["d"][0] == pytest.approx(sum(ev[3][2] - ev[2][2] for _, _, ev in steps) / 3)
    assert all(n == 1 for _, _, n in rows.values())


def test_busy_time_leaves_out_the_gaps() -> None:
    rng = random.Random()
    lo = rng.uniform(0, 100)
    events, end = _chain(rng, lo)
    hi = end + rng.uniform(1, 5)
    period, busy = step_busy([(lo, hi, events)])
    gap = events[3][1] - events[2][2]
    assert period == pytest.approx(hi - lo)
    assert busy == pytest.approx(end - lo - gap)


def test_the_boundary_table_is_the_median_step_with_the_idle_time_before_each_event() -> None:
    rng = random.Random()
    steps, lo = [], rng.uniform(0, 100)
    for _ in range(3):
        events, end = _chain(rng, lo)
        hi = end + rng.uniform(1, 5)
        steps.append((lo, hi, events))
        lo = hi
    median = sorted(steps, key=lambda s: s[1] - s[0])[1]
    rows = step_boundary(steps)
    assert [r[0] for r in rows] == ["a", "b", "c", "d"]
    start, _, events = median
    assert [r[1] for r in rows] == pytest.approx([a - start for _, a, _ in events])
    assert [r[3] for r in rows[:3]] == [0.0, 0.0, 0.0]  # PDL overlap is no idle time
    assert rows[3][3] == pytest.approx(events[3][1] - events[2][2])


def test_the_chain_gives_each_launch_its_median_marginal_in_launch_order() -> None:
    """Two layers a step (a, b, c, d twice): each kernel's per-launch marginal is the median over
    every launch of it, and the rows follow the median step's first launches."""
    rng = random.Random()
    steps, lo = [], rng.uniform(0, 100)
    for _ in range(5):
        first, end = _chain(rng, lo)
        second, end = _chain(rng, end)
        hi = end + rng.uniform(1, 5)
        steps.append((lo, hi, first + second))
        lo = hi
    rows = launch_chain(steps)
    assert [(name, n) for name, _, n in rows] == [("a", 2), ("b", 2), ("c", 2), ("d", 2)]
    added = {name: [] for name in "abcd"}
    for start, _, events in steps:
        end = start
        for name, _, b in events:
            added[name].append(max(0.0, b - end))
            end = max(end, b)
    for name, us, _ in rows:
        assert us == pytest.approx(statistics.median(added[name]))
