"""The fleet: num_replicas GPUs behind a router (engine/fleet.py, engine/routers.py, docs/model.md "Fleet").

Each router is checked against a reference computed from the run's own output (the outstanding
requests of every replica at each arrival, the adapters each replica held then), the resumable
loop against one uninterrupted call, the fleet machinery against the single-GPU loop, and random
routing against Poisson splitting (M/D/1 per replica).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from frames import frames_equal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import ROUTERS, STRATEGIES, Scenario, fleet, simulate
from engine import loop as L
from engine import sim as S
from engine.metrics import adapter_duplication
from engine.policies import EVICT_BELADY
from engine.routers import hash_ring
from engine.workload import Workload, generate

#: A small, loaded scenario with swaps, queues and variable lengths (explicit: not tied to a preset).
BASE = dict(gpu="a100-80gb", model="llama-2-7b", vram_budget_gb=1.0, gpu_mem_util=0.9, reserve_gb=2.0,
            num_adapters=60, max_loras=6, zipf_s=1.0, prompt_tokens=200, output_tokens=40,
            length_dist="lognormal", length_spread=0.6, arrival_rate_rps=30.0, duration_s=8.0, warmup_s=1.0,
            strategy="vllm")
#: One adapter, batch 1, one output token, fixed service of 1 ms: an M/D/1 queue per GPU.
SERIAL = dict(gpu="a100-80gb", model="llama-2-7b", service_mode="fixed", max_batch_size=1, output_tokens=1,
              prompt_tokens=100, prefill_ms_per_token=0.01, step_overhead_ms=0.0, lora_ms_per_adapter=0.0,
              load_latency_ms=0.0, num_adapters=1, adapter_rank=16, vram_budget_gb=1.0, gpu_mem_util=0.9,
              reserve_gb=1.0, load_mode="sync", strategy="naive", drain_s=600.0)
STATIC = [r for r, v in ROUTERS.items() if not v.stateful]
CONFIGS = [dict(), dict(kv_allocator="contiguous", memory_mode="unified", load_mode="async")]


def _sc(**kw) -> Scenario:
    return Scenario(**{**BASE, **kw})


def _fleet_direct(sc: Scenario, lockstep: bool = True) -> S.SimResult:
    """The fleet path run on ``sc`` as it is (also with num_replicas = 1, which ``simulate`` sends to the
    single-GPU loop instead)."""
    sc = sc.validate()
    wl = generate(sc)
    empty = np.zeros(0, np.int64)
    template = S._build(sc, Workload(np.zeros(0), empty, empty, empty))
    return S._fleet_result(sc, fleet.run(sc, wl, template, S.MAX_EVENTS, lockstep=lockstep))


def _same_result(a: S.SimResult, b: S.SimResult, skip_summary=()) -> None:
    frames_equal(a, b, skip_summary, replicas=True)


# ------------------------------------------------------------------------------ one replica, resumable loop
@pytest.mark.parametrize("cfg", CONFIGS, ids=["static-paged", "unified-contiguous-async"])
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_one_replica_fleet_reproduces_the_single_gpu_run(strategy, cfg):
    """The fleet machinery (lockstep advance, routing, injection) with one replica gives the single-GPU
    loop's results bit for bit, for every strategy; simulate() with num_replicas = 1 is that loop."""
    try:
        sc = _sc(strategy=strategy, **cfg).validate()
    except ValueError:
        pytest.skip("configuration not valid for this strategy")
    one = simulate(sc)
    router = "round_robin" if STRATEGIES[strategy].evict == EVICT_BELADY else "least_loaded"
    direct = _fleet_direct(sc.replace(router=router))
    assert len(one.requests) > 100 and one.summary["loads_total"] > 0
    _same_result(one, direct, skip_summary=("adapter_duplication",))
    assert direct.summary["adapter_duplication"] == pytest.approx(1.0)
    for r in ROUTERS:  # the router is irrelevant to one GPU
        _same_result(one, simulate(sc.replace(router=r)))


def _chunked_equal(sc: Scenario, limits) -> None:
    wl = generate(sc)
    ref = S._build(sc, wl)
    L.run_loop(*(ref[k] for k in S.LOOP_ARGS))
    arr = S._build(sc, wl)
    arr["S_i"][L.SI_FLEET] = 1
    arr["S_i"][L.SI_NKNOWN] = len(wl)
    for t in limits:
        arr["S_f"][L.SF_TLIMIT] = t
        assert L.run_loop(*(arr[k] for k in S.LOOP_ARGS)) in (L.PH_TOP, L.PH_IDLE)
        assert arr["S_f"][L.SF_T] >= t or arr["S_i"][L.SI_PHASE] == L.PH_IDLE
    arr["S_f"][L.SF_TLIMIT] = L._INF
    assert L.run_loop(*(arr[k] for k in S.LOOP_ARGS)) == L.PH_DONE
    control_i = [L.SI_FLEET, L.SI_NKNOWN]
    control_f = [L.SF_TLIMIT, L.SF_WAKE]
    for k, v in ref.items():
        w = arr[k]
        if k == "S_i":
            v, w = np.delete(v, control_i), np.delete(w, control_i)
        elif k == "S_f":
            v, w = np.delete(v, control_f), np.delete(w, control_f)
        if isinstance(v, np.ndarray):
            assert np.array_equal(v, w, equal_nan=True), k


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategy=st.sampled_from(list(STRATEGIES)), cfg=st.sampled_from(CONFIGS),
       limits=st.lists(st.floats(0.0, 12.0, allow_nan=False), min_size=1, max_size=40))
def test_loop_run_in_chunks_equals_one_call(strategy, cfg, limits):
    """Advancing to T1 < T2 < ... (any times, through steps, stalls and idle gaps) and then to the end
    leaves every array exactly as one uninterrupted call does."""
    try:
        sc = _sc(strategy=strategy, **cfg).validate()
    except ValueError:
        return
    _chunked_equal(sc, sorted(limits))


def test_loop_run_in_many_small_chunks_with_a_closed_loop():
    sc = _sc(arrival_process="closed", concurrency=8).validate()
    wl = generate(sc, n_closed=2000)
    ref = S._build(sc, wl)
    L.run_loop(*(ref[k] for k in S.LOOP_ARGS))
    arr = S._build(sc, wl)
    arr["S_i"][L.SI_FLEET] = 1
    arr["S_i"][L.SI_NKNOWN] = len(wl)
    for t in np.arange(0.0, 10.0, 0.0137):
        arr["S_f"][L.SF_TLIMIT] = t
        L.run_loop(*(arr[k] for k in S.LOOP_ARGS))
    arr["S_f"][L.SF_TLIMIT] = L._INF
    L.run_loop(*(arr[k] for k in S.LOOP_ARGS))
    for k in ("R_i", "R_f", "A_i", "ts", "ev_t", "ev_i"):
        assert np.array_equal(ref[k], arr[k], equal_nan=True), k


# ------------------------------------------------------------------------------ fleet machinery
@pytest.mark.parametrize("router", STATIC)
@pytest.mark.parametrize("strategy", ["naive", "batch", "oracle", "slora"])
def test_static_router_shortcut_equals_lockstep(router, strategy):
    """A router that reads no state runs each replica on its own; the lockstep gives the same result."""
    sc = _sc(strategy=strategy, num_replicas=3, router=router, arrival_rate_rps=60.0)
    _same_result(_fleet_direct(sc, lockstep=False), _fleet_direct(sc, lockstep=True))


@pytest.mark.parametrize("router", STATIC)
def test_static_router_replica_equals_a_single_gpu_on_its_requests(router):
    """Replica k of a static router is one GPU fed the requests routed to it (as a trace)."""
    sc = _sc(num_replicas=3, router=router, arrival_rate_rps=60.0)
    r = simulate(sc)
    wl = generate(sc)
    cols = [c for c in r.requests.columns if c != "replica"]
    for k in range(3):
        m = (r.requests.replica == k).to_numpy()
        one = simulate(sc.replace(num_replicas=1), trace=Workload(wl.arrival_s[m], wl.adapter[m],
                                                                   wl.prompt_tokens[m], wl.output_tokens[m]))
        pd.testing.assert_frame_equal(r.requests[m].reset_index(drop=True)[cols], one.requests[cols],
                                      check_exact=True)
        ev = r.events[r.events.replica == k].reset_index(drop=True)
        pd.testing.assert_frame_equal(ev.drop(columns="replica"), one.events.drop(columns="replica"),
                                      check_exact=True)


@pytest.mark.parametrize("router", ["least_loaded", "lora_affinity"])
def test_capacity_growth_changes_nothing(router, monkeypatch):
    """A state-reading router may send a replica more requests than it has room for: the fleet grows
    the replica's arrays and resumes.  Starting from room for one request changes no result."""
    sc = _sc(num_replicas=3, router=router, arrival_rate_rps=20.0)
    ref = _fleet_direct(sc)
    monkeypatch.setattr(fleet, "initial_capacity", lambda n, nr: 1)
    _same_result(ref, _fleet_direct(sc))


# ------------------------------------------------------------------------------ routers
def test_random_routing_splits_poisson_into_md1_queues():
    """Random routing thins a Poisson stream into independent Poisson streams: 4 serial GPUs at 4 lambda
    wait as one GPU at lambda (Pollaczek-Khinchine); joining the shortest queue waits far less."""
    svc = 100 * 0.01e-3
    rho = 0.7
    lam = rho / svc
    pk = rho * svc / (2 * (1 - rho)) * 1e3
    waits = {"one": [], "random": [], "least_loaded": []}
    for seed in range(2):
        one = Scenario(**SERIAL, arrival_rate_rps=lam, duration_s=60.0, warmup_s=2.0, seed=seed)
        runs = {"one": simulate(one)}
        for router in ("random", "least_loaded"):
            runs[router] = simulate(one.replace(num_replicas=4, router=router, arrival_rate_rps=4 * lam,
                                                duration_s=15.0))
        for name, r in runs.items():
            q = r.requests[(r.requests.arrival_s >= 2.0) & (r.requests.arrival_s < r.scenario.duration_s)]
            assert q.completed.all()
            waits[name].append(q.queue_ms.to_numpy())
    w = {k: np.concatenate(v).mean() for k, v in waits.items()}
    assert abs(w["random"] - pk) / pk < 0.05, (w, pk)
    assert abs(w["random"] - w["one"]) / pk < 0.06, (w, pk)
    assert w["least_loaded"] < 0.5 * w["random"], w


@settings(max_examples=12, deadline=None)
@given(n=st.integers(2, 8), seed=st.integers(0, 1000))
def test_round_robin_splits_counts_within_one(n, seed):
    r = simulate(_sc(num_replicas=n, router="round_robin", seed=seed, duration_s=3.0, warmup_s=0.5))
    rep = r.requests.replica.to_numpy()
    assert np.array_equal(rep, np.arange(len(rep)) % n)
    counts = np.bincount(rep, minlength=n)
    assert counts.max() - counts.min() <= 1


def test_adapter_hash_is_a_static_partition_stable_under_growth():
    sc = _sc(num_adapters=300, zipf_s=0.6, router="adapter_hash", arrival_rate_rps=60.0)
    maps = {}
    for n in (3, 4):
        r = simulate(sc.replace(num_replicas=n))
        per = r.requests.groupby("adapter").replica.agg(["nunique", "first"])
        assert (per["nunique"] == 1).all()  # every request of an adapter on one replica
        assert np.array_equal(per["first"].to_numpy(), hash_ring(n, 300)[per.index.to_numpy()])
        maps[n] = per["first"]
    common = maps[3].index.intersection(maps[4].index)
    moved = maps[3][common] != maps[4][common]
    assert (maps[4][common][moved] == 3).all()  # adapters only move to the new replica
    # popularity decides nothing: the partition is a function of (num_replicas, adapter id)
    r = simulate(sc.replace(num_replicas=3, zipf_s=1.4, seed=5))
    assert np.array_equal(r.requests.replica.to_numpy(), hash_ring(3, 300)[r.requests.adapter.to_numpy()])


@pytest.mark.parametrize("n", range(1, 13))
def test_consistent_hashing_remaps_about_one_in_n_plus_one(n):
    a, b = hash_ring(n, 4000), hash_ring(n + 1, 4000)
    moved = a != b
    assert set(b[moved].tolist()) <= {n}
    assert 0.5 / (n + 1) <= moved.mean() <= 1.5 / (n + 1), moved.mean()
    share = np.bincount(b, minlength=n + 1) / 4000 * (n + 1)
    assert share.min() > 0.6 and share.max() < 1.45, share  # virtual nodes spread the load


def _outstanding(req: pd.DataFrame, n_rep: int) -> np.ndarray:
    """Reference: out[i, k] = requests routed to k before request i and not finished by its arrival."""
    a = req.arrival_s.to_numpy()
    f = np.where(req.completed.to_numpy(), req.finish_s.to_numpy(), np.inf)
    rep = req.replica.to_numpy()
    before = np.tril(np.ones((len(a), len(a)), bool), -1)  # j < i (arrival order)
    busy = before & (f[None, :] > a[:, None])
    return np.stack([(busy & (rep[None, :] == k)).sum(1) for k in range(n_rep)], axis=1)


def _held(r, n_rep: int) -> np.ndarray:
    """Reference: held[i, k] = replica k held request i's adapter (resident or loading) just before its
    arrival: its last load/evict event of that adapter strictly before the arrival was a load."""
    ev = r.events[r.events.kind.isin(["swap", "evict"])]
    last = {key: (g.t_s.to_numpy(), (g.kind == "swap").to_numpy()) for key, g in ev.groupby(["replica", "adapter"])}
    req = r.requests
    out = np.zeros((len(req), n_rep), bool)
    for i, (a, t) in enumerate(zip(req.adapter.to_numpy(), req.arrival_s.to_numpy())):
        for k in range(n_rep):
            if (k, a) in last:
                ts, is_load = last[(k, a)]
                j = np.searchsorted(ts, t, side="left") - 1
                out[i, k] = j >= 0 and is_load[j]
    return out


def test_least_loaded_picks_the_fewest_outstanding_lowest_index():
    r = simulate(_sc(num_replicas=3, router="least_loaded", arrival_rate_rps=75.0, duration_s=10.0))
    out = _outstanding(r.requests, 3)
    chosen = r.requests.replica.to_numpy()
    assert len(chosen) > 500 and out.max() > 5  # queues form
    assert np.array_equal(chosen, out.argmin(1))  # fewest outstanding, ties to the lowest index
    assert (out.max(1) > out.min(1)).mean() > 0.3  # the choice was often not a tie


@pytest.mark.parametrize("slack", [0, 2, 1000])
def test_lora_affinity_follows_its_rule(slack):
    r = simulate(_sc(num_replicas=3, router="lora_affinity", affinity_load_slack=slack, arrival_rate_rps=70.0,
                     duration_s=8.0))
    out = _outstanding(r.requests, 3)
    held = _held(r, 3)
    chosen = r.requests.replica.to_numpy()
    ok = out <= out.min(1, keepdims=True) + slack
    cand = np.where(ok & held, out, np.iinfo(np.int64).max)
    expect = np.where((ok & held).any(1), cand.argmin(1), out.argmin(1))
    assert np.array_equal(chosen, expect)
    assert (ok & held).any(1).mean() > 0.3  # affinity decided often
    if slack == 0:  # no holder among the least loaded: the least loaded's choice
        none = ~(ok & held).any(1)
        assert none.sum() > 20 and np.array_equal(chosen[none], out.argmin(1)[none])


def test_lora_affinity_loads_less_than_least_loaded_on_a_skewed_fleet():
    """Many adapters, Zipf popularity, 8 slots per GPU: routing to replicas already holding the adapter
    loads a third fewer adapters than balancing on load alone."""
    for seed in (0, 1):
        sc = _sc(num_adapters=200, max_loras=8, length_dist="fixed", prompt_tokens=256, output_tokens=64,
                 arrival_rate_rps=24.0, duration_s=30.0, warmup_s=2.0, num_replicas=4, seed=seed)
        ll = simulate(sc.replace(router="least_loaded")).summary
        af = simulate(sc.replace(router="lora_affinity")).summary
        assert af["loads_total"] < 0.8 * ll["loads_total"], (af["loads_total"], ll["loads_total"])
        assert af["swap_rate"] < ll["swap_rate"] - 0.1
        assert af["adapter_duplication"] < ll["adapter_duplication"]


# ------------------------------------------------------------------------------ results, conservation
@pytest.mark.parametrize("router", list(ROUTERS))
def test_every_request_is_served_by_one_replica_and_figures_add_up(router):
    sc = _sc(num_replicas=3, router=router, arrival_rate_rps=50.0)
    r = simulate(sc)
    s = r.summary
    assert len(r.requests) == len(generate(sc))
    assert r.requests.replica.between(0, 2).all()
    assert s["num_replicas"] == 3 and list(r.replicas.replica) == [0, 1, 2]
    for key in ("requests", "completed", "loads_total", "evictions_total"):
        assert r.replicas[key].sum() == s[key], key
    assert r.replicas.throughput_req_s.sum() == pytest.approx(s["throughput_req_s"])
    assert r.replicas.gpu_busy_frac.mean() == pytest.approx(s["gpu_busy_frac"])
    assert s["load_imbalance"] == pytest.approx(r.replicas.requests.max() / r.replicas.requests.mean())
    assert s["swap_events"] == (r.events.kind == "swap").sum()
    assert np.array_equal(r.events.groupby("replica").size().reindex(range(3), fill_value=0).to_numpy(),
                          [(r.events.replica == k).sum() for k in range(3)])
    assert r.events.t_s.is_monotonic_increasing
    by = r.timeseries_by_replica
    assert len(by) == 3 * len(r.timeseries) and list(by.columns) == ["replica", *r.timeseries.columns]
    for col in ("queue_len", "batch_size", "resident_adapters"):
        assert np.allclose(by.groupby("t_s")[col].sum().to_numpy(), r.timeseries[col].to_numpy())
    for col in ("gpu_busy_frac", "kv_used_frac"):
        assert np.allclose(by.groupby("t_s")[col].mean().to_numpy(), r.timeseries[col].to_numpy())
    # the fleet's TTFT percentiles are over all requests
    done = r.requests[r.requests.completed & (r.requests.arrival_s >= sc.warmup_s)]
    assert s["ttft_p99_ms"] == pytest.approx(np.percentile(done.ttft_ms, 99))


def test_fleet_runs_are_deterministic_and_share_the_request_stream():
    sc = _sc(num_replicas=3, arrival_rate_rps=50.0)
    stream = None
    for router in ROUTERS:
        a, b = simulate(sc.replace(router=router)), simulate(sc.replace(router=router))
        _same_result(a, b)
        cols = a.requests[["arrival_s", "adapter", "prompt_tokens", "output_tokens"]]
        if stream is None:
            stream = cols
            wl = generate(sc)
            assert np.array_equal(cols.arrival_s, wl.arrival_s) and np.array_equal(cols.adapter, wl.adapter)
        pd.testing.assert_frame_equal(cols, stream, check_exact=True)
    r1, r2 = simulate(sc.replace(router="random")), simulate(sc.replace(router="random", seed=1))
    assert not np.array_equal(r1.requests.replica, r2.requests.replica[:len(r1.requests)])


def test_single_gpu_result_has_the_fleet_columns():
    r = simulate(_sc())
    assert (r.requests.replica == 0).all() and (r.events.replica == 0).all()
    assert r.summary["num_replicas"] == 1 and r.summary["load_imbalance"] == 1.0
    assert r.summary["adapter_duplication"] == 1.0
    assert len(r.replicas) == 1
    for c in r.replicas.columns[1:]:
        assert r.replicas[c].iloc[0] == r.summary[c], c
    pd.testing.assert_frame_equal(r.timeseries_by_replica.drop(columns="replica"), r.timeseries)


def test_shipped_trace_replays_on_a_fleet():
    sc = _sc(trace="azure-conv-2023", duration_s=60.0, warmup_s=5.0, trace_time_scale=2.0, max_batched_tokens=16384,
             num_replicas=2, router="least_loaded")
    r = simulate(sc)
    assert len(r.requests) == len(sc.trace_requests()[0]) and set(r.requests.replica) == {0, 1}


# ------------------------------------------------------------------------------ duplication
def _dup_brute(t, delta, adapter, w0, w1, grid=20001):
    ts = np.linspace(w0, w1, grid)[:-1] + (w1 - w0) / (grid - 1) / 2
    copies = np.zeros(len(ts))
    held = np.zeros(len(ts))
    for a in np.unique(adapter):
        m = adapter == a
        cum = np.cumsum(delta[m])
        j = np.searchsorted(t[m], ts, side="right") - 1
        c = np.where(j >= 0, cum[np.maximum(j, 0)], 0)
        copies += c
        held += c > 0
    return copies.sum() / held.sum() if held.sum() else math.nan


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.floats(0, 10, allow_nan=False)), max_size=30))
def test_adapter_duplication_is_mean_copies_per_held_adapter(changes):
    """D = integral of copies / integral of distinct held adapters, against sampling on a fine grid."""
    # build a valid history: per (replica, adapter) alternate load / evict in time order
    t, d, a = [], [], []
    for rep in range(3):
        for ad in range(4):
            times = sorted(x for (aa, rr, x) in changes if aa == ad and rr == rep)
            for j, x in enumerate(times):
                t.append(x)
                d.append(1 if j % 2 == 0 else -1)
                a.append(ad)
    t, d, a = np.array(t, float), np.array(d, np.int64), np.array(a, np.int64)
    o = np.argsort(t, kind="stable")
    t, d, a = t[o], d[o], a[o]
    got = adapter_duplication(t, d, a, 2.0, 9.0)
    ref = _dup_brute(t, d, a, 2.0, 9.0)
    if math.isnan(ref):
        assert math.isnan(got) or got == pytest.approx(1.0, rel=0.01)
    else:
        assert got == pytest.approx(ref, rel=0.01, abs=0.01)


def test_adapter_duplication_of_a_partition_is_one_and_of_replication_is_n():
    sc = _sc(num_adapters=4, max_loras=0, arrival_rate_rps=40.0, num_replicas=3)
    assert simulate(sc.replace(router="adapter_hash")).summary["adapter_duplication"] == pytest.approx(1.0)
    # every replica soon holds all 4 adapters (they all fit): about 3 copies each
    assert simulate(sc.replace(router="random")).summary["adapter_duplication"] == pytest.approx(3.0, abs=0.05)


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("kw, match", [
    (dict(router="bogus"), r"router: invalid value 'bogus'; allowed: round_robin, random, least_loaded, "
                           r"lora_affinity, adapter_hash"),
    (dict(num_replicas=0), r"num_replicas: invalid value 0; allowed: an integer in \[1, 64\]"),
    (dict(num_replicas=65), r"num_replicas: invalid value 65; allowed: an integer in \[1, 64\]"),
    (dict(num_replicas=2.5), r"num_replicas: invalid value 2.5; allowed: an integer in \[1, 64\]"),
    (dict(num_replicas="4"), r"num_replicas: invalid value '4'; allowed: an integer in \[1, 64\]"),
    (dict(num_replicas=True), r"num_replicas: invalid value True; allowed: an integer"),
    (dict(affinity_load_slack=-1), r"affinity_load_slack: invalid value -1; allowed: an integer in \[0, "),
    (dict(num_replicas=2, arrival_process="closed"), r"num_replicas: invalid value 2; allowed: 1 with "
                                                     r"arrival_process 'closed'"),
    (dict(num_replicas=2, strategy="oracle", router="least_loaded"),
     r"router: invalid value 'least_loaded'; allowed: round_robin, random, adapter_hash with strategy 'oracle'"),
    (dict(num_replicas=11, num_adapters=100_000), r"num_replicas: invalid value 11; allowed: at most 10 with "
                                                  r"num_adapters 100000"),
])
def test_invalid_fleet_fields_name_field_value_and_allowed(kw, match):
    with pytest.raises(ValueError, match=match):
        simulate(_sc(**kw))


def test_fleet_fields_coerce_from_json_and_urls():
    sc = Scenario.from_dict({**BASE, "num_replicas": "4", "router": "lora_affinity", "affinity_load_slack": "3"})
    assert (sc.num_replicas, sc.router, sc.affinity_load_slack) == (4, "lora_affinity", 3)
    assert Scenario.from_json(sc.to_json()) == sc
    with pytest.raises(ValueError, match=r"num_replicas: invalid value '4.5'; allowed: an integer"):
        Scenario.from_dict({"num_replicas": "4.5"})
    assert Scenario().num_replicas == 1 and Scenario().router == "round_robin"


@pytest.mark.parametrize("router,kw", [("least_loaded", {}), ("adapter_hash", dict(strategy="slora")),
                                       ("lora_affinity", dict(arrival_rate_rps=400.0, duration_s=6.0, warmup_s=1.0))])
def test_replica_rows_are_each_replicas_own_summary(router, kw):
    """SimResult.replicas (metrics.replica_row, the short path) equals metrics.summarize over each replica's
    requests and counters, column for column (overload included: unfinished requests, NaN-free rows)."""
    from engine import fleet as F
    from engine import sim as S
    from engine.metrics import REPLICA_COLUMNS, summarize
    sc = _sc(num_replicas=3, router=router, **kw).validate()
    r = simulate(sc)
    st = S._simulate_arrays(sc, None)[2]
    for k, v in enumerate(F.replica_arrays(st)):
        m = (r.requests.replica == k).to_numpy()
        full = summarize(sc, {c: r.requests[c].to_numpy()[m] for c in r.requests.columns}, S._counters(sc, v))
        row = r.replicas.iloc[k]
        for c in REPLICA_COLUMNS[1:]:
            assert row[c] == full[c] or (np.isnan(row[c]) and np.isnan(full[c])), (k, c)
