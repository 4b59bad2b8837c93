"""Parameter sweeps: a grid over scenario fields x strategies x replications.

    >>> from engine import Scenario
    >>> from engine.sweep import run_sweep, summarize_sweep
    >>> base = Scenario.from_preset("seed1-rtx3090", duration_s=20, warmup_s=2)
    >>> df = run_sweep(base, {"arrival_rate_rps": [4, 64]}, ["naive", "batch"], replications=3)  # doctest: +SKIP
    >>> summarize_sweep(df, ["ttft_mean_ms"])  # doctest: +SKIP

Common random numbers: replication ``k`` uses seed ``base.seed + k`` for every
strategy and grid point, so strategy comparisons are paired.  Runs are spread
over processes (``spawn`` context: safe with Numba and threads), threads, or Ray
tasks (``backend="ray"``, optional; ``engine/backends.py``); the result is one row
per (grid point, strategy, replication) in a fixed order, so it depends neither on
the number of workers nor on the backend.
"""
from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .backends import (
    BACKENDS,
    BackendError,
    check_backend,
    connect_ray,
    cpu_count,
    import_ray,
    pool_chunks,
    ray_chunks,
    shutdown_ray,
)
from .metrics import mean_ci
from .policies import STRATEGIES
from .scenario import Scenario
from .sim import simulate_summary

#: Upper bound on the runs one sweep may launch (protects the machine and the hosted app).
MAX_RUNS = 100_000
#: Expected simulated requests one sweep may ask for, all runs together (about 2-4 minutes on two cores).
MAX_SWEEP_REQUESTS = 500_000_000
#: Columns of a sweep table that describe the run rather than measure it.
ID_COLUMNS = ("strategy", "replication", "seed")

Progress = bool | Callable[[int, int], Any]
__all__ = ["BACKENDS", "BackendError", "ID_COLUMNS", "check_backend", "MAX_RUNS", "build_points", "cpu_count", "half_width",
           "metric_columns", "paired_diff_ci", "parallel_map", "ratio_ci", "run_scenarios", "run_sweep",
           "run_sweeps", "shutdown_ray", "summarize_sweep"]


# ---------------------------------------------------------------------------- validation
def _check_grid(grid: dict) -> dict[str, list]:
    if not isinstance(grid, dict):
        raise ValueError(f"grid: expected a dict of field -> list of values, got {type(grid).__name__}")
    names = set(Scenario.field_names())
    out: dict[str, list] = {}
    for k, vals in grid.items():
        if k not in names:
            raise ValueError(f"grid: unknown scenario field {k!r}; allowed: {', '.join(sorted(names))}")
        if k == "strategy":
            raise ValueError("grid: field 'strategy' is swept by the strategies argument; allowed: any other field")
        if k == "seed":
            raise ValueError("grid: field 'seed' is set by replications (seed = base.seed + k); allowed: any other field")
        if isinstance(vals, (str, bytes)) or not isinstance(vals, Sequence) and not isinstance(vals, np.ndarray):
            raise ValueError(f"grid: field {k!r} needs a list of values, got {vals!r}")
        vals = list(vals.tolist() if isinstance(vals, np.ndarray) else vals)
        if not vals:
            raise ValueError(f"grid: field {k!r} has no values; allowed: a non-empty list")
        out[k] = vals
    return out


def _check_strategies(strategies) -> list[str]:
    if isinstance(strategies, str):
        strategies = [strategies]
    strategies = list(strategies or [])
    if not strategies:
        raise ValueError(f"strategies: empty; allowed: a non-empty list of {', '.join(STRATEGIES)}")
    for s in strategies:
        if s not in STRATEGIES:
            raise ValueError(f"strategies: unknown value {s!r}; allowed: {', '.join(STRATEGIES)}")
    if len(set(strategies)) != len(strategies):
        raise ValueError(f"strategies: duplicate values in {strategies!r}")
    return strategies


def _check_int(name: str, v, lo: int, hi: int, allow_none: bool = False) -> None:
    if v is None and allow_none:
        return
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise ValueError(f"{name}: invalid value {v!r}; allowed: an integer in [{lo}, {hi}]")


def build_points(base: Scenario, grid: dict, strategies) -> tuple[dict[str, list], list[str], list[tuple[dict, str, Scenario]]]:
    """Validate a sweep and return (grid, strategies, [(point, strategy, scenario)]).

    Every (grid point, strategy) scenario is built and validated here, so a bad
    value fails before any simulation starts, with a message naming the field.
    """
    if not isinstance(base, Scenario):
        raise ValueError(f"base: expected engine.Scenario, got {type(base).__name__}")
    grid = _check_grid(grid)
    strategies = _check_strategies(strategies)
    keys = list(grid)
    points = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        point = dict(zip(keys, combo))
        for s in strategies:
            try:
                sc = base.replace(**point, strategy=s).validate()
            except ValueError as e:
                where = ", ".join(f"{k}={v!r}" for k, v in point.items())
                raise ValueError(f"{e} (grid point {where or 'base'}, strategy {s})") from None
            point_typed = {k: getattr(sc, k) for k in keys}
            points.append((point_typed, s, sc))
    return grid, strategies, points


# ---------------------------------------------------------------------------- execution
def _summary_row(summary: dict) -> dict:
    return {k: v for k, v in summary.items()
            if isinstance(v, (int, float, bool, np.integer, np.floating, np.bool_))}


def _progress_fn(progress: Progress, total: int, desc: str = "sweep"):
    """Return (update(done), close()) for a progress argument."""
    if callable(progress):
        return (lambda done: progress(done, total)), (lambda: None)
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=total, desc=desc, file=sys.stderr, unit="run", dynamic_ncols=True)
        state = {"n": 0}

        def update(done):
            bar.update(done - state["n"])
            state["n"] = done
        return update, bar.close
    return (lambda done: None), (lambda: None)


def parallel_map(fn: Callable, items: Sequence, workers: int | None = None, progress: Progress = False,
                 desc: str = "sweep", threads: bool = False, backend: str | None = None,
                 ray_address: str | None = None) -> list:
    """``[fn(x) for x in items]`` over a pool, in input order whatever the number of workers or the backend.

    ``backend``: ``"process"`` (``fn`` must be a module-level function: it is pickled to ``spawn``
    workers, which take a few seconds to start), ``"thread"`` (threads start at once and overlap inside
    the jitted loop, which releases the GIL: ``nogil=True``, but not in the Python around it) or
    ``"ray"`` (Ray tasks on a local instance or the cluster at ``ray_address`` / ``$RAY_ADDRESS``;
    ``engine/backends.py`` says which Ray, what the workers get, and when it is shut down).  None:
    ``"thread"`` if ``threads`` (the older spelling) else ``"process"``.  workers=None: one worker per
    core (Ray: per CPU of the cluster), at most one per item; workers=1: in this process, whatever the
    backend (Ray: ``workers`` sets the chunks and a new local instance's CPUs; a cluster runs as many
    chunks at once as it has free CPUs).  The first item runs here first: that compiles (or loads) the jitted loop once and fills
    the on-disk Numba cache, so the workers load it instead of each compiling it again.  The rest go
    out in ~8 chunks per worker (few tasks, balanced load, a moving progress bar); each item is
    deterministic, so neither the chunks nor the backend change the results.
    """
    _check_int("workers", workers, 1, 256, allow_none=True)
    backend = check_backend(backend, threads, ray_address)
    if backend == "ray":
        import_ray()  # a missing package fails before any run
    items = list(items)
    n = len(items)
    if n > MAX_RUNS:
        raise ValueError(f"sweep: {n} runs; allowed: at most {MAX_RUNS}")
    if workers is None and backend != "ray":
        workers = cpu_count()
    if n <= 2 or workers == 1:
        workers = 1
    update, close = _progress_fn(progress, n, desc)
    results: list = [None] * n
    try:
        update(0)
        if workers == 1:
            for i, x in enumerate(items):
                results[i] = fn(x)
                update(i + 1)
            return results
        if backend == "ray":
            ray, cpus, options = connect_ray(workers, ray_address)
            workers = workers or cpus
        workers = min(workers, n - 1)
        results[0] = fn(items[0])
        done = 1
        update(done)
        rest = list(range(1, n))
        # Chunks interleave indices so slow regions of a grid are shared out.
        n_chunks = min(len(rest), workers * 8)
        chunks = [rest[c::n_chunks] for c in range(n_chunks)]
        parts = (ray_chunks(ray, options, fn, items, chunks) if backend == "ray" else
                 pool_chunks(fn, items, chunks, workers, threads=backend == "thread"))
        for idx, rows in parts:
            for i, row in zip(idx, rows):
                results[i] = row
            done += len(idx)
            update(done)
    finally:
        close()
    return results


def _simulate_summary(sc: Scenario) -> dict:
    return _summary_row(simulate_summary(sc))


def run_scenarios(scenarios: list[Scenario], workers: int | None = None, progress: Progress = False,
                  desc: str = "sweep", backend: str | None = None, ray_address: str | None = None) -> list[dict]:
    """Simulate validated scenarios; return their numeric summaries in input order.

    workers=None: one process per core (at most one per chunk); workers=1: in this process.
    ``backend`` / ``ray_address``: where the runs go (``parallel_map``; default: processes).
    """
    return parallel_map(_simulate_summary, scenarios, workers=workers, progress=progress, desc=desc,
                        backend=backend, ray_address=ray_address)


def run_sweep(base: Scenario, grid: dict[str, list], strategies: list[str], replications: int,
              workers: int | None = None, progress: Progress = False, backend: str | None = None,
              ray_address: str | None = None) -> pd.DataFrame:
    """Simulate every (grid point x strategy x replication); one tidy row per run.

    Columns: the grid fields (in grid order), ``strategy``, ``replication``, ``seed``,
    then every numeric summary metric.  Replication k uses seed ``base.seed + k`` for
    every strategy and grid point (common random numbers).  Rows are ordered by grid
    point (``itertools.product`` order), strategy (given order), replication, whatever
    the number of workers.  ``df.attrs["grid_fields"]`` lists the grid fields.
    Invalid input raises ValueError naming the field before any run starts.  ``backend``:
    ``"process"`` (default), ``"thread"`` or ``"ray"`` (with ``ray_address``; see ``parallel_map``):
    the same rows whatever the backend.
    """
    return run_sweeps([(base, grid, strategies)], replications, workers=workers, progress=progress,
                      backend=backend, ray_address=ray_address)[0]


def run_sweeps(specs: Sequence[tuple[Scenario, dict, Sequence[str]]], replications: int,
               workers: int | None = None, progress: Progress = False,
               desc: str = "sweep", backend: str | None = None, ray_address: str | None = None) -> list[pd.DataFrame]:
    """Several sweeps ``(base, grid, strategies)`` in one pool; one DataFrame each.

    Same rules and output as ``run_sweep``; every spec is validated before any run starts.
    """
    _check_int("replications", replications, 1, 1000)
    _check_int("workers", workers, 1, 256, allow_none=True)
    check_backend(backend, ray_address=ray_address)
    built = []
    for base, grid, strategies in specs:
        grid, strategies, points = build_points(base, grid, strategies)
        if base.seed + replications - 1 > 2**63 - 1:
            raise ValueError(f"seed: base seed {base.seed} + {replications} replications overflows; "
                             f"allowed: a smaller seed")
        built.append((base, grid, points))
    total = sum(len(p) for _, _, p in built) * replications
    if total > MAX_RUNS:
        raise ValueError(f"sweep: {total} runs (points x strategies x {replications} replications); "
                         f"allowed: at most {MAX_RUNS}")
    work = replications * sum(sc.expected_requests() for _, _, p in built for _, _, sc in p)
    if work > MAX_SWEEP_REQUESTS:
        raise ValueError(f"sweep: about {work:,.0f} simulated requests (every run's expected requests x "
                         f"{replications} replications); allowed: at most {MAX_SWEEP_REQUESTS:,} per sweep")
    tasks, meta, owner = [], [], []
    for j, (base, _grid, points) in enumerate(built):
        for point, s, sc in points:
            for k in range(replications):
                tasks.append(sc.replace(seed=base.seed + k))
                meta.append({**point, "strategy": s, "replication": k, "seed": base.seed + k})
                owner.append(j)
    rows = run_scenarios(tasks, workers=workers, progress=progress, desc=desc, backend=backend,
                         ray_address=ray_address)
    out = []
    for j, (_base, grid, _points) in enumerate(built):
        df = pd.DataFrame([{**m, **r} for m, r, o in zip(meta, rows, owner) if o == j])
        df.attrs["grid_fields"] = list(grid)
        out.append(df)
    return out


# ---------------------------------------------------------------------------- summary
def metric_columns(df: pd.DataFrame, by: Sequence[str]) -> list[str]:
    skip = set(by) | set(ID_COLUMNS)
    return [c for c in df.columns if c not in skip and pd.api.types.is_numeric_dtype(df[c])]


def summarize_sweep(df: pd.DataFrame, metrics: Sequence[str] | None = None,
                    by: Sequence[str] | None = None, level: float = 0.95) -> pd.DataFrame:
    """Mean and Student-t CI over replications, tidy: one row per (grid point, strategy, metric).

    ``by`` defaults to ``df.attrs["grid_fields"]`` (else the columns before ``strategy``).
    ``n`` counts the finite values the mean uses; with n < 2 the CI bounds are NaN.
    """
    if by is None:
        by = df.attrs.get("grid_fields")
        if by is None:
            cols = list(df.columns)
            by = cols[: cols.index("strategy")] if "strategy" in cols else []
    by = list(by)
    keys = by + (["strategy"] if "strategy" in df.columns else [])
    for k in keys:
        if k not in df.columns:
            raise ValueError(f"by: unknown column {k!r}")
    metrics = list(metrics) if metrics is not None else metric_columns(df, by)
    for m in metrics:
        if m not in df.columns:
            raise ValueError(f"metrics: unknown column {m!r}; allowed: {', '.join(metric_columns(df, by))}")
    out = []
    groups = df.groupby(keys, sort=False, dropna=False) if keys else [((), df)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        ident = dict(zip(keys, key))
        for m in metrics:
            x = g[m].to_numpy(dtype=float)
            mean, lo, hi = mean_ci(x, level)
            out.append({**ident, "metric": m, "mean": mean, "ci_low": lo, "ci_high": hi,
                        "n": int(np.isfinite(x).sum())})
    return pd.DataFrame(out, columns=keys + ["metric", "mean", "ci_low", "ci_high", "n"])


def paired_diff_ci(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and CI of a - b over paired replications (common random numbers)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return mean_ci(a - b, level)


def ratio_ci(num: np.ndarray, den: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and CI of the per-replication ratio num / den (paired)."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return mean_ci(num / den, level)


def half_width(lo: float, hi: float) -> float:
    return (hi - lo) / 2 if math.isfinite(lo) and math.isfinite(hi) else math.nan
