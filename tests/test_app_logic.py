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
    assert values["strategy"] == ["naive", "hot_set", "batch"]


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
    assert float(clean["vram_budget_gb"]) <= 7.0 and "clamped" in by["vram_budget_gb"].message
    assert clean["model"] == "llama-2-7b" and "gpt-9" in by["model"].message
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
    q = controls.url_params({"gpu": "h100-80gb", "zipf_s": 1.3, "strategy": ["batch", "slora"], "duration_s": 60.0,
                             "arrival_cv": 2.0, "seed": 7})
    # pcie_gbps follows the GPU (its default there): not carried; arrival_cv does not apply to Poisson arrivals
    assert q == {"gpu": "h100-80gb", "zipf_s": "1.3", "strategy": ["batch", "slora"], "duration_s": "60", "seed": "7"}
    seed = controls.url_params({"preset": "seed1-rtx3090", "zipf_s": 1.3})
    assert seed == {"preset": "seed1-rtx3090", "zipf_s": "1.3"}  # the preset's values are its defaults
    # what the URL carries restores the same values
    back, issues = controls.resolve(q)
    assert not issues and back["zipf_s"] == 1.3 and back["pcie_gbps"] == 50.0 and back["strategy"] == ["batch", "slora"]


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
                           ["naive", "hot_set", "batch"], 1)
    rows = sweep.run_grid(runs, _fake_run)
    table = sweep.crossover_table(rows)
    assert len(table) == 4 and set(table["winner"]) == {"batch"}
    cell = table[(table["x"] == 20.0) & (table["y"] == 1.0)].iloc[0]
    assert cell["runner_up"] == "hot_set"
    assert cell["margin_ms"] == pytest.approx(2.0) and cell["margin_pct"] == pytest.approx(0.125)


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
