"""A ToolRun as a Case: the scenario it ran (the server's settings the user states, the traffic the
file states), the request stream to replay, and the tool's own metric definitions applied to the
simulation.

Assumptions (each also in the docstring that applies it):

* the server side is not in the files: GPU, model, ``max_loras``, ``max_cpu_loras``,
  ``max_lora_rank``, adapters and their popularity come from the base scenario and the user's
  settings (``server_scenario``); the model is prefilled from ``model_id`` when it names a preset
  model's Hugging Face repo id (``engine.presets`` ``Model.source``);
* open-loop and burst runs are replayed as a trace (``engine.workload.Workload``): the file's
  request count, arrival process and lengths (when the file lists fewer requests than it sent,
  each request's lengths are drawn from the listed pairs); adapters drawn from the scenario's
  popularity;
* closed-loop runs use the engine's closed loop (``arrival_process`` closed, ``concurrency``) for
  the file's duration: it issues requests until then, where the tool stopped after its request
  count (the two differ by the ramp-down of the last < concurrency requests); lengths are drawn
  from the scenario (fixed at the file's means, or lognormal with the per-request arrays' CV);
* every simulated request has output >= 1 and, without chunked prefill, prompt <= ``max_batched_tokens``
  (else ValueError).
"""
from __future__ import annotations

import math
import re

import numpy as np

from ... import presets
from ...presets.servers import VLLM_FITTED_PRESET, VLLM_MAX_LORA_RANKS, vllm_rank_holding, vllm_server_fields
from ...scenario import MAX_REQUESTS, Scenario
from ...sim import simulate
from ...workload import Workload, draw_adapters
from ..cases import Case
from ..vllm_runs import vllm_slot_bytes
from .base import ToolRun

#: Metrics the replay can compute on a simulation (the rest of a file's keys are not compared).
SIM_METRIC = re.compile(r"^(request_throughput|output_throughput|mean_itl_ms|"
                        r"(mean|median|std|p\d+(\.\d+)?)_(ttft|tpot|e2el)_ms)$")
#: The metrics a tool file's fit minimises by default, those of them the file has (``--metrics`` chooses others):
#: request throughput, the per-step cost (mean TPOT; in a file without TPOT, e.g. GuideLLM's, its mean ITL:
#: ``run_case``), and the TTFT distribution by its mean, median and 99th percentile: the mean alone can be met by
#: a distribution of the wrong shape, and the tail is what latency SLOs bound.
DEFAULT_FIT_METRICS = ("request_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms")
#: Weights of the relative residuals (simulated / measured - 1, per run; ``fitting.fit_cases``) of a tool file's
#: fit: 1 for every metric but the TTFT order statistics, median 0.5 and p99 0.25.  Why: an order statistic rests
#: on fewer requests than a mean (p99: the top 1 %), so it is noisier: for an exponential-like TTFT its relative
#: sampling error is about 1.4x (median) and 2.2x (p99) the mean's, and in a simulation it also jumps as events
#: reorder, which makes the objective rugged; weights near the inverse of that noise, rounded to halvings, keep a
#: noisy tail from steering the fit while it still counts.  Measured on round trips with tests/test_readers.py's
#: writers (files written by our engine at known parameters, 3 tools x 2 sizes x 2 rate pairs): with these weights all 12
#: fits recovered both parameters within 5 %; with weight 1 on median and p99, 10 of 12.  The fit also runs in
#: two stages (``fit._fit_in_stages``): the means first, then every metric from there.
FIT_METRIC_WEIGHTS = {"median_ttft_ms": 0.5, "p99_ttft_ms": 0.25}
_SEED_TAG = 0x7001


def match_model(model_id: str) -> str | None:
    """The preset model whose Hugging Face repo id ``model_id`` names (the id itself, its last path
    part, or either without an ``-Instruct`` / ``-chat`` / ``-hf`` suffix), or None."""
    if not model_id:
        return None
    want = {model_id.strip().lower(), model_id.strip().rstrip("/").split("/")[-1].lower()}
    want |= {re.sub(r"-(instruct|chat|hf|chat-hf)$", "", w) for w in want}
    for name, m in presets.MODELS.items():
        repo = m.source.split(" ")[0].lower()
        if repo in want or repo.split("/")[-1] in want:
            return name
    return None


#: The tools whose files measure a vLLM server (``vllm bench serve`` and its predecessor's layout).
VLLM_TOOLS = ("vllm-bench-serve",)


def server_scenario(base: Scenario, runs: list[ToolRun], gpu=None, model=None, max_loras=None, max_cpu_loras=None,
                    max_lora_rank=None, num_adapters=None, popularity=None, overrides=None) -> tuple[Scenario, list[str]]:
    """The server the runs measured: ``base`` with the user's LoRA settings (None = keep base's).

    ``model``: else the preset model ``model_id`` names, else base's.  ``max_lora_rank`` sets
    ``adapter_rank`` (all adapters at that rank) and, with ``max_loras`` > 0, the adapter budget
    vLLM reserves: max_loras x ``vllm_slot_bytes(max_lora_rank)``.  ``popularity``: "uniform"
    (``popularity`` power with ``power_alpha`` 1: every adapter equally likely), "zipf:S" or
    "power:A"; for ``vllm bench serve`` files the default is uniform (its ``--lora-modules`` pick is
    ``random.choice`` or round-robin).  ``overrides``: any Scenario fields, applied last.
    """
    notes: list[str] = []
    kw: dict = {}
    if model is None:
        ids = sorted({r.model_id for r in runs if r.model_id})
        found = {match_model(i) for i in ids} - {None}
        if len(found) == 1:
            model = found.pop()
            notes.append(f"model {model} from model_id {', '.join(ids)}")
        elif ids:
            notes.append(f"model_id {', '.join(ids)} names no single preset model; model {base.model} from the "
                         "base scenario (state it with --model)")
    for f, v in (("gpu", gpu), ("model", model), ("max_loras", max_loras), ("max_cpu_loras", max_cpu_loras),
                 ("num_adapters", num_adapters)):
        if v is not None:
            kw[f] = v
    if max_lora_rank is not None:
        kw.update(adapter_rank=int(max_lora_rank), adapter_ranks=())
        slots = kw.get("max_loras", base.max_loras)
        if slots:
            b = slots * vllm_slot_bytes(int(max_lora_rank), kw.get("model", base.model)) / presets.GIB
            kw["vram_budget_gb"] = round(b + 1e-3, 4)
            notes.append(f"adapter budget {kw['vram_budget_gb']} GiB = {slots} slots x vLLM's slot at rank "
                         f"{max_lora_rank}")
    vllm_file = bool(runs) and all(r.tool in VLLM_TOOLS for r in runs)
    if vllm_file and base.strategy != "vllm":  # fit the file as the server it measured, not the base's policy
        gpu_name = kw.get("gpu", base.gpu)
        server = {k: v for k, v in vllm_server_fields(gpu_name).items() if k not in kw}
        slots = kw.get("max_loras", base.max_loras) or 1  # vLLM's own default --max-loras is 1
        server["max_loras"] = slots
        if "vram_budget_gb" not in kw:
            rank = kw.get("adapter_rank", base.adapter_rank)
            vrank = vllm_rank_holding(rank) or VLLM_MAX_LORA_RANKS[-1]
            server["vram_budget_gb"] = round(slots * vllm_slot_bytes(vrank, kw.get("model", base.model))
                                             / presets.GIB + 1e-3, 4)
        kw = {**server, **kw}
        notes.append(f"fitted as vLLM (the server a {runs[0].tool} file measures): strategy vllm, vLLM's batch "
                     f"limits on {gpu_name} ({server.get('max_batch_size', '-')} sequences, "
                     f"{server.get('max_batched_tokens', '-')} tokens), PCIe {server.get('pcie_gbps', '-')} GB/s "
                     f"of that GPU, start values from the vLLM fit ({VLLM_FITTED_PRESET})"
                     + ("" if base.max_loras else "; --max-loras 1, vLLM's default (state yours with --max-loras)"))
    if popularity is None and any(r.tool == "vllm-bench-serve" for r in runs):
        popularity = "uniform"
        notes.append("adapter popularity uniform (vllm bench serve picks --lora-modules uniformly)")
    if popularity is not None:
        kw.update(_popularity(popularity))
    sized = [r for r in runs if math.isfinite(r.mean_in) and math.isfinite(r.mean_out) and r.mean_in > 0]
    if sized:  # the base's own traffic is not what the file measured: check the server on the file's lengths
        kw = {**_length_fields(max(sized, key=lambda r: r.mean_in + r.mean_out)), **kw}
    kw.update(overrides or {})
    try:
        return base.replace(**kw).validate(), notes
    except ValueError as e:
        raise ValueError(f"server settings: {e} (change the server's fields with --set FIELD=VALUE)") from None


def _popularity(spec: str) -> dict:
    s = str(spec).strip().lower()
    if s == "uniform":
        return {"popularity": "power", "power_alpha": 1.0}
    kind, _, val = s.partition(":")
    try:
        x = float(val)
    except ValueError:
        x = math.nan
    if kind == "zipf" and x >= 0:
        return {"popularity": "zipf", "zipf_s": x}
    if kind == "power" and x > 0:
        return {"popularity": "power", "power_alpha": x}
    raise ValueError(f"popularity: invalid value {spec!r}; allowed: uniform, zipf:S (S >= 0), power:A (A > 0)")


# ----------------------------------------------------------------------------- the request stream
def arrivals(run: ToolRun, seed: int) -> np.ndarray:
    """Send times of ``run.num_requests`` requests (s from the run's start), sorted.

    Recorded send times when the file has them; a burst: all 0; constant: i / rate; Poisson and
    Gamma: gaps Gamma(shape = burstiness, scale = 1 / (rate x burstiness)), and for ``vllm bench
    serve`` rescaled so that the last request leaves at n / rate (as vLLM does).
    """
    n = run.num_requests
    if not 0 <= n <= MAX_REQUESTS:  # a file's claim, checked before anything is generated from it
        raise ValueError(f"{run.source}: {n:,} requests; allowed: at most {MAX_REQUESTS:,} per run "
                         "(the engine's cap on one simulation)")
    if run.start_s is not None:
        return np.sort(run.start_s)
    if run.arrival == "burst":
        return np.zeros(n)
    rate = run.rate_rps
    if run.arrival == "constant":
        return np.arange(n) / rate
    rng = np.random.default_rng(np.random.SeedSequence([seed, _SEED_TAG]))
    b = run.burstiness
    t = np.cumsum(rng.gamma(b, 1.0 / (rate * b), size=n))
    if run.tool == "vllm-bench-serve" and n and t[-1] > 0:
        t *= (n / rate) / t[-1]
    return t


def run_trace(run: ToolRun, sc: Scenario) -> Workload | None:
    """The Workload to replay (None for a closed loop, which the engine generates)."""
    if run.arrival == "closed":
        return None
    t = arrivals(run, sc.seed)
    n = len(t)
    order = np.argsort(run.start_s, kind="stable") if run.start_s is not None else np.arange(n)  # the recorded per-request arrays in send order
    if run.detailed and len(run.input_lens) == n:
        p, q = run.input_lens[order], run.output_lens[order]
    elif run.detailed:  # the file lists fewer requests than it sent: draw from the listed (prompt, output) pairs
        idx = np.random.default_rng(np.random.SeedSequence([sc.seed, _SEED_TAG, 2])).integers(0, len(run.input_lens), n)
        p, q = run.input_lens[idx], run.output_lens[idx]
    else:
        p = np.full(n, max(1, int(round(run.mean_in))), np.int64)
        q = np.full(n, max(1, int(round(run.mean_out))), np.int64)
    if run.adapters is not None and len(run.adapters) == n:  # the adapters the requests named, as recorded
        ad = run.adapters[order].astype(np.int64)
        if len(ad) and (ad.min() < 0 or ad.max() >= sc.num_adapters):
            raise ValueError(f"{run.source}: adapter index {int(ad.max() if ad.max() >= sc.num_adapters else ad.min())}"
                             f" outside the scenario's {sc.num_adapters} adapters; allowed: 0 to {sc.num_adapters - 1}")
    else:
        rng = np.random.default_rng(np.random.SeedSequence([sc.seed, _SEED_TAG, 1]))
        ad = draw_adapters(sc, rng, n)
    pfx = None
    if run.prefix is not None and len(run.prefix) == n and sc.prefix_tokens > 0 and sc.prefix_share > 0:
        pfx = run.prefix[order].astype(np.int64)
    return Workload(t.astype(np.float64), ad, p.astype(np.int64), q.astype(np.int64), prefix=pfx)


def case_scenario(run: ToolRun, server: Scenario) -> Scenario:
    """``server`` with ``run``'s traffic, for the replay (not for users: lengths are the longest ones,
    so that the memory checks cover every request; warm-up 0, a long drain).  The server fields the run states
    (``run.server_fields``: an observed reference server's flags) override ``server``'s."""
    if run.server_fields:
        try:
            server = server.replace(**run.server_fields)
        except ValueError as e:
            raise ValueError(f"{run.source}: the server it states: {e}") from None
    lens = run.input_lens if run.detailed else np.array([max(1, int(round(run.mean_in)))])
    bad = np.flatnonzero(lens > server.max_batched_tokens) if not server.chunked_prefill_on() else lens[:0]
    if len(bad):
        what = f"input_lens[{bad[0]}]" if run.detailed else "mean prompt (total_input_tokens / completed)"
        raise ValueError(f"{run.source}: {what}: {int(lens[bad[0]])} tokens > max_batched_tokens "
                         f"({server.max_batched_tokens}); allowed: at most that (raise it with --set max_batched_tokens=N)")
    if run.arrival == "closed":
        kw = dict(arrival_process="closed", concurrency=run.concurrency, **_length_fields(run))
        dur = run.window_s[1] if run.metric_origin == "window" else run.duration_s
    else:
        t = arrivals(run, server.seed)
        last = float(t.max()) if len(t) else 0.0
        dur = max(last + 1e-3, run.window_s[1] if run.metric_origin == "window" else run.duration_s)
        if run.detailed:
            p, q = int(run.input_lens.max()), int(run.output_lens.max())
        else:
            p, q = max(1, int(round(run.mean_in))), max(1, int(round(run.mean_out)))
        kw = dict(arrival_process="poisson", arrival_rate_rps=max(len(t), 1) / dur, prompt_tokens=p,
                  output_tokens=q, length_dist="fixed")
    kw.update(duration_s=float(dur), warmup_s=0.0, drain_s=float(min(86400.0, max(600.0, 10 * dur))))
    try:
        return server.replace(**kw).validate()
    except ValueError as e:
        if kw.get("length_dist") == "lognormal":  # a closed loop's lognormal lengths that do not fit: fixed ones
            try:
                return server.replace(**{**kw, "length_dist": "fixed"}).validate()
            except ValueError:
                pass
        raise ValueError(f"{run.source}: {e}") from None


def _length_fields(run: ToolRun) -> dict:
    if run.detailed:
        cv = max(float(np.std(run.input_lens) / np.mean(run.input_lens)), float(np.std(run.output_lens) / np.mean(run.output_lens)))
        if cv > 1e-9:
            return dict(prompt_tokens=int(round(run.mean_in)), output_tokens=int(round(run.mean_out)),
                        length_dist="lognormal", length_spread=round(min(cv, 10.0), 4))
    return dict(prompt_tokens=max(1, int(round(run.mean_in))), output_tokens=max(1, int(round(run.mean_out))),
                length_dist="fixed")


def run_case(run: ToolRun, server: Scenario, fit_metrics=None) -> Case:
    """The Case of one run: measured = the file's metrics the replay can compute."""
    sc = case_scenario(run, server)
    trace = run_trace(run, sc)
    measured = {k: v for k, v in run.measured.items() if SIM_METRIC.match(k) and math.isfinite(v)}
    want = tuple(fit_metrics) if fit_metrics else DEFAULT_FIT_METRICS
    fitm = tuple(m for m in want if m in measured)
    if not fit_metrics and "mean_tpot_ms" not in measured and "mean_itl_ms" in measured:
        fitm += ("mean_itl_ms",)  # the per-step cost of a file without TPOT (GuideLLM's ITL)
    return Case(name=run.source, scenario=sc, measured=measured, metric_fn=tool_metrics(run), trace=trace,
                fit_metrics=fitm, info={"tool": run.tool})


def simulate_run(run: ToolRun, server: Scenario):
    """Simulate ``run``'s traffic on ``server`` (what the writers serialise)."""
    sc = case_scenario(run, server)
    return simulate(sc, trace=run_trace(run, sc))


# ----------------------------------------------------------------------------- metrics
def selected(res, run: ToolRun):
    """(requests the tool's latency statistics cover, requests its rates count, rate denominator s)."""
    r = res.requests
    sc = res.scenario
    done = r["completed"].to_numpy()
    arr = r["arrival_s"].to_numpy()
    end = arr + r["e2e_ms"].to_numpy() / 1e3
    if run.metric_origin == "window":
        w0, w1 = run.window_s
        lat = done & (end > w0) & (arr < w1)          # GuideLLM: requests overlapping the window
        rate = done & (end >= w0) & (end < w1)         # its rates: completions inside the window
        return lat, rate, max(w1 - w0, 1e-9)
    t0 = 0.0 if run.metric_origin == "start" else (float(arr.min()) if len(arr) else 0.0)
    stop = float(end[done].max()) if done.all() and done.any() else sc.duration_s + sc.drain_s
    return done, done, max(stop - t0, 1e-9)


def tool_metrics(run: ToolRun):
    """metric_fn for a Case: the tool's definitions on the simulated requests (``selected``)."""
    keys = [k for k in run.measured if SIM_METRIC.match(k)]

    def fn(res, sc) -> dict[str, float]:
        r = res.requests
        lat, rate, span = selected(res, run)
        out_tok = r["output_tokens"].to_numpy()
        out = {"request_throughput": float(rate.sum() / span),
               "output_throughput": float(out_tok[rate].sum() / span)}
        tp = r["tpot_ms"].to_numpy()
        dec = lat & (out_tok > 1)
        vals = {"ttft": r["ttft_ms"].to_numpy()[lat], "tpot": tp[dec], "e2el": r["e2e_ms"].to_numpy()[lat]}
        w = out_tok[dec] - 1
        out["mean_itl_ms"] = float((tp[dec] * w).sum() / w.sum()) if w.sum() else math.nan
        for k in keys:
            m = re.match(r"^(mean|median|std|p([\d.]+))_(ttft|tpot|e2el)_ms$", k)
            if m:
                v = vals[m.group(3)]
                out[k] = _stat(v, m.group(1), m.group(2))
        return out
    return fn


def _stat(v: np.ndarray, stat: str, p: str | None) -> float:
    if len(v) == 0:
        return math.nan
    if stat == "mean":
        return float(np.mean(v))
    if stat == "median":
        return float(np.median(v))
    if stat == "std":
        return float(np.std(v))
    return float(np.percentile(v, float(p)))


def ttft_distribution(run: ToolRun, res) -> dict:
    """Measured vs simulated per-request TTFT: percentiles and the Kolmogorov-Smirnov distance
    (largest gap between the two empirical CDFs; 0 = identical, 1 = disjoint)."""
    lat, _, _ = selected(res, run)
    sim = np.sort(res.requests["ttft_ms"].to_numpy()[lat])
    meas = np.sort(run.ttfts_ms)
    out = {"case": run.source, "n_measured": len(meas), "n_simulated": len(sim)}
    if len(sim) == 0 or len(meas) == 0:
        return {**out, "ks": math.nan}
    grid = np.concatenate([meas, sim])
    ks = np.max(np.abs(np.searchsorted(meas, grid, "right") / len(meas) - np.searchsorted(sim, grid, "right") / len(sim)))
    out["ks"] = float(ks)
    for p in (10, 50, 90, 99):
        out[f"p{p}_measured_ms"] = float(np.percentile(meas, p))
        out[f"p{p}_simulated_ms"] = float(np.percentile(sim, p))
    return out


# ----------------------------------------------------------------------------- the fitted scenario
def fitted_workload(server: Scenario, run: ToolRun) -> tuple[Scenario, str]:
    """``server`` with ``run``'s traffic as Scenario fields, for ``python -m engine run``.

    Poisson -> ``arrival_process`` poisson; Gamma shape b -> gamma with ``arrival_cv`` 1/sqrt(b);
    constant gaps -> gamma with ``arrival_cv`` 0.01; closed loop -> closed with ``concurrency``;
    ``arrival_rate_rps`` the rate, ``duration_s`` the run's request window (n / rate, or its
    duration when closed), ``warmup_s`` 0; lengths at the file's means (lognormal with the arrays'
    CV when they vary).  A burst (rate inf) has no Scenario equivalent: the traffic stays the base's.
    """
    if run.arrival == "burst":
        return server, f"{run.source}: an all-at-once burst (request_rate inf) has no Scenario equivalent; the " \
                       "fitted scenario keeps the base scenario's traffic"
    kw = _length_fields(run)
    if run.arrival == "closed":
        kw.update(arrival_process="closed", concurrency=run.concurrency, duration_s=round(run.duration_s, 3))
    else:
        cv = 1.0 if run.arrival == "poisson" else (0.01 if run.arrival == "constant" else 1 / math.sqrt(run.burstiness))
        kw.update(arrival_process="poisson" if run.arrival == "poisson" else "gamma", arrival_cv=round(cv, 6),
                  arrival_rate_rps=float(run.rate_rps), duration_s=round(max(run.num_requests / run.rate_rps, 1.0), 3))
    kw["warmup_s"] = 0.0
    try:
        return server.replace(**kw).validate(), f"traffic of {run.source}"
    except ValueError:
        kw.update(length_dist="fixed")
        return server.replace(**kw).validate(), f"traffic of {run.source} (fixed lengths: the lognormal ones do not fit)"
