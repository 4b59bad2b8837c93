"""Metrics: the summary of one run, and confidence intervals over replications."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else float("nan")


def summarize(sc, req: pd.DataFrame, counters: dict) -> dict:
    """Flat dict of metrics over requests that arrived in [warmup_s, duration_s)."""
    m = (req["arrival_s"] >= sc.warmup_s) & (req["arrival_s"] < sc.duration_s)
    r = req[m]
    done = r[r["completed"]]
    ttft = done["ttft_ms"].to_numpy()
    window = sc.duration_s - sc.warmup_s
    fin = req["finish_s"].to_numpy()
    in_win = (fin >= sc.warmup_s) & (fin < sc.duration_s)
    n_req, n_done = len(r), len(done)
    tpot = done["tpot_ms"].dropna().to_numpy()
    ttft_sum = float(ttft.sum())
    s = {
        "requests": n_req,
        "completed": n_done,
        "not_completed": n_req - n_done,
        "ttft_mean_ms": float(ttft.mean()) if n_done else math.nan,
        "ttft_p50_ms": _pct(ttft, 50),
        "ttft_p90_ms": _pct(ttft, 90),
        "ttft_p99_ms": _pct(ttft, 99),
        "queue_mean_ms": float(done["queue_ms"].mean()) if n_done else math.nan,
        "load_wait_mean_ms": float(done["load_wait_ms"].mean()) if n_done else math.nan,
        "prefill_mean_ms": float(done["prefill_ms"].mean()) if n_done else math.nan,
        "tpot_mean_ms": float(tpot.mean()) if len(tpot) else math.nan,
        "e2e_mean_ms": float(done["e2e_ms"].mean()) if n_done else math.nan,
        "e2e_p99_ms": _pct(done["e2e_ms"].to_numpy(), 99),
        "throughput_req_s": float(in_win.sum() / window),
        "throughput_tok_s": float(req["output_tokens"].to_numpy()[in_win].sum() / window),
        "swap_rate": float(done["loaded"].sum() / n_done) if n_done else math.nan,
        "swap_share_of_ttft": float(done["load_wait_ms"].sum() / ttft_sum) if ttft_sum > 0 else 0.0,
        "gpu_busy_frac": counters["busy_s_in_window"] / window,
        "hit_rate_gpu": float(1.0 - r["loaded"].mean()) if n_req else math.nan,
        "tier_gpu_frac": float((r["tier"] == "gpu").mean()) if n_req else math.nan,
        "tier_disk_frac": float((r["tier"] == "disk").mean()) if n_req else math.nan,
        "slo_attainment": float((ttft <= sc.slo_ttft_ms).sum() / n_req) if n_req else math.nan,
    }
    s.update(counters)
    return s


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
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * x.std(ddof=1) / math.sqrt(n))
    return mean, mean - half, mean + half
