"""The dashboard's pure logic (no running app): control resolution, URL sanitizing,
scenario building and caps, sweep orchestration, exports."""
from __future__ import annotations

import io
import json
import math

import pandas as pd
import pytest

from app import controls, exports, sweep
from engine import STRATEGIES, Scenario, presets, simulate


def test_every_control_is_a_scenario_field_with_help():
    fields = set(Scenario.field_names())
    for c in controls.CONTROLS:
        assert c.key in fields or c.key == controls.PRESET_KEY, c.key
        assert len(c.help) > 20, c.key
    # the brief's list
    for key in ["gpu", "model", "vram_budget_gb", "pcie_gbps", "zipf_s", "batch_window_ms", "arrival_rate_rps",
                "num_adapters", "adapter_rank", "output_tokens", "prompt_tokens", "max_loras", "hot_set_k",
                "arrival_process", "duration_s", "seed", "strategy"]:
        assert key in controls.BY_KEY


def test_defaults_are_the_default_preset():
    values, issues = controls.resolve({})
    assert not issues
    sc, notes = controls.build_scenario(values)
    assert not notes
    ref = Scenario.from_preset("default")
    assert sc.to_dict() == ref.replace(strategy=controls.DEFAULT_STRATEGIES[0]).to_dict()
    assert values["strategy"] == ["naive", "hot_set", "batch", "vllm", "slora"]


def test_vram_max_follows_gpu_and_model():
    values, _ = controls.resolve({"gpu": "rtx3090", "model": "llama-7b"})
    lo, hi, step = controls.BY_KEY["vram_budget_gb"].bounds(values)
    mx = Scenario.from_preset("default", gpu="rtx3090", model="llama-7b").max_vram_budget_gb()
    assert hi <= mx < hi + step
    values, _ = controls.resolve({"gpu": "h200"})
    assert controls.BY_KEY["vram_budget_gb"].bounds(values)[1] > 100


def test_pcie_default_follows_gpu():
    values, _ = controls.resolve({"gpu": "h100-80gb"})
    assert values["pcie_gbps"] == presets.GPUS["h100-80gb"].pcie_gbps
    values, _ = controls.resolve({"preset": "seed1-rtx3090"})
    assert values["pcie_gbps"] == 16.0  # the preset's own value on its own GPU


def test_sanitize_clamps_drops_and_names_each_parameter():
    clean, issues = controls.sanitize_query({
        "arrival_rate_rps": ["9999"], "zipf_s": ["abc"], "foo": ["1"], "strategies": ["batch", "nope"],
        "gpu": ["rtx3090"], "vram_budget_gb": ["50"], "model": ["gpt-9"], "num_adapters": ["12.5"],
        "seed": ["1", "2"]})
    by = {i.key: i for i in issues}
    assert clean["arrival_rate_rps"] == "200" and by["arrival_rate_rps"].kind == "adjusted"
    assert "zipf_s" not in clean and by["zipf_s"].kind == "malformed"
    assert "foo" not in clean and by["foo"].kind == "unknown" and "`foo`" in by["foo"].message
    assert clean["strategy"] == ["batch"] and "'nope'" in by["strategy"].message
    # clamped to what fits beside the default's model on the URL's GPU (an RTX 3090: about 1.4 GiB)
    fits = Scenario.from_preset("default", gpu="rtx3090").max_vram_budget_gb()
    assert float(clean["vram_budget_gb"]) <= fits and "clamped" in by["vram_budget_gb"].message
    # an unknown model is replaced by the default preset's
    assert clean["model"] == "llama-3.1-8b" == presets.SCENARIOS["default"]["model"]
    assert "gpt-9" in by["model"].message
    assert "num_adapters" not in clean and "integer" in by["num_adapters"].message
    assert clean["seed"] == "2" and "2 times" in by["seed"].message
    for i in issues:
        assert f"`{i.key}`" in i.message


def test_sanitize_keeps_a_good_url_unchanged():
    q = {"arrival_rate_rps": ["32"], "zipf_s": ["1.1"], "strategy": ["batch"]}
    clean, issues = controls.sanitize_query(q)
    assert not issues
    assert clean == controls.normalize_query(q)


def test_share_query_round_trips():
    values, _ = controls.resolve({"gpu": "l4", "zipf_s": 1.3, "strategy": ["batch", "slora"],
                                  "arrival_process": "gamma", "arrival_cv": 2.0})
    from urllib.parse import parse_qs
    q = parse_qs(controls.share_query(values))
    back, issues = controls.resolve({k: (v if k == "strategy" else v[0]) for k, v in q.items()})
    assert not issues
    strip = lambda d: {k: v for k, v in d.items() if not k.startswith("_")}  # noqa: E731
    assert strip(back) == strip(values)


def test_url_params_are_the_non_default_controls():
    """What a scenario page's URL carries (app/controls.py restores it after a page without the controls)."""
    assert controls.url_params({}) == {}
    assert controls.url_params(controls.resolve({})[0]) == {}  # every control at its default
    # a GPU other than the default's (an H100 80 GB since issue 24), so that the URL has to carry it
    assert presets.SCENARIOS["default"]["gpu"] != "a100-80gb"
    q = controls.url_params({"gpu": "a100-80gb", "zipf_s": 1.3, "strategy": ["batch", "slora"], "duration_s": 60.0,
                             "arrival_cv": 2.0, "seed": 7})
    # pcie_gbps follows the GPU (its default there): not carried; arrival_cv does not apply to Poisson arrivals
    assert q == {"gpu": "a100-80gb", "zipf_s": "1.3", "strategy": ["batch", "slora"], "duration_s": "60", "seed": "7"}
    seed = controls.url_params({"preset": "seed1-rtx3090", "zipf_s": 1.3})
    assert seed == {"preset": "seed1-rtx3090", "zipf_s": "1.3"}  # the preset's values are its defaults
    # what the URL carries restores the same values
    back, issues = controls.resolve(q)
    assert not issues and back["zipf_s"] == 1.3 and back["strategy"] == ["batch", "slora"]
    assert back["pcie_gbps"] == presets.GPUS["a100-80gb"].pcie_gbps == 25.0


def test_cap_shortens_long_runs():
    sc = Scenario.from_preset("default", arrival_rate_rps=200.0, duration_s=3600.0)
    capped, note = controls.cap_scenario(sc)
    assert capped.arrival_rate_rps * capped.duration_s <= controls.MAX_REQUESTS_PER_RUN
    assert "200,000" in note
    assert controls.cap_scenario(Scenario.from_preset("default"))[1] is None
    closed = Scenario.from_preset("default", arrival_process="closed", duration_s=3600.0)
    assert controls.cap_scenario(closed)[0].duration_s == controls.MAX_CLOSED_DURATION_S


def test_build_scenario_reports_the_engines_error():
    values, _ = controls.resolve({"gpu": "rtx3090", "model": "llama-2-13b"})
    with pytest.raises(ValueError, match="model"):
        controls.build_scenario(values)


def test_non_url_fields_lists_the_uploaded_extras():
    base = Scenario.from_preset("default", service_mode="fixed", zipf_s=1.4).to_dict()
    assert controls.non_url_fields(base, "default") == ["service_mode"]


# ------------------------------------------------------------------- sweeps
def _fake_run(sc: Scenario) -> dict:
    if sc.strategy == "batch" and sc.arrival_rate_rps > 30:
        raise ValueError("arrival_rate_rps: too fast for this fake")
    k = {"naive": 1.0, "hot_set": 0.9, "batch": 0.8}[sc.strategy]
    return {m: k * sc.arrival_rate_rps + 0.1 * sc.seed for m in sweep.SWEEP_METRICS}


def test_sweep_plan_run_aggregate():
    base = Scenario.from_preset("default", duration_s=60.0)
    xs = sweep.grid_values(4, 40, 4)
    assert xs == [4.0, 16.0, 28.0, 40.0]
    runs = sweep.plan(base, "arrival_rate_rps", xs, ["naive", "batch"], 3)
    assert len(runs) == 4 * 2 * 3
    assert sweep.expected_requests(r[3] for r in runs) == pytest.approx(sum(x * 60 for x in xs) * 6)
    ticks = []
    rows = sweep.run_plan(runs, _fake_run, progress=lambda i, n: ticks.append((i, n)))
    assert ticks[-1] == (24, 24) and len(rows) == 24
    agg = sweep.aggregate(rows, ["ttft_p50_ms"])
    naive4 = agg[(agg["strategy"] == "naive") & (agg["x"] == 4.0)].iloc[0]
    assert naive4["mean"] == pytest.approx(4.1) and naive4["n"] == 3
    assert naive4["ci_low"] < naive4["mean"] < naive4["ci_high"]
    failed = agg[(agg["strategy"] == "batch") & (agg["x"] == 40.0)].iloc[0]
    assert failed["n"] == 0 and math.isnan(failed["mean"])
    assert sweep.errors(rows) == ["batch at 40.0: arrival_rate_rps: too fast for this fake"]
    assert sweep.grid_values(1, 10, 20, integer=True) == list(range(1, 11))


def test_crossover_table_picks_winner_and_margin():
    base = Scenario.from_preset("default", duration_s=60.0)
    runs = sweep.plan_grid(base, "arrival_rate_rps", [4.0, 20.0], "zipf_s", [0.5, 1.0],
                           ["naive", "hot_set", "batch"], 3)
    rows = sweep.run_grid(runs, _fake_run)
    assert list(rows.columns) == ["x", "y", "strategy", "replication", "ttft_p50_ms", "requests", "not_completed",
                                  "error"]
    table = sweep.crossover_table(rows)
    assert list(table.columns) == sweep.CROSSOVER_COLUMNS
    # the fake's differences are the same in every paired replication: a zero-width CI, so every cell is a win
    assert len(table) == 4 and set(table["status"]) == {"win"} and set(table["winner"]) == {"batch"}
    cell = table[(table["x"] == 20.0) & (table["y"] == 1.0)].iloc[0]
    assert cell["runner_up"] == "hot_set" and cell["verdict"] == "batch" and cell["n"] == 3
    assert cell["margin_ms"] == pytest.approx(2.0) and cell["margin_pct"] == pytest.approx(2.0 / 16.1)
    assert cell["margin_ci_low_ms"] == pytest.approx(2.0) and cell["margin_ci_high_ms"] == pytest.approx(2.0)


#: Common noise per seed (shared by every strategy: common random numbers) and a small own noise.
_COMMON = [0.0, 12.0, -9.0, 5.0, -4.0]
_OWN = {"naive": [0.8, -0.5, 0.2, -0.9, 0.4], "hot_set": [-0.6, 0.9, -0.3, 0.5, -0.2],
        "batch": [0.3, -0.2, 0.6, -0.4, 0.1], "oracle": [0.0] * 5, "vllm": [0.8, -0.5, 0.2, -0.9, 0.4]}


def _noisy_run(sc: Scenario) -> dict:
    """naive and hot_set 0.3 ms apart inside +-1 ms of own noise (a tie); batch 20 ms ahead at zipf_s > 0.75 (a
    win, visible only paired: the common noise is +-12 ms); oracle lowest everywhere (a bound); hot_set collapses
    at 20 req/s (half its requests unfinished, with a flattering TTFT)."""
    k = sc.seed - Scenario.from_preset("default").seed
    level = {"naive": 100.0, "hot_set": 100.3, "vllm": 100.0, "oracle": 50.0,
             "batch": 80.0 if sc.zipf_s > 0.75 else 120.0}[sc.strategy]
    collapsed = sc.strategy == "hot_set" and sc.arrival_rate_rps >= 20
    return {"ttft_p50_ms": (10.0 if collapsed else level) + _COMMON[k] + _OWN[sc.strategy][k],
            "requests": 1000, "not_completed": 500 if collapsed else 0}


def _noisy_table(strategies, reps=3, **kw) -> pd.DataFrame:
    base = Scenario.from_preset("default", duration_s=60.0)
    runs = sweep.plan_grid(base, "arrival_rate_rps", [4.0, 20.0], "zipf_s", [0.5, 1.0], strategies, reps)
    return sweep.crossover_table(sweep.run_grid(runs, _noisy_run), **kw).set_index(["x", "y"])


def test_crossover_table_wins_only_outside_the_noise_and_ties_otherwise():
    t = _noisy_table(["naive", "hot_set", "batch", "oracle"], exclude=["oracle"])
    # batch's 20 ms lead is far outside the paired noise: a win (the +-12 ms common noise cancels in the pairs)
    win = t.loc[(4.0, 1.0)]
    assert win["status"] == "win" and win["winner"] == "batch" and win["verdict"] == "batch"
    assert win["margin_ci_low_ms"] > 0 and win["margin_ci_low_ms"] < win["margin_ms"] < win["margin_ci_high_ms"]
    # naive vs hot_set: 0.3 ms apart inside the noise: a tie, naming the tied set; its margin CI includes zero
    tie = t.loc[(4.0, 0.5)]
    assert tie["status"] == "tie" and tie["verdict"] == "tie" and pd.isna(tie["winner"])
    assert tie["tied"] == "naive, hot_set" and tie["best"] == "naive" and tie["runner_up"] == "hot_set"
    assert tie["margin_ci_low_ms"] <= 0 <= tie["margin_ci_high_ms"]
    # the bound has the lowest TTFT everywhere but never wins (nor ties) a cell; it is named as not ranked
    assert "oracle" not in set(t["winner"].dropna()) and "oracle" not in set(t["best"].dropna())
    assert not t["tied"].str.contains("oracle").any()
    assert (t["not_ranked"].str.contains("oracle")).all()
    # hot_set collapses at 20 req/s: its flattering TTFT is not ranked there, so naive wins alone at zipf 0.5
    col = t.loc[(20.0, 0.5)]
    assert col["status"] == "win" and col["winner"] == "naive" and "hot_set (collapsed: 50% unfinished)" in col[
        "not_ranked"]
    tally = sweep.crossover_tally(t.reset_index())
    assert tally["wins"] == {"batch": 2, "naive": 1} and tally["ties"] == 1
    assert tally["tied_sets"] == {"naive, hot_set": 1}


def test_crossover_table_strategies_identical_in_effect_always_tie():
    t = _noisy_table(["naive", "vllm"])  # vllm is naive to the last digit in this fake
    assert set(t["status"]) == {"tie"} and t["winner"].isna().all()
    assert set(t["tied"]) == {"naive, vllm"} and (t["margin_ms"] == 0).all()


def test_crossover_table_one_replication_is_a_lead_not_a_win():
    t = _noisy_table(["naive", "batch"], reps=1)
    assert set(t["status"]) == {"lead"} and set(t["verdict"]) == {"no CI"} and t["winner"].isna().all()
    assert sweep.crossover_tally(t.reset_index())["leads"] == 4


def test_crossover_tally_text_counts_ties_apart_and_names_the_references():
    from app import page_crossover

    t = _noisy_table(["naive", "hot_set", "batch", "oracle"], exclude=["oracle"]).reset_index()
    text = page_crossover.tally_text(t, ["oracle"])
    assert "Cells won" in text and "**batch** 2" in text and "**naive** 1" in text
    assert "ties (within the noise) 1: **naive** = **hot_set** 1" in text
    assert "**oracle** (an offline bound)" in text and "never wins" in text
    none = page_crossover.tally_text(_noisy_table(["naive", "vllm"]).reset_index(), [])
    assert none.startswith("No cell has a winner outside the noise") and "ties (within the noise) 4" in none


def test_crossover_url_parameters_are_sanitized():
    from app import page_crossover

    assert controls.PAGE_PARAMS["xo_"] is page_crossover.sanitize_query
    clean, issues = page_crossover.sanitize_query({"xo_reps": ["9"], "xo_n": ["3"], "xo_zzz": ["1"]})
    assert clean == {"xo_reps": str(page_crossover.MAX_REPLICATIONS), "xo_n": "3"}
    assert {i.key: i.kind for i in issues} == {"xo_reps": "adjusted", "xo_zzz": "unknown"}
    clean, issues = page_crossover.sanitize_query({"xo_reps": ["1"], "xo_n": ["two"]})
    assert clean == {"xo_reps": "2"} and {i.key: i.kind for i in issues} == {"xo_reps": "adjusted",
                                                                           "xo_n": "malformed"}
    clean, _ = controls.sanitize_query({"xo_reps": ["4"], "zipf_s": ["1.2"]})
    assert clean == {"xo_reps": "4", "zipf_s": "1.2"}


def test_sweep_over_the_engine():
    base = Scenario.from_preset("default", duration_s=60.0, warmup_s=5.0)
    runs = sweep.plan(base, "zipf_s", [0.5, 1.5], ["naive", "hot_set"], 2)
    rows = sweep.run_plan(runs, lambda sc: simulate(sc).summary)
    agg = sweep.aggregate(rows)
    assert set(agg["metric"]) == set(sweep.SWEEP_METRICS) and agg["n"].min() == 2


# ------------------------------------------------------------------ exports
def test_exports_match_engine_output():
    sc = Scenario.from_preset("default", duration_s=60.0, warmup_s=5.0)
    res = {s: simulate(sc.replace(strategy=s)) for s in ["naive", "batch"]}
    req = pd.read_csv(io.BytesIO(exports.requests_csv({s: r.requests for s, r in res.items()})))
    assert list(req.columns) == ["strategy", *res["naive"].requests.columns]
    assert len(req) == sum(len(r.requests) for r in res.values())
    summ = pd.read_csv(io.BytesIO(exports.summary_csv({s: r.summary for s, r in res.items()})))
    assert list(summ["strategy"]) == ["naive", "batch"]
    assert summ["ttft_p50_ms"].tolist() == pytest.approx([r.summary["ttft_p50_ms"] for r in res.values()])
    ts = pd.read_csv(io.BytesIO(exports.timeseries_csv({s: r.timeseries for s, r in res.items()})))
    assert list(ts.columns) == ["strategy", *res["naive"].timeseries.columns]
    back = Scenario.from_json(exports.scenario_json(sc).decode())
    assert back == sc and json.loads(exports.scenario_json(sc))["gpu"] == sc.gpu


def test_strategies_in_controls_match_engine():
    assert controls.BY_KEY["strategy"].options({}) == list(STRATEGIES)
