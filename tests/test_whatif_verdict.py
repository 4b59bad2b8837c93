"""The What-if verdict: noise-aware (paired replications), objective-aware, bounds and collapses never win."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.page_whatif import K_OBJECTIVE, K_REPS, sanitize_query, verdict
from engine import Scenario, simulate


def summ(p99, p50=10.0, done=100, n=100, slo=1.0, tok=1000.0):
    return {"ttft_p99_ms": p99, "ttft_p50_ms": p50, "ttft_mean_ms": p50, "requests": n, "completed": done,
            "not_completed": n - done, "slo_attainment": slo, "throughput_tok_s": tok}


def test_identical_strategies_tie():
    reps = {"naive": [summ(50), summ(60), summ(55)], "hot_set": [summ(50), summ(60), summ(55)]}
    text, kind = verdict(reps, "ttft_p99_ms")
    assert kind == "tie" and text.startswith("Tie on p99 TTFT") and "**hot_set**" in text


def test_separated_strategies_win_with_their_paired_lead():
    reps = {"naive": [summ(50), summ(80), summ(65)], "batch": [summ(100), summ(131), summ(114)]}
    text, kind = verdict(reps, "ttft_p99_ms")
    assert kind == "win" and text.startswith("**naive**") and "runner-up **batch**" in text
    assert "paired 95 % CI over 3 replications" in text


def test_noise_inside_the_ci_is_a_tie_not_a_win():
    reps = {"naive": [summ(50), summ(80), summ(65)], "batch": [summ(51), summ(78), summ(67)]}
    assert verdict(reps, "ttft_p99_ms")[1] == "tie"


def test_the_bound_never_wins_and_is_labelled():
    reps = {"oracle": [summ(1), summ(1), summ(1)], "naive": [summ(50), summ(52), summ(51)],
            "batch": [summ(90), summ(95), summ(93)]}
    text, kind = verdict(reps, "ttft_p99_ms")
    assert kind == "win" and text.startswith("**naive**")
    assert "**oracle** (an offline bound, not a contender)" in text


def test_a_collapsed_strategy_never_wins_on_ttft_and_is_named():
    # hot_set's finished requests are fast, but 40 % never finish
    reps = {"hot_set": [summ(5, done=60)] * 3, "naive": [summ(50), summ(52), summ(51)],
            "batch": [summ(90), summ(95), summ(93)]}
    text, kind = verdict(reps, "ttft_p99_ms")
    assert text.startswith("**naive**") and "**hot_set** collapses: 40% of the requests never finish" in text
    # on SLO attainment (unfinished count as misses) it is ranked normally
    reps = {"hot_set": [summ(5, done=60, slo=0.6)] * 3,
            "naive": [summ(50, slo=0.9), summ(52, slo=0.95), summ(51, slo=0.92)]}
    text, kind = verdict(reps, "slo_attainment")
    assert kind == "win" and text.startswith("**naive**")


def test_one_replication_is_not_a_verdict():
    text, kind = verdict({"naive": [summ(50)], "batch": [summ(90)]}, "ttft_p99_ms")
    assert kind == "lead" and "not a verdict" in text


def test_url_parameters_of_the_page():
    clean, issues = sanitize_query({K_REPS: ["5"], K_OBJECTIVE: ["ttft_p50_ms"]})
    assert clean == {K_REPS: "5", K_OBJECTIVE: "ttft_p50_ms"} and not issues
    clean, issues = sanitize_query({K_REPS: ["99"], K_OBJECTIVE: ["fastest"], "wi_x": ["1"]})
    assert clean == {K_REPS: "10"}
    msgs = " ".join(i.message for i in issues)
    assert "clamped to 10" in msgs and "`wi_objective`='fastest' dropped" in msgs and "`wi_x`" in msgs
    clean, issues = sanitize_query({K_REPS: ["two"]})
    assert clean == {} and "not an integer" in issues[0].message


@pytest.mark.slow
def test_app_banner_on_the_default_scenario_with_the_oracle():
    """Real app: the oracle is labelled as a bound and never crowned; the banner states its replications."""
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app" / "main.py"), default_timeout=120)
    at.query_params.update({"strategy": ["naive", "oracle", "batch"], "duration_s": "60", K_REPS: "3"})
    at.run()
    assert not at.exception
    banner = at.info[0].value
    assert "**oracle** (an offline bound, not a contender)" in banner
    assert not banner.startswith("**oracle**") and ("wins on p99 TTFT" in banner or banner.startswith("Tie"))
    # the tiles carry the CI half-width of the 3 replications
    assert "±" not in at.metric[0].value and any(c.value.startswith("±") for c in at.caption)
    sc = Scenario.from_preset("default", duration_s=60.0, strategy="naive")
    assert simulate(sc).summary["requests"] > 0
