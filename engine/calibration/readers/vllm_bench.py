"""``vllm bench serve --save-result`` / ``benchmarks/benchmark_serving.py --save-result`` result JSON.

Keys as vLLM writes them (``vllm/benchmarks/serve.py`` at vllm-project/vllm commit 009e6d4a,
``benchmarks/benchmark_serving.py`` at commit 0049e29c; tests/fixtures/tools/README.md):

* set-up: ``date``, ``backend``, ``model_id``, ``tokenizer_id``, ``num_prompts``; traffic:
  ``request_rate`` (a number, or the string ``"inf"``: every request at t = 0), ``burstiness``
  (Gamma shape of the gaps, 1 = Poisson), ``max_concurrency`` (null or an integer: a semaphore on
  requests in flight);
* results: ``duration`` (s, from the benchmark start to the last response), ``completed``,
  ``failed``, ``total_input_tokens``, ``total_output_tokens``, ``request_throughput`` (=
  completed / duration), ``output_throughput``, and ``{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms``
  (``--percentile-metrics`` / ``--metric-percentiles``: ``p90_ttft_ms``, ``p99.9_ttft_ms``, ...);
* ``--save-detailed`` (the old script always kept them): per request ``input_lens``,
  ``output_lens``, ``ttfts`` (s), ``itls`` (lists, s), ``errors`` (empty string = success), and in
  ``vllm bench serve`` also ``start_times`` (perf_counter s) and ``latencies`` (s).

How the traffic maps (``replay.py`` does the replay):

* ``request_rate`` r finite: open loop.  vLLM draws each gap from Gamma(shape = burstiness,
  scale = 1 / (r x burstiness)) (mean 1/r, CV = 1/sqrt(burstiness); ``burstiness`` inf = constant
  gaps) and rescales the cumulative delays so the last request leaves at num_prompts / r; the replay
  does the same with the scenario's seed (vLLM's own draws are not in the file).  With
  ``start_times`` (and no ``max_concurrency``, under which they are the semaphore's release times)
  the replay uses the recorded send times instead, shifted so that the first send is at
  duration - (last response - first send) when ``latencies`` are there, else at 0 (the benchmark
  clock starts before the first send; ``start_times`` are perf_counter values).
* ``request_rate`` inf: every request at t = 0 (a burst); with ``max_concurrency`` C as well: a
  closed loop of C clients (``arrival_process`` closed).  A finite rate with ``max_concurrency``
  stays an open loop: the cap is noted, not modelled (valid while the cap is not reached).
* lengths: the per-request ``input_lens`` / ``output_lens`` of the successful requests when the file
  has them, else every request at total_input_tokens / completed and total_output_tokens /
  completed (fixed lengths: vLLM's random dataset default, range ratio 0).
* ``duration`` is the throughput denominator: the replay measures from t = 0 to the last finish.
"""
from __future__ import annotations

import math
import re
from datetime import datetime

import numpy as np

from .base import Keys, ToolRun, same_length, stats_from_values

TOOL = "vllm-bench-serve"
_STAT = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms$")
_ARRAYS = ("input_lens", "output_lens", "ttfts", "itls", "errors", "start_times", "latencies")


def read_vllm_bench(obj, where: str) -> ToolRun:
    """One result object of a ``vllm bench serve`` / ``benchmark_serving.py`` file as a ToolRun."""
    k = Keys(obj, where)
    if k.has("ramp_up_strategy"):
        raise k.err("ramp_up_strategy", f"{obj['ramp_up_strategy']!r}: ramp-up runs have no single rate; "
                    "allowed: absent (a constant --request-rate)")
    if not k.has("request_rate"):
        raise k.err("request_rate", "missing (a number, or \"inf\")")
    rr = obj["request_rate"]
    rate = math.inf if (isinstance(rr, str) and rr.strip().lower() == "inf") else k.num("request_rate", positive=True, allow_inf=True)
    burst = k.num("burstiness", required=False, default=1.0, positive=True, allow_inf=True)
    mc = k.integer("max_concurrency", required=False, default=0, lo=1)
    completed = k.integer("completed", lo=0)
    failed = k.integer("failed", required=False, default=0)
    duration = k.num("duration", positive=True)
    num_prompts = k.integer("num_prompts", required=False, default=completed + failed, lo=1)
    if completed == 0:
        raise k.err("completed", "0: no request succeeded, nothing to compare")
    measured = {"request_throughput": k.num("request_throughput")}
    if k.has("output_throughput"):
        measured["output_throughput"] = k.num("output_throughput")
    for key in obj:
        if _STAT.match(key) and obj[key] is not None:
            measured[key] = k.num(key)
    notes = []
    run = ToolRun(tool=TOOL, version=_version(obj), source=where, arrival="poisson", rate_rps=rate,
                  num_requests=completed, duration_s=duration, burstiness=burst, failed=failed,
                  model_id=k.text("model_id"), measured=measured, notes=notes, metric_origin="start")
    if math.isinf(rate):
        run.arrival, run.concurrency = ("closed", mc) if mc else ("burst", 0)
    else:
        run.arrival = "constant" if math.isinf(burst) else ("poisson" if burst == 1.0 else "gamma")
        if mc:
            run.cap = mc
            notes.append(f"max_concurrency {mc} with request_rate {rate:g}: the cap is not modelled (open loop "
                         "at the rate); the fit holds only while the cap is not reached")
    if failed:
        notes.append(f"{failed} failed request(s) are not replayed")
    if k.has("input_lens"):
        _read_detailed(k, run, completed)
    else:
        run.mean_in = k.integer("total_input_tokens") / completed
        run.mean_out = k.integer("total_output_tokens") / completed
    if completed + failed != num_prompts:
        notes.append(f"num_prompts {num_prompts} but completed + failed = {completed + failed}")
    return run


def _read_detailed(k: Keys, run: ToolRun, completed: int) -> None:
    obj = k.obj
    present = {a: obj[a] for a in _ARRAYS if obj.get(a) is not None}
    for a in ("output_lens", "ttfts"):
        if a not in present:
            raise k.err(a, "missing (the per-request arrays come together: input_lens, output_lens, ttfts)")
    for a, v in present.items():
        if not isinstance(v, list):
            raise k.err(a, f"expected a list (one entry per request), got {type(v).__name__}")
    same_length(k.where, present)
    inp = k.array("input_lens", "int")
    out = k.array("output_lens", "int")
    ttft = k.array("ttfts", scale=1e3)
    if "errors" in present:
        errs = present["errors"]
        for i, e in enumerate(errs):
            if not isinstance(e, str):
                raise ValueError(f"{k.where}: errors[{i}]: invalid value {e!r}; allowed: a string ('' = success)")
        ok = np.array([e == "" for e in errs])
    else:
        ok = out > 0
    if "itls" in present:
        for i, row in enumerate(present["itls"]):
            if not isinstance(row, list):
                raise ValueError(f"{k.where}: itls[{i}]: expected a list of gaps (s), got {type(row).__name__}")
            for j, x in enumerate(row):
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                    raise ValueError(f"{k.where}: itls[{i}][{j}]: invalid value {x!r}; allowed: a finite number >= 0")
    if int(ok.sum()) != completed:
        raise k.err("input_lens", f"{int(ok.sum())} successful entries but completed = {completed}")
    bad = np.flatnonzero(ok & (out < 1))
    if len(bad):
        raise ValueError(f"{k.where}: output_lens[{bad[0]}]: 0 tokens for a successful request; allowed: >= 1")
    bad = np.flatnonzero(ok & (inp < 1))
    if len(bad):
        raise ValueError(f"{k.where}: input_lens[{bad[0]}]: 0 tokens; allowed: >= 1")
    run.input_lens, run.output_lens, run.ttfts_ms = inp[ok].astype(np.int64), out[ok].astype(np.int64), ttft[ok]
    run.mean_in, run.mean_out = float(run.input_lens.mean()), float(run.output_lens.mean())
    for key, v in stats_from_values(run.ttfts_ms, "ttft").items():
        run.measured.setdefault(key, v)
    if "start_times" in present and not run.cap and run.arrival != "closed":
        st = k.array("start_times")
        t0 = float(st.min())
        lead = 0.0
        if "latencies" in present:
            lat = k.array("latencies")
            # the benchmark clock starts before the first send: duration - (last end - first send)
            lead = max(0.0, run.duration_s - float(np.max(st + lat) - t0))
        run.start_s = (st - t0 + lead)[ok]
        run.notes.append("arrivals replayed from start_times")


def _version(obj: dict) -> str:
    if "endpoint_type" in obj or "failed" in obj:
        return "vllm bench serve" + (f" {obj['vllm_version']}" if isinstance(obj.get("vllm_version"), str) else "")
    return "benchmark_serving.py"


# ----------------------------------------------------------------------------- writer
def to_vllm_bench_json(res, run: ToolRun, detailed: bool = False, percentiles=(99,), model_id: str = "",
                       legacy: bool = False) -> dict:
    """A result object in the ``vllm bench serve --save-result`` layout (``legacy``: the
    ``benchmark_serving.py`` one) from a simulation of ``run``'s traffic (``replay.simulate_run``).

    Computed as vLLM's ``calculate_metrics`` does: every request, duration from t = 0 to the last
    finish (the horizon when some did not finish), numpy percentiles; ITL gaps are the request's
    TPOT repeated (the engine has no per-token times).
    """
    r = res.requests.sort_values("arrival_s", kind="stable")
    sc = res.scenario
    done = r["completed"].to_numpy()
    end = (r["arrival_s"] + r["e2e_ms"] / 1e3).to_numpy()  # the client sees the response end
    dur = float(end[done].max()) if done.all() and done.any() else sc.duration_s + sc.drain_s
    ok = r[done]
    out_lens = ok["output_tokens"].to_numpy()
    ttft = ok["ttft_ms"].to_numpy() / 1e3
    tpot = ok["tpot_ms"].to_numpy() / 1e3
    e2e = ok["e2e_ms"].to_numpy() / 1e3
    itls = [[float(tp)] * int(n - 1) if n > 1 else [] for tp, n in zip(tpot, out_lens)]
    flat_itl = np.concatenate([np.asarray(x) for x in itls]) if any(itls) else np.zeros(0)
    res_d = {"date": datetime(2025, 1, 1).strftime("%Y%m%d-%H%M%S"), "backend": "vllm", "model_id": model_id,
             "tokenizer_id": model_id, "num_prompts": int(len(r))}
    if not legacy:
        res_d = {"date": res_d["date"], "endpoint_type": "openai", "backend": "openai", "label": None,
                 **{k: res_d[k] for k in ("model_id", "tokenizer_id", "num_prompts")}}
    res_d["request_rate"] = "inf" if math.isinf(run.rate_rps) or run.arrival == "closed" else float(run.rate_rps)
    res_d["burstiness"] = float(run.burstiness)
    res_d["max_concurrency"] = int(run.concurrency or run.cap) or None
    n_ok = int(len(ok))
    tin, tout = int(ok["prompt_tokens"].sum()), int(out_lens.sum())
    res_d.update({"duration": dur, "completed": n_ok})
    if not legacy:
        res_d["failed"] = int(len(r) - n_ok)
    res_d.update({"total_input_tokens": tin, "total_output_tokens": tout, "request_throughput": n_ok / dur,
                  ("request_goodput:" if legacy else "request_goodput"): None, "output_throughput": tout / dur,
                  "total_token_throughput": (tin + tout) / dur})
    per = {"input_lens": ok["prompt_tokens"].astype(int).tolist(), "output_lens": out_lens.astype(int).tolist(),
           "ttfts": ttft.tolist(), "itls": itls}
    if not legacy:
        per["latencies"] = e2e.tolist()
        per["start_times"] = (ok["arrival_s"].to_numpy() + 1000.0).tolist()
    per["generated_texts"] = [""] * n_ok
    per["errors"] = [""] * n_ok
    if detailed or legacy:  # benchmark_serving.py removed the arrays before it merged them in: always kept
        res_d.update(per)
    elif not legacy:
        res_d["latencies"] = per["latencies"]
    for name, vals in (("ttft", ttft), ("tpot", tpot[out_lens > 1]), ("itl", flat_itl), ("e2el", e2e)):
        v = vals if len(vals) else np.zeros(1)
        res_d[f"mean_{name}_ms"] = float(np.mean(v) * 1e3)
        res_d[f"median_{name}_ms"] = float(np.median(v) * 1e3)
        res_d[f"std_{name}_ms"] = float(np.std(v) * 1e3)
        for p in percentiles:
            pw = str(int(p)) if int(p) == p else str(p)
            res_d[f"p{pw}_{name}_ms"] = float(np.percentile(v, p) * 1e3)
    return res_d
