"""Cached calls into the engine (the only place the app runs simulations).

Results are cached with ``st.cache_data`` keyed on the scenario's JSON (every
field) and ``ENGINE_VERSION``; the Numba kernels are warmed once per process.
"""
from __future__ import annotations

import hashlib
import io
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from engine import ENGINE_VERSION, Scenario, read_trace, shipped_trace, simulate, simulate_summary

from . import charts
from .controls import cap_scenario

#: Largest trace upload, in MB (matches server.maxUploadSize in .streamlit/config.toml).
MAX_UPLOAD_MB = 20
#: Cap on the simulated requests of one sweep or crossover grid (all runs together).
MAX_GRID_REQUESTS = 2_500_000


@st.cache_resource(show_spinner=False)
def warmup() -> float:
    """Compile (or load from Numba's cache) the engine's kernels once per process."""
    t = time.perf_counter()
    simulate(Scenario.from_preset("default", duration_s=2.0, warmup_s=0.5, arrival_rate_rps=5.0,
                                  num_adapters=8, hot_set_k=-1, drain_s=5.0))
    return time.perf_counter() - t


@st.cache_data(max_entries=32, show_spinner=False)
def _full(scenario_json: str, engine_version: str, trace_digest: str | None = None,
          _trace: bytes | None = None) -> dict:
    sc = Scenario.from_json(scenario_json)
    wl = read_trace(io.BytesIO(_trace), sc) if _trace is not None else None
    r = simulate(sc, trace=wl)
    window = (sc.warmup_s, sc.duration_s)
    return {"requests": r.requests, "timeseries": r.timeseries, "summary": r.summary, "replicas": r.replicas,
            # chart-ready frames, computed once per scenario
            "cdf": charts.cdf_frame({sc.strategy: r.requests}, window),
            "ts": charts.timeseries_frame({sc.strategy: r.timeseries})}


@st.cache_data(max_entries=20_000, show_spinner=False)
def _summary(scenario_json: str, engine_version: str) -> dict:
    return simulate_summary(Scenario.from_json(scenario_json))


def capped(sc: Scenario) -> Scenario:
    return cap_scenario(sc)[0]


def run(sc: Scenario, trace: dict | None = None) -> dict:
    """Full result (requests, timeseries, summary) of one scenario; ValueError if invalid.

    ``trace``: ``{"digest": ..., "data": bytes}`` of an uploaded trace CSV to replay.
    """
    sc = capped(sc).validate()
    if trace is None:
        return _full(sc.to_json(), ENGINE_VERSION)
    return _full(sc.to_json(), ENGINE_VERSION, trace["digest"], trace["data"])


def summary(sc: Scenario) -> dict:
    """Summary metrics only (sweeps, crossover); cached separately and much smaller."""
    sc = capped(sc).validate()
    return _summary(sc.to_json(), ENGINE_VERSION)


@st.cache_data(max_entries=16, show_spinner=False)
def _example_trace_csv(name: str, scenario_json: str, engine_version: str) -> bytes:
    return shipped_trace(name, Scenario.from_json(scenario_json)).to_csv(index=False).encode()


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
#: One pool per server process, shared by its sessions (first come, first served).
_POOL = ThreadPoolExecutor(max_workers=RUN_THREADS, thread_name_prefix="whatif-sim")


def run_replications(sc: Scenario, strategies: list[str], n_reps: int, trace: dict | None = None,
                     summaries_only: bool = False) -> tuple[dict[str, dict], dict[str, list[dict]], dict[str, str]]:
    """Every strategy's full result (replication 0) and the summaries of replications 1..n_reps-1 (seed + k:
    common random numbers), on ``RUN_THREADS`` threads; through the caches of ``run`` and ``summary``.
    Returns (results, reps, failed): ``failed`` maps a strategy to the ValueError message it raised.
    ``summaries_only``: replication 0 as a summary too (``results`` is then empty)."""
    ctx = get_script_run_ctx()

    def job(s: str, k: int):
        if ctx is not None:
            add_script_run_ctx(threading.current_thread(), ctx)
        try:
            if k == 0 and not summaries_only:
                return run(sc.replace(strategy=s), trace)
            return summary(sc.replace(strategy=s, seed=sc.seed + k))
        except ValueError as e:
            return e

    jobs = [(s, k) for s in strategies for k in range(n_reps)]
    futures = [_POOL.submit(job, s, k) for s, k in jobs]
    out = [f.result() for f in futures]
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
            reps[s].append(r)
    return results, reps, failed
