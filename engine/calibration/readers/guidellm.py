"""GuideLLM benchmark report (``guidellm benchmark ... --output-path benchmarks.json``), report
schema ``metadata.version`` 2 as GuideLLM 0.8.1 writes it (``GenerativeBenchmarksReport``,
``guidellm/benchmark/schemas/{report,benchmark,metrics}.py``, ``guidellm/schemas/base/
{statistics,request_stats}.py``, ``guidellm/scheduler/strategies.py``; tests/fixtures/tools/README.md).

One ToolRun per entry of ``benchmarks`` (a sweep is one report).  Keys read, per benchmark:

* ``config.strategy.type_``: ``synchronous`` -> closed loop of 1; ``concurrent`` (``streams``) ->
  closed loop of ``streams``; ``throughput`` -> closed loop of ``max_concurrency`` when set, else a
  burst of every request at t = 0; ``constant`` (``rate``) -> gaps 1 / rate; ``poisson`` (``rate``)
  -> Poisson; ``max_concurrency`` on a rate strategy is noted (a cap, not modelled);
* ``scheduler_metrics``: ``request_start_time`` (t = 0 of the replay), ``measure_start_time`` /
  ``measure_end_time`` (the measurement window, after warm-up and before cool-down),
  ``requests_made.total`` (requests replayed);
* ``metrics`` (each a StatusDistributionSummary; the ``successful`` part): ``requests_per_second``
  .mean -> request_throughput, ``output_tokens_per_second``.mean -> output_throughput,
  ``time_to_first_token_ms`` mean / median / percentiles.pNN -> *_ttft_ms, ``inter_token_latency_ms``
  .mean -> mean_itl_ms (GuideLLM weights each request by its output tokens - 1, as vLLM's ITL),
  ``request_latency`` (s) -> *_e2el_ms, ``prompt_token_count`` / ``output_token_count``.mean -> the
  mean lengths;
* ``requests.successful`` (when it lists every successful request and none errored or stayed
  incomplete): per request ``prompt_tokens``, ``output_tokens``, ``time_to_first_token_ms``,
  ``request_start_time`` -> replayed lengths and send times, and the TTFT distribution.

GuideLLM counts a request in the window when it overlaps it and rates from completions inside
it; the replay applies the same rule (``replay.selected``, metric origin "window").
"""
from __future__ import annotations

import math

import numpy as np

from .base import Keys, ToolRun, stats_from_values

TOOL = "guidellm"
_PCTS = ("p001", "p01", "p05", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "p999")
_PNAME = {"p001": "0.1", "p01": "1", "p05": "5", "p10": "10", "p25": "25", "p50": "50", "p75": "75", "p90": "90",
          "p95": "95", "p99": "99", "p999": "99.9"}


def read_guidellm(obj, where: str) -> list[ToolRun]:
    k = Keys(obj, where)
    meta = k.sub("metadata")
    ver = meta.integer("version")
    if ver != 2:
        raise meta.err("version", f"{ver}: unsupported GuideLLM report schema; allowed: 2 (GuideLLM 0.8.1)")
    version = meta.text("guidellm_version") or f"report schema {ver}"
    bl = obj.get("benchmarks")
    if not isinstance(bl, list) or not bl:
        raise k.err("benchmarks", "expected a non-empty list of benchmarks")
    runs = []
    for i, b in enumerate(bl):
        src = where if len(bl) == 1 else f"{where}#{i}"
        runs.append(_benchmark(Keys(b, where, f"benchmarks[{i}]."), src, version))
    return runs


def _benchmark(b: Keys, src: str, version: str) -> ToolRun:
    cfg = b.sub("config")
    st = cfg.sub("strategy")
    kind = st.text("type_", required=True)
    sm = b.sub("scheduler_metrics")
    t0 = sm.num("request_start_time")
    m0, m1 = sm.num("measure_start_time"), sm.num("measure_end_time")
    if not (t0 <= m0 < m1):
        raise sm.err("measure_end_time", f"measurement window [{m0}, {m1}] is empty or starts before "
                     f"request_start_time {t0}")
    made = sm.sub("requests_made").integer("total", lo=1)
    m = b.sub("metrics")
    tot = m.sub("request_totals")
    n_ok, n_err, n_inc = tot.integer("successful"), tot.integer("errored"), tot.integer("incomplete")
    if n_ok == 0:
        raise tot.err("successful", "0: no request succeeded, nothing to compare")

    def ok(name):
        return m.sub(name).sub("successful")

    measured = {"request_throughput": ok("requests_per_second").num("mean"),
                "output_throughput": ok("output_tokens_per_second").num("mean")}
    measured.update(_dist(ok("time_to_first_token_ms"), "ttft", 1.0))
    measured.update(_dist(ok("request_latency"), "e2el", 1e3))
    itl = ok("inter_token_latency_ms")
    measured["mean_itl_ms"] = itl.num("mean")
    run = ToolRun(tool=TOOL, version=version, source=src, arrival="poisson", rate_rps=math.nan, num_requests=made,
                  duration_s=m1 - m0, metric_origin="window", window_s=(m0 - t0, m1 - t0), measured=measured,
                  failed=n_err + n_inc, mean_in=ok("prompt_token_count").num("mean"),
                  mean_out=ok("output_token_count").num("mean"))
    backend = cfg.sub("backend", required=False)
    run.model_id = backend.text("model") if backend is not None else ""
    cap = st.integer("max_concurrency", required=False, default=0, lo=1)
    if kind == "synchronous":
        run.arrival, run.concurrency = "closed", 1
    elif kind == "concurrent":
        run.arrival, run.concurrency = "closed", st.integer("streams", lo=1)
    elif kind == "throughput":
        run.arrival, run.concurrency = ("closed", cap) if cap else ("burst", 0)
        run.rate_rps = math.inf
    elif kind in ("constant", "poisson"):
        run.arrival, run.rate_rps = kind, st.num("rate", positive=True)
        if cap:
            run.cap = cap
            run.notes.append(f"max_concurrency {cap} on a {kind} strategy: the cap is not modelled")
    else:
        raise st.err("type_", f"{kind!r}: not supported; allowed: synchronous, concurrent, throughput, constant, poisson")
    if n_err or n_inc:
        run.notes.append(f"{n_err} errored and {n_inc} incomplete request(s) in the window are not compared")
    _requests(b, run, n_ok, t0, exact_arrivals=(n_err + n_inc == 0))
    return run


def _dist(d: Keys, name: str, scale: float) -> dict[str, float]:
    out = {f"mean_{name}_ms": d.num("mean") * scale, f"median_{name}_ms": d.num("median") * scale}
    pc = d.sub("percentiles", required=False)
    if pc is not None:
        for p in ("p50", "p90", "p95", "p99"):
            if pc.has(p):
                out[f"p{_PNAME[p]}_{name}_ms"] = pc.num(p) * scale
    return out


def _requests(b: Keys, run: ToolRun, n_ok: int, t0: float, exact_arrivals: bool) -> None:
    reqs = b.sub("requests", required=False)
    lst = reqs.raw("successful") if reqs is not None else None
    if not isinstance(lst, list) or len(lst) != n_ok or n_ok == 0:
        if isinstance(lst, list) and lst:
            run.notes.append(f"requests.successful holds {len(lst)} of {n_ok} requests (sampled): mean lengths used")
        return
    p = np.empty(n_ok, np.int64)
    q = np.empty(n_ok, np.int64)
    ttft = np.empty(n_ok)
    start = np.empty(n_ok)
    for i, r in enumerate(lst):
        rk = Keys(r, b.where, f"{b.prefix}requests.successful[{i}].")
        p[i], q[i] = rk.integer("prompt_tokens", lo=1), rk.integer("output_tokens", lo=1)
        ttft[i] = rk.num("time_to_first_token_ms")
        start[i] = rk.num("request_start_time") - t0
    run.input_lens, run.output_lens, run.ttfts_ms = p, q, ttft
    for key, v in stats_from_values(ttft, "ttft").items():
        run.measured.setdefault(key, v)
    if exact_arrivals and run.arrival != "closed" and n_ok == run.num_requests:
        run.start_s = start
        run.notes.append("arrivals replayed from requests.successful[].request_start_time")
    elif run.arrival != "closed" and n_ok != run.num_requests:
        run.notes.append(f"{run.num_requests} requests made, {n_ok} listed (those overlapping the window): "
                         "arrivals generated, lengths drawn from the listed ones")


# ----------------------------------------------------------------------------- writer
def _summary(v: np.ndarray, weights=None) -> dict:
    v = np.asarray(v, float)
    if len(v) == 0:
        v = np.zeros(1)
    w = np.ones(len(v)) if weights is None else np.asarray(weights, float)
    mean = float(np.average(v, weights=w)) if w.sum() else 0.0
    pct = {k: float(np.percentile(v, float(_PNAME[k]))) for k in _PCTS}
    return {"mean": mean, "median": pct["p50"], "mode": pct["p50"], "variance": float(np.var(v)),
            "std_dev": float(np.std(v)), "min": float(v.min()), "max": float(v.max()), "count": int(len(v)),
            "total_sum": float(v.sum()), "percentiles": pct, "pdf": None, "mean_ci": None, "percentile_cis": None}


def _status(v, weights=None) -> dict:
    return {"successful": _summary(v, weights), "errored": _summary([]), "incomplete": _summary([]),
            "total": _summary(v, weights)}


def to_guidellm_json(res, run: ToolRun, model_id: str = "", t0: float = 1.7e9) -> dict:
    """A one-benchmark report in GuideLLM 0.8.1's layout (the keys this reader uses and their
    siblings; scheduler_state, constraints and the environment are left out) from a simulation of
    ``run``'s traffic (``replay.simulate_run``).  Window: ``run.window_s``."""
    from .replay import selected
    r = res.requests
    lat, rate, span = selected(res, run)
    q = r["output_tokens"].to_numpy()
    w0, w1 = run.window_s
    strat = {"type_": run.arrival if run.arrival in ("constant", "poisson") else "concurrent",
             "worker_count": None, "max_concurrency": None}
    if run.arrival in ("constant", "poisson"):
        strat["rate"] = float(run.rate_rps)
    else:
        strat["streams"] = int(run.concurrency)
    reqs = []
    for i in np.flatnonzero(lat):
        a = float(r["arrival_s"].iat[i])
        reqs.append({"type_": "generative_request_stats", "request_id": f"req-{i}", "request_start_time": t0 + a,
                     "request_end_time": t0 + a + float(r["e2e_ms"].iat[i]) / 1e3,
                     "request_latency": float(r["e2e_ms"].iat[i]) / 1e3,
                     "prompt_tokens": int(r["prompt_tokens"].iat[i]), "output_tokens": int(q[i]),
                     "time_to_first_token_ms": float(r["ttft_ms"].iat[i]),
                     "inter_token_latency_ms": float(r["tpot_ms"].iat[i]) if q[i] > 1 else None})
    dec = lat & (q > 1)
    n_lat = int(lat.sum())
    metrics = {
        "request_totals": {"successful": n_lat, "errored": 0, "incomplete": 0, "total": n_lat},
        "requests_per_second": _status(np.full(max(int(rate.sum()), 1), rate.sum() / span)),
        "output_tokens_per_second": _status(np.full(1, q[rate].sum() / span)),
        "request_latency": _status(r["e2e_ms"].to_numpy()[lat] / 1e3),
        "prompt_token_count": _status(r["prompt_tokens"].to_numpy()[lat]),
        "output_token_count": _status(q[lat]),
        "time_to_first_token_ms": _status(r["ttft_ms"].to_numpy()[lat]),
        "inter_token_latency_ms": _status(r["tpot_ms"].to_numpy()[dec], q[dec] - 1),
    }
    bench = {"type_": "generative_benchmark",
             "config": {"run_id": "roundtrip", "run_index": 0, "strategy": strat, "constraints": {},
                        "backend": {"target": "http://localhost:8000", "model": model_id}},
             "scheduler_metrics": {"start_time": t0, "request_start_time": t0, "measure_start_time": t0 + w0,
                                   "measure_end_time": t0 + w1, "request_end_time": t0 + w1, "end_time": t0 + w1,
                                   "requests_made": {"successful": int(len(r)), "errored": 0, "incomplete": 0,
                                                     "total": int(len(r))}},
             "metrics": metrics,
             "requests": {"successful": reqs, "errored": [], "incomplete": [], "total": None},
             "warnings": [], "start_time": t0 + w0, "end_time": t0 + w1, "duration": w1 - w0,
             "warmup_duration": w0, "cooldown_duration": 0.0}
    return {"metadata": {"version": 2, "guidellm_version": "0.8.1", "python_version": "3.12.3",
                         "platform": "Linux-x86_64"},
            "config": {}, "benchmarks": [bench], "conclusions": []}
