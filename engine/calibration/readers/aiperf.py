"""AIPerf ``profile_export_aiperf.json`` (AIPerf 0.13.0, export ``schema_version`` 1.4:
``aiperf/common/models/export_models.py`` ``JsonExportData`` / ``JsonMetricResult``,
``aiperf/config/phases.py``, ``aiperf/metrics/types/*.py``, ``aiperf/timing/intervals.py``;
tests/fixtures/tools/README.md).  The metric layout is GenAI-Perf's (``{"unit", "avg", "p50", ...}``
per metric), the traffic is AIPerf's ``input_config.phases``.

Keys read:

* ``input_config.phases``: the phase whose ``kind`` (or ``name``) is ``profiling``; its ``type``:
  ``concurrency`` (``concurrency``) -> closed loop; ``poisson`` / ``constant`` / ``gamma``
  (``rate``; ``smoothness`` = Gamma shape, 1 = Poisson, AIPerf draws gaps Gamma(smoothness,
  1 / (rate x smoothness)) as vLLM's burstiness) -> open loop; ``concurrency`` on a rate phase is a
  cap (noted, not modelled); ``input_config.models.items[0].name`` -> model_id;
* ``benchmark_duration`` (sec: last response - first request) and ``request_count`` (requests),
  ``error_request_count``;
* ``request_throughput`` .avg -> request_throughput; ``output_token_throughput`` .avg ->
  output_throughput; ``time_to_first_token`` (ms) -> *_ttft_ms; ``inter_token_latency`` (ms; per
  request (latency - TTFT) / (output - 1): vLLM's TPOT) -> *_tpot_ms; ``request_latency`` (ms) ->
  *_e2el_ms (``avg`` -> mean, ``p50`` -> median, ``pNN`` -> pNN, ``std``);
* ``input_sequence_length`` / ``output_sequence_length`` .avg -> the mean lengths.

Rates are per ``benchmark_duration``: the replay measures from the first send to the last finish
(metric origin "first_arrival").
"""
from __future__ import annotations

import math

import numpy as np

from .base import Keys, ToolRun

TOOL = "aiperf"
_PCT = ("p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99")
_MAP = (("time_to_first_token", "ttft"), ("inter_token_latency", "tpot"), ("request_latency", "e2el"))


def read_aiperf(obj, where: str) -> ToolRun:
    k = Keys(obj, where)
    ic = k.sub("input_config")
    phases = ic.raw("phases")
    if not isinstance(phases, list) or not phases:
        raise ic.err("phases", "expected a non-empty list of phases")
    prof = [(i, p) for i, p in enumerate(phases) if isinstance(p, dict)
            and (p.get("kind") == "profiling" or (p.get("kind") is None and p.get("name") == "profiling"))]
    if len(prof) != 1:
        raise ic.err("phases", f"{len(prof)} profiling phases; allowed: exactly one (kind 'profiling')")
    i, _ = prof[0]
    ph = Keys(phases[i], where, f"input_config.phases[{i}].")
    kind = ph.text("type", required=True)
    dur = _metric(k, "benchmark_duration", "sec").num("avg", positive=True)
    count = _metric(k, "request_count", "requests").integer("avg", lo=1)
    err = _metric(k, "error_request_count", "requests", required=False)
    measured = {"request_throughput": _metric(k, "request_throughput").num("avg")}
    ot = _metric(k, "output_token_throughput", required=False)
    if ot is not None:
        measured["output_throughput"] = ot.num("avg")
    for key, name in _MAP:
        mk = _metric(k, key, "ms", required=False)
        if mk is None:
            continue
        measured[f"mean_{name}_ms"] = mk.num("avg")
        if mk.has("p50"):
            measured[f"median_{name}_ms"] = mk.num("p50")
        if mk.has("std"):
            measured[f"std_{name}_ms"] = mk.num("std")
        for p in _PCT:
            if mk.has(p) and p != "p50":
                measured[f"{p}_{name}_ms"] = mk.num(p)
    run = ToolRun(tool=TOOL, version=f"{k.text('aiperf_version') or '?'} (export schema {k.text('schema_version') or '?'})",
                  source=where, arrival="poisson", rate_rps=math.nan, num_requests=count, duration_s=dur,
                  metric_origin="first_arrival", measured=measured,
                  mean_in=_metric(k, "input_sequence_length", "tokens").num("avg", positive=True),
                  mean_out=_metric(k, "output_sequence_length", "tokens").num("avg", positive=True),
                  failed=err.integer("avg") if err is not None else 0)
    models = ic.sub("models", required=False)
    items = models.raw("items") if models is not None else None
    if isinstance(items, list) and items and isinstance(items[0], dict) and isinstance(items[0].get("name"), str):
        run.model_id = items[0]["name"]
    if kind == "concurrency":
        run.arrival, run.concurrency = "closed", ph.integer("concurrency", lo=1)
    elif kind in ("poisson", "constant", "gamma"):
        run.rate_rps = ph.num("rate", positive=True)
        run.arrival = kind
        if kind == "gamma":
            run.burstiness = ph.num("smoothness", required=False, default=1.0, positive=True)
            run.arrival = "poisson" if run.burstiness == 1.0 else "gamma"
        cap = ph.integer("concurrency", required=False, default=0, lo=1)
        if cap:
            run.cap = cap
            run.notes.append(f"concurrency {cap} on a {kind} phase: the cap is not modelled")
    else:
        raise ph.err("type", f"{kind!r}: not supported; allowed: concurrency, poisson, constant, gamma")
    if run.failed:
        run.notes.append(f"{run.failed} errored request(s) are not replayed")
    return run


def _metric(k: Keys, key: str, unit: str | None = None, required: bool = True) -> Keys | None:
    mk = k.sub(key, required=required)
    if mk is not None and unit is not None:
        u = mk.text("unit", required=True)
        if u != unit:
            raise mk.err("unit", f"{u!r}; allowed: {unit!r}")
    return mk


# ----------------------------------------------------------------------------- writer
def _res(v: np.ndarray, unit: str) -> dict:
    v = np.asarray(v, float)
    if len(v) == 0:
        v = np.zeros(1)
    d = {"unit": unit, "avg": float(np.mean(v))}
    d.update({p: float(np.percentile(v, float(p[1:]))) for p in _PCT})
    d.update({"min": float(v.min()), "max": float(v.max()), "std": float(np.std(v)), "count": int(len(v)),
              "sum": float(v.sum())})
    return d


def to_aiperf_json(res, run: ToolRun, model_id: str = "") -> dict:
    """A ``profile_export_aiperf.json`` in AIPerf 0.13.0's layout (metric keys and their siblings;
    the endpoint, dataset and artifact sections of input_config left out) from a simulation of
    ``run``'s traffic (``replay.simulate_run``)."""
    from .replay import selected
    r = res.requests
    lat, rate, span = selected(res, run)
    q = r["output_tokens"].to_numpy()
    dec = lat & (q > 1)
    n = int(lat.sum())
    if run.arrival == "closed":
        phase = {"name": "profiling", "kind": "profiling", "type": "concurrency", "concurrency": int(run.concurrency),
                 "requests": n}
    else:
        phase = {"name": "profiling", "kind": "profiling", "type": "gamma" if run.arrival == "gamma" else run.arrival,
                 "requests": n, "rate": float(run.rate_rps)}
        if run.arrival == "gamma":
            phase["smoothness"] = float(run.burstiness)
    return {
        "schema_version": "1.4", "aiperf_version": "0.13.0", "benchmark_id": "roundtrip",
        "request_throughput": {"unit": "requests/sec", "avg": float(rate.sum() / span)},
        "request_latency": _res(r["e2e_ms"].to_numpy()[lat], "ms"),
        "request_count": {"unit": "requests", "avg": float(n)},
        "time_to_first_token": _res(r["ttft_ms"].to_numpy()[lat], "ms"),
        "inter_token_latency": _res(r["tpot_ms"].to_numpy()[dec], "ms"),
        "output_token_throughput": {"unit": "tokens/sec", "avg": float(q[rate].sum() / span)},
        "output_sequence_length": _res(q[lat], "tokens"),
        "input_sequence_length": _res(r["prompt_tokens"].to_numpy()[lat], "tokens"),
        "benchmark_duration": {"unit": "sec", "avg": float(span)},
        "input_config": {"models": {"items": [{"name": model_id}]}, "phases": [phase]},
        "was_cancelled": False, "is_complete": True,
    }
