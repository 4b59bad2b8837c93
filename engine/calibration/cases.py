"""Cases (one measured run each: scenario, optional request stream, measured metrics, how to
read the same metrics off a simulation), simulating them, and their error tables."""
from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..scenario import Scenario
from ..sim import simulate
from ..workload import Workload


@dataclass
class Case:
    """One measured run: how to simulate it and which numbers to compare."""

    name: str
    scenario: Scenario
    measured: dict[str, float]
    metric_fn: Callable[[Any, Scenario], dict[str, float]]
    trace: Workload | None = None
    fit_metrics: tuple[str, ...] = ("request_throughput", "mean_ttft_ms")
    info: dict = field(default_factory=dict)


def engine_metrics(res, sc: Scenario) -> dict[str, float]:
    """Metrics in ``vllm bench serve`` names from the engine's own summary window."""
    s = res.summary
    r = res.requests
    m = (r["arrival_s"] >= sc.warmup_s) & (r["arrival_s"] < sc.duration_s) & r["completed"]
    tpot = r.loc[m, "tpot_ms"].dropna().to_numpy()
    return {
        "request_throughput": s["throughput_req_s"],
        "output_throughput": s["throughput_tok_s"],
        "mean_ttft_ms": s["ttft_mean_ms"],
        "median_ttft_ms": s["ttft_p50_ms"],
        "p99_ttft_ms": s["ttft_p99_ms"],
        "mean_tpot_ms": s["tpot_mean_ms"],
        "median_tpot_ms": float(np.median(tpot)) if len(tpot) else math.nan,
        "p99_tpot_ms": float(np.percentile(tpot, 99)) if len(tpot) else math.nan,
        "slo_attainment": s["slo_attainment"],
    }


def typed_values(sc: Scenario, values: dict[str, float]) -> dict[str, float | int]:
    """Fitted values as the scenario's fields take them: integer fields rounded."""
    out = {}
    for k, v in values.items():
        cur = getattr(sc, k)
        out[k] = int(round(v)) if isinstance(cur, int) and not isinstance(cur, bool) else float(v)
    return out


def simulate_case(case: Case, values: dict[str, float] | None = None) -> dict[str, float]:
    sc = case.scenario.replace(**typed_values(case.scenario, values)) if values else case.scenario
    res = simulate(sc, trace=case.trace)
    return case.metric_fn(res, sc)


def _rel(sim: float, meas: float) -> float:
    if not (math.isfinite(meas) and meas > 0):
        return math.nan
    if not math.isfinite(sim):
        return math.inf
    return sim / meas - 1.0


def error_table(cases: list[Case], sims: list[dict[str, float]], metrics=None) -> pd.DataFrame:
    """Long table: one row per (case, metric) with measured, simulated, relative error."""
    rows = []
    for c, s in zip(cases, sims):
        for k, meas in c.measured.items():
            if metrics is not None and k not in metrics:
                continue
            if not math.isfinite(meas):
                continue
            sim = s.get(k, math.nan)
            rows.append({"case": c.name, **c.info, "metric": k, "measured": meas, "simulated": sim,
                         "rel_error": _rel(sim, meas), "fitted": k in c.fit_metrics,
                         "sim_overloaded": bool(s.get("overloaded", 0.0))})
    return pd.DataFrame(rows)


def summarize_errors(table: pd.DataFrame, by=("metric",)) -> pd.DataFrame:
    """MAPE, median and worst absolute relative error per metric (and group)."""
    if table.empty:
        return pd.DataFrame(columns=[*by, "n", "mape", "median_ape", "worst_ape", "worst_case"])
    t = table.assign(ape=table["rel_error"].abs())
    out = []
    for key, g in t.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        g2 = g[np.isfinite(g["ape"])]
        worst = g.loc[g["ape"].idxmax()] if len(g) else None
        out.append({**dict(zip(by, key)), "n": len(g), "n_finite": len(g2),
                    "mape": float(g2["ape"].mean()) if len(g2) else math.nan,
                    "median_ape": float(g2["ape"].median()) if len(g2) else math.nan,
                    "worst_ape": float(g["ape"].max()) if len(g) else math.nan,
                    "worst_case": worst["case"] if worst is not None else ""})
    return pd.DataFrame(out)


def simulate_cases(cases: list[Case], values: dict[str, float] | None = None,
                   workers: int | None = None) -> list[dict[str, float]]:
    """``simulate_case`` over many cases on a thread pool (the jitted loop releases the GIL)."""
    workers = max(1, min(len(cases), workers or os.cpu_count() or 1))
    if workers == 1:
        return [simulate_case(c, values) for c in cases]
    # longest first, so the slow runs do not end up last on one thread
    order = sorted(range(len(cases)), key=lambda i: -cases[i].scenario.arrival_rate_rps * cases[i].scenario.duration_s)
    out: list = [None] * len(cases)
    with ThreadPoolExecutor(workers) as ex:
        for i, m in zip(order, ex.map(lambda i: simulate_case(cases[i], values), order)):
            out[i] = m
    return out
