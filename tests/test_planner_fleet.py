"""The planner's min_replicas objective: the fewest replicas that serve a rate within an SLO.

An M/D/1 oracle (random routing splits a Poisson stream into Poisson streams), the search's bracketing on a
fake predicate (monotone and not), monotonicity in the rate and the GPU, the one-GPU and unreachable cases,
costs, invalid input, the CLI and the Plan page."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from legacy import legacy_preset

from engine import MAX_REPLICAS, ROUTERS, Scenario
from engine.planner import GPU_PRICES_USD_PER_HOUR, MAX_REPLICAS_SEARCH, OBJECTIVES, plan, plan_summary
from engine.planner import search as search_mod

# One adapter, batch 1, one output token, fixed 1 ms service (as tests/test_planner.py): with the random router
# each replica sees a Poisson stream of rate / N, an M/D/1 queue.
SERIAL = dict(
    gpu="a100-80gb", model="llama-2-7b", service_mode="fixed", max_batch_size=1, output_tokens=1,
    prompt_tokens=100, prefill_ms_per_token=0.01, step_overhead_ms=0.0, lora_ms_per_adapter=0.0,
    load_latency_ms=0.0, num_adapters=1, adapter_rank=16, vram_budget_gb=1.0, gpu_mem_util=0.9,
    reserve_gb=1.0, load_mode="sync", strategy="naive", drain_s=600.0, warmup_s=5.0, duration_s=200.0,
    arrival_rate_rps=100.0, router="random",
)
S_MS = 1.0  # service time of SERIAL, ms


def md1_mean_ttft_ms(rate_rps: float, s_ms: float = S_MS) -> float:
    """M/D/1 mean time in system (Pollaczek-Khinchine): S + rho S / (2 (1 - rho)); inf when rho >= 1."""
    rho = rate_rps * s_ms / 1e3
    return math.inf if rho >= 1 else s_ms + rho * s_ms / (2 * (1 - rho))


def md1_replicas(rate_rps: float, slo_ms: float, cap: int = MAX_REPLICAS_SEARCH) -> int:
    """Smallest N whose per-GPU utilisation rate / N x S < 1 and whose mean TTFT meets the SLO (0: none)."""
    for n in range(1, cap + 1):
        if md1_mean_ttft_ms(rate_rps / n) <= slo_ms:
            return n
    return 0


@pytest.mark.parametrize("rate, slo_ms", [(700.0, 3.0), (2500.0, 3.0), (5000.0, 3.0), (2700.0, 50.0)])
def test_min_replicas_matches_the_md1_oracle(rate, slo_ms):
    want = md1_replicas(rate, slo_ms)
    # the oracle's answer is not a knife edge: the count below fails by a margin, the answer passes by one
    assert md1_mean_ttft_ms(rate / want) < 0.9 * slo_ms
    assert want == 1 or md1_mean_ttft_ms(rate / (want - 1)) > 1.1 * slo_ms
    sc = Scenario(**{**SERIAL, "arrival_rate_rps": rate})
    res = plan(sc, {"ttft_mean_ms": slo_ms}, {}, replications=2, objective="min_replicas", probe_requests=50_000,
               workers=1)
    b = res.best
    assert b is not None, res.table.iloc[0]["reason"]
    assert b["replicas_needed_max"] == want and b["replicas_needed"] == want, (b["replicas_by_replication"], want)
    assert b["replicas_by_replication"] == f"{want},{want}"
    assert list(res.runs["value"]) == [want, want]
    assert b["ttft_mean_ms"] == pytest.approx(md1_mean_ttft_ms(rate / want), rel=0.1)
    assert res.scenario(b["config"]).num_replicas == want
    assert res.scenario(b["config"]).arrival_rate_rps == rate  # the rate is the fleet's total, unchanged


def test_one_gpu_suffices_when_it_meets_the_slo():
    sc = Scenario(**SERIAL)  # 100 req/s: rho 0.1
    res = plan(sc, {"ttft_mean_ms": 3.0}, {}, replications=3, objective="min_replicas", workers=1)
    b = res.best
    assert b["replicas_needed"] == 1 and b["replicas_needed_max"] == 1 and b["replicas_by_replication"] == "1,1,1"
    assert list(res.runs["probes"]) == [1, 1, 1]  # it starts at one replica, which passes
    assert b["fleet_price_usd_per_hour"] == GPU_PRICES_USD_PER_HOUR["a100-80gb"]
    assert "1 replica(s) behind the random router serve 100 req/s" in plan_summary(res)


def test_slo_below_the_service_time_is_infeasible_with_a_reason():
    sc = Scenario(**SERIAL)
    res = plan(sc, {"ttft_mean_ms": 0.5}, {}, replications=1, objective="min_replicas", workers=1)
    assert res.best is None
    row = res.table.iloc[0]
    assert row["feasible"] and not row["meets_slo"] and not row["recommended"]
    assert row["reason"].startswith(f"SLO not met with up to {MAX_REPLICAS_SEARCH} replicas in 1 of 1")
    assert "ttft_mean_ms" in row["reason"] and "SLO <= 0.5" in row["reason"], row["reason"]
    assert math.isnan(row["replicas_needed"]) and math.isnan(row["fleet_price_usd_per_hour"])
    assert row["replicas_by_replication"] == f">{MAX_REPLICAS_SEARCH}"
    assert res.runs["probes"].iloc[0] == 5  # 1, 2, 4, 8, 16: doubling to the cap, then it stops
    assert plan_summary(res).startswith("No configuration meets the SLO")
    # a smaller cap is the user's
    res4 = plan(sc, {"ttft_mean_ms": 0.5}, {}, replications=1, objective="min_replicas", max_replicas=4, workers=1)
    assert "up to 4 replicas" in res4.table.iloc[0]["reason"] and res4.runs["probes"].iloc[0] == 3


# ------------------------------------------------------------------ the search itself, on a fake predicate
def _fake(monkeypatch, passes):
    """Make a probe at num_replicas n pass iff passes(n) (no simulation); return the list of probed counts."""
    seen = []

    def fake_simulate_summary(s):
        seen.append(s.num_replicas)
        return {"n": s.num_replicas}

    monkeypatch.setattr(search_mod, "simulate_summary", fake_simulate_summary)
    monkeypatch.setattr(search_mod, "verdict", lambda summ, slo, rate, w: (passes(summ["n"]), "" if passes(
        summ["n"]) else f"fails at {summ['n']}"))
    return seen


@pytest.mark.parametrize("need", [1, 2, 3, 5, 8, 9, 13, 16])
@pytest.mark.parametrize("start", [None, 1, 4, 16])
def test_search_finds_the_smallest_passing_count(monkeypatch, need, start):
    seen = _fake(monkeypatch, lambda n: n >= need)
    sc = legacy_preset("default", num_adapters=50)
    r = search_mod.min_replicas(sc, {"ttft_p99_ms": 1.0}, start=start)
    assert r.value == need and r.summary == {"n": need}
    assert need == 1 or need - 1 in seen  # a crossing: the count below was probed and failed
    assert r.reason == ("" if need == 1 else f"{need - 1} replica(s): fails at {need - 1}")
    assert r.probes == len(seen) <= 2 * math.ceil(math.log2(MAX_REPLICAS_SEARCH)) + 2, seen
    assert len(set(seen)) == len(seen)  # no count probed twice


def test_search_start_near_the_answer_takes_two_probes(monkeypatch):
    seen = _fake(monkeypatch, lambda n: n >= 6)
    r = search_mod.min_replicas(legacy_preset("default", num_adapters=50), {"ttft_p99_ms": 1.0}, start=6)
    assert r.value == 6 and seen == [6, 5]


def test_search_none_passing_and_non_monotone_noise(monkeypatch):
    sc = legacy_preset("default", num_adapters=50)
    seen = _fake(monkeypatch, lambda n: False)
    r = search_mod.min_replicas(sc, {"ttft_p99_ms": 1.0})
    assert r.value == 0 and r.summary is None and seen == [1, 2, 4, 8, 16] and r.reason == "16 replica(s): fails at 16"
    # non-monotone: 3 passes, 4 fails, 5+ pass. The answer is a crossing (passes, the count below failed).
    for start in (None, 2, 7, 12):
        ok = lambda n: n == 3 or n >= 5  # noqa: E731
        seen = _fake(monkeypatch, ok)
        r = search_mod.min_replicas(sc, {"ttft_p99_ms": 1.0}, start=start)
        assert r.value in (3, 5) and ok(int(r.value)) and int(r.value) - 1 in seen and not ok(int(r.value) - 1)


def test_search_cap_follows_the_fleet_bounds(monkeypatch):
    seen = _fake(monkeypatch, lambda n: False)
    sc = legacy_preset("default", num_adapters=100_000)  # num_replicas x num_adapters <= 1,000,000
    assert search_mod.replicas_cap(sc) == 10
    r = search_mod.min_replicas(sc, {"ttft_p99_ms": 1.0})
    assert seen == [1, 2, 4, 8, 10] and "the search stops at 10 replicas" in r.reason, (seen, r.reason)
    assert search_mod.replicas_cap(legacy_preset("default"), 1000) == MAX_REPLICAS


def test_probe_queue_cap_is_per_replica():
    sc = legacy_preset("default", arrival_rate_rps=400.0)
    one = search_mod.probe_cap(sc, {"ttft_p99_ms": 500.0})
    four = search_mod.probe_cap(sc.replace(num_replicas=4), {"ttft_p99_ms": 500.0})
    assert one == sc.max_batch_size + 800 and four == sc.max_batch_size + 200


# ------------------------------------------------------------------ monotonicity, costs, ties, routers
SMALL = dict(duration_s=60.0, warmup_s=5.0, drain_s=30.0, num_adapters=50)


def test_higher_rate_never_needs_fewer_replicas_and_costs_add_up():
    sc = legacy_preset("default", **SMALL, router="least_loaded")
    res = plan(sc, {"ttft_p99_ms": 400.0}, {"arrival_rate_rps": [10.0, 40.0, 80.0]}, replications=2,
               objective="min_replicas", workers=1)
    t = res.table.set_index("arrival_rate_rps")
    n = t["replicas_needed_max"]
    assert n[10.0] <= n[40.0] <= n[80.0], n.to_dict()
    assert n[80.0] >= 2 * n[10.0] and n[80.0] > 1, n.to_dict()
    for _, r in t.iterrows():
        assert r["fleet_price_usd_per_hour"] == pytest.approx(r["replicas_needed_max"] * GPU_PRICES_USD_PER_HOUR[sc.gpu])
        assert r["cost_per_mtok_usd"] == pytest.approx(r["fleet_price_usd_per_hour"] / (r["throughput_tok_s"] * 3600)
                                                       * 1e6)
    assert res.table.iloc[0]["arrival_rate_rps"] == 10.0 and bool(res.table.iloc[0]["recommended"])


def test_faster_gpu_never_needs_more_replicas():
    sc = legacy_preset("default", **SMALL, arrival_rate_rps=60.0)
    res = plan(sc, {"ttft_p99_ms": 400.0}, {"gpu": ["a10g", "a100-80gb", "h100-80gb"]}, replications=2,
               objective="min_replicas", workers=1)
    n = res.table.set_index("gpu")["replicas_needed_max"]
    assert n["a10g"] >= n["a100-80gb"] >= n["h100-80gb"] >= 1, n.to_dict()
    assert n["a10g"] > n["h100-80gb"], n.to_dict()
    assert res.best["gpu"] == "h100-80gb"


def test_router_grid_ties_and_the_cheaper_fleet_first():
    # batch_window_ms does not affect naive: the two rows per router are the same simulations (a tie), and
    # between two GPUs that need the same count the cheaper fleet ranks first.
    sc = legacy_preset("default", **SMALL, arrival_rate_rps=30.0)
    res = plan(sc, {"ttft_p99_ms": 400.0}, {"router": ["least_loaded", "lora_affinity"],
                                            "batch_window_ms": [10.0, 30.0]},
               replications=2, objective="min_replicas", workers=1)
    t = res.table
    assert set(t["router"]) == {"least_loaded", "lora_affinity"} and t["meets_slo"].all()
    best = t.iloc[0]
    twin = t[(t["router"] == best["router"]) & (t["config"] != best["config"])].iloc[0]
    assert bool(twin["tie_with_best"]) and twin["replicas_by_replication"] == best["replicas_by_replication"]
    res2 = plan(sc, {"ttft_p99_ms": 400.0}, {"gpu": ["a100-80gb", "a100-40gb"]}, replications=1,
                objective="min_replicas", gpu_prices_usd_per_hour={"a100-80gb": 0.5, "a100-40gb": 2.0}, workers=1)
    t2 = res2.table
    if t2.iloc[0]["replicas_needed"] == t2.iloc[1]["replicas_needed"]:
        assert t2.iloc[0]["gpu"] == "a100-80gb" and bool(t2.iloc[1]["tie_with_best"])
    else:
        assert t2.iloc[0]["replicas_needed"] < t2.iloc[1]["replicas_needed"]


# ------------------------------------------------------------------ invalid input, CLI
@pytest.mark.parametrize("kw, needle", [
    (dict(objective="min_replica"), "objective: invalid value 'min_replica'; allowed: max_rate, max_adapters, "
                                    "min_cost, min_replicas"),
    (dict(grid={"router": ["least_loaded", "nearest"]}),
     "grid: field 'router': invalid value 'nearest'; allowed: " + ", ".join(ROUTERS)),
    (dict(grid={"num_replicas": [1, 2]}), "grid: field 'num_replicas' is what the objective 'min_replicas' searches"),
    (dict(max_replicas=0), f"max_replicas: invalid value 0; allowed: an integer in [1, {MAX_REPLICAS}]"),
    (dict(max_replicas=MAX_REPLICAS + 1), "max_replicas: invalid value"),
    (dict(max_replicas=True), "max_replicas: invalid value True"),
])
def test_invalid_input_names_the_field_and_the_allowed_values(kw, needle):
    args = dict(base=legacy_preset("default", **SMALL), slo={"ttft_p99_ms": 400.0}, grid={},
                objective="min_replicas")
    args.update(kw)
    with pytest.raises(ValueError) as e:
        plan(**args)
    assert needle in str(e.value)
    assert "min_replicas" in OBJECTIVES


def test_router_grid_is_checked_for_every_objective():
    with pytest.raises(ValueError, match="grid: field 'router': invalid value 'x'"):
        plan(legacy_preset("default", **SMALL), {"ttft_p99_ms": 400.0}, {"router": ["x"]})


def test_cli_min_replicas_with_a_router_grid(tmp_path, capsys):
    from engine.cli import main
    out = tmp_path / "plan"
    rc = main(["plan", "--preset", "default", "--set", "duration_s=40", "--set", "num_adapters=50",
               "--set", "arrival_rate_rps=40", "--slo", "ttft_p99_ms=400", "--objective", "min_replicas",
               "--grid", "router=least_loaded,lora_affinity", "--replications", "2", "--workers", "1",
               "--max-replicas", "8", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "replica(s) behind the" in printed and "# fleet:" in printed and "replicas_needed_max" in printed
    assert (out / "plan.csv").is_file() and (out / "plan.png").is_file()
    doc = json.loads((out / "plan.json").read_text())
    assert doc["objective"] == "min_replicas" and doc["grid"]["router"] == ["least_loaded", "lora_affinity"]
    assert doc["best"]["router"] in ("least_loaded", "lora_affinity") and doc["best"]["replicas_needed_max"] >= 1


@pytest.mark.parametrize("argv, needle", [
    (["--objective", "min_replicas", "--grid", "router=nearest"], "grid: field 'router': invalid value 'nearest'"),
    (["--objective", "min_replica"], "invalid choice: 'min_replica'"),
    (["--objective", "min_replicas", "--max-replicas", "0"], "--max-replicas: invalid value '0'"),
    (["--objective", "min_replicas", "--max-replicas", "65"], "max_replicas: invalid value 65"),
    (["--objective", "min_replicas", "--grid", "num_replicas=1,2"], "what the objective 'min_replicas' searches"),
])
def test_cli_bad_input_exits_2_with_one_line(capsys, argv, needle):
    from engine.cli import main
    try:
        rc = main(["plan", "--preset", "default", "--slo", "ttft_p99_ms=400", *argv])
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    assert rc == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1, err


# ------------------------------------------------------------------ the Plan page
ROOT = Path(__file__).resolve().parent.parent


def test_plan_page_min_replicas_via_the_url():
    from conftest import goto
    from streamlit.testing.v1 import AppTest

    from app import page_plan, runner

    runner.compile_kernels()  # compile before the AppTest timeout starts
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    for k, v in {"duration_s": "60", "plan_objective": "min_replicas", "plan_gpus": ["a100-80gb", "h100-80gb"],
                 "plan_max_loras": "8", "plan_strategies": "vllm", "plan_reps": "1",
                 "plan_routers": ["least_loaded", "lora_affinity"]}.items():
        at.query_params[k] = v
    at = goto(at, "plan").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.warning, [w.value for w in at.warning]
    assert at.selectbox(key=page_plan.K_OBJECTIVE).value == "min_replicas"
    assert at.multiselect(key=page_plan.K_ROUTERS).value == ["least_loaded", "lora_affinity"]
    assert any("2 gpu x 1 max_loras x 1 strategy x 2 router = 4 configurations" in c.value for c in at.caption)
    at.button(key=page_plan.K_RUN).click()
    at = at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    (summary,) = [s.value for s in at.success]
    assert "replica(s) behind the" in summary
    (t,) = [d.value for d in at.dataframe if "rank" in d.value.columns]
    assert len(t) == 4 and set(t["router"]) == {"least_loaded", "lora_affinity"}
    assert t["rank"].iloc[0] == "best" and t["value"].iloc[0] >= 1
    assert {"replicas_needed_max", "replicas_by_replication", "fleet_price_usd_per_hour"} <= set(t.columns)
    assert (t["fleet_price_usd_per_hour"] >= t["price_usd_per_hour"]).all()
    assert len(at.get("vega_lite_chart")) == 2  # replicas needed and the fleet cost; throughput against cost
    assert any(m.label == "Replicas to deploy" for m in at.metric)
    # a bad router in the URL warns by name
    at2 = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    at2.query_params["plan_routers"] = ["nearest", "random"]
    at2 = goto(at2, "plan").run()
    assert not at2.exception
    assert any("`plan_routers`" in w.value and "nearest" in w.value for w in at2.warning)
    assert at2.multiselect(key=page_plan.K_ROUTERS).value == ["random"]
