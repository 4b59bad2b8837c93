"""Fitting tool runs: a train / held-out split the user chooses, the fit on the train runs, the
errors per split, the per-request TTFT distributions, and the diagnostics that say when the fit
should not be trusted (parameters at a bound, errors above 25 %)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from ...scenario import Scenario
from ...sim import simulate
from ..cases import Case, error_table, simulate_cases, summarize_errors, typed_values
from ..fitting import DEFAULT_PARAMS, FitResult, fit_cases
from ..report import at_bounds
from .base import ToolRun
from .replay import DEFAULT_FIT_METRICS, fitted_workload, run_case, ttft_distribution

#: Relative error above which a metric is flagged next to the fitted values.
ERROR_FLAG = 0.25
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
    res = fit_cases(train, params, bounds, start=start, max_nfev=max_nfev, log=log, workers=workers)
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
        "ttft_distribution": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
                              for row in tf.distributions.to_dict("records")],
        "at_bounds": tf.at_bounds,
        "errors_above_25pct": tf.large_errors,
        "notes": tf.notes,
    }
