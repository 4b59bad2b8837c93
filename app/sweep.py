"""Sweep and crossover orchestration over ``engine.simulate`` (no model logic, no Streamlit).

A sweep varies one scenario field over a grid and runs every strategy with
``replications`` seeds (``seed + k``, common random numbers across strategies,
as ``engine.compare`` does); ``aggregate`` turns the per-run summaries into mean
and 95% CI with ``engine.mean_ci``; ``crossover_table`` ranks each cell with ``engine.rank`` (a
winner only when the paired CI of its lead excludes zero, else a tie).  The run function is injected so the
app can pass its cached wrapper and tests a plain ``simulate``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from engine import STRATEGIES, Scenario, mean_ci, rank

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


#: A strategy whose runs leave more than this share of a cell's requests unfinished has collapsed: its
#: TTFT covers the finished requests only, so it is not ranked in that cell (the What-if page's rule).
COLLAPSE_UNFINISHED = 0.05
#: Columns of ``crossover_table``.
CROSSOVER_COLUMNS = ["x", "y", "status", "verdict", "winner", "best", "best_ms", "runner_up", "runner_up_ms",
                     "margin_ms", "margin_ci_low_ms", "margin_ci_high_ms", "margin_pct", "tied", "n",
                     "not_ranked"]


def run_grid(runs, run_fn: RunFn, progress: ProgressFn | None = None) -> pd.DataFrame:
    """One row per run: x, y, strategy, replication, ttft_p50_ms, requests, not_completed, error."""
    rows = run_plan(runs, run_fn, metrics=["ttft_p50_ms", "requests", "not_completed"], progress=progress)
    rows["y"] = rows["x"].map(lambda xy: xy[1])
    rows["x"] = rows["x"].map(lambda xy: xy[0])
    return rows[["x", "y", "strategy", "replication", "ttft_p50_ms", "requests", "not_completed", "error"]]


def _strategy_order(s: str) -> tuple[int, str]:
    """``engine.STRATEGIES`` order (unknown names last), so that a tied set reads the same in every cell."""
    order = list(STRATEGIES)
    return (order.index(s) if s in order else len(order), s)


def _unfinished(g: pd.DataFrame) -> float:
    """Mean share of the window's requests that never finished (0 when the rows do not record it)."""
    if "not_completed" not in g or "requests" not in g:
        return 0.0
    req = g["requests"].to_numpy(dtype=float)
    ok = np.isfinite(req) & (req > 0)
    return float(np.mean(g["not_completed"].to_numpy(dtype=float)[ok] / req[ok])) if ok.any() else 0.0


def crossover_table(rows: pd.DataFrame, exclude: Sequence[str] = (), metric: str = "ttft_p50_ms",
                    higher_is_better: bool = False, collapse: float | None = COLLAPSE_UNFINISHED) -> pd.DataFrame:
    """Per cell: the noise-aware verdict of ``engine.rank`` over the paired replications.

    ``rows``: ``run_grid`` output (replication k of every strategy uses the same seed).  ``exclude``:
    strategies that never win (bounds and baselines, ``engine.contenders_excluded``); a strategy that
    collapsed in a cell (more than ``collapse`` of its requests unfinished) is not ranked there either.

    Columns: x, y; ``status``: "win" (the paired 95 % CI of the lead over every other contender excludes
    zero, or it is the only contender left), "tie" (some are within the noise), "lead" (one replication: no
    CI, no verdict) or "none"; ``verdict``: the winner, "tie", "no CI" or None (what the map colours);
    ``winner`` (None unless a win); ``best`` (best mean) and ``best_ms``; ``runner_up`` (second best mean)
    and ``runner_up_ms``; ``margin_ms`` (runner-up minus best, oriented so that it is >= 0) with its paired
    95 % CI ``margin_ci_low_ms``/``margin_ci_high_ms``; ``margin_pct`` (relative to the best); ``tied``
    (the tied set in ``engine.STRATEGIES`` order, ", "-joined; "" unless a tie); ``n`` (replications); ``not_ranked``
    (strategies that ran but were not ranked, with why).
    """
    excl = set(exclude)
    sign = 1.0 if higher_is_better else -1.0
    out = []
    for (x, y), cell in rows.groupby(["x", "y"], sort=False):
        rec = {c: None for c in CROSSOVER_COLUMNS}
        rec.update({"x": x, "y": y, "status": "none", "tied": "", "n": 0})
        for c in ("best_ms", "runner_up_ms", "margin_ms", "margin_ci_low_ms", "margin_ci_high_ms", "margin_pct"):
            rec[c] = math.nan
        values, skipped, collapsed = {}, [], []
        for s, g in cell.groupby("strategy", sort=False):
            g = g.sort_values("replication", kind="stable")
            values[s] = g[metric].to_numpy(dtype=float)
            if s in excl:
                skipped.append(f"{s} (reference)")
            elif collapse is not None and _unfinished(g) > collapse:
                collapsed.append(s)
                skipped.append(f"{s} (collapsed: {_unfinished(g):.0%} unfinished)")
        rec["not_ranked"] = ", ".join(skipped)
        counts = {len(v) for v in values.values()}
        if not values or len(counts) != 1:
            out.append(rec)
            continue
        r = rank(values, higher_is_better=higher_is_better, exclude=[*excl.intersection(values), *collapsed])
        rec["n"] = counts.pop()
        if r.best is None:
            out.append(rec)
            continue
        contenders = [s for s in r.order if s not in r.excluded and math.isfinite(r.stats[s]["mean"])]
        rec["best"], rec["best_ms"] = r.best, r.stats[r.best]["mean"]
        if len(contenders) > 1:
            second = contenders[1]
            d = r.stats[second]
            rec["runner_up"], rec["runner_up_ms"] = second, d["mean"]
            # diff_to_best = best - runner-up; the margin is how far the runner-up is behind (>= 0)
            # (+ 0.0: no "-0.0" for a margin of exactly zero)
            lo, hi = sorted((sign * d["diff_ci_low"] + 0.0, sign * d["diff_ci_high"] + 0.0))
            rec["margin_ms"], rec["margin_ci_low_ms"], rec["margin_ci_high_ms"] = sign * d["diff_to_best"] + 0.0, lo, hi
            if rec["best_ms"] > 0:
                rec["margin_pct"] = rec["margin_ms"] / rec["best_ms"]
        if r.tied:
            rec["status"], rec["verdict"] = "tie", "tie"
            rec["tied"] = ", ".join(sorted([r.best, *r.tied], key=_strategy_order))
        elif len(contenders) > 1 and not r.has_ci:
            rec["status"], rec["verdict"] = "lead", "no CI"
        else:
            rec["status"], rec["verdict"], rec["winner"] = "win", r.best, r.best
        out.append(rec)
    return pd.DataFrame(out, columns=CROSSOVER_COLUMNS)


def crossover_tally(table: pd.DataFrame) -> dict:
    """Counts of a ``crossover_table``: wins per strategy, ties (and per tied set), leads without a CI, empty."""
    status = table["status"]
    return {"wins": table.loc[status == "win", "winner"].value_counts().to_dict(),
            "ties": int((status == "tie").sum()),
            "tied_sets": table.loc[status == "tie", "tied"].value_counts().to_dict(),
            "leads": int((status == "lead").sum()),
            "none": int((status == "none").sum())}
