"""Cached calls into the engine (the only place the app runs simulations).

Results are cached with ``st.cache_data`` keyed on the scenario's JSON (every
field) and ``ENGINE_VERSION``; the Numba kernels are warmed once per process.

Simulation workers (``run_replications``): ``RUN_THREADS`` threads per server process
(``FairScheduler``), shared fairly by its sessions.  The rule:

* Each session (its Streamlit session id; one shared key outside a script run) has a FIFO
  queue of jobs.  A free worker takes the oldest queued job of the session with the fewest
  jobs running (ties: the session served longest ago), so while two sessions have work each
  gets a worker, and one session's burst waits behind the other's next job, not in front of it.
  With one session only, it gets every worker.
* A job that has started runs to its end (a jitted run cannot be interrupted); the work cap of
  one run bounds how long another session waits for a worker.
* A job that has not started is dropped (its future cancelled, never run) when its rerun is
  superseded or abandoned: the same session calls ``run_replications`` again (a newer rerun:
  each call starts a new generation of the session's jobs and drops the older generations'
  queued jobs), or the rerun waiting for it is asked to stop or rerun (Streamlit's stop/rerun
  request, checked every ``POLL_S`` while waiting; the run then stops or reruns as at any
  ``st`` call).  "Newer" is by script run, not by call: Streamlit's fast reruns start a session's
  next run on a new thread while the stopped one is still running, so a run asked to stop
  queues nothing, and a run whose queued jobs an older run dropped anyway queues them again
  (``_gather``).
* Speculative jobs (``anticipate``: the scenarios one slider step away, computed while the user
  reads the page) wait in a second queue per session and start only when no session has a job
  of the first kind queued and no script run is in progress (``FairScheduler.rendering``; and
  ``spec_delay_s`` after the last one ended), so they take idle workers only: a rerun of any
  session waits at most for the speculative runs already started (one run per worker, bounded by
  the per-run caps).  A session's newer rerun or newer speculation drops its speculative jobs not
  started.
"""
from __future__ import annotations

import atexit
import functools
import gc
import hashlib
import io
import itertools
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import FIRST_EXCEPTION, CancelledError, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from engine import ENGINE_VERSION, Scenario, read_trace, shipped_trace, simulate, simulate_summary

from . import charts, exports
from .controls import MAX_REQUESTS_PER_RUN, cap_scenario

#: Largest trace upload, in MB (matches server.maxUploadSize in .streamlit/config.toml).
MAX_UPLOAD_MB = 20
#: Cap on the simulated requests of one sweep or crossover grid (all runs together).
MAX_GRID_REQUESTS = 2_500_000


def compile_kernels() -> None:
    """Compile (or load from Numba's cache) the engine's kernels with one tiny run; the tests and benchmarks call
    it before their first timed or time-limited run."""
    simulate(Scenario.from_preset("default", duration_s=2.0, warmup_s=0.5, arrival_rate_rps=5.0,
                                  num_adapters=8, hot_set_k=-1, drain_s=5.0))


def _warm() -> float:
    t = time.perf_counter()
    compile_kernels()
    # The ~250,000 objects of the imported modules (pandas, altair, numba, the app) never die: out of the
    # collector's reach, Streamlit's full collection after every rerun (runner.postScriptGC) takes 12-20 ms
    # instead of 140-500 ms (measured in Chromium, issue 26).
    gc.collect()
    gc.freeze()
    return time.perf_counter() - t


@st.cache_resource(show_spinner=False)
def warmup_future() -> Future:
    """Compile (or load from Numba's cache) the engine's kernels once per process, on a background thread
    started by the first session: that session's page (its sidebar, its controls) is drawn meanwhile, and every
    session waits on the same Future before it simulates (Numba compiles a function once, under its lock)."""
    fut: Future = Future()
    fut.started_at = time.time()  # type: ignore[attr-defined]

    def work() -> None:
        try:
            fut.set_result(_warm())
        except BaseException as e:  # noqa: BLE001 (the page reports it)
            fut.set_exception(e)
    threading.Thread(target=work, name="engine-warmup", daemon=True).start()
    return fut


def warmup() -> float:
    """Block until the kernels are ready (``warmup_future``); the warm-up's seconds."""
    return warmup_future().result()


#: A full result holds every request (about 140 bytes each: 0.55 MB at the default scenario's 4,000 requests).
#: Runs of at most SMALL_RUN_REQUESTS expected requests (the live view's, and all that ``anticipate`` computes)
#: are kept in a cache of FULL_CACHE_ENTRIES (the current reruns of several sessions and their anticipated
#: next steps: at most about 210 MB); larger ones in one of BIG_CACHE_ENTRIES.
SMALL_RUN_REQUESTS = 12_000
FULL_CACHE_ENTRIES = 128
BIG_CACHE_ENTRIES = 32
SUMMARY_CACHE_ENTRIES = 20_000


def _full(scenario_json: str, engine_version: str, trace_digest: str | None = None,
          _trace: bytes | None = None) -> dict:
    sc = Scenario.from_json(scenario_json)
    wl = read_trace(io.BytesIO(_trace), sc) if _trace is not None else None
    if wl is not None:  # the hosted app's work cap, as for a generated workload (controls.cap_scenario)
        n = int((wl.arrival_s < sc.duration_s).sum())
        if n > MAX_REQUESTS_PER_RUN:
            raise ValueError(f"trace: {n:,} requests arrive within duration_s ({sc.duration_s:g} s); allowed: at "
                             f"most {MAX_REQUESTS_PER_RUN:,} per strategy on the dashboard (a shorter duration, or "
                             "python -m engine run --trace, which takes up to 1,000,000 rows)")
    r = simulate(sc, trace=wl)
    window = (sc.warmup_s, sc.duration_s)
    return {"requests": r.requests, "timeseries": r.timeseries, "summary": r.summary, "replicas": r.replicas,
            # chart-ready frames, computed once per scenario
            "cdf": charts.cdf_frame({sc.strategy: r.requests}, window),
            "ts": charts.timeseries_frame({sc.strategy: r.timeseries})}


_full_small = st.cache_data(max_entries=FULL_CACHE_ENTRIES, show_spinner=False)(_full)
_full_big = st.cache_data(max_entries=BIG_CACHE_ENTRIES, show_spinner=False)(_full)


def small_run(sc: Scenario) -> bool:
    """A generated open-loop run of at most ``SMALL_RUN_REQUESTS`` expected requests (``Scenario.expected_requests``):
    the live view's size, the only runs ``anticipate`` computes."""
    return not sc.trace and sc.arrival_process != "closed" and sc.expected_requests() <= SMALL_RUN_REQUESTS


@st.cache_data(max_entries=SUMMARY_CACHE_ENTRIES, show_spinner=False)
def _summary(scenario_json: str, engine_version: str) -> dict:
    return simulate_summary(Scenario.from_json(scenario_json))


def capped(sc: Scenario) -> Scenario:
    return cap_scenario(sc)[0]


#: Simulations running now, by what they compute: a session asking for one that another session is computing
#: waits for that result instead of computing it again (``st.cache_data`` shares finished results only).
_INFLIGHT: dict[tuple, Future] = {}
_INFLIGHT_LOCK = threading.Lock()

#: The keys of ``once`` that returned a result, most recently asked for last, at most as many of a kind as
#: (a little under) that kind's cache holds: every call of the cached functions goes through ``once`` and both
#: this and ``st.cache_data``'s memory cache keep the most recently used entries, so a key held here is in the
#: cache.  ``cached_replications`` reads it to serve a rerun whose runs are all cached without the workers.
_DONE_BOUND = {"full": FULL_CACHE_ENTRIES * 3 // 4, "summary": SUMMARY_CACHE_ENTRIES * 3 // 4}
_DONE: dict[str, OrderedDict] = {k: OrderedDict() for k in _DONE_BOUND}


def _remember(key: tuple) -> None:
    done = _DONE.get(key[0]) if len(key) == 2 else None  # (a replayed trace's runs are not tracked)
    if done is None:
        return
    with _INFLIGHT_LOCK:
        done[key[1]] = True
        done.move_to_end(key[1])
        while len(done) > _DONE_BOUND[key[0]]:
            done.popitem(last=False)


def once(key: tuple, fn: Callable[[], Any]) -> Any:
    """``fn()`` (a call of an ``st.cache_data`` function), computed once for all the callers that ask for ``key``
    while it runs: the first caller computes, the others wait for it (its exception is theirs) and then call
    ``fn()`` themselves, a cache hit that gives each its own copy (no object shared between sessions).  The owner
    registers only once it is running, so a waiter always waits for a computation in progress (never for a
    queued job: no deadlock on the workers)."""
    with _INFLIGHT_LOCK:
        fut = _INFLIGHT.get(key)
        owner = fut is None
        if owner:
            fut = _INFLIGHT[key] = Future()
            fut.set_running_or_notify_cancel()
    if not owner:
        fut.result()
        out = fn()
        _remember(key)
        return out
    try:
        out = fn()
    except BaseException as e:
        fut.set_exception(e)
        raise
    else:
        fut.set_result(out)
        _remember(key)
        return out
    finally:
        with _INFLIGHT_LOCK:
            _INFLIGHT.pop(key, None)


@functools.lru_cache(maxsize=1024)
def _run_key(sc: Scenario, strategy: str | None, seed: int | None) -> tuple[str, bool]:
    """(cache key: the capped, validated scenario as compact JSON; whether it is a small run) of ``sc`` with
    ``strategy`` / ``seed`` in place of its own (None: its own); ValueError if invalid.  Memoised (every caller
    passes all three arguments, positionally: one entry per run): a live step asks for the same 15 keys its
    anticipation asked for (replace, cap, validate and JSON: ~0.25 ms each)."""
    kw = {k: v for k, v in (("strategy", strategy), ("seed", seed)) if v is not None and v != getattr(sc, k)}
    sc = capped(sc.replace(**kw) if kw else sc).validate()
    return sc.to_json(indent=None), small_run(sc)


def _full_call(sc: Scenario, strategy: str | None = None) -> tuple[tuple, Callable[[], dict], bool]:
    """(``once`` key, cached call, whether it is a small run) of ``sc``'s generated full result (with ``strategy``
    in place of its own); ValueError if invalid."""
    js, small = _run_key(sc, strategy, None)
    cached = _full_small if small else _full_big
    return ("full", js), lambda: cached(js, ENGINE_VERSION), small


def _summary_call(sc: Scenario, strategy: str | None = None, seed: int | None = None
                  ) -> tuple[tuple, Callable[[], dict]]:
    """(``once`` key, cached call) of ``sc``'s summary (with ``strategy`` / ``seed`` in place of its own);
    ValueError if invalid."""
    js, _ = _run_key(sc, strategy, seed)
    return ("summary", js), lambda: _summary(js, ENGINE_VERSION)


def cached_replications(sc: Scenario, strategies: list[str], n_reps: int, first: int = 0
                        ) -> tuple[dict[str, dict], dict[str, list[dict]], dict[str, str]] | None:
    """What ``run_replications(sc, strategies, n_reps, first=first)`` returns, read from the caches in this thread
    when every run is there (a slider step the server anticipated, a rerun for a page-local control, a shared
    scenario, a later look of a sequential comparison): no worker hand-off, no spinner; None when some run is not
    cached (or is not a generated live-view run: only the small runs' cache is tracked against its size,
    ``_DONE_BOUND``)."""
    keys = []  # the ``once`` keys of the runs _job makes
    try:
        for s in strategies:
            key, _, small = _full_call(sc, s)
            if not small:
                return None
            if first == 0:
                keys.append(key)
            keys += [_summary_call(sc, s, sc.seed + k)[0] for k in range(max(1, first), n_reps)]
    except ValueError:
        return None  # (the workers' jobs report it)
    with _INFLIGHT_LOCK:
        if not all(key[1] in _DONE[key[0]] for key in keys):
            return None
    return read_replications(sc, strategies, n_reps, first)  # (every read a cache hit)


def replication_digest(sc: Scenario, strategies: Iterable[str], n_reps: int) -> bytes | None:
    """A digest of the runs ``run_replications(sc, strategies, n_reps)`` reads (their cache keys, in its order, and
    the engine version): what a view built from them is keyed on (``view``); None when one cannot run."""
    h = hashlib.blake2b(ENGINE_VERSION.encode(), digest_size=16)
    try:
        for s in strategies:
            for k in range(n_reps):
                h.update(b"\0" + _run_key(sc, s, None if k == 0 else sc.seed + k)[0].encode())
    except ValueError:
        return None
    return h.digest()


#: At most this many views (``view``) are kept, the least recently used dropped first.
VIEW_ENTRIES = 512
#: Pure products of cached runs (a page's verdict, table and chart markup), by a key naming the runs
#: (``replication_digest``) and the settings they were built for: built by a page's rerun, or ahead of a slider step
#: by ``anticipate``'s ``then``; shared between sessions (immutable values: strings and tuples of them).
_VIEWS: OrderedDict = OrderedDict()


def view(key: Hashable, build: Callable[[], Any]) -> Any:
    """``build()``, kept under ``key`` (``VIEW_ENTRIES`` at most): a later call with the same key returns it without
    building it again.  ``build`` must be pure and return an immutable value: every session gets the same object."""
    with _INFLIGHT_LOCK:
        if key in _VIEWS:
            _VIEWS.move_to_end(key)
            return _VIEWS[key]
    value = build()
    with _INFLIGHT_LOCK:
        _VIEWS[key] = value
        _VIEWS.move_to_end(key)
        while len(_VIEWS) > VIEW_ENTRIES:
            _VIEWS.popitem(last=False)
    return value


def read_replications(sc: Scenario, strategies: list[str], n_reps: int, first: int = 0
                      ) -> tuple[dict[str, dict], dict[str, list[dict]], dict[str, str]]:
    """What ``run_replications(sc, strategies, n_reps, first=first)`` returns, read (or computed) through the caches
    in this thread, one run after the other: for a worker's job (``anticipate``'s ``then``), which must not wait for
    the workers, and for ``cached_replications``."""
    results: dict[str, dict] = {}
    reps: dict[str, list[dict]] = {}
    failed: dict[str, str] = {}
    for s in strategies:
        try:
            got = [run(sc, None, s)] if first == 0 else []
            got_reps = [got[0]["summary"]] if got else []
            got_reps += [summary(sc, s, sc.seed + k) for k in range(max(1, first), n_reps)]
        except ValueError as e:
            failed[s] = str(e)
            continue
        if got:
            results[s] = got[0]
        reps[s] = got_reps
    return results, reps, failed


def run(sc: Scenario, trace: dict | None = None, strategy: str | None = None) -> dict:
    """Full result (requests, timeseries, summary) of one scenario (with ``strategy`` in place of its own);
    ValueError if invalid.

    ``trace``: ``{"digest": ..., "data": bytes}`` of an uploaded trace CSV to replay.
    """
    if trace is None:
        key, call, _ = _full_call(sc, strategy)
        return once(key, call)
    js, _ = _run_key(sc, strategy, None)
    return once(("full", js, trace["digest"]),
                lambda: _full_big(js, ENGINE_VERSION, trace["digest"], trace["data"]))


def summary(sc: Scenario, strategy: str | None = None, seed: int | None = None) -> dict:
    """Summary metrics only (sweeps, crossover), of ``sc`` with ``strategy`` / ``seed`` in place of its own;
    cached separately and much smaller."""
    return once(*_summary_call(sc, strategy, seed))


@st.cache_data(max_entries=16, show_spinner=False)
def _example_trace_csv(name: str, scenario_json: str, engine_version: str) -> bytes:
    return exports.csv_bytes(shipped_trace(name, Scenario.from_json(scenario_json)))


def example_trace_csv(name: str, sc: Scenario) -> bytes:
    """A shipped trace in the upload format, with adapters drawn as ``sc`` draws them (replays ``sc`` exactly
    when ``sc.trace == name``)."""
    return _example_trace_csv(name, sc.to_json(), ENGINE_VERSION)


def trace_record(name: str, data: bytes) -> dict:
    if len(data) > MAX_UPLOAD_MB * 1024 * 1024:
        raise ValueError(f"trace: {name} is {len(data) / 2**20:.1f} MB; allowed: at most {MAX_UPLOAD_MB} MB")
    return {"name": name, "data": data, "digest": hashlib.sha256(data).hexdigest(), "size": len(data)}


#: Threads one rerun spreads its simulations over (the jitted loop releases the GIL: ``nogil=True``).
RUN_THREADS = max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
#: How often (seconds) a rerun waiting for its simulations checks whether Streamlit asked it to stop or rerun.
POLL_S = 0.1
#: The key of the work submitted outside a script run (no session).
NO_SESSION = "<no session>"


@dataclass
class _Job:
    future: Future
    fn: Callable[..., Any]
    args: tuple
    generation: int


@dataclass
class _Session:
    queue: deque = field(default_factory=deque)   # _Job, oldest first
    spec: deque = field(default_factory=deque)    # speculative _Job, oldest first: only when no session has queue
    running: int = 0
    served: int = 0                                # the dispatch tick of its last started job (0: never)


class FairScheduler:
    """``workers`` threads serving per-session FIFO queues fairly (the rule: the module docstring).

    ``submit(key, fn, calls)`` queues ``fn(*args)`` for every ``args`` of ``calls`` as one generation of the
    session ``key``'s work and returns their ``Future``s; with ``supersede`` the queued jobs of ``key``'s
    older generations are dropped first (cancelled, never run).  ``cancel(futures)`` drops the ones not
    started.  A job's exception is set on its future.  The threads start with the first job."""

    def __init__(self, workers: int, name: str = "whatif-sim", spec_delay_s: float = 0.0):
        self.workers = max(1, int(workers))
        self.name = name
        self._cv = threading.Condition()
        self._sessions: dict[Hashable, _Session] = {}   # only sessions with jobs queued or running
        self._generation = itertools.count(1)
        self._tick = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._rendering = 0          # script runs in progress (``rendering``): no speculative job starts meanwhile
        self._idle_since = 0.0       # time.monotonic() when the last one ended
        self.spec_delay_s = spec_delay_s   # and speculative jobs wait this long after it

    @contextmanager
    def rendering(self):
        """Around a script run: speculative jobs start only when no script run is in progress and the last one
        ended ``spec_delay_s`` ago (its page sent, the browser drawing it), so they never slow a rerun down by
        more than the runs already started."""
        with self._cv:
            self._rendering += 1
        try:
            yield
        finally:
            with self._cv:
                self._rendering -= 1
                self._idle_since = time.monotonic()
                self._cv.notify_all()

    def submit(self, key: Hashable, fn: Callable[..., Any], calls: Iterable[tuple], *,
               supersede: bool = False, speculative: bool = False) -> list[Future]:
        futures: list[Future] = []
        with self._cv:
            if self._closed:
                raise RuntimeError("FairScheduler: submit after shutdown")
            gen = next(self._generation)
            sess = self._sessions.setdefault(key, _Session())
            stale = [j for j in sess.queue if j.generation < gen] if supersede and not speculative else []
            if stale:
                sess.queue = deque(j for j in sess.queue if j.generation >= gen)
            if supersede or speculative:  # a newer rerun or speculation drops the older speculation
                stale += sess.spec
                sess.spec = deque()
            target = sess.spec if speculative else sess.queue
            for args in calls:
                futures.append(Future())
                target.append(_Job(futures[-1], fn, tuple(args), gen))
            self._forget_if_idle(key)
            while len(self._threads) < min(self.workers, sum(len(s.queue) + len(s.spec) + s.running
                                                             for s in self._sessions.values())):
                t = threading.Thread(target=self._work, name=f"{self.name}_{len(self._threads)}", daemon=True)
                self._threads.append(t)
                t.start()
            self._cv.notify_all()
        for j in stale:
            j.future.cancel()
        return futures

    def cancel(self, futures: Iterable[Future]) -> int:
        """Drop the given jobs that have not started (their futures cancelled); returns how many."""
        drop = set(futures)
        dropped: list[_Job] = []
        with self._cv:
            for key, sess in list(self._sessions.items()):
                for name in ("queue", "spec"):
                    q = getattr(sess, name)
                    if any(j.future in drop for j in q):
                        dropped += [j for j in q if j.future in drop]
                        setattr(sess, name, deque(j for j in q if j.future not in drop))
                self._forget_if_idle(key)
        for j in dropped:
            j.future.cancel()
        return len(dropped)

    def load(self, key: Hashable) -> tuple[int, int]:
        """(jobs queued, jobs running) of the session ``key`` (speculative jobs queued: ``speculating``)."""
        with self._cv:
            sess = self._sessions.get(key)
            return (len(sess.queue), sess.running) if sess else (0, 0)

    def pending(self) -> int:
        """Jobs of every session queued, speculative or running (0: the workers are idle)."""
        with self._cv:
            return sum(len(s.queue) + len(s.spec) + s.running for s in self._sessions.values())

    def speculating(self, key: Hashable) -> int:
        """Speculative jobs of the session ``key`` queued (not started)."""
        with self._cv:
            sess = self._sessions.get(key)
            return len(sess.spec) if sess else 0

    def shutdown(self, wait: bool = True) -> None:
        """Drop every queued job; the threads end after their current job (joined if ``wait``)."""
        with self._cv:
            self._closed = True
            dropped = [j for s in self._sessions.values() for j in (*s.queue, *s.spec)]
            for key, s in list(self._sessions.items()):
                s.queue.clear()
                s.spec.clear()
                self._forget_if_idle(key)
            self._cv.notify_all()
        for j in dropped:
            j.future.cancel()
        if wait:
            for t in self._threads:
                if t is not threading.current_thread():
                    t.join()

    def _forget_if_idle(self, key: Hashable) -> None:
        sess = self._sessions.get(key)
        if sess is not None and not sess.queue and not sess.spec and not sess.running:
            del self._sessions[key]  # nothing queued or running: no state kept for the session

    def _next(self) -> tuple[Hashable, _Job] | None:
        """Under the lock: the next job by the rule, marked running; None once shut down."""
        while True:
            kind = "queue"
            ready = [(s.running, s.served, k) for k, s in self._sessions.items() if s.queue]
            wake = None
            if not ready and not self._rendering:  # speculation: only while no rerun is queued or rendering
                kind, now = "spec", time.monotonic()
                quiet = self._idle_since + self.spec_delay_s
                ready = [(s.running, s.served, k) for k, s in self._sessions.items() if s.spec] if quiet <= now else []
                if not ready and any(s.spec for s in self._sessions.values()):
                    wake = quiet - now
            if ready:
                key = min(ready, key=lambda r: r[:2])[2]
                sess = self._sessions[key]
                job = getattr(sess, kind).popleft()
                if not job.future.set_running_or_notify_cancel():
                    self._forget_if_idle(key)
                    continue  # cancelled by its caller (Future.cancel) while queued
                sess.running += 1
                sess.served = next(self._tick)
                return key, job
            if self._closed:
                return None
            self._cv.wait(timeout=wake)

    def _work(self) -> None:
        while True:
            with self._cv:
                picked = self._next()
            if picked is None:
                return
            key, job = picked
            try:
                result = job.fn(*job.args)
            except BaseException as e:  # as ThreadPoolExecutor: the caller gets it from the future
                job.future.set_exception(e)
            else:
                job.future.set_result(result)
            del job, picked  # no reference to the result kept by an idle worker
            with self._cv:
                self._sessions[key].running -= 1
                self._forget_if_idle(key)
                self._cv.notify_all()


#: Off with ``LORA_WHATIF_ANTICIPATE=0`` in the server's environment: no speculative simulations.
ANTICIPATE = os.environ.get("LORA_WHATIF_ANTICIPATE", "1").strip() != "0"
#: At most this many simulated requests per ``anticipate`` call, all its runs together (the rest is not queued).
ANTICIPATE_MAX_REQUESTS = 400_000
#: Seconds after the last script run ended before a speculative run starts: its page is sent and drawn first
#: (two simulation threads holding the GIL for their Python parts delayed a page by ~250 ms in Chromium).
ANTICIPATE_DELAY_S = 0.15


#: One scheduler per server process, shared fairly by its sessions (the module docstring).
SCHEDULER = FairScheduler(RUN_THREADS, spec_delay_s=ANTICIPATE_DELAY_S)
# At exit, its workers finish the run they are in (each bounded by the per-run caps) and take no other: a daemon
# thread still inside the jitted loop when the interpreter finalizes aborts the process ("terminate called without
# an active exception", seen in 2 of 10 runs of tests/test_app_live.py, whose last step leaves speculative runs).
atexit.register(SCHEDULER.shutdown)


def _session_key(ctx) -> Hashable:
    """The key of a script run's session in ``SCHEDULER`` (``NO_SESSION`` without one)."""
    return ctx.session_id if ctx is not None else NO_SESSION


def _yield_check(ctx) -> Callable[[], None] | None:
    """A script run's stop/rerun check (None outside a script run).  Called before a run submits: a run already asked
    to stop queues nothing, since with fast reruns its ``supersede`` would drop its successor's jobs."""
    return getattr(ctx, "yield_check", None)


def _gather(futures: list[Future], yield_check: Callable[[], None] | None,
            resubmit: Callable[[list[int]], list[Future]] | None = None) -> list:
    """The futures' results in order; the first job exception is raised.  While waiting, ``yield_check`` (a script
    run's stop/rerun check) is called every ``POLL_S``; whatever is raised (a job's exception, Streamlit's stop or
    rerun) first drops this call's jobs that have not started.

    A job dropped while this run still waits for it, and still is its session's current run (``yield_check``
    does not raise), was dropped by an older run of the session: with Streamlit's fast reruns (the default) a
    widget change stops the script run in progress and starts the next one on a new thread at once, so the
    stopped run can submit after its successor has, and its ``supersede`` drops the successor's queued jobs.
    ``resubmit(indices)`` queues those jobs again (their new futures); without it a dropped job raises
    ``CancelledError``.  (``concurrent.futures.wait`` never counts a future cancelled outside an executor as done:
    cancellations are looked for here, or such a run would wait forever, seen as a page stuck on "Simulating...".)"""
    futures = list(futures)
    try:
        while True:
            failed = next((f for f in futures if f.done() and not f.cancelled() and f.exception() is not None), None)
            if failed is not None:
                raise failed.exception()
            if yield_check is not None:
                yield_check()  # (a run asked to stop or rerun stops here, before it queues anything again)
            dropped = [i for i, f in enumerate(futures) if f.cancelled()]
            if dropped:
                if resubmit is None:
                    raise CancelledError(f"{len(dropped)} of this run's simulations were dropped")
                for i, f in zip(dropped, resubmit(dropped)):
                    futures[i] = f
            pending = [f for f in futures if not f.done()]
            if not pending:
                return [f.result() for f in futures]
            wait(pending, timeout=POLL_S, return_when=FIRST_EXCEPTION)
    except BaseException:
        SCHEDULER.cancel(futures)
        raise


def _job(ctx, trace: dict | None = None, summaries_only: bool = False,
         then: Callable[[Scenario], Any] | None = None) -> Callable[[Scenario, str | None, int], Any]:
    """The worker job of a script run ``ctx``: replication ``k`` of ``strategy`` on ``sc`` as ``run_replications``
    asks for it (the full result of replication 0, else a summary at seed + k), through the caches; a ValueError
    (the scenario cannot run) is returned, not raised.  ``strategy`` None: ``then(sc)``."""
    def job(sc: Scenario, strategy: str | None, k: int):
        if ctx is not None:
            add_script_run_ctx(threading.current_thread(), ctx)
        try:
            if strategy is None:
                return then(sc) if then is not None else None
            if k == 0 and not summaries_only:
                return run(sc, trace, strategy)
            return summary(sc, strategy, sc.seed + k)
        except ValueError as e:
            return e
    return job


def anticipate(scenarios: Iterable[Scenario], strategies: list[str], n_reps: int,
               then: Callable[[Scenario], Any] | None = None) -> int:
    """Queue, as speculative jobs of this session (``FairScheduler``: idle workers only, dropped by the session's
    next rerun), the runs ``run_replications(sc, strategies, n_reps)`` would ask for on each scenario, in the
    order given, so that a slider step to one of them finds its results in the cache (or in flight: ``once``).
    Open-loop generated scenarios of at most ``SMALL_RUN_REQUESTS`` requests a run only, at most
    ``ANTICIPATE_MAX_REQUESTS`` simulated requests in all; nothing with ``ANTICIPATE`` off.  ``then``: a job of
    its own, queued after each scenario's runs, calls ``then(sc)`` (a page builds the views of its results:
    ``view``; it reads them through ``read_replications``, which waits for a run still in progress on the other
    worker and computes nothing twice).  Returns the number of runs queued."""
    if not ANTICIPATE or n_reps < 1:
        return 0
    ctx = get_script_run_ctx()
    calls, budget = [], ANTICIPATE_MAX_REQUESTS
    for sc in scenarios:
        sc = capped(sc)
        if not small_run(sc):
            continue  # (a trace, a closed loop or a long run: not a live view's step)
        cost = sc.expected_requests() * len(strategies) * n_reps
        if cost > budget:
            break
        budget -= cost
        calls += [(sc, s, k) for s in strategies for k in range(n_reps)]
        if then is not None:
            calls.append((sc, None, -1))
    n = sum(1 for c in calls if c[1] is not None)
    if calls:  # into the caches; a ValueError is the rerun's to report, if one asks for that run
        check = _yield_check(ctx)
        if check is not None:
            check()  # (a run asked to stop would drop its successor's speculation)
        SCHEDULER.submit(_session_key(ctx), _job(ctx, then=then), calls, speculative=True)
    return n


def run_replications(sc: Scenario, strategies: list[str], n_reps: int, trace: dict | None = None,
                     summaries_only: bool = False, first: int = 0
                     ) -> tuple[dict[str, dict], dict[str, list[dict]], dict[str, str]]:
    """Every strategy's full result (replication 0) and the summaries of replications 1..n_reps-1 (seed + k:
    common random numbers), on the ``RUN_THREADS`` workers of ``SCHEDULER`` (shared fairly with the other
    sessions; a newer call of this session drops this one's jobs not started); through the caches of ``run``
    and ``summary``.
    Returns (results, reps, failed): ``failed`` maps a strategy to the ValueError message it raised.
    ``summaries_only``: replication 0 as a summary too (``results`` is then empty).  ``first``: only replications
    ``first``..n_reps-1 (another look of a sequential comparison: the earlier ones are the caller's already)."""
    ctx = get_script_run_ctx()
    key = _session_key(ctx)
    jobs = [(s, k) for s in strategies for k in range(first, n_reps)]
    # a session's newer rerun drops the queued jobs of its older ones (outside a script run there are no reruns)
    calls = [(sc, s, k) for s, k in jobs]
    job = _job(ctx, trace, summaries_only)
    yield_check = _yield_check(ctx)
    if yield_check is not None:
        yield_check()  # (a run already asked to stop queues nothing)
    futures = SCHEDULER.submit(key, job, calls, supersede=ctx is not None)
    # (a job dropped by an older run of this session, while this one waits for it: queued again, without dropping
    # anything; the older run drops its own jobs when it sees its stop request: ``_gather``)
    resubmit = (lambda idx: SCHEDULER.submit(key, job, [calls[i] for i in idx])) if ctx is not None else None
    out = _gather(futures, yield_check, resubmit)
    results: dict[str, dict] = {}
    reps: dict[str, list[dict]] = {}
    failed: dict[str, str] = {}
    for (s, k), r in zip(jobs, out):
        if s in failed:
            continue
        if isinstance(r, ValueError):
            failed[s] = str(r)
            results.pop(s, None)
            reps.pop(s, None)
        elif k == 0 and summaries_only:
            reps[s] = [r]
        elif k == 0:
            results[s] = r
            reps[s] = [r["summary"]]
        else:
            reps.setdefault(s, []).append(r)
    return results, reps, failed
