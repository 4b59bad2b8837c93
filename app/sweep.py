"""Sweep and crossover orchestration over ``engine.simulate`` (no model logic, no Streamlit).

A sweep varies one scenario field over a grid and runs every strategy with
``replications`` seeds (``seed + k``, common random numbers across strategies,
as ``engine.compare`` does); ``aggregate`` turns the per-run summaries into mean
and 95% CI with ``engine.mean_ci``.  The run function is injected so the
app can pass its cached wrapper and tests a plain ``simulate``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from engine import Scenario, mean_ci

#: Metrics a sweep records: summary key -> (axis title, number format).
SWEEP_METRICS: dict[str, tuple[str, str]] = {
    "ttft_p50_ms": ("TTFT p50 (ms)", ",.1~f"),
    "ttft_p99_ms": ("TTFT p99 (ms)", ",.1~f"),
    "swap_rate": ("Swap rate (loads per request)", ",.2~f"),
    "swap_share_of_ttft": ("Swap share of TTFT", ".0%"),
    "throughput_tok_s": ("Throughput (tokens/s)", ",.0f"),
    "slo_attainment": ("SLO attainment", ".0%"),
}

RunFn = Callable[[Scenario], dict]
ProgressFn = Callable[[int, int], None]


def grid_values(lo: float, hi: float, n: int, integer: bool = False) -> list:
    """``n`` evenly spaced values in [lo, hi] (rounded and de-duplicated for integer fields)."""
    n = max(1, int(n))
    xs = np.linspace(float(lo), float(hi), n) if n > 1 else np.array([float(lo)])
    if integer:
        return sorted({int(round(v)) for v in xs})
    return [float(round(v, 6)) for v in xs]


def plan(base: Scenario, field: str, values: Sequence, strategies: Sequence[str],
         replications: int) -> list[tuple[object, str, int, Scenario | None, str | None]]:
    """(x, strategy, replication, scenario or None, error) for every run of a sweep."""
    runs = []
    for x in values:
        for s in strategies:
            for k in range(replications):
                try:
                    sc = base.replace(**{field: x, "strategy": s, "seed": base.seed + k})
                    err = None
                except ValueError as e:
                    sc, err = None, str(e)
                runs.append((x, s, k, sc, err))
    return runs


def expected_requests(scenarios: Iterable[Scenario | None]) -> float:
    """Requests the runs will simulate (open loop: rate x duration per run)."""
    return float(sum(sc.expected_requests() for sc in scenarios if sc is not None))


def run_plan(runs, run_fn: RunFn, metrics: Iterable[str] = tuple(SWEEP_METRICS),
             progress: ProgressFn | None = None) -> pd.DataFrame:
    """Run every planned scenario; one row per run with its metrics (NaN and ``error`` on failure)."""
    metrics = list(metrics)
    rows = []
    total = len(runs)
    for i, (x, s, k, sc, err) in enumerate(runs):
        vals = {m: math.nan for m in metrics}
        if sc is not None:
            try:
                summ = run_fn(sc)
                vals = {m: float(summ.get(m, math.nan)) for m in metrics}
            except ValueError as e:
                err = str(e)
        rows.append({"x": x, "strategy": s, "replication": k, **vals, "error": err})
        if progress is not None:
            progress(i + 1, total)
    return pd.DataFrame(rows, columns=["x", "strategy", "replication", *metrics, "error"])


def aggregate(rows: pd.DataFrame, metrics: Iterable[str] = tuple(SWEEP_METRICS),
              by: Sequence[str] = ("x", "strategy")) -> pd.DataFrame:
    """Mean and 95% CI per group and metric: columns *by, metric, mean, ci_low, ci_high, n."""
    out = []
    for key, g in rows.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        for m in metrics:
            x = g[m].to_numpy(dtype=float)
            mean, lo, hi = mean_ci(x)
            out.append({**dict(zip(by, key)), "metric": m, "mean": mean, "ci_low": lo, "ci_high": hi,
                        "n": int(np.isfinite(x).sum())})
    return pd.DataFrame(out, columns=[*by, "metric", "mean", "ci_low", "ci_high", "n"])


def errors(rows: pd.DataFrame) -> list[str]:
    """Distinct error messages of failed runs, each with the first point it hit."""
    seen: dict[str, str] = {}
    for _, r in rows[rows["error"].notna()].iterrows():
        seen.setdefault(r["error"], f"{r['strategy']} at {r['x']}")
    return [f"{where}: {msg}" for msg, where in seen.items()]


# ------------------------------------------------------------------ crossover
def plan_grid(base: Scenario, x_field: str, xs: Sequence, y_field: str, ys: Sequence,
              strategies: Sequence[str], replications: int):
    """(x, y, strategy, replication, scenario or None, error) for every cell and run."""
    runs = []
    for x in xs:
        for y in ys:
            for s in strategies:
                for k in range(replications):
                    try:
                        sc = base.replace(**{x_field: x, y_field: y, "strategy": s, "seed": base.seed + k})
                        err = None
                    except ValueError as e:
                        sc, err = None, str(e)
                    runs.append(((x, y), s, k, sc, err))
    return runs


def run_grid(runs, run_fn: RunFn, progress: ProgressFn | None = None) -> pd.DataFrame:
    rows = run_plan(runs, run_fn, metrics=["ttft_p50_ms"], progress=progress)
    rows["y"] = rows["x"].map(lambda xy: xy[1])
    rows["x"] = rows["x"].map(lambda xy: xy[0])
    return rows[["x", "y", "strategy", "replication", "ttft_p50_ms", "error"]]


def crossover_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per cell: winner (lowest mean TTFT p50), runner-up and margin.

    Columns x, y, winner, best_ms, runner_up, runner_up_ms, margin_ms, margin_pct
    (margin relative to the winner's p50); cells where no strategy ran have NaN.
    """
    means = rows.groupby(["x", "y", "strategy"], sort=False)["ttft_p50_ms"].mean().reset_index()
    out = []
    for (x, y), g in means.groupby(["x", "y"], sort=False):
        g = g[np.isfinite(g["ttft_p50_ms"])].sort_values("ttft_p50_ms", kind="stable")
        rec = {"x": x, "y": y, "winner": None, "best_ms": math.nan, "runner_up": None,
               "runner_up_ms": math.nan, "margin_ms": math.nan, "margin_pct": math.nan}
        if len(g):
            rec["winner"], rec["best_ms"] = g.iloc[0]["strategy"], float(g.iloc[0]["ttft_p50_ms"])
        if len(g) > 1:
            rec["runner_up"], rec["runner_up_ms"] = g.iloc[1]["strategy"], float(g.iloc[1]["ttft_p50_ms"])
            rec["margin_ms"] = rec["runner_up_ms"] - rec["best_ms"]
            rec["margin_pct"] = rec["margin_ms"] / rec["best_ms"] if rec["best_ms"] > 0 else math.nan
        out.append(rec)
    return pd.DataFrame(out, columns=["x", "y", "winner", "best_ms", "runner_up", "runner_up_ms",
                                      "margin_ms", "margin_pct"])
