"""Speculative runs of the next slider step (issue 26, item 1: a rerun that does only what the view needs).

* ``FairScheduler``'s speculative queue: its jobs start only when no session has a job queued and no script run
  is in progress (``rendering``) plus ``spec_delay_s``; a session's newer rerun or speculation drops its
  speculative jobs not started; real jobs of any session overtake them.  Event-gated, never timed.
* ``runner.anticipate`` queues exactly the runs ``run_replications`` asks for: a later rerun of a speculated
  scenario runs no simulation (counted) and gets the same results as computing them afresh.
* ``page_whatif.last_moved`` / ``anticipated_values``: which slider moved, in which direction; ``controls.step_values``: the
  arrow-key step as the browser sends it, inside the slider's range.
* The What-if page in AppTest: after a rerun, the next arrival-rate step is a cache hit.
"""
from __future__ import annotations

import time
from pathlib import Path

from conftest import kpi_tables, svg_charts
from legacy import legacy_preset
from streamlit.testing.v1 import AppTest
from test_app_sessions import WAIT, sched  # noqa: F401  (sched: the gated scheduler fixture)

from app import controls, page_whatif, runner

MAIN = str(Path(__file__).resolve().parent.parent / "app" / "main.py")


def test_speculation_waits_for_real_work_of_every_session(sched):  # noqa: F811
    s, g = sched
    fa = s.submit("A", g.job, [("A0",), ("A1",), ("A2",)])
    g.wait_started("A0", "A1")
    spec = s.submit("B", g.job, [("S0",), ("S1",)], speculative=True)
    assert s.speculating("B") == 2 and s.load("B") == (0, 0)
    g.release("A0")                       # a worker frees up: A's queued job goes first, not B's speculation
    assert g.wait_count(3)[2] == "A2", g.started
    fc = s.submit("C", g.job, [("C0",)])  # a real job submitted after the speculation still overtakes it
    g.release("A1")
    assert g.wait_count(4)[3] == "C0", g.started
    g.release("A2")                       # nothing real is queued now: the speculation runs on the idle worker
    assert g.wait_count(5)[4] == "S0", g.started
    g.release_all()
    for f in [*fa, *fc, *spec]:
        f.result(timeout=WAIT)
    assert g.started.index("S1") > g.started.index("C0")


def test_a_newer_rerun_or_speculation_drops_the_speculation_not_started(sched):  # noqa: F811
    s, g = sched
    busy = s.submit("A", g.job, [("A0",), ("A1",)])
    g.wait_started("A0", "A1")
    old = s.submit("B", g.job, [("old0",), ("old1",)], speculative=True)
    newer = s.submit("B", g.job, [("new0",)], speculative=True)   # newer speculation replaces the older
    assert all(f.cancelled() for f in old) and s.speculating("B") == 1
    other = s.submit("C", g.job, [("C-spec",)], speculative=True)  # another session's is kept
    rerun = s.submit("B", g.job, [("B-real",)], supersede=True)    # B's rerun drops B's speculation
    assert newer[0].cancelled() and s.speculating("B") == 0 and s.speculating("C") == 1
    g.release_all()
    for f in [*busy, *rerun, *other]:
        f.result(timeout=WAIT)
    assert "old0" not in g.started and "new0" not in g.started


def test_speculation_waits_while_a_script_renders_and_for_the_delay_after(sched):  # noqa: F811
    s, g = sched
    s.spec_delay_s = 0.0
    with s.rendering():
        spec = s.submit("B", g.job, [("S0",)], speculative=True)
        real = s.submit("A", g.job, [("A0",)])   # real work runs during a script run
        g.wait_started("A0")
        g.release("A0")
        real[0].result(timeout=WAIT)
        time.sleep(0.05)                         # an idle worker had every chance to take S0: it must not
        assert "S0" not in g.started and s.speculating("B") == 1
    g.wait_started("S0")                         # the script run ended: now it starts
    g.release_all()
    spec[0].result(timeout=WAIT)
    # with a delay, not before it has passed since the last script run ended
    s.spec_delay_s = 0.3
    with s.rendering():
        pass
    t_end = time.monotonic()
    spec = s.submit("B", g.job, [("S1",)], speculative=True)
    g.wait_started("S1")
    assert time.monotonic() - t_end >= 0.3
    spec[0].result(timeout=WAIT)


def _wait_idle(timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while runner.SCHEDULER.pending() and time.monotonic() < deadline:
        time.sleep(0.01)


def _count_simulations(monkeypatch) -> list[str]:
    """The simulations this process runs from now on; the workers are idle first (an earlier test's session may
    have left speculative runs behind, which would be counted here)."""
    _wait_idle()
    calls: list[str] = []
    real_full, real_summary = runner.simulate, runner.simulate_summary

    def full(sc, *a, **k):
        calls.append(f"full {sc.strategy} {sc.seed} {sc.arrival_rate_rps:g}")
        return real_full(sc, *a, **k)

    def summ(sc, *a, **k):
        calls.append(f"summary {sc.strategy} {sc.seed} {sc.arrival_rate_rps:g}")
        return real_summary(sc, *a, **k)

    monkeypatch.setattr(runner, "simulate", full)
    monkeypatch.setattr(runner, "simulate_summary", summ)
    return calls


def test_anticipate_queues_exactly_what_a_rerun_asks_for(monkeypatch):
    sc = legacy_preset("default", duration_s=20.0, warmup_s=2.0, arrival_rate_rps=8.25, seed=91_001)
    nxt = sc.replace(arrival_rate_rps=8.75)
    strategies = ["naive", "vllm"]
    calls = _count_simulations(monkeypatch)
    assert runner.anticipate([nxt], strategies, 3) == 6
    _wait_idle()
    assert sorted(calls) == sorted([f"full {s} {nxt.seed} 8.75" for s in strategies]
                                   + [f"summary {s} {nxt.seed + k} 8.75" for s in strategies for k in (1, 2)])
    calls.clear()
    results, reps, failed = runner.run_replications(nxt, strategies, 3)
    assert calls == [] and not failed, calls          # every run was a cache hit
    monkeypatch.undo()
    for s in strategies:                             # and the same results as computing them now
        want = [runner.simulate(nxt.replace(strategy=s, seed=nxt.seed + k)).summary for k in range(3)]
        assert reps[s] == want and results[s]["summary"] == want[0]


def test_anticipate_is_bounded_and_can_be_switched_off(monkeypatch):
    sc = legacy_preset("default", duration_s=20.0, warmup_s=2.0, arrival_rate_rps=8.0, seed=91_002)
    calls = _count_simulations(monkeypatch)
    monkeypatch.setattr(runner, "ANTICIPATE_MAX_REQUESTS", 8.0 * 20.0 * 2 * 2)   # one scenario's worth
    assert runner.anticipate([sc, sc.replace(seed=91_003)], ["naive", "vllm"], 2) == 4
    assert runner.anticipate([sc.replace(arrival_process="closed", concurrency=4)], ["naive"], 1) == 0
    monkeypatch.setattr(runner, "ANTICIPATE", False)
    assert runner.anticipate([sc], ["naive"], 1) == 0
    _wait_idle()
    assert len(calls) == 4


def test_step_values_move_by_the_slider_step_inside_its_range():
    values, _ = controls.resolve({"arrival_rate_rps": "6"})
    up, down = controls.step_values(values, "arrival_rate_rps", [1, -1])
    assert up["arrival_rate_rps"] == 6.5 and down["arrival_rate_rps"] == 5.5
    assert {k: v for k, v in up.items() if k != "arrival_rate_rps"} == \
        {k: v for k, v in values.items() if k != "arrival_rate_rps"}
    top, _ = controls.resolve({"arrival_rate_rps": "200"})
    assert [v["arrival_rate_rps"] for v in controls.step_values(top, "arrival_rate_rps", [1, -1])] == [199.5]
    zipf, _ = controls.resolve({"zipf_s": "1.1", "vram_budget_gb": "1.05"})
    assert controls.step_values(zipf, "zipf_s", [1])[0]["zipf_s"] == 1.15            # not 1.1500000000000001
    assert controls.step_values(zipf, "vram_budget_gb", [1])[0]["vram_budget_gb"] == 1.25   # onto the grid
    assert controls.step_values(zipf, "vram_budget_gb", [-1])[0]["vram_budget_gb"] == 0.75
    assert controls.step_values(values, "model", [1]) == []        # not a slider
    assert controls.step_values(values, "concurrency", [1]) == []  # not shown with Poisson arrivals


def test_anticipated_values_follow_the_slider_that_moved():
    before, _ = controls.resolve({"zipf_s": "1.0"})
    after, _ = controls.resolve({"zipf_s": "0.95"})
    last = {k: v for k, v in before.items() if not k.startswith("_")}
    assert page_whatif.last_moved(after, last) == ("zipf_s", -1)
    nxt = page_whatif.anticipated_values(after, ("zipf_s", -1))
    assert [v["zipf_s"] for v in nxt] == [0.9, 1.0]          # on down, then back up (the browser's floats)
    # nothing moved (a first visit, or a select changed): the slider that moved last, else the arrival rate up
    assert page_whatif.last_moved(after, None) == ("arrival_rate_rps", 1)
    assert page_whatif.last_moved(after, {**last, "zipf_s": 0.95, "gpu": "l40s"}, ("zipf_s", -1)) == ("zipf_s", -1)
    rate = after["arrival_rate_rps"]
    assert [v["arrival_rate_rps"] for v in page_whatif.anticipated_values(after, ("arrival_rate_rps", 1))] == \
        [rate + 0.5, rate - 0.5]


def _whatif(seed: int) -> AppTest:
    """The What-if page on a 120 s scenario of its own ``seed``, run once, the server's speculation done."""
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params["duration_s"] = "120"
    at.query_params["seed"] = str(seed)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    _wait_idle()
    return at


def test_the_next_arrival_rate_step_on_the_whatif_page_is_a_cache_hit(monkeypatch):
    calls = _count_simulations(monkeypatch)
    at = _whatif(91004)
    rate = at.slider(key="arrival_rate_rps").value
    n = len(at.multiselect(key="strategy").value) * at.number_input(key=page_whatif.K_REPS).value
    ran = {r: sum(c.endswith(f" {r:g}") for c in calls) for r in (rate, rate + 0.5, rate - 0.5)}
    assert ran == {rate: n, rate + 0.5: n, rate - 0.5: n}, calls   # the page, then one step up and one down
    at.slider(key="arrival_rate_rps").set_value(rate + 0.5)
    calls.clear()
    at.run()
    assert not at.exception and len(kpi_tables(at)) == 1
    assert [c for c in calls if c.endswith(f" {rate + 0.5:g}")] == [], "the step simulated instead of reading"
    _wait_idle()
    # it moved up: the next step up and the one back (cached) were anticipated
    assert {c.split()[-1] for c in calls} == {f"{rate + 1.0:g}"}, calls


def test_long_runs_are_neither_anticipated_nor_kept_in_the_live_cache(monkeypatch):
    """A run of more than SMALL_RUN_REQUESTS expected requests goes to the small cache of big results, and is
    never simulated ahead (it is no live view's slider step)."""
    sc = legacy_preset("default", duration_s=20.0, warmup_s=2.0, arrival_rate_rps=8.0, seed=91_005)
    assert sc.expected_requests() == 160.0 and runner.small_run(sc)
    assert not runner.small_run(sc.replace(arrival_process="closed", concurrency=4))
    monkeypatch.setattr(runner, "SMALL_RUN_REQUESTS", 100)
    assert not runner.small_run(sc)
    calls = _count_simulations(monkeypatch)
    assert runner.anticipate([sc], ["naive"], 1) == 0
    small, big = runner._full_small, runner._full_big
    seen = []
    monkeypatch.setattr(runner, "_full_small", lambda *a: seen.append("small") or small(*a))
    monkeypatch.setattr(runner, "_full_big", lambda *a: seen.append("big") or big(*a))
    runner.run(sc)
    monkeypatch.setattr(runner, "SMALL_RUN_REQUESTS", 1000)
    runner.run(sc.replace(seed=91_006))
    assert seen == ["big", "small"] and len(calls) == 2


def _count_views(monkeypatch) -> list[tuple[str, str]]:
    """(product, thread name) of every view the What-if page builds from now on (``page_whatif.verdict``,
    ``table_html``, ``chart_svg``: what ``_kept`` builds, on a miss, in the script or on a worker)."""
    import threading

    built: list[tuple[str, str]] = []
    for name in ("verdict", "table_html", "chart_svg"):
        real = getattr(page_whatif, name)

        def counted(*a, _real=real, _name=name, **k):
            built.append((_name, threading.current_thread().name))
            return _real(*a, **k)
        monkeypatch.setattr(page_whatif, name, counted)
    return built


def test_a_step_to_an_anticipated_scenario_draws_the_views_built_ahead_and_they_are_the_fresh_ones(monkeypatch):
    """After the runs of the next step, a worker builds its verdict, table and chart (``page_whatif._prebuild``) for
    the session's settings: the step builds none of them, and draws what building them now from freshly computed
    runs draws.  A setting the views were not built for (another baseline) builds its own, never a stale one."""
    _wait_idle()
    at = _whatif(91006)
    built = _count_views(monkeypatch)
    rate = at.slider(key="arrival_rate_rps").value
    at.slider(key="arrival_rate_rps").set_value(rate + 0.5)
    at.run()
    assert not at.exception
    assert [b for b in built if not b[1].startswith("whatif-sim")] == [], built   # nothing built in the script
    state = at.session_state[controls.STATE_KEY]
    sc, names = state.scenario, list(state.strategies)
    n = int(at.session_state[page_whatif.K_REPS])
    monkeypatch.undo()
    fresh = {s: [runner.simulate(sc.replace(strategy=s, seed=sc.seed + k)).summary for k in range(n)] for s in names}
    baseline = at.session_state[controls.BASELINE_KEY]
    assert [h.value for h in at.get("html") if "wi-kpi" in h.value] == [page_whatif.table_html(fresh, baseline, n)]
    text, _ = page_whatif.verdict(fresh, page_whatif.DEFAULT_OBJECTIVE)
    assert at.info[0].value == text
    other = next(s for s in names if s != baseline)
    at.session_state[controls.BASELINE_KEY] = other   # (a full rerun: the settings row draws it)
    at.run()
    assert not at.exception and at.selectbox(key=controls.BASELINE_KEY).value == other
    assert [h.value for h in at.get("html") if "wi-kpi" in h.value] == [page_whatif.table_html(fresh, other, n)]
    # another chart, and the CDF's axis switched off: the next step finds that chart built too (its key as _charts')
    at.session_state[page_whatif.K_CHART] = "breakdown"
    at.session_state[page_whatif.K_LOG] = False
    at.run()
    assert not at.exception
    _wait_idle()
    built = _count_views(monkeypatch)
    at.slider(key="arrival_rate_rps").set_value(rate + 1.0)   # one step up again: anticipated by the runs above
    at.run()
    assert not at.exception and len(svg_charts(at)) == 1
    assert [b for b in built if not b[1].startswith("whatif-sim")] == [], built


def test_until_decided_a_step_to_an_anticipated_scenario_reads_its_looks_from_the_cache(monkeypatch):
    """With "Until decided" on, the server anticipates as many replications as the step took (at least two), and a
    step to an anticipated scenario reads every look in the script (``runner.cached_replications``), never through
    the workers; it shows what computing the looks afresh shows."""
    _wait_idle()
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params.update({"duration_s": "120", "seed": "91007", page_whatif.K_AUTO: "true"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state[page_whatif.K_AUTO] is True
    _wait_idle()
    handed = []
    real = runner.run_replications
    monkeypatch.setattr(runner, "run_replications", lambda *a, **k: handed.append(a[2]) or real(*a, **k))
    rate = at.slider(key="arrival_rate_rps").value
    at.slider(key="arrival_rate_rps").set_value(rate + 0.5)
    at.run()
    assert not at.exception and handed == [], handed
    shown = [i.value for i in at.info]
    monkeypatch.undo()
    state = at.session_state[controls.STATE_KEY]
    cap = int(at.session_state[page_whatif.K_REPS])
    _, reps, _, decision = page_whatif.run_until_decided(state.scenario, list(state.strategies), cap,
                                                          page_whatif.DEFAULT_OBJECTIVE)
    text, _ = page_whatif.sequential_banner(*page_whatif.verdict(reps, page_whatif.DEFAULT_OBJECTIVE), decision)
    assert shown[0] == text
