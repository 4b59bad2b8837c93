"""Fleet page (issue 14 item 4): routers side by side on the sidebar's scenario, per-replica bars, a sweep of
p99 TTFT against the number of replicas with the GPUs needed; URL-bound page controls."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import goto
from streamlit.testing.v1 import AppTest

from app import controls, page_fleet
from engine import ROUTERS, presets

MAIN = str(Path(__file__).resolve().parent.parent / "app" / "main.py")
FLEET = {"duration_s": "120", "num_replicas": "4", "arrival_rate_rps": "64", "strategy": "naive"}


def open_fleet(**query) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=300)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    goto(at, "fleet")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# ------------------------------------------------------------------ pure helpers
def test_verdict_ties_identical_routers_and_crowns_a_separated_one():
    same = [{"ttft_p99_ms": v} for v in (100.0, 120.0, 90.0)]
    text, kind = page_fleet.verdict({"a": same, "b": same})
    assert kind == "tie" and "Tie" in text
    better = [{"ttft_p99_ms": v - 50.0} for v in (100.0, 120.0, 90.0)]
    text, kind = page_fleet.verdict({"a": same, "b": better})
    assert kind == "win" and text.startswith("**b**")
    assert page_fleet.verdict({"a": same[:1], "b": better[:1]})[1] == "lead"


def test_gpus_needed_is_the_fewest_replicas_whose_ci_is_under_the_slo():
    df = pd.DataFrame({"replicas": [1, 2, 4, 1, 2, 4], "router": ["x"] * 3 + ["y"] * 3,
                       "mean": [900, 300, 100, 900, 600, 400], "ci_high": [1000, 450, 150, 1000, 700, 520]})
    assert page_fleet.gpus_needed(df, 500.0) == {"x": 2, "y": None}
    assert page_fleet.sweep_counts(8) == [1, 2, 3, 4, 6, 8]


@pytest.mark.parametrize("query, key", [({"fl_reps": "99"}, "fl_reps"), ({"fl_max": "x"}, "fl_max"),
                                        ({"fl_strategy": "warp"}, "fl_strategy"), ({"fl_bogus": "1"}, "fl_bogus")])
def test_bad_url_parameters_are_named(query, key):
    clean, issues = page_fleet.sanitize_query({k: [v] for k, v in query.items()})
    assert issues and all(key in i.message for i in issues)
    if key == "fl_reps":
        assert clean == {"fl_reps": str(page_fleet.MAX_REPS)}
    else:
        assert key not in clean


# ------------------------------------------------------------------ the page
def test_one_replica_offers_a_fleet_and_the_button_makes_one():
    at = open_fleet(duration_s="120", strategy="naive")
    assert any("One replica" in i.value for i in at.info)
    at.button(key=page_fleet.K_TRY).click()
    at.run()
    assert not at.exception
    assert at.slider(key="num_replicas").value == 4
    # 4 x the default's rate (6 req/s since issue 24: 24 req/s): said on the button
    assert at.slider(key="arrival_rate_rps").value == 4 * presets.SCENARIOS["default"]["arrival_rate_rps"] == 24.0
    assert at.query_params["num_replicas"] == "4"  # a visible, URL-bound change


def test_routers_side_by_side_bars_and_sweep():
    at = open_fleet(**FLEET)
    table = at.dataframe[0].value
    assert list(table["router"]) == list(ROUTERS)
    assert (table["Load imbalance (max/mean)"] >= 1.0).all()
    assert table.loc[table["router"] == "round_robin", "Load imbalance (max/mean)"].iloc[0] < 1.01  # within 1 request
    assert any("p99 TTFT" in i.value for i in at.info)  # the noise-aware verdict
    assert len(at.get("vega_lite_chart")) == 2  # requests and swap rate per replica
    at.number_input(key=page_fleet.K_MAX).set_value(4)
    at.run()
    assert at.number_input(key=page_fleet.K_MAX).value == 4
    at.button(key=page_fleet.K_RUN).click()
    at.run()
    assert not at.exception and not at.error
    assert len(at.get("vega_lite_chart")) == 3
    need, = [m.value for m in at.markdown if "GPUs needed" in m.value]
    assert all(f"{r}:" in need for r in ROUTERS)


def test_the_sidebar_carries_replicas_and_router_to_other_pages():
    at = open_fleet(**FLEET, router="least_loaded")
    assert at.selectbox(key="router").value == "least_loaded"
    sc = at.session_state[controls.STATE_KEY].scenario
    assert sc.num_replicas == 4 and sc.router == "least_loaded"
    goto(at, "whatif")
    at.run()
    assert not at.exception and at.slider(key="num_replicas").value == 4
