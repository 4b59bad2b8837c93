"""Sessions isolated and fairly served (issue 25, item 3).

* ``app.runner.FairScheduler`` (the simulation workers of a server process), without Streamlit: per-session
  FIFO queues, a free worker goes to the session with the fewest jobs running, a session's newer generation
  drops its older queued jobs, results and exceptions reach the right futures.  Jobs are gated by
  ``threading.Event``s: the assertions are on the order jobs start in, never on wall time.
* Two AppTest sessions of app/main.py in one process: a heavy upload in one does not hold the other's rerun
  behind it (a wall-clock bound, generous: see ``test_a_heavy_upload_in_one_session_does_not_delay_another``).
* A model uploaded in one session is not in another's menu, URL or scenario.json.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor
from pathlib import Path

import pytest
import streamlit as st
from conftest import kpi_tables, uploader
from legacy import legacy_preset
from streamlit.testing.v1 import AppTest

from app import controls, runner
from engine import STRATEGIES, Scenario, presets

MAIN = str(Path(__file__).resolve().parent.parent / "app" / "main.py")
TIMEOUT = 300
WAIT = 60  # seconds an Event-gated step may take before the test gives up (never reached when it passes)


# ------------------------------------------------------------------ the scheduler, without Streamlit
class Gates:
    """Jobs that record when they start and then wait for their gate."""

    def __init__(self):
        self.lock = threading.Lock()
        self.started: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self.began: dict[str, threading.Event] = {}
        self.all_open = False

    def _ev(self, d: dict, name: str) -> threading.Event:
        with self.lock:
            if name not in d:
                d[name] = threading.Event()
                if d is self.gates and self.all_open:
                    d[name].set()
            return d[name]

    def job(self, name: str, fail: BaseException | None = None):
        with self.lock:
            self.started.append(name)
        self._ev(self.began, name).set()
        assert self._ev(self.gates, name).wait(WAIT), f"gate of {name} never opened"
        if fail is not None:
            raise fail
        return f"result of {name}"

    def wait_started(self, *names: str) -> None:
        for n in names:
            assert self._ev(self.began, n).wait(WAIT), f"{n} never started (started: {self.started})"

    def release(self, *names: str) -> None:
        for n in names:
            self._ev(self.gates, n).set()

    def release_all(self) -> None:
        """Open every gate, those of jobs not started yet too."""
        with self.lock:
            self.all_open = True
            gates = list(self.gates.values())
        for ev in gates:
            ev.set()

    def wait_count(self, n: int) -> list[str]:
        deadline = time.monotonic() + WAIT
        while len(self.started) < n and time.monotonic() < deadline:
            time.sleep(0.005)
        with self.lock:
            return list(self.started)


@pytest.fixture
def sched():
    s = runner.FairScheduler(2, name="test-fair")
    g = Gates()
    yield s, g
    g.release_all()
    s.shutdown(wait=True)


def _a_burst_then_b(submit_a, submit_b, g: Gates) -> list[str]:
    """A submits 8 gated jobs, both workers take one; B submits 1; A's first job ends: the start order."""
    fa = submit_a([(f"A{i}",) for i in range(8)])
    g.wait_started("A0", "A1")           # both workers busy with A
    fb = submit_b([("B0",)])
    g.release("A0")                       # one worker frees up: whose job does it take?
    g.wait_count(3)
    g.release_all()
    for f in [*fa, *fb]:
        f.result(timeout=WAIT)
    return list(g.started)


def test_a_second_session_gets_the_next_free_worker_not_the_burst(sched):
    s, g = sched
    order = _a_burst_then_b(lambda calls: s.submit("A", g.job, calls), lambda calls: s.submit("B", g.job, calls), g)
    assert set(order[:2]) == {"A0", "A1"} and order[2] == "B0", order   # B before A's 3rd job
    assert order.index("B0") < order.index("A2")


def test_a_fifo_pool_would_serve_the_burst_first():
    # the same sequence on the pool the app had (one ThreadPoolExecutor, first come first served): A's 3rd job
    # takes the free worker and B waits behind A's whole burst; the test above tells the two apart
    g = Gates()
    pool = ThreadPoolExecutor(2)
    try:
        order = _a_burst_then_b(lambda calls: [pool.submit(g.job, *c) for c in calls],
                                lambda calls: [pool.submit(g.job, *c) for c in calls], g)
        assert order[2] == "A2", order
    finally:
        g.release_all()
        pool.shutdown(wait=True)


def test_within_a_session_jobs_start_in_order_and_one_session_alone_gets_every_worker(sched):
    s, g = sched
    fa = s.submit("A", g.job, [(f"A{i}",) for i in range(5)])
    g.wait_started("A0", "A1")
    assert s.load("A") == (3, 2)
    for i in range(3):                    # each job that ends hands its worker to the session's next job
        g.release(f"A{i}")
        assert g.wait_count(3 + i)[2 + i] == f"A{2 + i}"
    g.release_all()
    assert [f.result(timeout=WAIT) for f in fa] == [f"result of A{i}" for i in range(5)]
    assert s.load("A") == (0, 0)


def test_two_sessions_with_work_alternate(sched):
    s, g = sched
    fa = s.submit("A", g.job, [(f"A{i}",) for i in range(4)])
    g.wait_started("A0", "A1")
    fb = s.submit("B", g.job, [(f"B{i}",) for i in range(4)])
    # each time a job ends, the session with fewer jobs running gets the worker: one each while both have work
    for n, (done, nxt) in enumerate([("A0", "B0"), ("A1", "A2"), ("B0", "B1"), ("A2", "A3"), ("B1", "B2"),
                                     ("A3", "B3")]):
        g.release(done)
        assert g.wait_count(3 + n)[2 + n] == nxt, g.started
    g.release_all()
    for f in [*fa, *fb]:
        f.result(timeout=WAIT)


def test_a_superseded_generation_is_dropped_before_it_starts(sched):
    s, g = sched
    old = s.submit("A", g.job, [(f"old{i}",) for i in range(6)], supersede=True)
    g.wait_started("old0", "old1")
    other = s.submit("B", g.job, [("B0",)], supersede=True)  # another session's work is never dropped
    new = s.submit("A", g.job, [("new0",), ("new1",)], supersede=True)
    assert all(f.cancelled() for f in old[2:]), "the older rerun's queued jobs are cancelled at once"
    assert not old[0].cancelled() and not old[1].cancelled(), "started jobs run to their end"
    assert s.load("A") == (2, 2)
    g.release_all()
    assert old[0].result(timeout=WAIT) == "result of old0" and old[1].result(timeout=WAIT) == "result of old1"
    assert [f.result(timeout=WAIT) for f in new] == ["result of new0", "result of new1"]
    assert other[0].result(timeout=WAIT) == "result of B0"
    assert not any(n.startswith("old") and n not in ("old0", "old1") for n in g.started), g.started
    with pytest.raises(CancelledError):
        old[2].result()


def test_without_supersede_a_new_batch_queues_behind(sched):
    s, g = sched
    first = s.submit("A", g.job, [(f"x{i}",) for i in range(4)])
    second = s.submit("A", g.job, [("y0",)])
    g.wait_started("x0", "x1")
    for i, nxt in enumerate(["x2", "x3", "y0"]):
        g.release(f"x{i}")
        assert g.wait_count(3 + i)[2 + i] == nxt
    g.release_all()
    assert [f.result(timeout=WAIT) for f in [*first, *second]] == \
        [f"result of {n}" for n in ["x0", "x1", "x2", "x3", "y0"]]


def test_results_and_exceptions_reach_their_own_futures(sched):
    s, _ = sched
    fa = s.submit("A", lambda x: x * x, [(i,) for i in range(20)])
    fb = s.submit("B", lambda x: -x, [(i,) for i in range(20)])

    def boom(x):
        raise KeyError(f"job {x}")

    fc = s.submit("C", boom, [(1,), (2,)])
    assert [f.result(timeout=WAIT) for f in fa] == [i * i for i in range(20)]
    assert [f.result(timeout=WAIT) for f in fb] == [-i for i in range(20)]
    for i, f in enumerate(fc, 1):
        with pytest.raises(KeyError, match=f"job {i}"):
            f.result(timeout=WAIT)
    # the workers survive a failing job
    assert s.submit("C", lambda: "still serving", [()])[0].result(timeout=WAIT) == "still serving"


def test_a_stop_or_rerun_while_waiting_drops_the_jobs_not_started(sched, monkeypatch):
    """run_replications waits through ``_gather``: Streamlit's stop/rerun request (``yield_check`` raising)
    drops that rerun's queued jobs, then propagates."""
    s, g = sched
    monkeypatch.setattr(runner, "SCHEDULER", s)
    futures = s.submit("A", g.job, [(f"A{i}",) for i in range(6)])
    g.wait_started("A0", "A1")

    class Stop(Exception):
        pass

    def yield_check():
        raise Stop

    with pytest.raises(Stop):
        runner._gather(futures, yield_check)
    assert all(f.cancelled() for f in futures[2:]) and s.load("A") == (0, 2)
    g.release_all()
    assert [f.result(timeout=WAIT) for f in futures[:2]] == ["result of A0", "result of A1"]
    assert sorted(g.started) == ["A0", "A1"]


def test_gather_raises_a_jobs_exception_and_drops_the_rest(sched, monkeypatch):
    s, g = sched
    monkeypatch.setattr(runner, "SCHEDULER", s)
    futures = s.submit("A", g.job, [("A0", MemoryError("too big")), ("A1",), ("A2",), ("A3",)])
    g.wait_started("A0", "A1")
    g.release("A0")
    with pytest.raises(MemoryError, match="too big"):
        runner._gather(futures, None)
    # A0's worker may have taken A2 before the error was seen; A3 (still queued) is dropped
    assert futures[3].cancelled() and (futures[2].cancelled() or futures[2].running() or futures[2].done())
    g.release_all()


def _in_thread(fn) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 (the test reads it)
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_a_job_an_older_run_dropped_is_queued_again(sched, monkeypatch):
    """Streamlit's fast reruns start a session's next script run on a new thread while the stopped one is still
    running, so the stopped run (A) can submit after its successor (B) has; A's ``supersede`` then drops B's queued
    jobs.  B, still the current run (its ``yield_check`` does not raise), queues them again and gets every result;
    it used to wait forever (``concurrent.futures.wait`` never reports a future cancelled outside an executor as
    done: the page stayed on "Simulating...", seen in Chromium in 2 of 54 and 1 of 80 first slider steps of a fresh
    server under CPU load, bench/step_stress.py)."""
    s, g = sched
    monkeypatch.setattr(runner, "SCHEDULER", s)
    busy = s.submit("S", g.job, [("X0",), ("X1",)])
    g.wait_started("X0", "X1")  # both workers busy: B's jobs stay queued
    calls = [("B0",), ("B1",), ("B2",)]
    futures_b = s.submit("S", g.job, calls, supersede=True)
    resubmitted: list[list[int]] = []

    def resubmit(idx):
        resubmitted.append(list(idx))
        return s.submit("S", g.job, [calls[i] for i in idx])
    a_submitted = threading.Event()  # (B looks for dropped jobs once A's supersede has dropped all three)
    t, out = _in_thread(lambda: runner._gather(futures_b, lambda: a_submitted.wait(WAIT), resubmit))
    futures_a = s.submit("S", g.job, [("A0",)], supersede=True)  # the older run, stopped but not there yet
    a_submitted.set()
    assert all(f.cancelled() for f in futures_b)
    s.cancel(futures_a)  # (the older run sees its stop request: it drops its own jobs)
    g.release_all()
    t.join(WAIT)
    assert not t.is_alive(), "the current run waited forever for jobs an older run dropped"
    assert out == {"value": ["result of B0", "result of B1", "result of B2"]}
    assert resubmitted == [[0, 1, 2]] and "A0" not in g.started and busy[0].result(timeout=WAIT)


def test_a_dropped_job_without_resubmit_raises_instead_of_waiting(sched, monkeypatch):
    """A cancelled future is never "done" for ``concurrent.futures.wait``: ``_gather`` looks for it itself."""
    s, g = sched
    monkeypatch.setattr(runner, "SCHEDULER", s)
    s.submit("S", g.job, [("X0",), ("X1",)])
    g.wait_started("X0", "X1")
    futures = s.submit("S", g.job, [("B0",)])
    s.cancel(futures)
    for yield_check in (None, lambda: None):
        t, out = _in_thread(lambda yc=yield_check: runner._gather(futures, yc))
        t.join(WAIT)
        assert not t.is_alive() and isinstance(out.get("error"), CancelledError), out


# ------------------------------------------------------------------ two AppTest sessions, one process
def _whatif(session: str, **query) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    at.session_state["_test_session"] = session
    for k, v in query.items():
        at.query_params[k] = v
    return at


@pytest.fixture
def sessions(monkeypatch):
    """AppTest gives every session the same id ("test session id"): key the scheduler's sessions by a
    session-state value instead (a real server's session ids are distinct).  Returns the script-run contexts
    seen per session, to stop a session's rerun as Streamlit does when its browser leaves or reruns."""
    contexts: dict[str, object] = {}

    def key(ctx):
        if ctx is None:
            return runner.NO_SESSION
        name = st.session_state.get("_test_session", ctx.session_id)
        contexts[name] = ctx
        return name

    monkeypatch.setattr(runner, "_session_key", key)
    return contexts


#: A heavy but valid upload: every strategy that runs in about a second or less at this load (S-LoRA and
#: batch_t4_k2 take 5-20 s per run here), 10 replications, the longest duration at 40 req/s (144,000 requests
#: per run, under the dashboard's cap): 110 simulations, about 40 s of work for the two workers.
HEAVY_STRATEGIES = [s for s in STRATEGIES if s not in ("slora", "batch_t4_k2")]


def _heavy_scenario_json() -> bytes:
    # A stated scenario, not the product's default: the bound below rests on each of A's jobs taking about a
    # second, which holds on the former default's uncalibrated roofline (tests/legacy.py: naive, vllm, hot_set
    # 0.1-0.2 s, batch 0.9 s a run here).  On today's default (the vLLM profile on an H100) 40 req/s is past
    # saturation (vllm completes about 120,000 of the 142,600 requests) and a run takes 4-6 s (vllm, batch,
    # hot_set): B could then wait longer than the bound for one of A's jobs.  B still reruns the real default.
    sc = legacy_preset("default", duration_s=3600.0, arrival_rate_rps=40.0, seed=4242,
                       strategy=HEAVY_STRATEGIES[0])
    d = {**sc.to_dict(), "strategies": HEAVY_STRATEGIES, "replications": 10}
    return json.dumps(d).encode()


def _timed_run(at: AppTest) -> float:
    t = time.perf_counter()
    at.run()
    return time.perf_counter() - t


def measure_contention(contexts: dict, seed0: int = 7100) -> dict:
    """B's default What-if rerun alone, then while A's heavy upload keeps the workers busy; A is then stopped
    (its rerun abandoned).  Returns the times (s) and what A ran."""
    warm = _whatif("B", seed=str(seed0))
    warm.run()                                 # imports, kernels, the warm-up run
    assert not warm.exception, [e.value for e in warm.exception]
    solo_at = _whatif("B", seed=str(seed0 + 1))
    solo = _timed_run(solo_at)                 # the default page: 5 strategies x 3 replications, not cached
    assert not solo_at.exception and len(kpi_tables(solo_at)) == 1 and len(kpi_tables(solo_at)[0]) > 0

    a = _whatif("A")
    a.run()
    uploader(a, "scenario_upload").set_value(("heavy.json", _heavy_scenario_json(), "application/json"))
    a_done = threading.Event()
    a_error: list[BaseException] = []

    def run_a():
        try:
            a.run(timeout=TIMEOUT)
        except BaseException as e:  # noqa: BLE001  (reported by the test)
            a_error.append(e)
        finally:
            a_done.set()

    ta = threading.Thread(target=run_a, name="session-A", daemon=True)
    ta.start()
    try:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and not a_done.is_set():
            queued, running = runner.SCHEDULER.load("A")
            if queued >= 50 and running == runner.RUN_THREADS:
                break  # A's rerun has queued its simulations and holds every worker
            time.sleep(0.005)
        queued_a = runner.SCHEDULER.load("A")[0]
        assert queued_a >= 50, (runner.SCHEDULER.load("A"), a_error)

        b = _whatif("B", seed=str(seed0 + 2))
        contended = _timed_run(b)
        assert not b.exception and len(kpi_tables(b)[0]) == len(kpi_tables(solo_at)[0])
        queued_after_b = runner.SCHEDULER.load("A")[0]
    finally:
        # A's browser leaves (or reruns): Streamlit asks its script run to stop; the jobs it queued are dropped
        if "A" in contexts:
            contexts["A"].script_requests.request_stop()
        assert a_done.wait(WAIT) and not a_error, a_error
        queued_after_stop = runner.SCHEDULER.load("A")[0]  # A's script has ended: what it left queued
        deadline = time.monotonic() + WAIT
        while runner.SCHEDULER.load("A") != (0, 0) and time.monotonic() < deadline:
            time.sleep(0.05)
    return {"solo": solo, "contended": contended, "a_queued_at_b_start": queued_a,
            "a_queued_after_b": queued_after_b, "a_queued_after_stop": queued_after_stop,
            "a_load_after_stop": runner.SCHEDULER.load("A")}


@pytest.mark.timeout(600)
def test_a_heavy_upload_in_one_session_does_not_delay_another(sessions):
    """Session A uploads a scenario.json that asks for 110 long simulations (every input valid); while they
    run, session B reruns the default What-if page.  B must finish within 3x its own solo time + 5 s: with the
    fair scheduler B's jobs wait for at most one of A's (about a second each) and then have a worker to
    themselves.  Measured on the 2-core CI machine under load (load average 4-7): B alone 0.35-0.8 s; B beside A
    0.8-1.9 s with the fair scheduler, 29-43 s with the old first-come-first-served pool (one
    ThreadPoolExecutor, monkeypatched in: B waited behind all of A's 110 runs), against a bound of 6-7.4 s.
    A wall-clock bound is unavoidable here; its margin (3x + 5 s, B's solo time measured in this test under
    the same load) is generous so that a loaded CI machine cannot make it flake.  Then A's rerun is stopped
    (its browser left): its queued jobs are dropped at once and the workers are free within one job."""
    m = measure_contention(sessions)
    print(f"\nsolo {m['solo']:.2f} s, contended {m['contended']:.2f} s, A queued {m['a_queued_at_b_start']} "
          f"-> {m['a_queued_after_b']}")
    assert m["contended"] <= 3 * m["solo"] + 5.0, m
    assert m["a_queued_after_b"] > 0, "A still had work queued when B finished: B was not served after it"
    assert m["a_queued_after_stop"] == 0, "the stopped rerun's queued jobs are dropped before its script ends"
    assert m["a_load_after_stop"] == (0, 0), m


# ------------------------------------------------------------------ uploaded models stay in their session
LLAMA_1B = {"model_type": "llama", "_name_or_path": "acme/Session-A-Llama-1B", "hidden_size": 2048,
            "intermediate_size": 5632, "num_attention_heads": 32, "num_key_value_heads": 4,
            "num_hidden_layers": 22, "vocab_size": 32000, "max_position_embeddings": 2048,
            "torch_dtype": "float16", "hidden_act": "silu"}


def _plain(text: str) -> str:
    """A rendered warning as plain text (Markdown escapes and word joiners removed)."""
    return text.replace("\\", "").replace("\u2060", "")


def test_a_model_uploaded_in_one_session_is_absent_from_another():
    fast = {"duration_s": "60", "strategy": "naive"}
    a = _whatif("A", **fast)
    a.run()
    uploader(a, "config_upload").set_value(("config.json", json.dumps(LLAMA_1B).encode(),
                                                    "application/json"))
    a.run()
    assert not a.exception and not a.error
    name = "session-a-llama-1b"
    assert a.selectbox(key="model").value == name and name in a.selectbox(key="model").options
    assert a.session_state[controls.UPLOADED_MODELS_KEY] == [name]
    assert name in presets.MODELS and not presets.is_preset_model(name)  # the engine's registry: per process

    # another session: not in its menu; its URL naming the model is warned about and dropped
    b = _whatif("B", model=name, **fast)
    b.run()
    assert not b.exception
    assert name not in b.selectbox(key="model").options
    default_model = presets.SCENARIOS["default"]["model"]  # llama-3.1-8b since issue 24
    assert b.selectbox(key="model").value == default_model == "llama-3.1-8b"
    assert b.session_state[controls.STATE_KEY].scenario.model == default_model
    warned = [_plain(w.value) for w in b.warning]
    assert any("`model`" in w and name in w and "not one of" in w for w in warned), warned
    assert not any(name in o for o in b.selectbox(key="model").options)
    assert b.query_params.get("model") in (None, [default_model], default_model)
    assert controls.UPLOADED_MODELS_KEY not in b.session_state

    # a scenario.json that only names A's model (no definition) is refused in B; one that carries the
    # definition makes it B's model too (B uploaded it)
    sc = Scenario.from_preset("default", duration_s=60.0, model=name)
    named = {k: v for k, v in sc.to_dict().items() if k != "model_definition"}
    uploader(b, "scenario_upload").set_value(("named.json", json.dumps(named).encode(),
                                                      "application/json"))
    b.run()
    errors = [_plain(e.value) for e in b.error]
    assert len(errors) == 1 and "named.json" in errors[0] and "model" in errors[0], errors
    assert name not in errors[0].split("allowed:")[1], "the allowed models are the presets and B's only"
    assert name not in b.selectbox(key="model").options
    # an unknown model's message does not list the models other sessions uploaded (the engine's would)
    unknown = {**named, "model": "no-such-model"}
    uploader(b, "scenario_upload").set_value(("unknown.json", json.dumps(unknown).encode(),
                                                      "application/json"))
    b.run()
    errors = [_plain(e.value) for e in b.error]
    assert len(errors) == 1 and "no-such-model" in errors[0] and name not in errors[0], errors
    uploader(b, "scenario_upload").set_value(("defined.json", sc.to_json().encode(), "application/json"))
    b.run()
    assert not b.exception and not b.error, [e.value for e in b.error]
    assert b.selectbox(key="model").value == name and b.session_state[controls.UPLOADED_MODELS_KEY] == [name]

    # outside any session (the pure part, tests, the CLI) only the presets are offered
    assert name not in controls.model_options()
    assert controls.model_options() == [n for n in presets.MODELS if presets.is_preset_model(n)]


def test_a_session_uploads_at_most_its_own_cap(monkeypatch):
    monkeypatch.setattr(controls, "MAX_UPLOADED_MODELS", 1)
    a = _whatif("A", duration_s="60", strategy="naive")
    a.run()
    up = uploader(a, "config_upload")
    up.set_value(("one.json", json.dumps({**LLAMA_1B, "_name_or_path": "acme/Cap-One"}).encode(), "application/json"))
    a.run()
    assert a.selectbox(key="model").value == "cap-one"
    uploader(a, "config_upload").set_value(
        ("two.json", json.dumps({**LLAMA_1B, "_name_or_path": "acme/Cap-Two"}).encode(), "application/json"))
    a.run()
    assert any("two.json" in e.value and "at most 1" in e.value for e in a.error), [e.value for e in a.error]
    assert a.session_state[controls.UPLOADED_MODELS_KEY] == ["cap-one"]
    # another session has its own allowance
    b = _whatif("B", duration_s="60", strategy="naive")
    b.run()
    uploader(b, "config_upload").set_value(
        ("two.json", json.dumps({**LLAMA_1B, "_name_or_path": "acme/Cap-Two"}).encode(), "application/json"))
    b.run()
    assert not b.error and b.selectbox(key="model").value == "cap-two"
    assert "cap-one" not in b.selectbox(key="model").options
