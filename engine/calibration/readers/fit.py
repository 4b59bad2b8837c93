"""Fitting tool runs: a train / held-out split the user chooses, the fit on the train runs (weighted relative
errors, ``replay.FIT_METRIC_WEIGHTS``; the means first, then every metric), the errors per split (the headline:
throughput, per-step cost, TTFT mean / median / p99), the per-request TTFT distributions, the diagnostics that
say when the fit should not be trusted (parameters at a bound, errors above 25 %), and the arguments of the user's
own server profile the fit makes (``profile_args``, ``engine.presets.register_profile``)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from ...presets.servers import ASSUMED, COST_FIELDS, profile_fields
from ...scenario import Scenario
from ...sim import simulate
from ..cases import Case, error_table, simulate_cases, summarize_errors, typed_values
from ..fitting import DEFAULT_PARAMS, FitResult, at_bounds, fit_cases
from .base import ToolRun
from .replay import DEFAULT_FIT_METRICS, FIT_METRIC_WEIGHTS, fitted_workload, run_case, ttft_distribution

#: Relative error above which a metric is flagged next to the fitted values.
ERROR_FLAG = 0.25
#: The metrics a fit reports first, per split (``headline_errors``), and a user profile keeps (``profile_errors_of``):
#: request throughput, the per-step cost (mean TPOT; GuideLLM reports the token-weighted ITL instead), and the
#: TTFT distribution: mean, median and p99 side by side.
HEADLINE_METRICS = ("request_throughput", "mean_tpot_ms", "mean_itl_ms", "mean_ttft_ms", "median_ttft_ms",
                    "p99_ttft_ms")
HOLD_OUT_CHOICES = ("none", "highest-rate", "highest-concurrency", "last", "FILE[,FILE...]")


@dataclass
class ToolFit:
    """A fit to tool runs: the fit itself, the split, the errors of both splits, the diagnostics."""

    result: FitResult
    scenario: Scenario                # the server with the fitted values and one run's traffic
    runs: list[ToolRun]
    cases: list[Case]
    held_out: list[bool]
    table: pd.DataFrame               # per (case, metric): measured, simulated, rel_error, split
    distributions: pd.DataFrame       # per detailed run: TTFT percentiles measured / simulated, KS
    at_bounds: list[str] = field(default_factory=list)
    large_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> pd.DataFrame:
        return summarize_errors(self.table, by=("split", "metric"))


def choose_hold_out(runs: list[ToolRun], spec: str | None) -> list[bool]:
    """Which runs are held out (not fitted).  ``spec``: None / "none"; "highest-rate" (the open-loop
    run at the highest finite rate); "highest-concurrency" (the closed loop with the most
    clients); "last" (the last run given); or file names / paths (comma-separated; a file holding
    several runs holds them all out).  At least one run must remain to fit."""
    n = len(runs)
    if not spec or spec == "none":
        return [False] * n
    if spec == "highest-rate":
        rates = [r.rate_rps if (r.arrival not in ("closed", "burst") and math.isfinite(r.rate_rps)) else -1 for r in runs]
        if max(rates, default=-1) < 0:
            raise ValueError("--hold-out: highest-rate: no run has a finite request rate")
        out = [i == rates.index(max(rates)) for i in range(n)]
    elif spec == "highest-concurrency":
        conc = [r.concurrency if r.arrival == "closed" else -1 for r in runs]
        if max(conc, default=-1) < 0:
            raise ValueError("--hold-out: highest-concurrency: no run is a closed loop (max_concurrency with rate inf)")
        out = [i == conc.index(max(conc)) for i in range(n)]
    elif spec == "last":
        out = [i == n - 1 for i in range(n)]
    else:
        names = [s.strip() for s in spec.split(",") if s.strip()]
        out = [False] * n
        for nm in names:
            hit = [i for i, r in enumerate(runs) if _same_file(r.source, nm)]
            if not hit:
                raise ValueError(f"--hold-out: {nm!r} is none of the data files; allowed: {', '.join(HOLD_OUT_CHOICES)} "
                                 f"(files: {', '.join(sorted({Path(_file_of(r.source)).name for r in runs}))})")
            for i in hit:
                out[i] = True
    if all(out):
        raise ValueError("--hold-out: every run is held out; at least one must remain to fit")
    return out


def _file_of(source: str) -> str:
    return source.split("#", 1)[0]


def _same_file(source: str, name: str) -> bool:
    """Does the hold-out ``name`` (a file name, a path, or a run "file#k") name ``source``'s file?"""
    if source == name:
        return True
    f, n = Path(_file_of(source)), Path(name)
    if "#" in name:
        return False
    if n.parent == Path("."):
        return f.name == n.name
    return f.resolve() == n.resolve()


def tool_cases(runs: list[ToolRun], server: Scenario, metrics=None) -> list[Case]:
    """One Case per run (``replay.run_case``)."""
    return [run_case(r, server, metrics) for r in runs]


def fit_tool_runs(runs: list[ToolRun], server: Scenario, params=DEFAULT_PARAMS, metrics=None, hold_out=None,
                  max_nfev: int = 60, bounds=None, log=None, workers: int | None = None) -> ToolFit:
    """Fit ``params`` of ``server`` to the train runs; errors of train and held-out runs at the
    fitted values; TTFT distributions of the runs with per-request arrays; diagnostics."""
    if not runs:
        raise ValueError("data: no runs")
    held = choose_hold_out(runs, hold_out)
    cases = tool_cases(runs, server, metrics)
    for c in cases:
        if metrics:
            missing = [m for m in metrics if m not in c.measured]
            if missing:
                raise ValueError(f"--metrics: {c.name} has no {', '.join(missing)}; it has {', '.join(sorted(c.measured))}")
        if not c.fit_metrics:
            raise ValueError(f"{c.name}: none of the fitted metrics ({', '.join(metrics or DEFAULT_FIT_METRICS)}) "
                             "is in the file")
    train = [c for c, h in zip(cases, held) if not h]
    test = [c for c, h in zip(cases, held) if h]
    start = {p: getattr(server, p) for p in params}
    res = _fit_in_stages(train, params, bounds, start, max_nfev, log, workers)
    tables = [res.table.assign(split="train")]
    if test:
        tables.append(error_table(test, simulate_cases(test, res.values, workers)).assign(split="held-out"))
    table = pd.concat(tables, ignore_index=True)
    fitted_server = server.replace(**res.values).validate()
    first = next((r for r, h in zip(runs, held) if not h and r.arrival != "burst"), runs[0])
    scen, note = fitted_workload(fitted_server, first)
    res.scenario = scen
    dist = []
    for r, c, h in zip(runs, cases, held):
        if r.ttfts_ms is not None:
            sc = c.scenario.replace(**typed_values(c.scenario, res.values))
            dist.append({**ttft_distribution(r, simulate(sc, trace=c.trace)), "split": "held-out" if h else "train"})
    tf = ToolFit(result=res, scenario=scen, runs=runs, cases=cases, held_out=held, table=table,
                 distributions=pd.DataFrame(dist), notes=[note])
    det = determination_note(cases, held, params)
    if det:
        tf.notes.append(det)
    tf.at_bounds = at_bounds(res.values)
    tf.large_errors = large_errors(table)
    return tf


def _fit_in_stages(train: list[Case], params, bounds, start: dict, max_nfev: int, log, workers) -> FitResult:
    """``fit_cases`` with ``FIT_METRIC_WEIGHTS``; when the fitted metrics mix means (and throughputs) with order
    statistics (median, pNN), first on the means alone (half the evaluations), then on all from there.  An order
    statistic of a simulation jumps as events reorder, so an objective with it is rugged near its optimum and the
    optimiser may stop in a dent far from it; the means vary smoothly and bring it close first (tests/test_readers.py:
    the round trips recover the truth)."""
    smooth = [dataclasses.replace(c, fit_metrics=tuple(m for m in c.fit_metrics if _is_smooth(m))) for c in train]
    if all(c.fit_metrics == s.fit_metrics for c, s in zip(train, smooth)) or not any(s.fit_metrics for s in smooth) \
            or max_nfev < 4:
        return fit_cases(train, params, bounds, start=start, max_nfev=max_nfev, log=log, workers=workers,
                         weights=FIT_METRIC_WEIGHTS)
    first = fit_cases(smooth, params, bounds, start=start, max_nfev=max_nfev // 2, log=log, workers=workers)
    res = fit_cases(train, params, bounds, start=first.values, max_nfev=max_nfev - max_nfev // 2, log=log,
                    workers=workers, weights=FIT_METRIC_WEIGHTS)
    res.start, res.nfev, res.wall_s = dict(first.start), first.nfev + res.nfev, first.wall_s + res.wall_s
    res.status = f"{res.status} (after a first fit of the means: {first.status})"
    return res


def _is_smooth(metric: str) -> bool:
    """A mean or a throughput (not an order statistic or a spread)."""
    return metric.startswith("mean_") or metric.endswith("_throughput")


def large_errors(table: pd.DataFrame, limit: float = ERROR_FLAG) -> list[str]:
    """One entry per (split, metric) whose worst |relative error| exceeds ``limit``, worst first:
    "metric +32 % (split, case)"."""
    rows = []
    if table.empty:
        return []
    t = table.assign(ape=table["rel_error"].abs())
    for (split, metric), g in t.groupby(["split", "metric"], sort=False):
        g = g[g["ape"].notna()]
        if len(g) and g["ape"].max() > limit:
            w = g.loc[g["ape"].idxmax()]
            rows.append((float(w["ape"]), f"{metric} {w['rel_error'] * 100:+.0f} % ({split}, {Path(str(w['case'])).name})"))
    return [r for _, r in sorted(rows, key=lambda x: -x[0])]


def determination_note(cases: list[Case], held: list[bool], params) -> str | None:
    """A note when the train runs give no more measured values than there are parameters."""
    n = sum(1 for c, h in zip(cases, held) if not h for m in c.fit_metrics if c.measured.get(m, 0) > 0)
    if n <= len(params):
        return (f"{len(params)} parameter(s) fitted to {n} measured value(s): the fit is not over-determined, its "
                "values need not be unique (add runs at other rates / concurrencies, or fit fewer parameters)")
    return None


def provenance(tf: ToolFit, files, params, command: str = "") -> dict:
    """What the fitted scenario comes from: files, tools, date, split, errors, diagnostics."""
    summ = tf.summary()
    return {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "files": sorted({str(f) for f in files}),
        "runs": [{"source": r.source, "tool": r.tool, "tool_version": r.version, "arrival": r.arrival,
                  "rate_rps": None if not math.isfinite(r.rate_rps) else r.rate_rps, "concurrency": r.concurrency,
                  "num_requests": r.num_requests, "mean_in": r.mean_in, "mean_out": r.mean_out,
                  "split": "held-out" if h else "train", "notes": r.notes} for r, h in zip(tf.runs, tf.held_out)],
        "params": list(params),
        "values": tf.result.values,
        "start": tf.result.start,
        "fit": {"nfev": tf.result.nfev, "status": tf.result.status, "cost": tf.result.cost},
        "errors": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
                   for row in summ.to_dict("records")],
        "headline_errors": headline_errors(tf.table).to_dict("records"),
        "ttft_distribution": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
                              for row in tf.distributions.to_dict("records")],
        "at_bounds": tf.at_bounds,
        "errors_above_25pct": tf.large_errors,
        "notes": tf.notes,
    }


def headline_errors(table: pd.DataFrame) -> pd.DataFrame:
    """Per split (train, then held-out) and ``HEADLINE_METRICS`` metric the file has (mean ITL only without mean
    TPOT): runs with a finite error, MAPE, 90th percentile (numpy's linear interpolation) and worst
    |simulated / measured - 1|."""
    rows = []
    if table.empty:
        return pd.DataFrame(columns=["split", "metric", "n_runs", "mape", "p90_abs", "worst_abs"])
    have = set(table["metric"])
    for split in ("train", "held-out"):
        for m in HEADLINE_METRICS:
            if m == "mean_itl_ms" and "mean_tpot_ms" in have:  # ITL only where TPOT is not measured
                continue
            a = table.loc[(table["split"] == split) & (table["metric"] == m), "rel_error"].astype(float).abs()
            a = a[np.isfinite(a)].to_numpy()
            if len(a):
                rows.append({"split": split, "metric": m, "n_runs": len(a), "mape": float(a.mean()),
                             "p90_abs": float(np.percentile(a, 90)), "worst_abs": float(a.max())})
    return pd.DataFrame(rows, columns=["split", "metric", "n_runs", "mape", "p90_abs", "worst_abs"])


def headline_text(table: pd.DataFrame) -> list[str]:
    """One line per split: throughput, per-step cost and TTFT mean / median / p99 errors side by side (MAPE, and
    the 90th percentile over runs when there are several)."""
    h = headline_errors(table)
    names = {"request_throughput": "throughput", "mean_tpot_ms": "mean TPOT", "mean_itl_ms": "mean ITL",
             "mean_ttft_ms": "TTFT mean", "median_ttft_ms": "median", "p99_ttft_ms": "p99"}
    out = []
    for split, g in h.groupby("split", sort=False):
        n = int(g["n_runs"].max())
        parts = [f"{names[r.metric]} {100 * r.mape:.1f} %" + (f" (p90 {100 * r.p90_abs:.1f} %)" if n > 1 else "")
                 for r in g.itertuples()]
        out.append(f"{split} ({n} run{'s' if n > 1 else ''}): " + ", ".join(parts))
    return out


def profile_errors_of(table: pd.DataFrame) -> dict:
    """A user profile's errors from a fit's error table: per ``HEADLINE_METRICS`` metric, the 90th percentile of
    |relative error| and the runs, over the held-out runs if any run was held out, else over the fitted ones
    ("in-sample")."""
    h = headline_errors(table)
    held = h[h["split"] == "held-out"]
    use, split = (held, "held-out") if len(held) else (h[h["split"] == "train"], "in-sample")
    return {r.metric: {"p90_abs": r.p90_abs, "n_runs": int(r.n_runs), "split": split} for r in use.itertuples()}


def profile_args(tf: ToolFit, files=(), name: str = "", label: str = "", when: str = "") -> dict:
    """``engine.presets.register_profile``'s arguments for the fit ``tf``: the server it was fitted as ("slora" for
    strategy slora, else "vllm"), its fitted cost fields, its GPU and model, ``profile_errors_of`` and a source
    naming the files, the split and what of the fit a profile does not carry (parameters outside the cost
    fields; server settings that differ from the base profile's).  ``name``: default "my-<base>"."""
    sc = tf.scenario
    base = "slora" if sc.strategy == "slora" else "vllm"
    names = sorted({Path(_file_of(r.source)).name for r in tf.runs}) if not files else [Path(f).name for f in files]
    n_held = sum(tf.held_out)
    src = (f"fitted to {', '.join(names)} ({len(tf.runs) - n_held} run(s) fitted, {n_held} held out)"
           + (f" on {when}" if when else "") + f"; fitted: {', '.join(tf.result.values)}")
    extra = [p for p in tf.result.values if p not in COST_FIELDS]
    if extra:
        src += f"; not part of a server profile, left out: {', '.join(extra)}"
    ref = profile_fields(base, sc.gpu)
    differ = [k for k, v in ref.items() if k not in COST_FIELDS and k != "server" and k not in ASSUMED
              and getattr(sc, k) != v]
    if differ:
        src += (f"; the fitted server differs from the {base} profile's settings in {', '.join(differ[:6])}"
                + (" and more" if len(differ) > 6 else "") + " (the profile keeps the profile's)")
    src = src.translate({ord(c): " " for c in "[]<>`|*\\\n\r"})
    return {"name": name or f"my-{base}", "label": label, "base": base,
            "cost": {f: getattr(sc, f) for f in COST_FIELDS}, "gpu": sc.gpu, "model": sc.model,
            "errors": profile_errors_of(tf.table), "source": src[:2000]}
