"""app.runner.run_replications (the What-if page's threads) gives what the serial engine calls give."""
from __future__ import annotations

from legacy import legacy_preset

from app import runner
from engine import simulate


def test_threaded_replications_equal_serial_engine_runs():
    sc = legacy_preset("default", duration_s=20.0, warmup_s=2.0, arrival_rate_rps=8.0)
    strategies = ["naive", "hot_set", "slora"]
    results, reps, failed = runner.run_replications(sc, strategies, 3)
    assert not failed and list(results) == strategies and list(reps) == strategies
    for s in strategies:
        want = [simulate(sc.replace(strategy=s, seed=sc.seed + k)).summary for k in range(3)]
        assert reps[s] == want, s
        assert results[s]["summary"] == want[0]


def test_a_strategy_that_cannot_run_is_reported_not_raised():
    # hot_set_k above what the budget pins is refused by hot_set only
    sc = legacy_preset("default", duration_s=10.0, warmup_s=1.0, hot_set_k=16)
    results, reps, failed = runner.run_replications(sc, ["naive", "hot_set"], 2)
    assert list(results) == ["naive"] and list(reps) == ["naive"] and len(reps["naive"]) == 2
    assert "hot_set_k" in failed["hot_set"]


def test_once_computes_a_result_once_for_concurrent_callers():
    """Sessions asking at the same time for a simulation in progress wait for it instead of computing it again
    (runner.once); each then gets its own call's return; an exception reaches every caller."""
    import threading
    import time as _time

    from app import runner
    calls, started = [], threading.Event()

    def slow():
        calls.append(1)
        started.set()
        _time.sleep(0.5)
        return {"n": len(calls)}
    out = []
    first = threading.Thread(target=lambda: out.append(runner.once(("t", 1), slow)))
    first.start()
    started.wait(5)
    waiters = [threading.Thread(target=lambda: out.append(runner.once(("t", 1), lambda: {"n": -len(calls)})))
               for _ in range(3)]
    for t in waiters:
        t.start()
    for t in [first, *waiters]:
        t.join(10)
    assert len(calls) == 1 and sorted(o["n"] for o in out) == [-1, -1, -1, 1]  # one run; the waiters' own calls
    assert not runner._INFLIGHT

    release = threading.Event()

    def boom():
        started.set()
        release.wait(10)  # held until the second caller waits on it
        raise ValueError("bad scenario")
    errs = []

    def call(fn):
        try:
            runner.once(("t", 2), fn)
        except ValueError as e:
            errs.append(str(e))
    started.clear()
    a = threading.Thread(target=call, args=(boom,))
    a.start()
    started.wait(5)
    b = threading.Thread(target=call, args=(lambda: None,))
    b.start()
    _time.sleep(0.3)
    release.set()
    a.join(10)
    b.join(10)
    assert errs == ["bad scenario", "bad scenario"] and not runner._INFLIGHT


def test_a_later_look_runs_only_its_new_replications():
    """run_replications(..., first=k): the summaries of replications k..n-1 only (seed + k), no full result."""
    from app import runner
    from engine import Scenario, simulate
    sc = Scenario.from_preset("default", duration_s=20.0, warmup_s=2.0)
    results, reps, failed = runner.run_replications(sc, ["naive", "vllm"], 3, first=1)
    assert results == {} and not failed and list(reps) == ["naive", "vllm"]
    for s in reps:
        assert [r["ttft_p99_ms"] for r in reps[s]] == [simulate(sc.replace(strategy=s, seed=sc.seed + k))
                                                       .summary["ttft_p99_ms"] for k in (1, 2)]


def test_cached_replications_read_what_the_workers_computed_and_nothing_else():
    """runner.cached_replications (a rerun whose runs are all cached, read without the workers) returns exactly what
    run_replications returned, and None while any run is missing, for a run ``run`` does not cache by its scenario
    alone (a long one), or for a scenario that cannot run."""
    import numpy as np
    import pandas as pd
    sc = legacy_preset("default", duration_s=12.0, warmup_s=1.0, arrival_rate_rps=7.25, seed=4242)
    strategies = ["naive", "slora"]
    assert runner.cached_replications(sc, strategies, 2) is None  # (never run)
    results, reps, failed = runner.run_replications(sc, strategies, 2)
    assert not failed
    got = runner.cached_replications(sc, strategies, 2)
    assert got is not None
    g_results, g_reps, g_failed = got
    assert g_failed == {} and g_reps == reps and list(g_results) == strategies
    for s in strategies:
        pd.testing.assert_frame_equal(g_results[s]["requests"], results[s]["requests"])
        assert g_results[s]["summary"] == results[s]["summary"]
    assert runner.cached_replications(sc, strategies, 3) is None  # replication 3 was never run
    later = runner.cached_replications(sc, strategies, 2, first=1)  # a later look: replication 2 alone
    assert later == runner.run_replications(sc, strategies, 2, first=1) == ({}, {s: reps[s][1:] for s in reps}, {})
    assert runner.cached_replications(sc, strategies, 3, first=2) is None
    assert runner.cached_replications(sc, strategies + ["vllm"], 2) is None
    assert runner.cached_replications(sc.replace(seed=4243), strategies, 2) is None
    long = sc.replace(duration_s=float(np.ceil(2 * runner.SMALL_RUN_REQUESTS / sc.arrival_rate_rps)))
    assert runner.cached_replications(long, strategies, 1) is None
    assert runner.cached_replications(sc.replace(hot_set_k=10_000), ["hot_set"], 1) is None


def test_remembered_runs_stay_fewer_than_the_caches_hold():
    """A key held in runner._DONE must still be in st.cache_data's cache (both keep the most recently used): so
    each kind holds fewer keys than its cache's entries, and the oldest go first."""
    assert runner._DONE_BOUND["full"] < runner.FULL_CACHE_ENTRIES
    assert runner._DONE_BOUND["summary"] < runner.SUMMARY_CACHE_ENTRIES
    saved = dict(runner._DONE_BOUND)
    try:
        runner._DONE_BOUND["summary"] = 3
        for i in range(5):
            runner._remember(("summary", f"x{i}"))
        assert list(runner._DONE["summary"])[-3:] == ["x2", "x3", "x4"] and "x0" not in runner._DONE["summary"]
        runner._remember(("full", "y", "trace-digest"))  # a replayed trace's run: not tracked
        assert "y" not in runner._DONE["full"]
    finally:
        runner._DONE_BOUND.update(saved)
        for k in ("x2", "x3", "x4"):
            runner._DONE["summary"].pop(k, None)


def test_run_keys_are_the_capped_validated_scenario_and_memoised():
    """runner._run_key: the cache key of ``sc`` with a strategy / seed in place of its own is the capped, validated
    scenario as compact JSON (the same scenario as the indented form), computed once per (scenario, strategy,
    seed); an invalid scenario raises each time (nothing memoised)."""
    import json

    import pytest

    from app.controls import cap_scenario
    from engine import Scenario

    sc = legacy_preset("default", arrival_rate_rps=7.5)
    big = sc.replace(duration_s=86_400.0)  # past the hosted app's work cap: the key is the capped scenario's
    for base in (sc, big):
        for strategy, seed in ((None, None), ("slora", None), ("batch", base.seed + 2)):
            want = cap_scenario(base.replace(**{k: v for k, v in (("strategy", strategy), ("seed", seed))
                                                if v is not None}))[0].validate()
            js, small = runner._run_key(base, strategy, seed)
            assert js == want.to_json(indent=None) and "\n" not in js
            assert json.loads(js) == json.loads(want.to_json()) and Scenario.from_json(js) == want
            assert small == runner.small_run(want)
    assert runner._run_key(big, None, None)[0] != big.to_json(indent=None)  # (capped)
    hits = runner._run_key.cache_info().hits
    runner._run_key(sc, "slora", None)
    assert runner._run_key.cache_info().hits == hits + 1
    bad = sc.replace(strategy="naive")
    for _ in range(2):
        with pytest.raises(ValueError, match="hot_set_k"):
            runner._run_key(bad.replace(hot_set_k=10_000), "hot_set", None)


def test_views_are_built_once_per_key_and_the_least_recently_used_go_first(monkeypatch):
    monkeypatch.setattr(runner, "VIEW_ENTRIES", 3)
    monkeypatch.setattr(runner, "_VIEWS", type(runner._VIEWS)())
    built = []

    def build(k):
        built.append(k)
        return f"view {k}"
    for k in ("a", "b", "a", "c"):
        assert runner.view(("t", k), lambda k=k: build(k)) == f"view {k}"
    assert built == ["a", "b", "c"]                  # "a" the second time: kept
    first = runner.view(("t", "a"), lambda: build("a"))
    runner.view(("t", "d"), lambda: build("d"))      # over the bound: "b", the least recently used, goes
    assert list(runner._VIEWS) == [("t", "c"), ("t", "a"), ("t", "d")]
    assert runner.view(("t", "a"), lambda: build("a")) is first and built == ["a", "b", "c", "d"]
    runner.view(("t", "b"), lambda: build("b"))
    assert built[-1] == "b"


def test_the_replication_digest_names_the_runs_a_comparison_reads():
    sc = legacy_preset("default", duration_s=20.0, warmup_s=2.0, arrival_rate_rps=8.0)
    d = runner.replication_digest(sc, ["naive", "slora"], 3)
    assert isinstance(d, bytes) and d == runner.replication_digest(runner.capped(sc), ["naive", "slora"], 3)
    others = [runner.replication_digest(sc, ["slora", "naive"], 3), runner.replication_digest(sc, ["naive"], 3),
              runner.replication_digest(sc, ["naive", "slora"], 2),
              runner.replication_digest(sc.replace(seed=sc.seed + 1), ["naive", "slora"], 3),
              runner.replication_digest(sc.replace(arrival_rate_rps=8.5), ["naive", "slora"], 3)]
    assert len({d, *others}) == 6                    # order, strategies, replications, seed, scenario: all count
    assert runner.replication_digest(sc.replace(hot_set_k=10_000), ["hot_set"], 1) is None


def test_read_replications_in_this_thread_equals_the_workers_and_anticipate_then_follows_the_runs(monkeypatch):
    import time
    sc = legacy_preset("default", duration_s=20.0, warmup_s=2.0, arrival_rate_rps=8.0, seed=92_001, hot_set_k=16)
    names = ["naive", "hot_set", "slora"]           # hot_set cannot run (hot_set_k above what the budget pins)
    got = runner.read_replications(sc, names, 2)
    want = runner.run_replications(sc, names, 2)
    assert got[1] == want[1] and got[2] == want[2] and list(got[2]) == ["hot_set"]
    assert {s: r["summary"] for s, r in got[0].items()} == {s: r["summary"] for s, r in want[0].items()}
    nxt = sc.replace(arrival_rate_rps=8.5, hot_set_k=8)
    seen, sims = [], []
    real = runner.simulate_summary
    monkeypatch.setattr(runner, "simulate_summary", lambda s, *a, **k: sims.append(s.seed) or real(s, *a, **k))

    def then(s):  # on a worker, queued after nxt's runs: reads them (one still running elsewhere: waited for)
        results, reps, failed = runner.read_replications(s, ["naive", "slora"], 2)
        seen.append((s.arrival_rate_rps, sorted(results), [len(r) for r in reps.values()], failed))
    assert runner.anticipate([nxt], ["naive", "slora"], 2, then) == 4
    deadline = time.monotonic() + 120
    while (runner.SCHEDULER.pending() or not seen) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [(8.5, ["naive", "slora"], [2, 2], {})]
    assert sims == [nxt.seed + 1] * 2                # each summary computed once: then computed nothing again
