"""Metrics: the summary of one run, and confidence intervals over replications."""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else float("nan")


def _pcts(x: np.ndarray, qs: tuple) -> list[float]:
    """``[_pct(x, q) for q in qs]`` in one partition of x (the same values: tests/test_metrics.py)."""
    if not len(x):
        return [float("nan")] * len(qs)
    return [float(v) for v in np.percentile(x, qs)]


def summarize(sc, req, counters: dict) -> dict:
    """Flat dict of metrics over requests that arrived in [warmup_s, duration_s).

    ``req`` is the per-request table (a DataFrame or a dict of NumPy arrays with its columns).
    """
    col = (lambda k: req[k]) if isinstance(req, dict) else (lambda k: req[k].to_numpy())
    arrival = col("arrival_s")
    m = (arrival >= sc.warmup_s) & (arrival < sc.duration_s)
    completed = col("completed").astype(bool)
    done = m & completed
    ttft = col("ttft_ms")[done]
    loaded = col("loaded").astype(bool)
    window = sc.duration_s - sc.warmup_s
    fin = col("finish_s")
    in_win = (fin >= sc.warmup_s) & (fin < sc.duration_s)
    n_req, n_done = int(m.sum()), int(done.sum())
    tpot = col("tpot_ms")[done]
    tpot = tpot[np.isfinite(tpot)]
    tier = col("tier")
    tier_codes = tier.codes if hasattr(tier, "codes") else None
    ttft_sum = float(ttft.sum())

    def mean(x):
        return float(x.mean()) if len(x) else math.nan

    served = m & ~col("dropped").astype(bool)  # refused requests (max_in_system) had no tier and no adapter
    if tier_codes is not None:
        t_m = np.asarray(tier_codes)[served]
        gpu_frac = float((t_m == 0).mean()) if len(t_m) else math.nan
        disk_frac = float((t_m == 2).mean()) if len(t_m) else math.nan
    else:
        t_m = np.asarray(tier)[served]
        gpu_frac = float((t_m == "gpu").mean()) if len(t_m) else math.nan
        disk_frac = float((t_m == "disk").mean()) if len(t_m) else math.nan
    lw = col("load_wait_ms")[done]
    t50, t90, t99 = _pcts(ttft, (50, 90, 99))
    p90, p99 = _pcts(tpot, (90, 99))
    s = {
        "requests": n_req,
        "completed": n_done,
        "not_completed": n_req - n_done,
        "ttft_mean_ms": mean(ttft),
        "ttft_p50_ms": t50,
        "ttft_p90_ms": t90,
        "ttft_p99_ms": t99,
        "frontend_mean_ms": mean(col("frontend_ms")[done]),
        "queue_mean_ms": mean(col("queue_ms")[done]),
        "load_wait_mean_ms": mean(lw),
        "prefill_mean_ms": mean(col("prefill_ms")[done]),
        "tpot_mean_ms": mean(tpot),
        "tpot_p90_ms": p90,
        "tpot_p99_ms": p99,
        "e2e_mean_ms": mean(col("e2e_ms")[done]),
        "e2e_p99_ms": _pct(col("e2e_ms")[done], 99),
        "throughput_req_s": float(in_win.sum() / window),
        "throughput_tok_s": float(counters["tokens_in_window"] / window),
        "swap_rate": float(loaded[done].sum() / n_done) if n_done else math.nan,
        "swap_share_of_ttft": float(lw.sum() / ttft_sum) if ttft_sum > 0 else 0.0,
        "gpu_busy_frac": counters["busy_s_in_window"] / window,
        "hit_rate_gpu": float(1.0 - loaded[served].mean()) if served.any() else math.nan,
        "tier_gpu_frac": gpu_frac,
        "tier_disk_frac": disk_frac,
        "slo_attainment": float((ttft <= sc.slo_ttft_ms).sum() / n_req) if n_req else math.nan,
    }
    s.update(counters)
    if "cached_tokens" in (req if isinstance(req, dict) else req.columns):  # prefix cache (docs/model.md 3.7)
        cached, prompt = int(col("cached_tokens")[done].sum()), int(col("prompt_tokens")[done].sum())
        s["prefix_cache_hit_rate"] = cached / prompt if prompt else math.nan
        s["prefix_cached_tokens"], s["prefix_computed_tokens"] = cached, prompt - cached
    return s


#: A run is stable when it completes at least this share of the requests that arrived in the
#: window (the rest would still be queued at the end of the drain)...
STABLE_COMPLETED_FRAC = 0.99
#: ... and its throughput is at least this share of the arrival rate it actually saw in the window
#: (arrivals / window: the realised rate, so that Poisson noise in the arrival count does not count
#: as a backlog).  An overloaded server falls behind by (offered - capacity) / offered.
STABLE_THROUGHPUT_FRAC = 0.95


def stable(summary, window_s: float) -> bool:
    """The server keeps up: (almost) every request of the ``window_s`` measurement window completes, the
    throughput follows the arrivals, nothing refused, no deadlock (the planner's rule, docs/model.md 10)."""
    n = summary.get("requests", 0)
    if not n or summary.get("deadlock") or summary.get("dropped_total", 0) > 0:
        return False
    if summary["completed"] < STABLE_COMPLETED_FRAC * n:
        return False
    return summary["throughput_req_s"] >= STABLE_THROUGHPUT_FRAC * n / window_s


def mean_ci(x: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval; NaN bounds for fewer than 2 values."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if n < 2:
        return mean, math.nan, math.nan
    half = float(_t_quantile(0.5 + level / 2, n - 1) * x.std(ddof=1) / math.sqrt(n))
    return mean, mean - half, mean + half


@functools.lru_cache(maxsize=1024)
def _t_quantile(p: float, df: int) -> float:
    return stats.t.ppf(p, df)


# ---------------------------------------------------------------------------------------- fleet
#: Whole-run counters of a fleet: summed over replicas, any replica, the largest, the mean; any other
#: counter is a per-GPU constant (capacities, modes: the same on every replica) and keeps replica 0's.
FLEET_SUM = ("loads_total", "disk_loads_total", "evictions_total", "steps", "busy_s_in_window", "tokens_in_window",
             "swap_events", "compact_events", "preemptions", "dropped_total", "compacted_bytes", "rejections",
             "prefill_tokens_total", "prefill_chunks_total", "prefix_cached_tokens_total", "prefix_cache_hits_total",
             "prefix_cache_evictions")
FLEET_ANY = ("stopped_at_horizon", "deadlock", "events_truncated")
FLEET_MAX = ("end_s", "peak_adapter_bytes", "peak_kv_bytes", "peak_gpu_dynamic_bytes", "peak_step_tokens")
FLEET_MEAN = ("pcie_busy_frac", "avg_frag")
#: Columns of ``SimResult.replicas``: one row per replica, from the summary of its own requests.
REPLICA_COLUMNS = ("replica", "requests", "completed", "throughput_req_s", "throughput_tok_s", "ttft_p50_ms",
                   "ttft_p99_ms", "swap_rate", "loads_total", "evictions_total", "gpu_busy_frac", "pcie_busy_frac")


#: The per-request columns ``replica_row`` reads.
REPLICA_INPUTS = ("arrival_s", "completed", "finish_s", "ttft_ms", "loaded")


def replica_row(sc, req: dict, counters: dict) -> dict:
    """``summarize(sc, req, counters)`` restricted to REPLICA_COLUMNS (but ``replica``), without the rest:
    the same formulas on the same arrays (tests/test_fleet.py checks them equal), for a fleet's rows."""
    arrival = req["arrival_s"]
    m = (arrival >= sc.warmup_s) & (arrival < sc.duration_s)
    done = m & req["completed"].astype(bool)
    ttft = req["ttft_ms"][done]
    window = sc.duration_s - sc.warmup_s
    fin = req["finish_s"]
    n_done = int(done.sum())
    t50, t99 = _pcts(ttft, (50, 99))
    return {
        "requests": int(m.sum()),
        "completed": n_done,
        "throughput_req_s": float(((fin >= sc.warmup_s) & (fin < sc.duration_s)).sum() / window),
        "throughput_tok_s": float(counters["tokens_in_window"] / window),
        "ttft_p50_ms": t50,
        "ttft_p99_ms": t99,
        "swap_rate": float(req["loaded"].astype(bool)[done].sum() / n_done) if n_done else math.nan,
        "loads_total": counters["loads_total"],
        "evictions_total": counters["evictions_total"],
        "gpu_busy_frac": counters["busy_s_in_window"] / window,
        "pcie_busy_frac": counters["pcie_busy_frac"],
    }


def fleet_counters(per_replica: list[dict]) -> dict:
    """The fleet's whole-run counters from each replica's (see FLEET_SUM, ...)."""
    out = dict(per_replica[0])
    for k in FLEET_SUM:
        out[k] = sum(c[k] for c in per_replica)
    for k in FLEET_ANY:
        out[k] = any(c[k] for c in per_replica)
    for k in FLEET_MAX:
        out[k] = max(c[k] for c in per_replica)
    for k in FLEET_MEAN:
        out[k] = float(np.mean([c[k] for c in per_replica]))
    return out


def load_imbalance(requests_per_replica) -> float:
    """max / mean of the requests each replica received (1 = perfectly even); NaN without requests."""
    x = np.asarray(requests_per_replica, dtype=float)
    return float(x.max() / x.mean()) if len(x) and x.mean() > 0 else math.nan


def adapter_duplication(t, delta, adapter, w0: float, w1: float) -> float:
    """Time-averaged number of replicas holding an adapter, over the adapters held anywhere, in [w0, w1):

        D = ∫ Σ_a c_a(t) dt / ∫ #{a : c_a(t) > 0} dt,

    c_a(t) = replicas holding adapter a (resident or loading) at t, from the changes ``delta`` (+1: a
    load or a preload at t = 0; -1: an eviction) at times ``t`` (non-decreasing: the event log's order)
    for ``adapter``.  NaN if nothing is held."""
    t = np.asarray(t, dtype=float)
    delta = np.asarray(delta, dtype=np.int64)
    adapter = np.asarray(adapter, dtype=np.int64)
    if len(t) == 0 or w1 <= w0:
        return math.nan
    rest = w1 - np.clip(t, w0, w1)  # a change at t holds (or frees) over [max(t, w0), w1)
    copies = float((delta * rest).sum())
    # by adapter, in time order within each (a radix sort on 16-bit ids: the same stable order)
    small = len(adapter) and 0 <= adapter.min() and adapter.max() < 65536
    order = np.argsort(adapter.astype(np.uint16) if small else adapter, kind="stable")
    a, d, r = adapter[order], delta[order], rest[order]
    cs = np.cumsum(d)
    first = np.r_[True, a[1:] != a[:-1]]
    base = np.maximum.accumulate(np.where(first, np.arange(len(a)), 0))
    cnt = cs - (cs[base] - d[base])  # running count within each adapter's changes
    before = cnt - d
    held = float(r[(before == 0) & (cnt > 0)].sum() - r[(before > 0) & (cnt == 0)].sum())
    return copies / held if held > 0 else math.nan
