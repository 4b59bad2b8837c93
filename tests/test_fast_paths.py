"""The loop's shortcuts against the references they replace, every state array equal bit for bit:

* runs of pure-decode steps (loop._decode_run, IP_DECODE_RUN) against every step through the scheduler;
* on-demand KV: decode runs that add the blocks the scheduler's _grow_kv would (IP_RUN_GROW) against runs that
  stop at the first block needed;
* the no-room memo of a scheduling pass (SF_NOROOM, off with IP_FASTSKIP = 0) against searching for
  victims on every request (static memory), with loop._surely_noslot's answers in place of the calls it saves;
* and two Python shortcuts of a dashboard rerun: Scenario.to_dict against dataclasses.asdict, the error-band
  lookup against filtering its table."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legacy import legacy_preset

from engine import Scenario, sim
from engine import loop as L
from engine.policies import STRATEGIES
from engine.workload import generate

_STATE = ("R_i", "R_f", "A_i", "A_f", "S_i", "S_f", "ts", "ev_t", "ev_i", "heap_t", "heap_a")


def _both(sc: Scenario, flag=L.IP_DECODE_RUN, wl=None):
    """The run of ``sc`` (or of the workload ``wl``) with the loop flag ``flag`` on, then with it off."""
    sc = sc.validate()
    if wl is None:
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
        if k == "S_i":  # (the last scheduling pass's memo for blocked runs, and the count of passes: the references
            # make more; the wait queue's tail: a compacted queue is shorter, loop._compact_queue)
            x, y = (np.delete(v, [L.SI_BLOCKED, L.SI_PASSES, L.SI_WQTAIL, L.SI_WQHEAD]) for v in (x, y))
        if k == "R_i":  # (each request's place in the wait queue: the same order, other indices once compacted)
            x, y = np.delete(x, L.RI_WQPOS, axis=0), np.delete(y, L.RI_WQPOS, axis=0)
        if k == "S_f":
            x, y = np.delete(x, [L.SF_QNEXT, L.SF_QGOLD]), np.delete(y, [L.SF_QNEXT, L.SF_QGOLD])
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
    a, b = _both(legacy_preset(preset, **kw))
    _assert_same(a, b)
    assert a["S_i"][L.SI_STEPS] > 0


def test_fast_path_is_taken_and_bounded_by_on_demand_blocks():
    """On a light load most steps are pure decode; with on-demand KV a run adds the blocks the reference's
    _grow_kv allocates at every block boundary (IP_RUN_GROW; it stops where they would not fit), and the results
    still agree."""
    sc = legacy_preset("a100-light", strategy="vllm", kv_reservation="on_demand", kv_block_tokens=16,
                              duration_s=40.0, warmup_s=2.0)
    a, b = _both(sc)
    _assert_same(a, b)
    assert a["S_i"][L.SI_STEPS] > 2 * a["S_i"][L.SI_NISSUED]  # several decode steps per request


GROW = {
    **{f"default-{s}": ("default", dict(strategy=s, duration_s=40.0, warmup_s=5.0)) for s in STRATEGIES},
    # KV so tight that runs stop where the blocks would not fit and the scheduler preempts
    "tight": ("default", dict(strategy="vllm", kv_cache_gb=0.35, arrival_rate_rps=4.0, duration_s=30.0,
                              output_tokens=400, warmup_s=2.0)),
    # the queue empties while the running requests fill the KV: a run stops where _grow_kv would preempt
    "full": ("default", dict(strategy="vllm", kv_cache_gb=0.9, arrival_rate_rps=1.0, output_tokens=1500,
                             duration_s=60.0, warmup_s=2.0)),
    "tight-unified": ("default", dict(strategy="slora", memory_mode="unified", kv_cache_gb=0.35, arrival_rate_rps=4.0,
                                      duration_s=30.0, output_tokens=400, warmup_s=2.0)),
    "prefix-cache": ("default", dict(strategy="vllm", prefix_tokens=300, prefix_share=0.8, duration_s=40.0,
                                     warmup_s=5.0)),
    "block-1": ("default", dict(strategy="vllm", kv_block_tokens=1, duration_s=20.0, warmup_s=2.0)),
    "block-64": ("default", dict(strategy="naive", kv_block_tokens=64, duration_s=30.0, warmup_s=2.0)),
    "block-128": ("default", dict(strategy="naive", kv_block_tokens=128, duration_s=30.0, warmup_s=2.0)),
    "kernel-cost": ("default", dict(strategy="vllm", cost_model="kernel", duration_s=30.0, warmup_s=2.0)),
}


@pytest.mark.parametrize("case", list(GROW))
def test_decode_runs_growing_kv_equal_runs_stopping_at_blocks(case):
    preset, kw = GROW[case]
    sc = legacy_preset(preset, kv_reservation="on_demand", **kw)
    a, b = _both(sc, L.IP_RUN_GROW)
    _assert_same(a, b)
    # and both equal stepping through the scheduler
    arr = sim._build(sc.validate(), generate(sc.validate()))
    arr["ip"][L.IP_DECODE_RUN] = 0
    L.run_loop(*[arr[k] for k in sim.LOOP_ARGS])
    _assert_same(a, arr)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategy=st.sampled_from(sorted(STRATEGIES)), rate=st.floats(0.5, 30.0), out=st.integers(1, 300),
       prompt=st.integers(1, 600), batch=st.integers(1, 64), ondemand=st.booleans(), block=st.sampled_from([1, 16]),
       seed=st.integers(0, 10_000))
def test_random_scenarios_agree(strategy, rate, out, prompt, batch, ondemand, block, seed):
    random_scenario_agrees(dict(strategy=strategy, arrival_rate_rps=rate, output_tokens=out, prompt_tokens=prompt,
                                max_batch_size=batch, duration_s=12.0, warmup_s=1.0, seed=seed, kv_block_tokens=block),
                           ondemand)


def random_scenario_agrees(kw: dict, ondemand: bool) -> None:
    """The default preset with ``kw`` (on-demand KV if ``ondemand``): decode runs equal stepping, every array;
    a combination the engine refuses is skipped (its refusal is checked elsewhere)."""
    if ondemand:
        kw = {**kw, "kv_reservation": "on_demand"}
    try:
        sc = legacy_preset("default", **kw).validate()
    except ValueError:
        return
    _assert_same(*_both(sc))


NOROOM = {
    "hot_set": ("default", dict(strategy="hot_set", duration_s=60.0, warmup_s=5.0)),
    "hot_set-mixed-ranks": ("default", dict(strategy="hot_set", adapter_ranks=(8, 16, 32, 64), duration_s=60.0,
                                            warmup_s=5.0)),
    "vllm-memory-only": ("default", dict(strategy="vllm", duration_s=60.0, warmup_s=5.0, arrival_rate_rps=20.0)),
    "batch": ("default", dict(strategy="batch", duration_s=60.0, warmup_s=5.0, arrival_rate_rps=20.0)),
    "oracle": ("default", dict(strategy="oracle", duration_s=60.0, warmup_s=5.0)),
    "async-prefetch": ("default", dict(strategy="hot_set", load_mode="async", duration_s=60.0, warmup_s=5.0)),
    # a standing queue with the adapter memory full of adapters in use: the scan stops once no request of a held
    # adapter is left (the no-room memo covers the smallest adapter)
    "hot_set-queue": ("default", dict(strategy="hot_set", duration_s=60.0, warmup_s=5.0, arrival_rate_rps=21.0)),
    "naive-queue": ("default", dict(strategy="naive", duration_s=40.0, warmup_s=5.0, arrival_rate_rps=30.0)),
    # loop._surely_noslot answers for _try_admit only where its token and KV checks pass: a later, longer request
    # of the same pass that breaks the token budget, or the KV, stops the scan (found by searching scenarios that
    # fail with either check dropped)
    "grouped-token-budget": ("default", dict(strategy="batch", arrival_rate_rps=30.0, max_batched_tokens=1300,
                                             prompt_tokens=300, length_dist="lognormal", length_spread=1.0,
                                             duration_s=20.0, warmup_s=2.0, seed=0, max_batch_size=256)),
    "grouped-kv": ("default", dict(strategy="batch", arrival_rate_rps=30.0, kv_cache_gb=2.5, prompt_tokens=400,
                                   output_tokens=200, length_dist="lognormal", length_spread=1.0, duration_s=20.0,
                                   warmup_s=2.0, seed=0, max_batch_size=256, vram_budget_gb=0.5)),
}


@pytest.mark.parametrize("case", list(NOROOM))
def test_no_room_memo_equals_searching_every_time(case):
    preset, kw = NOROOM[case]
    sc = legacy_preset(preset, **kw)
    a, b = _both(sc, L.IP_FASTSKIP)
    _assert_same(a, b)
    assert a["S_i"][L.SI_LOADS] > 100  # adapters did swap


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategy=st.sampled_from(["naive", "hot_set", "batch", "vllm", "oracle"]), rate=st.floats(4.0, 40.0),
       budget=st.floats(0.3, 2.0), ranks=st.sampled_from([(32,), (8, 64), (16, 32)]), hot=st.integers(0, 12),
       seed=st.integers(0, 10_000))
def test_no_room_memo_random_scenarios(strategy, rate, budget, ranks, hot, seed):
    try:
        sc = legacy_preset("default", strategy=strategy, arrival_rate_rps=rate, vram_budget_gb=budget,
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
    sc = legacy_preset(preset, **kw)
    _summaries_equal(simulate_summary(sc), sim.simulate(sc).summary)


def test_simulate_summary_refuses_what_simulate_refuses():
    from engine import simulate_summary
    with pytest.raises(ValueError, match="scenario: expected engine.Scenario"):
        simulate_summary({"strategy": "naive"})
    with pytest.raises(ValueError, match="arrival_rate_rps"):
        simulate_summary(legacy_preset("default", arrival_rate_rps=-1.0))


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
    sc = legacy_preset("default", num_replicas=3, router=router, arrival_rate_rps=12.0, duration_s=40.0,
                              warmup_s=4.0)
    _fleet_equals_reference(monkeypatch, sc, L.IP_DECODE_RUN)


#: Fleets whose replicas are left behind (fleet._bounds, _holds_known) in every way: decode runs, queues
#: longer than the bound's scan (overload), adapter churn with few slots, unified memory with on-demand KV,
#: max_in_system drops, the kernel and fixed cost models, chunked prefill.
QUIET_CASES = [
    ("least_loaded", {}), ("lora_affinity", {}),
    ("least_loaded", dict(strategy="slora", load_mode="async")),
    ("lora_affinity", dict(kv_reservation="on_demand", strategy="vllm")),
    ("lora_affinity", dict(strategy="vllm", max_loras=2, num_adapters=400, zipf_s=0.6, arrival_rate_rps=30.0)),
    ("lora_affinity", dict(strategy="vllm", max_loras=2, num_adapters=400, zipf_s=0.6, arrival_rate_rps=90.0,
                           duration_s=15.0, warmup_s=1.0)),  # standing queues with churn: idle adapters evicted
    ("lora_affinity", dict(strategy="slora", kv_reservation="on_demand", load_mode="async", num_adapters=300)),
    ("least_loaded", dict(arrival_rate_rps=90.0, duration_s=12.0, warmup_s=1.0)),
    ("least_loaded", dict(max_in_system=6, arrival_rate_rps=40.0)),
    ("lora_affinity", dict(cost_model="kernel", strategy="vllm")),
    ("least_loaded", dict(service_mode="fixed", strategy="naive")),
    ("lora_affinity", dict(strategy="batch", num_adapters=50)),
]


@pytest.mark.parametrize("router,kw", QUIET_CASES)
def test_quiet_replicas_equal_advancing_every_replica(monkeypatch, router, kw):
    """A fleet leaves a replica behind while what the router reads of it cannot change (the outstanding count
    before its earliest possible completion, residency while no scheduling pass could touch it): the same
    results as advancing every replica to every arrival (IP_QUIET = 0)."""
    kw = {"arrival_rate_rps": 10.0, "duration_s": 40.0, "warmup_s": 4.0, **kw}
    sc = legacy_preset("default", num_replicas=4, router=router, **kw)
    _fleet_equals_reference(monkeypatch, sc, L.IP_QUIET)


def test_a_too_long_step_bound_breaks_the_fleet_reference(monkeypatch):
    """The reference comparison bites: a step-time bound 40 % too long leaves replicas behind past a completion,
    and the routes (or a replica's results) differ."""
    from engine import fleet
    sc = legacy_preset("default", num_replicas=4, router="least_loaded", arrival_rate_rps=10.0,
                              duration_s=40.0, warmup_s=4.0)
    good = sim.simulate(sc).requests
    real = fleet.min_step_seconds
    monkeypatch.setattr(fleet, "min_step_seconds", lambda ip, fp: 1.4 * real(ip, fp))
    bad = sim.simulate(sc).requests
    assert not good.equals(bad)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(preset=st.sampled_from(["default", "vllm-llama31-8b", "slora-a100-80-s1", "seed1-rtx3090"]),
       cost=st.sampled_from(["roofline", "kernel", "fixed"]),
       p=st.integers(0, 5000), d=st.integers(0, 256), ctx=st.integers(0, 400_000), kd=st.integers(0, 4000),
       lora=st.floats(0, 1e9), distinct=st.integers(0, 64), sample=st.integers(0, 64))
def test_min_step_seconds_bounds_every_step(preset, cost, p, d, ctx, kd, lora, distinct, sample):
    """fleet.min_step_seconds is at most the cost of any step holding a token (every cost model)."""
    from engine import fleet
    from engine.workload import Workload
    if p + d == 0:
        p = 1
    kw = (dict(cost_model="kernel", service_mode="roofline") if cost == "kernel" else
          dict(service_mode="fixed", cost_model="roofline") if cost == "fixed" else dict(service_mode="roofline"))
    sc = legacy_preset(preset, **kw).validate()
    empty = np.zeros(0, np.int64)
    arr = sim._build(sc, Workload(np.zeros(0), empty, empty, empty))
    ip, fp = arr["ip"], arr["fp"]
    lb = fleet.min_step_seconds(ip, fp)
    assert lb > 0.0
    kernel = fp[L.FP_KERNEL] != 0.0 and ip[L.IP_FIXED] == 0
    dt = L._step_dt(ip, fp, kernel, fp[L.FP_DENSE_N:L.FP_DENSE_K], fp[L.FP_DENSE_K:L.FP_DENSE_END],
                    fp[L.FP_KPARAMS:L.FP_DENSE_N], float(p), float(p * p + 2 * p * kd), float(d),
                    float(min(sample, p)), float(ctx if d else 0), lora, lora / 8, float(distinct))
    assert dt >= lb


def _paused_fleet_state(n_wait: int, n_run: int, output: int = 50, gen: int = 10):
    """One replica's stacked arrays (fleet layout, N = 1) paused at t = 1 s with ``n_run`` running requests
    (``gen`` of ``output`` tokens done) and ``n_wait`` waiting ones (none done), the last waiting one needing
    a single token."""
    from engine.workload import Workload
    sc = legacy_preset("default", strategy="vllm", kv_reservation="on_demand").validate()
    n = n_wait + n_run
    wl = Workload(np.zeros(n), np.zeros(n, np.int64), np.full(n, 100, np.int64), np.full(n, output, np.int64))
    arr = sim._build(sc, wl)
    st = {k: np.ascontiguousarray(arr[k][None]) for k in ("ip", "S_i", "S_f", "running", "A_i")}
    R_i, R_f = arr["R_i"].copy(), arr["R_f"].copy()
    for j in range(n_run):
        st["running"][0, j] = j
        R_i[L.RI_STATUS, j], R_i[L.RI_GEN, j] = L.ST_RUNNING, gen
    wq = np.zeros(n, np.int64)
    for j in range(n_wait):
        r = n_run + j
        R_i[L.RI_STATUS, r] = L.ST_WAITING
        wq[j] = r
    if n_wait:
        R_i[L.RI_OUTPUT, n - 1] = 1
    S_i, S_f = st["S_i"], st["S_f"]
    S_i[0, L.SI_NRUN], S_i[0, L.SI_NWAIT], S_i[0, L.SI_WQHEAD], S_i[0, L.SI_WQTAIL] = n_run, n_wait, 0, n_wait
    S_i[0, L.SI_NEXTARR] = S_i[0, L.SI_NKNOWN] = n
    S_i[0, L.SI_PHASE] = L.PH_TOP
    S_f[0, L.SF_T] = 1.0
    st.update(Ri=R_i.ravel(), Rf=R_f.ravel(), wq=wq, off=np.zeros(1, np.int64), cap=np.array([n], np.int64))
    return st


@pytest.mark.parametrize("n_wait", [3, 200])
def test_count_bound_is_the_fewest_tokens_left(n_wait):
    """fleet._bounds: the outstanding count cannot fall before the next iteration plus (fewest tokens any known
    request still needs) x the shortest step; a waiting request the scan does not reach (more than 64 queued)
    may need a single token (here the last one does: the bound is one step)."""
    from engine import fleet
    st = _paused_fleet_state(n_wait, n_run=4)
    qc, qr = np.zeros(1), np.zeros(1)
    fleet._bounds(0, st["off"], st["cap"], st["ip"], st["Ri"], st["Rf"], st["S_i"], st["S_f"], st["wq"],
                  st["running"], 0.01, qc, qr)
    assert qc[0] == pytest.approx(1.0 + 0.01)  # the last waiting request needs 1 token, seen or not
    assert qr[0] == 1.0  # requests wait: the next scheduling pass may load or evict
    st = _paused_fleet_state(0, n_run=4)
    fleet._bounds(0, st["off"], st["cap"], st["ip"], st["Ri"], st["Rf"], st["S_i"], st["S_f"], st["wq"],
                  st["running"], 0.01, qc, qr)
    assert qc[0] == pytest.approx(1.0 + 40 * 0.01) and qr[0] > 1e299  # 40 tokens left each; nothing waits


def test_a_held_adapter_is_known_held_only_while_it_is_in_use_and_nothing_finishes():
    """fleet._holds_known on a replica left behind (t past its residency bound): an adapter used by a running
    request stays held until a request may finish (qc) and, with on-demand KV, not even then (preemption frees
    it); an idle one stays held in static memory while no load can come (nobody waits, every arrival not taken
    in has its adapter held); an absent adapter stays absent while no request for it waits."""
    from engine import fleet
    st = _paused_fleet_state(0, n_run=2)
    A_i, ip = st["A_i"], st["ip"]
    A_i[0, L.AI_STATE, 0], A_i[0, L.AI_REF, 0] = L.AS_RESIDENT, 2
    A_i[0, L.AI_STATE, 1], A_i[0, L.AI_REF, 1] = L.AS_RESIDENT, 0
    A_i[0, L.AI_STATE, 2], A_i[0, L.AI_WAIT, 2] = L.AS_ABSENT, 0
    qc, qr = np.array([5.0]), np.array([2.0])

    def known(a, t):
        return fleet._holds_known(0, a, t, st["off"], st["cap"], ip, st["Ri"], st["S_i"], st["S_f"], A_i, qc, qr)
    assert known(1, 1.5)  # before the residency bound: anything
    S_i, c = st["S_i"], st["cap"][0]
    S_i[0, L.SI_NWAIT] = 1  # a request waits: the next pass may load, hence evict
    ip[0, L.IP_ONDEMAND] = 0
    assert known(0, 3.0) and not known(0, 6.0)  # in use: held until a request may finish
    ip[0, L.IP_ONDEMAND] = 1
    assert not known(0, 3.0)  # on-demand KV may preempt its requests first
    assert not known(1, 3.0)  # idle: the pass may evict it
    S_i[0, L.SI_NWAIT] = 0
    assert known(1, 3.0) and known(0, 6.0)  # nobody waits and nothing arrived: no load, so no eviction
    S_i[0, L.SI_NEXTARR] -= 1  # the last request arrived, not taken in yet; its adapter:
    st["Ri"][L.RI_ADAPTER * c + c - 1] = 0
    assert known(1, 3.0)  # held: no load
    st["Ri"][L.RI_ADAPTER * c + c - 1] = 2
    assert not known(1, 3.0)  # absent: its load may evict the idle adapter
    S_i[0, L.SI_NEXTARR] += 1
    ip[0, L.IP_UNIFIED] = 1
    assert not known(1, 3.0)  # unified memory: KV admission evicts idle adapters
    ip[0, L.IP_UNIFIED] = 0
    assert known(2, 3.0)  # absent, nobody asks for it
    A_i[0, L.AI_WAIT, 2] = 1
    assert not known(2, 3.0)


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.integers(-5, 5), min_size=0, max_size=300), floats=st.booleans())
def test_loop_argsort_is_numpys_stable_argsort(keys, floats):
    """loop._argsort (no allocation: run_loop compiles without reference counting) = np.argsort(kind="stable"),
    ties included (group keys tie; compaction's starts do not)."""
    key = np.array(keys, np.float64 if floats else np.int64)
    n = len(key)
    order, tmp = np.full(n + 3, -1, np.int64), np.zeros(n + 3, np.int64)
    L._argsort(key, n, order, tmp)
    assert np.array_equal(order[:n], np.argsort(key, kind="stable"))


def test_the_hot_path_is_compiled_without_reference_counting():
    """Every jitted function of the loop, the fleet and their callees is declared ``_nrt=False`` (the atomic
    reference counts of array arguments took about a third of the loop's time); Numba then refuses to compile
    anything that allocates there, so scratch comes from run_loop's ``wf`` / ``wi``."""
    from numba.core.registry import CPUDispatcher

    from engine import costs, fleet, kernels, memory, policies, routers
    seen = 0
    for mod in (L, fleet, routers, costs, kernels, memory, policies):
        for name, obj in vars(mod).items():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == mod.__name__:
                if name == "gemm_seconds_many":  # the kernel fitter's vectorised form (allocates; not in the loop)
                    continue
                assert obj.targetoptions.get("_nrt") is False, f"{mod.__name__}.{name}"
                seen += 1
    assert seen > 40


def test_the_per_step_helpers_are_inlined_into_the_loop():
    """The helpers run_loop calls on every iteration are declared ``inline="always"``: a call of a jitted function
    passes every array argument as its seven to nine fields (``_decode_run``: 17 arrays, about 130 words), which
    took about a third of the loop's time (bench/README.md, session 11); LLVM inlines the small ones anyway."""
    for fn in (L._decode_run, L._grow_kv, L._fill_row, L._step_dt):
        assert fn.targetoptions.get("inline") == "always", fn.__name__
    # _try_admit stays a call: inlined at its three call sites it made the loop slower (naive, default scenario:
    # 15.7 -> 17.4 ms)
    assert L._try_admit.targetoptions.get("inline", "never") == "never"


def test_a_small_adapter_still_gets_the_room_a_large_one_could_not():
    """The queue scan passes over absent adapters only once no room can be made for the smallest adapter: with
    144 MiB of adapter memory, a 128 MiB adapter in use and another 128 MiB one waiting (no room, no victim),
    a 16 MiB adapter queued behind it still starts in the same pass (and equals the full-search reference)."""
    from engine.workload import Workload
    mib = 2 ** 20
    sc = legacy_preset("default", strategy="hot_set", hot_set_k=0, adapter_ranks=(8, 64), adapter_rank=64,
                              num_adapters=8,
                              vram_budget_gb=144 * mib / 2 ** 30, duration_s=5.0, warmup_s=0.0).validate()
    wl = Workload(np.zeros(3), np.array([1, 3, 0]), np.full(3, 64), np.full(3, 8))
    out = []
    for fast in (1, 0):
        arr = sim._build(sc, wl)
        assert list(arr["A_i"][L.AI_MEMBYTES, [1, 3, 0]]) == [128 * mib, 128 * mib, 16 * mib]
        arr["ip"][L.IP_FASTSKIP] = fast
        L.run_loop(*[arr[k] for k in sim.LOOP_ARGS])
        out.append(arr)
    _assert_same(*out)
    admit = out[0]["R_f"][L.RF_ADMIT]
    assert admit[2] == admit[0] < admit[1]  # the small one with the first, the large one after it finished


# ------------------------------------------------------------------ Python fast paths of a dashboard rerun
def test_scenario_to_dict_equals_dataclasses_asdict_on_every_preset():
    """Scenario.to_dict copies fields directly (no recursive deep copy): the same dict as dataclasses.asdict."""
    import dataclasses

    from engine import presets
    for name in presets.SCENARIOS:
        sc = Scenario.from_preset(name)
        for s in (sc, sc.replace(adapter_ranks=(8, 16, 64), num_adapters=3)):
            want = dataclasses.asdict(s)
            want["adapter_ranks"] = list(s.adapter_ranks)
            got = s.to_dict()
            assert got == want and type(got["adapter_ranks"]) is list, name
            got["adapter_ranks"].append(1)   # a copy: the scenario is untouched
            assert s.to_dict() == want


def test_error_band_lookup_equals_filtering_the_table():
    """bands._p90 reads a per-table index; the reference filters the table as it did before."""
    import math

    from engine.calibration import bands
    t = bands.error_bases()

    def reference(basis, metrics):
        for m in metrics:
            r = t[(t["basis"] == basis) & (t["metric"] == m)]
            if len(r) and math.isfinite(float(r["p90_abs"].iloc[0])):
                return float(r["p90_abs"].iloc[0]), m, int(r["n_runs"].iloc[0])
        return math.nan, "", 0

    cases = [(b, (m,)) for b in t["basis"].unique() for m in t["metric"].unique()]
    cases += [(b, bands.LATENCY_METRICS) for b in t["basis"].unique()] + [("no-such-basis", ("request_throughput",))]
    for basis, metrics in cases:
        got, want = bands._p90(t, basis, metrics), reference(basis, metrics)
        assert got[1:] == want[1:] and (got[0] == want[0] or math.isnan(got[0]) and math.isnan(want[0])), basis
    assert bands.error_bases() is not bands.error_bases(copy=False)   # callers that may modify get a copy


@settings(max_examples=50, deadline=None)
@given(adapter=st.lists(st.integers(0, 6), max_size=40))
def test_belady_lists_are_each_adapters_requests_in_order(adapter):
    """policies.belady_lists against the plain reference: adapter a's requests, in stream order, at [ptr[a], end[a])."""
    from engine.policies import belady_lists
    ad = np.array(adapter, np.int64)
    order, ptr, end = belady_lists(ad, 7)
    for a in range(7):
        assert list(order[ptr[a]:end[a]]) == [i for i, x in enumerate(adapter) if x == a]


def test_only_belady_builds_its_lists():
    """The stream-wide sort is skipped for every other eviction order (their pick_victim never reads the lists)."""
    sc = legacy_preset("default", duration_s=20.0, warmup_s=2.0).validate()
    wl = generate(sc)
    assert not sim._build(sc, wl)["a_list"].any()
    arr = sim._build(sc.replace(strategy="oracle"), wl)
    assert arr["a_list"].any() and arr["A_i"][L.AI_END, -1] == len(wl)
