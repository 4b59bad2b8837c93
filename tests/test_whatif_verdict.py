"""The What-if verdict: noise-aware (paired replications), objective-aware, bounds and collapses never win."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kpi_tables
from streamlit.testing.v1 import AppTest

from app.page_whatif import (
    BEST,
    K_OBJECTIVE,
    K_REPS,
    KPIS,
    OPTIONAL_KPIS,
    STRATEGY_COLUMN,
    best_marked,
    fmt_half,
    kpi_help,
    kpi_table,
    sanitize_query,
    verdict,
)
from app.verdicts import ci_table
from engine import STRATEGIES, Scenario, simulate


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


# ------------------------------------------------------------------ the comparison table
def _cell(table, strategy: str, label: str) -> str:
    """The cell of ``strategy``'s row (its name in bold first) in the column ``label``."""
    return table.loc[table[STRATEGY_COLUMN].str.startswith(f"**{strategy}**"), label].iloc[0]


def test_kpi_table_mean_ci_delta_and_best():
    reps = {"naive": [summ(50), summ(80), summ(65)], "batch": [summ(100), summ(131), summ(114)]}
    t = kpi_table(reps, "naive")
    # no prefix cache ran: no "Prefix hits" column (OPTIONAL_KPIS); with one, the column is there
    assert list(t.columns) == [STRATEGY_COLUMN, *(label for key, label, *_ in KPIS if key not in OPTIONAL_KPIS)]
    ran = {s: [{**r, "prefix_cache_ran": True, "prefix_cache_hit_rate": 0.5} for r in rs] for s, rs in reps.items()}
    assert list(kpi_table(ran, "naive").columns) == [STRATEGY_COLUMN, *(label for _, label, *_ in KPIS)]
    assert [c.split("  \n")[0] for c in t[STRATEGY_COLUMN]] == ["**naive**", "**batch**"]
    assert _cell(t, "naive", STRATEGY_COLUMN) == "**naive**  \n:gray[baseline]"
    half = ci_table(reps, [("ttft_p99_ms", "p99")])["p99 ±"].tolist()
    # naive wins on p99 TTFT beyond the noise: marked; the baseline row has no delta
    assert _cell(t, "naive", "TTFT p99") == f"**65.0 ms** {BEST} ± {fmt_half(half[0], 'ms')}"
    # batch: mean ± half-width, then its difference to the baseline (worse on a lower-is-better KPI: red)
    assert _cell(t, "batch", "TTFT p99") == f"115.0 ms ± {fmt_half(half[1], 'ms')}  \n:red[+50.0 ms]"
    # equal on throughput and SLO: no one marked, the difference rounds to zero (grey, no sign)
    assert _cell(t, "batch", "Tokens / s") == "1,000 ± 0  \n:gray[0.0%]"
    assert _cell(t, "batch", "SLO met") == "100.0% ± 0.0 pp  \n:gray[0.0 pp]"
    assert _cell(t, "batch", "Swap rate") == "n/a"  # not in these summaries: said, no delta
    # the baseline moves: the deltas turn round (better on a lower-is-better KPI: green)
    t = kpi_table(reps, "batch")
    assert _cell(t, "naive", "TTFT p99").endswith("  \n:green[-50.0 ms]")
    assert _cell(t, "batch", STRATEGY_COLUMN) == "**batch**  \n:gray[baseline]"


def test_kpi_table_one_replication_has_no_ci():
    t = kpi_table({"naive": [summ(50, tok=900.0)], "batch": [summ(90, tok=1000.0)]}, "naive")
    assert "±" not in "".join(t.drop(columns=STRATEGY_COLUMN).to_numpy().ravel())
    assert _cell(t, "naive", "TTFT p99") == f"**50.0 ms** {BEST}"  # the shown best, no CI to judge
    assert _cell(t, "batch", "Tokens / s") == f"**1,000** {BEST}  \n:green[+11.1%]"
    assert "One replication" in kpi_help(1, "naive") and "Mean over 3 replications" in kpi_help(3, "naive")
    # the tooltip keeps what the tiles' tooltips said: each KPI's definition, each strategy's description
    text = kpi_help(3, "naive", ["naive", "slora"])
    assert all(f"**{label}**: {help_}" in text for _, label, _, help_ in KPIS)
    assert f"**slora**: {STRATEGIES['slora'].description}" in text


def test_best_is_noise_aware_and_never_a_bound_nor_a_collapse_on_ttft():
    base = [summ(50), summ(80), summ(65)]
    noisy = [summ(51), summ(78), summ(67)]   # within the noise of base
    far = [summ(100), summ(131), summ(114)]
    assert best_marked({"naive": base, "batch": noisy, "vllm": far}, "ttft_p99_ms", False) == {"naive", "batch"}
    assert best_marked({"naive": base, "batch": noisy}, "ttft_p99_ms", False) == set()  # all tied: none stands out
    assert best_marked({"naive": base}, "ttft_p99_ms", False) == set()  # one strategy: nothing to compare
    # the offline bound is faster but never marked; it is labelled in its row
    reps = {"oracle": [summ(1)] * 3, "naive": base, "batch": far}
    assert best_marked(reps, "ttft_p99_ms", False) == {"naive"}
    t = kpi_table(reps, "naive")
    assert _cell(t, "oracle", STRATEGY_COLUMN) == "**oracle**  \n:gray[offline bound]"
    assert BEST not in _cell(t, "oracle", "TTFT p99")
    # a collapse (40 % unfinished) is not the best on TTFT, but is on what counts the unfinished (SLO)
    reps = {"hot_set": [summ(5, done=60, slo=0.99)] * 3,
            "naive": [summ(50, slo=0.5), summ(52, slo=0.52), summ(51, slo=0.51)],
            "batch": [summ(100, slo=0.3), summ(131, slo=0.32), summ(114, slo=0.31)]}
    assert best_marked(reps, "ttft_p99_ms", False) == {"naive"}
    assert best_marked(reps, "slo_attainment", True) == {"hot_set"}
    assert ":orange[40 of 100 requests unfinished]" in _cell(kpi_table(reps, "naive"), "hot_set", STRATEGY_COLUMN)


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
    # the table carries the CI half-width of the 3 replications, after the mean
    table = kpi_tables(at)[0]
    assert list(table[STRATEGY_COLUMN].str.split("  \n").str[0]) == ["**naive**", "**oracle**", "**batch**"]
    assert all(" ± " in cell for cell in table["TTFT p50"])
    sc = Scenario.from_preset("default", duration_s=60.0, strategy="naive")
    assert simulate(sc).summary["requests"] > 0
