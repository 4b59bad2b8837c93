"""The plan's error band (issue 24 item 3, engine/planner/band.py): each answer again with the cost model
slower and faster by the band; pessimistic <= nominal <= optimistic on every row (the other way round for
replicas), the GPUs each side would take, and a sentence saying how far the recommendation could move."""
from __future__ import annotations

import math

import pytest

from engine import Scenario, planner
from engine.planner import band

BASE = Scenario.from_preset("vllm-llama31-8b", arrival_rate_rps=6.0)
SLO = {"ttft_p99_ms": 500}


@pytest.fixture(scope="module")
def rate_plan():
    return planner.plan(BASE, SLO, {"max_loras": [8, 32]}, replications=2, band=0.25)


def test_the_band_brackets_every_row(rate_plan):
    t = rate_plan.table
    assert (t["band"] == 0.25).all()
    for _, r in t.iterrows():
        assert r["max_rate_rps_pessimistic"] <= r["max_rate_rps"] <= r["max_rate_rps_optimistic"]
        assert r["gpus_pessimistic"] >= r["gpus"] >= r["gpus_optimistic"]
    # a 25 % slower model moves the answer by a real amount, not by nothing
    best = t.iloc[0]
    assert best["max_rate_rps_pessimistic"] < 0.95 * best["max_rate_rps"] < best["max_rate_rps_optimistic"]


def test_the_sentence_says_how_far_and_on_what(rate_plan):
    note = rate_plan.notes[0]
    assert note.startswith("How far it could move: ") and "25% slower" in note and "25% faster" in note
    assert "a band of 25% given to the plan" in note and "worst tenth" not in note  # given, not measured


def test_replicas_move_the_other_way():
    res = planner.plan(Scenario.from_preset("default", arrival_rate_rps=40.0, duration_s=120.0, warmup_s=10.0),
                       {"ttft_p99_ms": 1000}, {"router": ["least_loaded"]}, replications=1,
                       objective="min_replicas", band=0.5)
    r = res.table.iloc[0]
    assert r["replicas_pessimistic"] >= r["replicas_needed_max"] >= r["replicas_optimistic"] >= 1


def test_no_band_and_a_zero_band():
    off = planner.plan(BASE, SLO, {"max_loras": [32]}, replications=1, band=None)
    assert "band" not in off.table and not any(n.startswith("How far") for n in off.notes)
    zero = planner.plan(BASE, SLO, {"max_loras": [32]}, replications=1, band=0.0)
    r = zero.table.iloc[0]
    assert r["max_rate_rps_pessimistic"] == r["max_rate_rps"] == r["max_rate_rps_optimistic"]


@pytest.mark.parametrize("bad", [-0.1, 6.0, "wide", True, math.nan])
def test_a_bad_band_is_refused_before_any_work(bad):
    with pytest.raises(ValueError, match="^band: invalid value"):
        planner.plan(BASE, SLO, {"max_loras": [32]}, band=bad)


def test_scaling_is_symmetric_in_the_factor():
    slow, fast = band.scaled(BASE, 0.25, "pessimistic"), band.scaled(BASE, 0.25, "optimistic")
    assert slow.cost_scale == pytest.approx(1.25) and fast.cost_scale == pytest.approx(1 / 1.25)
