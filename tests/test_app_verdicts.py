"""app/verdicts.py: the comparison table and the noise-aware verdict shared by the What-if page (strategies) and
the Fleet page (routers); pure functions, no Streamlit."""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from app import page_fleet, page_whatif, verdicts

ROOT = Path(__file__).resolve().parents[1]
BASE = [100.0, 120.0, 90.0, 110.0]  # replication k's p99 TTFT of a reference candidate (common random numbers)


def reps_of(**values) -> dict[str, list[dict]]:
    """candidate -> per-replication summaries with the given p99 TTFTs."""
    return {k: [{"ttft_p99_ms": v} for v in vs] for k, vs in values.items()}


def _half(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


# ------------------------------------------------------------------ judge
def test_a_difference_inside_the_ci_is_a_tie_with_both_named():
    # b is 2 ms better on average, but the paired differences (+3, -8, +1, -4) swing both ways: a tie
    b = [100.0 - 3, 120.0 + 8, 90.0 - 1, 110.0 + 4]
    j = verdicts.judge({"a": BASE, "b": b}, higher_is_better=False)
    assert j.kind == "tie" and j.best == "a" and j.tied == ["b"] and j.runner_up is None and j.n == 4
    # the same mean gap with no noise at all is a clear win
    j = verdicts.judge({"a": BASE, "b": [v - 2.0 for v in BASE]}, higher_is_better=False)
    assert j.kind == "win" and j.best == "b" and j.tied == []


def test_a_clear_winner_is_named_with_its_paired_lead():
    diffs = [40.0, 55.0, 45.0, 60.0]  # c is worse than b by these, replication by replication
    values = {"c": [v + d for v, d in zip(BASE, diffs)], "b": BASE, "far": [v + 500 for v in BASE]}
    j = verdicts.judge(values, higher_is_better=False)
    assert j.kind == "win" and j.best == "b" and j.runner_up == "c"
    assert j.lead == pytest.approx(np.mean(diffs)) and j.lead_half == pytest.approx(_half(diffs))
    # higher is better: the order turns round
    j = verdicts.judge(values, higher_is_better=True)
    assert j.kind == "win" and j.best == "far" and j.runner_up == "c"


def test_no_ci_no_verdict_and_the_degenerate_cases():
    assert verdicts.judge({"a": [100.0], "b": [50.0]}, False).kind == "lead"  # one replication
    assert verdicts.judge({"a": BASE}, False).kind == "single"
    assert verdicts.judge({"a": BASE, "b": [math.nan] * 4}, False).kind == "single"  # b never finished
    assert verdicts.judge({"a": [math.nan] * 4}, False).kind == "none"


def test_excluded_candidates_never_win_nor_tie():
    j = verdicts.judge({"oracle": [1.0] * 4, "a": BASE, "b": [v + 50 for v in BASE]}, False, exclude=["oracle"])
    assert j.kind == "win" and j.best == "a" and j.runner_up == "b" and "oracle" not in j.tied
    assert verdicts.judge({"oracle": [1.0] * 4, "a": BASE}, False, exclude=["oracle"]).kind == "single"


# ------------------------------------------------------------------ verdict text
TEXTS = {"none": "none on {label}", "single": "only {best}", "lead": "{best} leads",
         "tie": "tie: {best} and {tied} over {n}", "win": "{best} beats {second} by {lead} ± {half} on {label}"}


def test_verdict_fills_the_page_template():
    fmt = lambda k, s: f"<{k} {s['mean']:.0f}>"  # noqa: E731
    text, kind = verdicts.verdict(reps_of(a=BASE, b=[v + 50 for v in BASE]), "ttft_p99_ms", False, TEXTS, fmt,
                                  "{:.1f}".format, label="p99")
    assert (text, kind) == ("<a 105> beats <b 155> by 50.0 ± 0.0 on p99", "win")
    text, kind = verdicts.verdict(reps_of(a=BASE, b=BASE, c=BASE), "ttft_p99_ms", False, TEXTS, fmt)
    assert kind == "tie" and text == "tie: <a 105> and <b 105>, <c 105> over 4"
    assert verdicts.verdict({"a": [{}]}, "ttft_p99_ms", False, TEXTS, fmt, label="p99") == ("none on p99", "none")


def test_the_pages_say_the_same_verdict_in_their_own_words():
    reps = reps_of(round_robin=[v + 50 for v in BASE], least_loaded=BASE)
    text, kind = page_fleet.verdict(reps)
    assert kind == "win" and text == (
        "**least_loaded** (105 ms) wins on p99 TTFT, ahead of **round_robin** (155 ms) (the paired 95 % CI of every "
        "difference excludes zero over 4 replications; every router sees the same requests).")
    summ = lambda v: {"ttft_p99_ms": v, "requests": 100, "not_completed": 0}  # noqa: E731
    text, kind = page_whatif.verdict({"naive": [summ(v + 50) for v in BASE], "batch": [summ(v) for v in BASE]})
    assert kind == "win" and text.startswith("**batch** (105.0 ms (± 20.5 ms)) wins on p99 TTFT: ahead of the "
                                             "runner-up **naive** (155.0 ms (± 20.5 ms)) by 50.0 ms ± 0.0 ms")
    # one router with a p99 TTFT (the others failed or finished nothing): said, not a crash
    text, kind = page_fleet.verdict(reps_of(least_loaded=BASE, random=[math.nan] * 4))
    assert kind == "single" and text.startswith("Only **least_loaded** (105 ms) has a p99 TTFT")


# ------------------------------------------------------------------ table and formats
def test_ci_table_means_and_half_widths():
    reps = {"x": [{"m": 1.0, "s": 0.5}, {"m": 3.0, "s": 0.7}, {"m": 2.0}], "y": [{"m": 4.0, "s": 0.1}] * 3}
    t = verdicts.ci_table(reps, [("m", "M"), ("s", "S")], "router")
    assert list(t.columns) == ["router", "M", "M ±", "S", "S ±"] and list(t["router"]) == ["x", "y"]
    x = t.set_index("router").loc["x"]
    assert x["M"] == pytest.approx(2.0) and x["M ±"] == pytest.approx(_half([1, 3, 2]))
    assert x["S"] == pytest.approx(0.6) and x["S ±"] == pytest.approx(_half([0.5, 0.7]))  # the missing one is NaN
    y = t.set_index("router").loc["y"]
    assert y["M ±"] == pytest.approx(0.0)
    one = verdicts.ci_table({"x": [{"m": 1.0}]}, [("m", "M")])
    assert one["M"].iloc[0] == 1.0 and math.isnan(one["M ±"].iloc[0])  # one replication: no CI


def test_fleet_column_formats_are_explicit_and_cover_the_table():
    fmt = verdicts.column_formats(page_fleet.KPIS)
    table = page_fleet.router_table(reps_of(a=BASE))
    assert set(fmt) == set(table.columns[1:])
    assert fmt == {"TTFT p50 (ms)": "%.1f", "TTFT p50 (ms) ±": "%.1f", "TTFT p99 (ms)": "%.1f",
                   "TTFT p99 (ms) ±": "%.1f", "Tokens/s": "%.1f", "Tokens/s ±": "%.1f",
                   "SLO met": "%.3f", "SLO met ±": "%.3f", "Swap rate": "%.3f", "Swap rate ±": "%.3f",
                   "Load imbalance (max/mean)": "%.3f", "Load imbalance (max/mean) ±": "%.3f",
                   "Replicas per adapter": "%.3f", "Replicas per adapter ±": "%.3f"}
    with pytest.raises(KeyError):
        verdicts.column_formats([("no_such_metric", "X")])


def test_every_metric_the_pages_show_has_a_unit():
    keys = [k for k, *_ in page_whatif.KPIS] + list(page_whatif.OBJECTIVES) + [k for k, _ in page_fleet.KPIS]
    assert all(verdicts.UNITS[k] in verdicts.COLUMN_FORMATS for k in keys)


def test_no_streamlit():
    code = "import sys, app.verdicts; sys.exit('streamlit' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=120).returncode == 0
