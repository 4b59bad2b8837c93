"""The loop's shortcuts against the references they replace, every state array equal bit for bit:

* runs of pure-decode steps (loop._decode_run, IP_DECODE_RUN) against every step through the scheduler;
* the no-room memo of a scheduling pass (SF_NOROOM, off with IP_FASTSKIP = 0) against searching for
  victims on every request (static memory)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Scenario, sim
from engine import loop as L
from engine.policies import STRATEGIES
from engine.workload import generate

_STATE = ("R_i", "R_f", "A_i", "A_f", "S_i", "S_f", "ts", "ev_t", "ev_i", "heap_t", "heap_a")


def _both(sc: Scenario, flag=L.IP_DECODE_RUN):
    sc = sc.validate()
    wl = generate(sc, n_closed=sc.concurrency * 64 + 1024) if sc.arrival_process == "closed" else generate(sc)
    out = []
    for fast in (1, 0):
        arr = sim._build(sc, wl)
        assert arr["ip"][flag] == 1  # on by default
        arr["ip"][flag] = fast
        L.run_loop(*[arr[k] for k in sim.LOOP_ARGS])
        out.append(arr)
    return out


def _assert_same(a, b):
    for k in _STATE:
        x, y = a[k], b[k]
        if k == "A_i":  # (Belady's cursor into each adapter's future requests is a cache: it may lag behind)
            x, y = np.delete(x, L.AI_CUR, axis=0), np.delete(y, L.AI_CUR, axis=0)
        assert np.array_equal(x, y, equal_nan=True), k


CASES = {
    **{f"default-{s}": ("default", dict(strategy=s, duration_s=40.0, warmup_s=5.0)) for s in STRATEGIES},
    "light-vllm": ("a100-light", dict(strategy="vllm", duration_s=40.0)),
    "light-slora-contig": ("a100-light", dict(strategy="slora", kv_allocator="contiguous", duration_s=40.0)),
    "vllm-runs": ("vllm-llama31-8b", dict(duration_s=120.0, warmup_s=10.0, arrival_rate_rps=2.0)),
    "slora-s1": ("slora-a10g-s1", dict(duration_s=60.0)),
    "kv-heavy": ("kv-qwen2-0.5b-heavy", dict(duration_s=20.0, warmup_s=2.0)),
    "kernel-cost": ("a100-light", dict(cost_model="kernel", duration_s=40.0)),
    "fixed": ("a100-light", dict(service_mode="fixed", duration_s=40.0)),
    "closed": ("a100-light", dict(arrival_process="closed", concurrency=6, duration_s=40.0, warmup_s=2.0)),
    "horizon": ("default", dict(arrival_rate_rps=40.0, duration_s=20.0, drain_s=0.5, warmup_s=0.0)),
    "on-demand-tight": ("default", dict(strategy="vllm", kv_cache_gb=0.35, arrival_rate_rps=4.0, duration_s=30.0,
                                        output_tokens=400, warmup_s=2.0)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_decode_runs_equal_the_step_by_step_reference(case):
    preset, kw = CASES[case]
    a, b = _both(Scenario.from_preset(preset, **kw))
    _assert_same(a, b)
    assert a["S_i"][L.SI_STEPS] > 0


def test_fast_path_is_taken_and_bounded_by_on_demand_blocks():
    """On a light load most steps are pure decode; with on-demand KV a run stops at every block boundary
    (the reference's _grow_kv allocates there), and the results still agree."""
    sc = Scenario.from_preset("a100-light", strategy="vllm", kv_reservation="on_demand", kv_block_tokens=16,
                              duration_s=40.0, warmup_s=2.0)
    a, b = _both(sc)
    _assert_same(a, b)
    assert a["S_i"][L.SI_STEPS] > 2 * a["S_i"][L.SI_NISSUED]  # several decode steps per request


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategy=st.sampled_from(sorted(STRATEGIES)), rate=st.floats(0.5, 30.0), out=st.integers(1, 300),
       prompt=st.integers(1, 600), batch=st.integers(1, 64), ondemand=st.booleans(), block=st.sampled_from([1, 16]),
       seed=st.integers(0, 10_000))
def test_random_scenarios_agree(strategy, rate, out, prompt, batch, ondemand, block, seed):
    kw = dict(strategy=strategy, arrival_rate_rps=rate, output_tokens=out, prompt_tokens=prompt, max_batch_size=batch,
              duration_s=12.0, warmup_s=1.0, seed=seed, kv_block_tokens=block)
    if ondemand:
        kw["kv_reservation"] = "on_demand"
    try:
        sc = Scenario.from_preset("default", **kw).validate()
    except ValueError:
        return  # a combination the engine refuses (checked elsewhere)
    a, b = _both(sc)
    _assert_same(a, b)


NOROOM = {
    "hot_set": ("default", dict(strategy="hot_set", duration_s=60.0, warmup_s=5.0)),
    "hot_set-mixed-ranks": ("default", dict(strategy="hot_set", adapter_ranks=(8, 16, 32, 64), duration_s=60.0,
                                            warmup_s=5.0)),
    "vllm-memory-only": ("default", dict(strategy="vllm", duration_s=60.0, warmup_s=5.0, arrival_rate_rps=20.0)),
    "batch": ("default", dict(strategy="batch", duration_s=60.0, warmup_s=5.0, arrival_rate_rps=20.0)),
    "oracle": ("default", dict(strategy="oracle", duration_s=60.0, warmup_s=5.0)),
    "async-prefetch": ("default", dict(strategy="hot_set", load_mode="async", duration_s=60.0, warmup_s=5.0)),
}


@pytest.mark.parametrize("case", list(NOROOM))
def test_no_room_memo_equals_searching_every_time(case):
    preset, kw = NOROOM[case]
    sc = Scenario.from_preset(preset, **kw)
    a, b = _both(sc, L.IP_FASTSKIP)
    _assert_same(a, b)
    assert a["S_i"][L.SI_LOADS] > 100  # adapters did swap


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategy=st.sampled_from(["naive", "hot_set", "batch", "vllm", "oracle"]), rate=st.floats(4.0, 40.0),
       budget=st.floats(0.3, 2.0), ranks=st.sampled_from([(32,), (8, 64), (16, 32)]), hot=st.integers(0, 12),
       seed=st.integers(0, 10_000))
def test_no_room_memo_random_scenarios(strategy, rate, budget, ranks, hot, seed):
    try:
        sc = Scenario.from_preset("default", strategy=strategy, arrival_rate_rps=rate, vram_budget_gb=budget,
                                  adapter_ranks=ranks, adapter_rank=max(ranks), hot_set_k=hot, duration_s=15.0,
                                  warmup_s=1.0, seed=seed).validate()
    except ValueError:
        return
    a, b = _both(sc, L.IP_FASTSKIP)
    _assert_same(a, b)


def _summaries_equal(a: dict, b: dict):
    assert a.keys() == b.keys()
    for k, v in a.items():
        w = b[k]
        same = v == w or (isinstance(v, float) and isinstance(w, float) and np.isnan(v) and np.isnan(w))
        assert same, (k, v, w)


SUMMARY_CASES = {
    **{f"default-{s}": ("default", dict(strategy=s, duration_s=30.0, warmup_s=5.0)) for s in STRATEGIES},
    "closed": ("a100-light", dict(arrival_process="closed", concurrency=6, duration_s=40.0, warmup_s=2.0)),
    "trace": ("azure-code-2023", dict(duration_s=60.0, warmup_s=5.0)),
    "fleet": ("default", dict(num_replicas=3, router="lora_affinity", arrival_rate_rps=30.0, duration_s=20.0,
                              warmup_s=2.0)),
    "vllm-runs": ("vllm-llama31-8b", dict(duration_s=120.0, warmup_s=10.0, arrival_rate_rps=2.0)),
}


@pytest.mark.parametrize("case", list(SUMMARY_CASES))
def test_simulate_summary_equals_the_full_results_summary(case):
    """engine.simulate_summary skips the DataFrames and gives the same summary, key for key, bit for bit."""
    from engine import simulate_summary
    preset, kw = SUMMARY_CASES[case]
    sc = Scenario.from_preset(preset, **kw)
    _summaries_equal(simulate_summary(sc), sim.simulate(sc).summary)


def test_simulate_summary_refuses_what_simulate_refuses():
    from engine import simulate_summary
    with pytest.raises(ValueError, match="scenario: expected engine.Scenario"):
        simulate_summary({"strategy": "naive"})
    with pytest.raises(ValueError, match="arrival_rate_rps"):
        simulate_summary(Scenario.from_preset("default", arrival_rate_rps=-1.0))


def _fleet_equals_reference(monkeypatch, sc: Scenario, flag: int) -> None:
    """The fleet run of ``sc`` equals, frame for frame and bit for bit, the run with the loop flag ``flag`` set
    to 0 in every replica (its reference)."""
    import pandas as pd
    fast = sim.simulate(sc)
    build = sim._build

    def reference(*a, **k):
        arr = build(*a, **k)
        arr["ip"][flag] = 0
        return arr

    monkeypatch.setattr(sim, "_build", reference)
    ref = sim.simulate(sc)
    pd.testing.assert_frame_equal(fast.requests, ref.requests, check_exact=True)
    pd.testing.assert_frame_equal(fast.timeseries_by_replica, ref.timeseries_by_replica, check_exact=True)
    pd.testing.assert_frame_equal(fast.events, ref.events, check_exact=True)
    _summaries_equal(fast.summary, ref.summary)


@pytest.mark.parametrize("router", ["least_loaded", "lora_affinity", "round_robin"])
def test_fleet_decode_runs_equal_the_reference(monkeypatch, router):
    """A fleet's replicas pause at every arrival and resume mid-run: the results equal step by step ones."""
    sc = Scenario.from_preset("default", num_replicas=3, router=router, arrival_rate_rps=12.0, duration_s=40.0,
                              warmup_s=4.0)
    _fleet_equals_reference(monkeypatch, sc, L.IP_DECODE_RUN)


@pytest.mark.parametrize("router,kw", [("least_loaded", {}), ("lora_affinity", {}),
                                       ("least_loaded", dict(strategy="slora", load_mode="async")),
                                       ("lora_affinity", dict(kv_reservation="on_demand", strategy="vllm"))])
def test_quiet_replicas_equal_advancing_every_replica(monkeypatch, router, kw):
    """A fleet skips replicas paused inside a decode run until they could change (SF_QUIET): the same
    results as advancing every replica to every arrival (IP_QUIET = 0)."""
    sc = Scenario.from_preset("default", num_replicas=4, router=router, arrival_rate_rps=10.0, duration_s=40.0,
                              warmup_s=4.0, **kw)
    _fleet_equals_reference(monkeypatch, sc, L.IP_QUIET)
