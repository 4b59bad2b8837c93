"""Ties and edges said out loud (issue 24, item 6): the planner's stated tie-break picks among the configurations
tied with the best, the result says why, and a note says when the pick sits at the edge of the grid."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from legacy import legacy_preset

from engine import Scenario
from engine.planner import OBJECTIVES, VALUE_COLUMNS, plan, plan_summary
from engine.planner.ties import TIE_BREAK, break_ties, edge_notes, tie_break_text, tie_notes

#: Three configurations tied with the best (rows 0-2) and one that is not (row 3), best first by the objective's
#: mean as ``_rank`` leaves them: each tie-break key decides one of the pairs.
#:   row 0: 2 GPUs, the best mean                  -> loses on GPUs
#:   row 1: 1 GPU, US$ 4/h                         -> loses on price (max_rate, max_adapters, min_replicas)
#:   row 2: 1 GPU, US$ 2/h, the lowest mean        -> the pick whenever price decides
#:   row 3: 1 GPU, US$ 1/h, not tied               -> never picked
#: (``gpus``: the GPUs the answer needs for the base demand, ``gpus_price_usd_per_hour`` their price: plan._gpus.)
ROWS = [
    dict(config=0, max_loras=64, gpus=2, gpus_price_usd_per_hour=6.0, cost_per_mtok_usd=0.50, ttft_p99_ms=100.0,
         max_rate_rps=30.0, max_adapters=900.0, throughput_tok_s=900.0, replicas_needed=2.0, meets_slo_frac=1.0),
    dict(config=1, max_loras=32, gpus=1, gpus_price_usd_per_hour=4.0, cost_per_mtok_usd=0.40, ttft_p99_ms=120.0,
         max_rate_rps=29.0, max_adapters=890.0, throughput_tok_s=890.0, replicas_needed=1.0, meets_slo_frac=1.0),
    dict(config=2, max_loras=16, gpus=1, gpus_price_usd_per_hour=2.0, cost_per_mtok_usd=0.45, ttft_p99_ms=90.0,
         max_rate_rps=28.0, max_adapters=880.0, throughput_tok_s=880.0, replicas_needed=1.0, meets_slo_frac=1.0),
    dict(config=3, max_loras=8, gpus=1, gpus_price_usd_per_hour=1.0, cost_per_mtok_usd=0.30, ttft_p99_ms=80.0,
         max_rate_rps=10.0, max_adapters=300.0, throughput_tok_s=300.0, replicas_needed=1.0, meets_slo_frac=1.0),
]
#: The pick of the stated rule, per objective: fewest GPUs (rows 1-3 of the tied 0-2: rows 1, 2), then
#: max_rate / max_adapters / min_replicas: the lowest US$/h (row 2); min_cost: the lowest US$/Mtok (row 1).
EXPECTED = {"max_rate": 2, "max_adapters": 2, "min_replicas": 2, "min_cost": 1}


def ranked(**change) -> pd.DataFrame:
    t = pd.DataFrame(ROWS)
    t["recommended"] = [True, False, False, False]
    t["tie_with_best"] = [False, True, True, False]
    t["meets_slo"] = True
    for k, v in change.items():
        t[k] = v
    return t


def test_every_objective_states_a_rule_from_one_constant():
    assert set(TIE_BREAK) == set(OBJECTIVES)
    for objective, keys in TIE_BREAK.items():
        assert keys[0][:2] == ("gpus", "min"), "fewest GPUs first"
        assert all(how in ("min", "max") for _, how, _ in keys)
        text = tie_break_text(objective)
        positions = [text.index(words) for _, _, words in keys]
        assert positions == sorted(positions), (objective, text)  # the text is the rule, in its order
    # then the lowest cost, then the objective itself
    assert [c for c, _, _ in TIE_BREAK["max_rate"]] == ["gpus", "gpus_price_usd_per_hour", "max_rate_rps"]
    assert TIE_BREAK["min_cost"][1][0] == "cost_per_mtok_usd"


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_three_tied_configurations_the_rule_picks(objective):
    t = break_ties(ranked(), objective)
    pick = EXPECTED[objective]
    assert list(t["config"])[0] == pick and list(t["config"])[3] == 3, "the tied rows come first, the pick on top"
    assert list(t["recommended"]) == [True, False, False, False]
    assert list(t["tie_with_best"]) == [False, True, True, False], "the best by the mean is now a tie"
    assert t.loc[0, "tie_break"].startswith("picked among 3 tied: ")
    assert all(s.startswith("tied with the pick; ") and "lost on " in s for s in t.loc[1:2, "tie_break"])
    assert t.loc[3, "tie_break"] == ""
    by = t.set_index("config")["tie_break"]
    assert "lost on fewest GPUs" in by[0] and by[0].endswith(": 2 vs 1"), by[0]  # row 0 needs a second GPU
    cost = "won on lowest cost: 0.4 vs 0.45" if objective == "min_cost" else "won on lowest price of those GPUs: 2 vs 4"
    if objective == "min_replicas":
        cost = "won on lowest fleet price: 2 vs 4"
    assert cost in by[pick] and "equal on fewest GPUs" in by[pick], by[pick]
    notes = tie_notes(t, objective, {"max_loras": [8, 16, 32, 64]})
    assert len(notes) == 1 and "3 configurations are tied" in notes[0]
    assert all(f"max_loras={r['max_loras']}" in notes[0] for r in ROWS[:3]) and "max_loras=8" not in notes[0]
    assert f"picks max_loras={ROWS[pick]['max_loras']}: equal on fewest GPUs" in notes[0] and cost in notes[0]


def test_equal_keys_fall_to_the_objective_then_the_table_order():
    # one GPU and the same price everywhere: max_rate picks the highest rate (row 0), min_cost the lowest US$/Mtok
    t = break_ties(ranked(gpus=1, gpus_price_usd_per_hour=2.0), "max_rate")
    assert t.loc[0, "config"] == 0 and "won on highest sustainable rate: 30 vs 29" in t.loc[0, "tie_break"]
    # all equal: the table's order, and it says so
    same = ranked(gpus=1, gpus_price_usd_per_hour=2.0, max_rate_rps=30.0)
    t = break_ties(same, "max_rate")
    assert list(t["config"]) == [0, 1, 2, 3] and "first in the table's order" in t.loc[0, "tie_break"]
    # a missing key (NaN) ranks last
    t = break_ties(ranked(gpus=[math.nan, math.nan, 1, 1]), "max_rate")
    assert t.loc[0, "config"] == 2


def test_no_ties_or_no_winner_changes_nothing():
    solo = ranked(tie_with_best=False)
    t = break_ties(solo, "max_rate")
    assert list(t["config"]) == [0, 1, 2, 3] and set(t["tie_break"]) == {""}
    assert tie_notes(t, "max_rate", {"max_loras": [8, 16, 32, 64]}) == []
    none = ranked(recommended=False, tie_with_best=False, meets_slo=False)
    assert list(break_ties(none, "max_rate")["config"]) == [0, 1, 2, 3]


# ------------------------------------------------------------------ edges
GRID = {"max_loras": [16, 32, 64], "gpu": ["a100-80gb", "h100-80gb"], "gpu_mem_util": [0.85, 0.9]}


def test_edge_notes_at_the_top_and_bottom_and_not_inside():
    top = edge_notes({"max_loras": 64, "gpu": "h100-80gb", "gpu_mem_util": 0.9}, {"max_loras": [16, 32, 64]})
    assert top == ["64 is the largest max_loras you gave: try 128."]
    bottom = edge_notes({"max_loras": 16}, {"max_loras": [16, 32, 64]})
    assert bottom == ["16 is the smallest max_loras you gave: try 8."]
    assert edge_notes({"max_loras": 32}, {"max_loras": [16, 32, 64]}) == []
    # arithmetic grids step, floats stay floats; strings never get a note
    assert edge_notes({"gpu_mem_util": 0.9, "gpu": "h100-80gb"}, GRID | {"max_loras": [64]}) == [
        "0.9 is the largest gpu_mem_util you gave: try 0.95."]
    assert edge_notes({"batch_window_ms": 10.0}, {"batch_window_ms": [10.0, 20.0, 30.0]}) == [
        "10 is the smallest batch_window_ms you gave: try 5."]


def test_edge_notes_need_two_values_and_skip_no_limit_zero():
    assert edge_notes({"max_loras": 64}, {"max_loras": [64]}) == []  # one value: no edge
    assert edge_notes({"max_loras": 0}, {"max_loras": [0, 16, 32]}) == []  # 0 = no limit: not the smallest
    assert edge_notes({"max_loras": 16}, {"max_loras": [0, 16, 32]}) == [
        "16 is the smallest max_loras you gave: try 8."]
    assert edge_notes({"max_loras": 16}, {"max_loras": [0, 16]}) == []  # one limited value left
    assert edge_notes({"hot_set_k": -1}, {"hot_set_k": [-1, 8, 16]}) == []  # -1 = auto: a setting, not a size
    assert edge_notes({"hot_set_k": 8}, {"hot_set_k": [-1, 8, 16]}) == ["8 is the smallest hot_set_k you gave: try 4."]
    # nothing positive below the smallest
    assert edge_notes({"num_replicas": 1}, {"num_replicas": [1, 2]}) == [
        "1 is the smallest num_replicas you gave (the pick uses it; nothing below it to try)."]


def test_edge_notes_name_an_invalid_suggestion_and_ties_across_the_grid():
    notes = edge_notes({"max_loras": 64}, {"max_loras": [32, 64]}, check=lambda f, v: f"{f}={v} does not fit")
    assert notes == ["64 is the largest max_loras you gave; 128 would not be a valid configuration "
                     "(max_loras=128 does not fit)."]
    notes = edge_notes({"max_loras": 64}, {"max_loras": [16, 32, 64]}, tied={"max_loras": [64, 32, 16]})
    assert notes[0].startswith("64 is the largest max_loras you gave: try 128 (every max_loras you gave is tied")


# ------------------------------------------------------------------ a real plan
def small() -> Scenario:
    return legacy_preset("default", duration_s=60.0, warmup_s=5.0, drain_s=30.0, arrival_rate_rps=10.0,
                                num_adapters=50)


def test_a_real_plan_carries_the_rule_the_ties_and_the_edge():
    # batch_window_ms does not affect naive: both windows tie exactly on each GPU (tests/test_planner.py)
    res = plan(small(), {"ttft_p99_ms": 400.0}, {"gpu": ["a100-80gb", "h100-80gb"], "batch_window_ms": [10.0, 30.0]},
               replications=3, workers=1)
    assert res.tie_break == tie_break_text("max_rate")
    t = res.table
    assert "gpus" in t.columns and "tie_break" in t.columns and (t["gpus"] == 1).all()  # 10 req/s: one GPU each
    assert res.best["gpu"] == "h100-80gb" and res.best["batch_window_ms"] == 10.0
    assert bool(t.iloc[1]["tie_with_best"]) and t.iloc[1]["tie_break"].startswith("tied with the pick")
    assert res.best["tie_break"].startswith("picked among 2 tied")
    band, tie, edge = res.notes  # the error band's note first (planner/band.py)
    assert band.startswith("How far it could move: ")
    assert tie.startswith("2 configurations are tied") and "batch_window_ms=10; batch_window_ms=30" in tie
    assert edge.startswith("10 is the smallest batch_window_ms you gave: try 3.33 (every batch_window_ms")
    # the gpu field is a string: no edge note; the summary names the rule
    assert not any("gpu " in n for n in res.notes)


@pytest.mark.parametrize("rate", [10.0, 30.0])
def test_a_real_plan_picks_by_the_rule_among_its_ties(rate):
    """Two replications: wide CIs, so GPUs tie; the pick needs the fewest GPUs for the base rate, then the cheaper."""
    res = plan(small().replace(arrival_rate_rps=rate), {"ttft_p99_ms": 400.0},
               {"gpu": ["a10g", "a100-80gb", "h100-80gb"]}, replications=2, workers=1)
    t = res.table
    for _, r in t[t["meets_slo"]].iterrows():
        assert r["gpus"] == max(1, math.ceil(rate / r["max_rate_rps"] - 1e-9))
        assert r["gpus_price_usd_per_hour"] == pytest.approx(r["gpus"] * r["price_usd_per_hour"])
    tied = t[t["recommended"] | t["tie_with_best"]]
    b = res.best
    assert b["max_rate_rps"] >= 0 and len(tied) >= 1
    for _, r in tied.iterrows():
        key = lambda x: (x["gpus"], x["gpus_price_usd_per_hour"], -x["max_rate_rps"])  # noqa: E731
        assert key(b) <= key(r), (b["gpu"], r["gpu"])
    if len(tied) > 1:
        assert res.notes[0].startswith("How far it could move: ")  # the error band's note comes first
        assert res.notes[1].startswith(f"{len(tied)} configurations are tied")
        assert f"picked by the {TIE_BREAK['max_rate'][0][2].split(' (')[0]}" in plan_summary(res)


def test_a_real_vllm_plan_at_the_top_of_max_loras(tmp_path, capsys):
    from engine.cli import main
    sc = small().replace(strategy="vllm")
    res = plan(sc, {"ttft_p99_ms": 400.0}, {"max_loras": [4, 16]}, replications=1, workers=1, band=None)
    assert res.best["max_loras"] == 16 and res.notes == ["16 is the largest max_loras you gave: try 64."]
    # the CLI prints the notes and writes them (and the rule) to plan.json
    out = tmp_path / "plan"
    rc = main(["plan", "--preset", "default", "--set", "duration_s=60", "--set", "num_adapters=50",
               "--set", "arrival_rate_rps=10", "--set", "strategy=vllm", "--slo", "ttft_p99_ms=400",
               "--grid", "max_loras=4,16", "--replications", "1", "--workers", "1", "--band", "none",
               "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "note: 16 is the largest max_loras you gave: try 64." in printed
    doc = json.loads((out / "plan.json").read_text())
    assert doc["tie_break"] == tie_break_text("max_rate") and doc["notes"] == [
        "16 is the largest max_loras you gave: try 64."]
    assert doc["best"]["tie_break"] == ""
    assert VALUE_COLUMNS["max_rate"] in pd.read_csv(out / "plan.csv").columns
