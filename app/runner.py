"""Cached calls into the engine (the only place the app runs simulations).

Results are cached with ``st.cache_data`` keyed on the scenario's JSON (every
field) and ``ENGINE_VERSION``; the Numba kernels are warmed once per process.
"""
from __future__ import annotations

import hashlib
import io
import time

import streamlit as st

from engine import ENGINE_VERSION, Scenario, read_trace, shipped_trace, simulate

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
    return {"requests": r.requests, "timeseries": r.timeseries, "summary": r.summary,
            # chart-ready frames, computed once per scenario
            "cdf": charts.cdf_frame({sc.strategy: r.requests}, window),
            "ts": charts.timeseries_frame({sc.strategy: r.timeseries})}


@st.cache_data(max_entries=20_000, show_spinner=False)
def _summary(scenario_json: str, engine_version: str) -> dict:
    return simulate(Scenario.from_json(scenario_json)).summary


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
