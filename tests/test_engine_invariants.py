"""Property-based invariants, determinism, thread safety and the seed-1 regime checks."""
import threading

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legacy import legacy_preset

from engine import STRATEGIES, Scenario, presets, simulate
from engine.costs import load_seconds


@st.composite
def scenarios(draw, strategies=tuple(STRATEGIES)):
    model = draw(st.sampled_from(["llama-2-7b", "qwen2-1.5b", "llama-3.1-8b"]))
    gpu = "a100-80gb"
    ranks = draw(st.sampled_from([(), (8, 16), (8, 16, 32, 64)]))
    rank = draw(st.sampled_from([8, 16, 32]))
    n_adapters = draw(st.integers(1, 60))
    base = Scenario(gpu=gpu, model=model, adapter_rank=rank, adapter_ranks=ranks, num_adapters=n_adapters)
    amax = base.max_adapter_bytes() / presets.GIB
    # budget between one adapter and ~30 of the largest
    budget = amax * draw(st.floats(1.05, 30.0))
    sc = base.replace(
        strategy=draw(st.sampled_from(strategies)),
        vram_budget_gb=budget,
        gpu_mem_util=draw(st.sampled_from([0.9, 0.35])),
        reserve_gb=1.0,
        zipf_s=draw(st.floats(0.0, 1.5)),
        arrival_rate_rps=draw(st.floats(1.0, 60.0)),
        arrival_process=draw(st.sampled_from(["poisson", "gamma", "closed"])),
        arrival_cv=draw(st.floats(0.5, 3.0)),
        concurrency=draw(st.integers(1, 16)),
        max_batch_size=draw(st.integers(1, 16)),
        max_loras=draw(st.sampled_from([0, 0, 2, 4])),
        max_cpu_loras=draw(st.sampled_from([0, 0, 5])),
        host_warm=draw(st.booleans()),
        prompt_tokens=draw(st.integers(1, 300)),
        output_tokens=draw(st.integers(1, 40)),
        length_dist=draw(st.sampled_from(["fixed", "uniform", "lognormal"])),
        frontend_ms=draw(st.sampled_from([0.0, 0.0, 7.5])),
        max_in_system=draw(st.sampled_from([0, 0, 3])),
        load_mode=draw(st.sampled_from(["sync", "async"])),
        memory_mode=draw(st.sampled_from(["static", "unified"])),
        kv_allocator=draw(st.sampled_from(["paged", "contiguous"])),
        service_mode=draw(st.sampled_from(["roofline", "fixed"])),
        batch_window_ms=draw(st.floats(1.0, 50.0)),
        duration_s=draw(st.floats(1.0, 6.0)),
        warmup_s=0.0,
        drain_s=600.0,
        popularity=draw(st.sampled_from(["zipf", "power"])),
        power_alpha=draw(st.floats(0.05, 1.0)),
        seed=draw(st.integers(0, 10_000)),
    )
    if draw(st.booleans()) and sc.kv_allocator == "paged":
        sc = sc.replace(kv_reservation="on_demand")
    if sc.max_vram_budget_gb() < sc.vram_budget_gb:
        sc = sc.replace(vram_budget_gb=max(amax * 1.01, sc.max_vram_budget_gb() * 0.9))
    return sc


def _check_invariants(r):
    req, s, sc = r.requests, r.summary, r.scenario
    # refused at arrival only under a cap, never served; the cap is never exceeded at an arrival
    assert req.dropped.sum() == s["dropped_total"]
    assert not req.dropped.any() or (sc.max_in_system > 0 and sc.arrival_process != "closed")
    assert not req[req.dropped].ttft_ms.notna().any()
    req = req[~req.dropped]
    # every request completes (or is reported as not completed, with why)
    if not req.completed.all():
        assert s["stopped_at_horizon"] or s["deadlock"]
    assert not s["deadlock"]
    done = req[req.completed]
    # no first token before arrival (plus its own load), no negative components
    assert (done.ttft_ms >= -1e-9).all()
    assert (done.load_wait_ms >= -1e-9).all() and (done.queue_ms >= -1e-6).all()
    assert (done.prefill_ms >= -1e-6).all()
    np.testing.assert_allclose(done.frontend_ms + done.queue_ms + done.load_wait_ms + done.prefill_ms, done.ttft_ms,
                               atol=1e-6)
    assert (done.frontend_ms == sc.frontend_ms).all()
    sizes = np.asarray(sc.adapter_sizes())
    min_load_ms = np.array([load_seconds(b, sc.pcie_gbps, sc.load_latency_ms) * 1e3 for b in sizes])
    own = done[done.loaded]
    assert (own.ttft_ms.to_numpy() + 1e-6 >= min_load_ms[own.adapter.to_numpy()]).all()
    assert (done.finish_s >= done.arrival_s).all()
    # memory: adapters plus KV never exceed their memory
    if s["memory_mode"] == "static":
        assert s["peak_adapter_bytes"] <= s["adapter_capacity_bytes"] + 1e-6
        assert s["peak_kv_bytes"] <= s["kv_capacity_bytes"] + 1e-6
    else:
        assert s["peak_gpu_dynamic_bytes"] <= s["pool_bytes"] + 1e-6
    # no adapter is evicted while a running request uses it (on the same GPU: a fleet's replicas evict apart)
    ev = r.events[r.events.kind == "evict"]
    if len(ev) and len(done):
        for (k, a), g in ev.groupby(["replica", "adapter"]):
            # (a preempted request leaves the batch for a while: its adapter may go meanwhile)
            rr = req[(req.adapter == a) & (req.preemptions == 0) & (req.replica == k)]
            # running interval: [admit, finish); admit = arrival + queue (+ load stalls waited out queued)
            adm = rr.admit_s.fillna(np.inf).to_numpy()  # never admitted: never running
            started = rr.queue_ms.notna().to_numpy()
            assert (adm[started] + 1e-9 >= (rr.arrival_s + rr.queue_ms / 1e3).to_numpy()[started]).all()
            fin = rr.finish_s.fillna(np.inf).to_numpy()
            for t in g.t_s.to_numpy():
                inside = (adm < t - 1e-12) & (t < fin - 1e-12)
                assert not inside.any(), f"adapter {a} evicted at {t} while in use"
    # load/evict counts consistent
    n_load = (r.events.kind == "swap").sum()
    if not s["events_truncated"]:
        assert n_load == s["loads_total"]
        assert req.loaded.sum() <= n_load


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_hold_on_random_scenarios(sc):
    _check_invariants(simulate(sc))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(strategies=("naive",)), st.integers(1, 1_000_000))
def test_oracle_never_loads_more_than_naive_or_hot_set(sc, seed):
    """Serial service (batch 1, sync) gives every policy the same reference order.

    Belady is optimal for equal-sized items only, so adapters here share one rank
    (with mixed sizes the oracle is a heuristic, see docs/model.md).
    """
    sc = sc.replace(max_batch_size=1, load_mode="sync", memory_mode="static", arrival_process="poisson",
                    max_loras=0, seed=seed, adapter_ranks=(), max_in_system=0)
    if sc.max_adapter_bytes() > sc.vram_budget_gb * presets.GIB:
        sc = sc.replace(vram_budget_gb=sc.max_adapter_bytes() * 1.5 / presets.GIB)
    loads = {}
    for s in ("naive", "hot_set", "oracle"):
        try:
            r = simulate(sc.replace(strategy=s))
        except ValueError:
            continue  # hot_set may not fit (no room for one pin plus a swap slot)
        assert r.requests.completed.all()
        loads[s] = r.summary["loads_total"]
    assert loads["oracle"] <= loads["naive"]
    if "hot_set" in loads:
        assert loads["oracle"] <= loads["hot_set"]


def test_determinism_same_seed_same_requests():
    sc = legacy_preset("default", duration_s=30.0, warmup_s=2.0, strategy="batch")
    a, b = simulate(sc), simulate(sc)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.timeseries, b.timeseries)
    c = simulate(sc.replace(seed=1))
    assert not a.requests.arrival_s.equals(c.requests.arrival_s)


def test_common_random_numbers_across_strategies():
    sc = legacy_preset("default", duration_s=30.0, warmup_s=2.0)
    cols = ["arrival_s", "adapter", "prompt_tokens", "output_tokens"]
    base = simulate(sc.replace(strategy="naive")).requests[cols]
    for s in STRATEGIES:
        got = simulate(sc.replace(strategy=s)).requests[cols]
        if STRATEGIES[s].single_adapter:  # the baseline maps every request onto adapter 0
            assert (got.adapter == 0).all()
            got = got.assign(adapter=base.adapter)
        pd.testing.assert_frame_equal(got, base)


def test_thread_safety_eight_threads_match_serial():
    scs = [legacy_preset("default", duration_s=40.0, warmup_s=2.0, strategy=s, seed=i)
           for i, s in enumerate(list(STRATEGIES) + ["naive", "batch"])]
    serial = [simulate(s).requests for s in scs]
    out = [None] * len(scs)

    def work(i):
        out[i] = simulate(scs[i]).requests

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(scs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(serial, out):
        pd.testing.assert_frame_equal(a, b)


def test_closed_loop_keeps_concurrency_clients_busy():
    sc = legacy_preset("default", arrival_process="closed", concurrency=8, duration_s=20.0,
                              warmup_s=2.0, strategy="vllm")
    r = simulate(sc)
    ts = r.timeseries[(r.timeseries.t_s > 3) & (r.timeseries.t_s < 19)]
    # every client always has exactly one request in the system
    np.testing.assert_allclose(ts.in_system, 8.0, rtol=1e-6)


# ---- the source simulator's headline regimes (see docs/findings.md for what holds and why)

def _seed1(**kw):
    return legacy_preset("seed1-rtx3090", **{"duration_s": 30.0, "warmup_s": 3.0, **kw})


def test_seed1_high_rate_batch_vs_naive_as_the_model_says():
    """Source claim: at 64 req/s batch beats naive on TTFT and swap rate.

    Our continuous-batching model does not reproduce it: holding arrivals for the
    window costs ~window/2 of TTFT, and with ~100 resident slots a 25 ms window rarely
    groups two requests for the same cold adapter, so swaps barely fall.  We assert
    what the model does: batch's swap rate is within 10% of naive's and its mean TTFT
    is higher (findings.md explains).
    """
    naive, batch = (simulate(_seed1(strategy=s)).summary for s in ("naive", "batch"))
    assert batch["ttft_mean_ms"] > naive["ttft_mean_ms"]
    assert abs(batch["swap_rate"] - naive["swap_rate"]) < 0.1 * naive["swap_rate"]


def test_seed1_low_rate_zipf_hot_set_has_lowest_swap_rate():
    """Source claim (holds): at 4 req/s with Zipf skew hot_set has the lowest swap rate of the three."""
    rates = {s: simulate(_seed1(strategy=s, arrival_rate_rps=4.0, duration_s=120.0)).summary["swap_rate"]
             for s in ("naive", "hot_set", "batch")}
    assert rates["hot_set"] < rates["naive"] and rates["hot_set"] < rates["batch"]


@pytest.mark.parametrize("max_loras,rate,ranks", [(4, 40.0, (8, 16)), (8, 25.0, (16,)), (2, 60.0, (8,))])
def test_vllm_fast_skip_equals_the_full_queue_scan(max_loras, rate, ranks):
    """The O(slots) early stop of the skip scan (IP_FASTSKIP) admits exactly what scanning the
    whole waiting queue admits, on overloaded many-adapter runs where the queue is deep."""
    from engine import loop as L
    from engine import sim
    from engine.workload import generate
    sc = legacy_preset("default", strategy="vllm", max_loras=max_loras, num_adapters=64,
                              adapter_ranks=ranks, adapter_rank=max(ranks), arrival_rate_rps=rate,
                              zipf_s=0.6, duration_s=40.0, warmup_s=0.0, drain_s=0.0, seed=11)
    wl = generate(sc)
    out = []
    for fast in (1, 0):
        arr = sim._build(sc, wl)
        arr["ip"][L.IP_FASTSKIP] = fast
        L.run_loop(*[arr[k] for k in sim.LOOP_ARGS])
        out.append(arr)
    a, b = out
    assert a["S_i"][L.SI_NWAIT] > 50  # the queue did build up
    from test_fast_paths import _assert_same  # (every state array but the caches and queue indices)
    _assert_same(a, b)


@pytest.mark.parametrize("strategy,budget_gb", [("naive", 1.0), ("vllm", 0.07), ("slora", 0.2)])
def test_on_demand_kv_admits_more_and_preempts_under_pressure(strategy, budget_gb):
    """KV for about 4 whole requests: reserving prompt + output caps the batch there;
    on-demand growth (vLLM; S-LoRA's unified pool) runs more at once, and when memory fills
    it preempts the latest admitted request, which later recomputes and still completes."""
    from engine.presets import GIB, kv_bytes_per_token
    base = legacy_preset("default")
    kv_tok = kv_bytes_per_token(base.model_spec)
    sc = base.replace(arrival_process="closed", concurrency=16, max_batch_size=16, num_adapters=4,
                      prompt_tokens=64, output_tokens=192, length_dist="fixed", kv_block_tokens=16,
                      kv_cache_gb=4 * 16 * 16 * kv_tok / GIB, vram_budget_gb=budget_gb, duration_s=30.0,
                      warmup_s=0.0, drain_s=60.0, strategy=strategy, seed=1)
    full = simulate(sc)
    od = simulate(sc.replace(kv_reservation="on_demand"))
    assert full.timeseries.batch_size.max() <= 5 + 1e-9
    assert full.summary["preemptions"] == 0
    assert od.timeseries.batch_size.max() > full.timeseries.batch_size.max() + 2
    assert od.summary["preemptions"] > 0
    done = od.requests[od.requests.completed]
    assert od.requests.completed.all() and (done.preemptions > 0).any()
    assert od.summary["throughput_tok_s"] > full.summary["throughput_tok_s"]
    _check_invariants(od)  # incl. peak KV (+ adapters) within capacity (the pool)
    if od.summary["load_mode"] == "sync":
        # a request's TTFT parts are settled at its first token: requests whose first tokens came from
        # the same step share that step's load stall, whatever happened to them after (preemption)
        first = (done.arrival_s + (done.ttft_ms - done.frontend_ms) / 1e3).round(9)
        own_stall = (done.load_wait_ms - done.load_wait_queued_ms).round(9)
        assert (own_stall.groupby(first).nunique() == 1).all()
        assert od.summary["loads_total"] > 4 or strategy != "vllm"


def test_on_demand_kv_needs_the_paged_allocator():
    base = legacy_preset("default", kv_reservation="on_demand")
    with pytest.raises(ValueError, match="kv_reservation.*kv_allocator"):
        base.replace(kv_allocator="contiguous").validate()
    base.replace(strategy="slora").validate()  # unified memory grows KV on demand too
    with pytest.raises(ValueError, match="kv_reservation: invalid value 'lazy'"):
        base.replace(kv_reservation="lazy").validate()
