"""The Plan page's advanced path (the sidebar scenario with a free grid; the deployment form is in
tests/test_app_plan_deployment.py) under AppTest: it renders, a small plan shows the ranked table, the recommendation
and its command lines, an SLO nobody meets shows the reasons, plan_ URL parameters round-trip (bad ones warn by name),
the work cap refuses big plans, and "Open on What-if" lands there with the recommended scenario."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import goto, kpi_tables
from streamlit.testing.v1 import AppTest

from app import controls, page_plan, runner

ROOT = Path(__file__).resolve().parent.parent
MAIN = str(ROOT / "app" / "main.py")
TIMEOUT = 60
#: A short scenario (the duration control's minimum) and a tiny plan: 2 GPUs x 1 max_loras x 1 strategy, 1 replication.
FAST = {"duration_s": "60"}
#: The advanced path (the page opens on the deployment form).
ADVANCED = {page_plan.K_MODE: page_plan.MODE_SIDEBAR}
TINY = {"plan_gpus": ["a100-80gb", "h100-80gb"], "plan_max_loras": "8", "plan_strategies": "vllm", "plan_reps": "1"}
#: A sidebar scenario that TINY's 8 adapter slots serve: the default's 8 most popular adapters only.  The default
#: since issue 24 (vLLM profile, 200 adapters, lognormal lengths at 6 req/s) meets no p99 TTFT of 500 ms with
#: max_loras 8 on either GPU (requests queue for a slot: unstable at 6 req/s), and FAST's 30 s window stops the
#: rate search's halving at 100 arrivals (3.3 req/s), so the plan would recommend nothing.  With as many adapters
#: as slots, both GPUs meet it at some rate and the plan has a recommendation to show.
SERVED = {"num_adapters": "8"}


@pytest.fixture(scope="module", autouse=True)
def warm():
    """Compile (or load) the Numba kernels before the first AppTest run (its timeout is 60 s)."""
    runner.compile_kernels()


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def plan_page(**query) -> AppTest:
    """A deep link to /plan with ``query`` (plus the short scenario), first run done."""
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in {**FAST, **ADVANCED, **query}.items():
        at.query_params[k] = v
    return ok(goto(at, "plan").run())


def run(at: AppTest) -> AppTest:
    at.button(key=page_plan.K_RUN).click()
    return ok(at.run())


def table(at: AppTest) -> pd.DataFrame:
    frames = [d.value for d in at.dataframe if "rank" in d.value.columns]
    assert len(frames) == 1
    return frames[0]


def test_page_renders_its_controls_without_running():
    at = plan_page()
    assert at.title[0].value == "Plan"
    assert at.selectbox(key=page_plan.K_OBJECTIVE).value == "max_rate"
    assert at.selectbox(key=page_plan.K_SLO_METRIC).value == "ttft_p99_ms"
    assert at.number_input(key=page_plan.K_SLO).value == 500.0
    assert at.multiselect(key=page_plan.K_GPUS).value == page_plan.DEFAULT_GPUS
    assert at.multiselect(key=page_plan.K_STRATEGIES).value == page_plan.DEFAULT_STRATEGIES
    assert at.slider(key=page_plan.K_REPS).value == 3
    assert at.sidebar.slider(key="duration_s").value == 60.0  # the shared scenario is the base
    assert any("configurations x 3 replication(s)" in c.value for c in at.caption)
    assert not at.dataframe and not at.main.get("code")  # nothing runs before the button
    assert not at.error and not at.warning


def test_small_plan_shows_table_recommendation_and_commands():
    at = run(plan_page(**TINY, **SERVED))
    assert not at.error
    (summary,) = [s.value for s in at.success]
    assert summary.startswith("Best: gpu=") and "max_loras=8, strategy=vllm" in summary
    t = table(at)
    assert len(t) == 2 and set(t["gpu"]) == {"a100-80gb", "h100-80gb"}
    assert t["rank"].iloc[0] == "best" and t["value"].iloc[0] >= t["value"].iloc[1] > 0
    assert {"ci", "cost_per_mtok_usd", "price_usd_per_hour", "reason"} <= set(t.columns)
    last = at.session_state[page_plan.LAST_KEY]["result"]
    assert t["gpu"].iloc[0] == last["best"]["gpu"]  # the planner's order, unchanged
    codes = [c.value for c in at.main.get("code")]
    assert any("vllm serve" in c and "--max-loras 8" in c for c in codes)
    # 8 slots is SGLang's default --max-loras-per-batch: not printed (flags only where the answer differs)
    assert any("sglang.launch_server" in c and "--max-loras-per-batch" not in c for c in codes)
    # (strategy vllm caches prefixes keyed by adapter as both servers do: no prefix-cache assumption, docs/model.md 3.7)
    assert any("What the simulation assumed" in m.value and "requests of at most" in m.value for m in at.markdown)
    assert not any("no prefix cache" in m.value for m in at.markdown)
    assert any(c.value.startswith("Recommended: gpu ") for c in at.subheader)
    assert any("GiB of weights" in m.value for m in at.markdown)  # the memory sentence
    assert len(at.get("vega_lite_chart")) == 1
    assert any("common random numbers" in c.value and "indicative" in c.value for c in at.caption)
    # a rerun shows the same result (kept; the cache holds it for the same inputs)
    ok(at.run())
    assert table(at).equals(t)


def _specs(at: AppTest) -> list[dict]:
    """The Vega-Lite specs of the page's charts (AppTest lists them, it does not render them)."""
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def _datasets(at: AppTest, i: int) -> dict[str, pd.DataFrame]:
    """The named datasets Streamlit ships beside chart ``i``'s spec (Arrow), as DataFrames."""
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
    return {d.name: convert_arrow_bytes_to_pandas_df(d.data.data) for d in at.get("vega_lite_chart")[i].proto.datasets}


def test_min_replicas_plan_draws_the_replicas_and_fleet_cost_chart():
    at = run(plan_page(**{**TINY, "plan_objective": "min_replicas", "plan_reps": "2"}))
    assert not at.error, [e.value for e in at.error]
    t = table(at)
    assert len(t) == 2 and t["rank"].iloc[0] == "best"
    specs = _specs(at)
    assert len(specs) == 2  # replicas needed + fleet cost, then the fleet's throughput against its cost
    rep = specs[0]
    assert rep["title"] == "Replicas needed, and what the fleet costs" and len(rep["hconcat"]) == 2
    left, right = rep["hconcat"]
    assert right["title"] == "The fleet's price per hour"
    assert [ly["mark"]["type"] for ly in left["layer"]] == ["bar", "rule", "circle", "text"]
    ok_rows = t[t["replicas_needed_max"].notna()]
    dots = _datasets(at, 0)[left["layer"][2]["data"]["name"]]  # one dot per replication
    assert len(dots) == 2 * len(ok_rows) > 0
    assert set(dots["label"].str.split(" · ").str[0]) == set(ok_rows["gpu"])
    assert dots["replicas"].max() == ok_rows["replicas_needed_max"].max()
    assert any("the bar reaches the replicas to deploy" in c.value for c in at.caption)
    # the cost axis switches the right-hand panel to US$ per million tokens
    at.segmented_control(key=page_plan.K_COST_AXIS).set_value("cost_per_mtok_usd")
    ok(at.run())
    specs = _specs(at)
    assert len(specs) == 2 and specs[0]["hconcat"][1]["title"] == "The fleet's cost per million tokens"


def test_unsupported_strategy_says_there_is_no_server_equivalent():
    at = run(plan_page(**{**TINY, **SERVED, "plan_gpus": "h100-80gb", "plan_strategies": "batch"}))
    infos = [i.value for i in at.info]
    assert sum("No real-server equivalent" in i for i in infos) == 2, infos
    assert not at.main.get("code")


def test_slo_nobody_meets_shows_the_reasons():
    at = run(plan_page(**TINY, plan_slo="1"))
    assert not at.error
    assert any(w.value.startswith("No configuration meets the SLO") for w in at.warning)
    t = table(at)
    assert (t["rank"] == "fails SLO").all() and t["reason"].str.startswith("SLO not met").all()
    assert any("Why no configuration qualifies" in m.value for m in at.markdown)
    assert not at.main.get("code")
    with pytest.raises(KeyError):
        at.button(key=page_plan.K_OPEN)


def test_url_parameters_round_trip():
    q = {"plan_objective": "max_adapters", "plan_slo_metric": "tpot_mean_ms", "plan_slo": "40",
         "plan_slo2_metric": "slo_attainment", "plan_slo2": "0.8", "plan_gpus": ["l40s", "h100-80gb"],
         "plan_max_loras": ["4", "12"], "plan_cpu_loras": "64", "plan_strategies": ["slora", "vllm", "naive"],
         "plan_reps": "2", "plan_price_l40s": "0.8"}
    at = plan_page(**q)
    assert not at.warning, [w.value for w in at.warning]
    assert at.selectbox(key=page_plan.K_OBJECTIVE).value == "max_adapters"
    assert at.selectbox(key=page_plan.K_SLO_METRIC).value == "tpot_mean_ms"
    assert at.number_input(key=page_plan.K_SLO).value == 40.0
    assert at.selectbox(key=page_plan.K_SLO2_METRIC).value == "slo_attainment"
    assert at.number_input(key=page_plan.K_SLO2).value == 0.8
    assert at.multiselect(key=page_plan.K_GPUS).value == ["l40s", "h100-80gb"]
    assert [int(v) for v in at.multiselect(key=page_plan.K_MAX_LORAS).value] == [4, 12]
    assert [int(v) for v in at.multiselect(key=page_plan.K_CPU_LORAS).value] == [64]
    assert at.multiselect(key=page_plan.K_STRATEGIES).value == ["slora", "vllm", "naive"]
    assert at.slider(key=page_plan.K_REPS).value == 2
    assert at.number_input(key="plan_price_l40s").value == 0.8
    assert at.number_input(key="plan_price_h100-80gb").value == 3.0  # the preset
    # the URL keeps them (as the browser's address would)
    for k, v in q.items():
        assert at.query_params[k] == v, k
    assert any("2 gpu x 2 max_loras x 1 max_cpu_loras x 3 strategy = 12 configurations x 2" in c.value
               for c in at.caption)


def test_bad_url_parameters_warn_by_name_and_fall_back():
    at = plan_page(plan_objective="fastest", plan_gpus=["tpu", "h100-80gb"], plan_reps="9", plan_slo="abc",
                   plan_max_loras=["x", "8", "99999"], plan_strategies="nope", plan_price_tpu="3",
                   plan_slo2_metric="ttft_p99_ms", plan_foo="1")
    text = " ".join(w.value for w in at.warning)
    for name in ["plan_objective", "plan_gpus", "plan_reps", "plan_slo", "plan_max_loras", "plan_strategies",
                 "plan_price_tpu", "plan_slo2_metric", "plan_foo"]:
        assert f"`{name}`" in text, (name, text)
    assert at.selectbox(key=page_plan.K_OBJECTIVE).value == "max_rate"
    assert at.multiselect(key=page_plan.K_GPUS).value == ["h100-80gb"]
    assert at.slider(key=page_plan.K_REPS).value == 5
    assert at.number_input(key=page_plan.K_SLO).value == 500.0
    assert [int(v) for v in at.multiselect(key=page_plan.K_MAX_LORAS).value] == [8, 4096]
    assert at.multiselect(key=page_plan.K_STRATEGIES).value == page_plan.DEFAULT_STRATEGIES
    assert at.selectbox(key=page_plan.K_SLO2_METRIC).value == "none"
    assert "plan_foo" not in at.query_params and "plan_price_tpu" not in at.query_params


def test_sanitize_query_is_pure_and_names_each_parameter():
    clean, issues = page_plan.sanitize_query({"plan_slo_metric": ["slo_attainment"], "plan_slo": ["1.5"],
                                              "plan_cpu_loras": ["16,32,16"], "plan_price_h200": ["-1"]})
    assert clean == {"plan_slo_metric": "slo_attainment", "plan_slo": "1", "plan_cpu_loras": ["16", "32"],
                     "plan_price_h200": "0.01"}
    assert [i.key for i in issues] == ["plan_slo", "plan_price_h200"]
    assert controls.sanitize_query({"plan_reps": ["2"], "zipf_s": ["1.1"]})[0] == {"plan_reps": "2", "zipf_s": "1.1"}


def test_work_cap_refuses_big_plans():
    at = plan_page(plan_gpus=["a100-80gb", "h100-80gb", "l40s"], plan_max_loras=["8", "16", "32", "64"],
                   plan_strategies=["vllm", "slora"], plan_reps="3")
    (err,) = [e.value for e in at.error]
    assert "72 searches" in err and f"limit of {page_plan.MAX_PLAN_SEARCHES}" in err
    assert at.button(key=page_plan.K_RUN).disabled


def test_planner_errors_are_shown_not_raised():
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in {**FAST, **ADVANCED, **TINY, "arrival_process": "closed"}.items():
        at.query_params[k] = v
    at = run(ok(goto(at, "plan").run()))
    assert any("arrival_process" in e.value and "closed" in e.value for e in at.error)


def test_open_on_whatif_loads_the_recommended_scenario():
    at = run(plan_page(**TINY, **SERVED))
    best = at.session_state[page_plan.LAST_KEY]["result"]["best"]
    at.button(key=page_plan.K_OPEN).click()
    ok(at.run())
    assert at.title[0].value == "What-if"
    assert at.sidebar.slider(key="arrival_rate_rps").value == pytest.approx(best["max_rate_rps"])
    assert at.sidebar.selectbox(key="gpu").value == best["gpu"]
    assert at.sidebar.slider(key="max_loras").value == best["max_loras"] == 8
    assert "vllm" in at.sidebar.multiselect(key="strategy").value
    assert at.sidebar.slider(key="duration_s").value == 60.0  # the base scenario's, not a probe's
    assert any("Loaded the plan's recommended configuration" in s.value for s in at.success)
    assert not at.error and len(kpi_tables(at)) == 1 and len(kpi_tables(at)[0]) >= 1  # the What-if table ran


def test_changing_the_slo_metric_resets_its_threshold_and_marks_a_result_stale():
    at = run(plan_page(**TINY))
    at.selectbox(key=page_plan.K_SLO_METRIC).set_value("slo_attainment")
    ok(at.run())
    assert at.number_input(key=page_plan.K_SLO).value == 0.9  # a fraction now, not 500 ms
    assert any("changed since this plan ran" in i.value for i in at.info)  # the old result stays, marked stale
    assert table(at) is not None
