"""Fitting: least squares on relative error of the free cost-model parameters (bounded,
fixed request streams, so deterministic for given data and seeds)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..scenario import Scenario
from .cases import Case, _rel, engine_metrics, error_table, simulate_cases, typed_values
from .measurements import METRIC_COLUMNS, load_measurements, row_scenario

#: Cost-model parameters ``fit`` may vary, with physical bounds.
FIT_BOUNDS: dict[str, tuple[float, float]] = {
    "compute_eff": (0.05, 1.0),
    "bw_eff": (0.05, 1.0),
    "step_overhead_ms": (0.0, 100.0),
    "lora_ms_per_adapter": (0.0, 2.0),
    "lora_ms_per_slot": (0.0, 1.0),
    "lora_us_per_token_slot": (0.0, 5.0),
    "frontend_ms": (0.0, 50.0),
    "max_in_system": (1000.0, 200000.0),
    "load_latency_ms": (0.0, 100.0),
    "disk_latency_ms": (0.0, 500.0),
}
DEFAULT_PARAMS = ("compute_eff", "bw_eff", "step_overhead_ms")
#: What each parameter of FIT_BOUNDS is, in words and with its unit, for the user (``calibrate``'s output, the
#: dashboard's fit): the field name follows in parentheses (``param_label``), to map it to the scenario JSON.
#: The step-time terms are those of docs/model.md 5.1; the load latency, 5.3.
PARAM_LABELS: dict[str, str] = {
    "compute_eff": "GEMM efficiency (share of FP16 peak)",
    "bw_eff": "memory-bandwidth efficiency (share of HBM peak)",
    "step_overhead_ms": "per-step overhead (ms)",
    "lora_ms_per_adapter": "LoRA cost per distinct adapter in a step (ms)",
    "lora_ms_per_slot": "LoRA cost per adapter slot per step (ms)",
    "lora_us_per_token_slot": "LoRA cost per token and adapter slot (µs)",
    "frontend_ms": "front-end latency per request (ms)",
    "max_in_system": "cap on requests in the server (requests)",
    "load_latency_ms": "adapter load latency, fixed part (ms)",
    "disk_latency_ms": "adapter read from disk on a host-cache miss, fixed part (ms)",
}


def param_label(p: str) -> str:
    """``PARAM_LABELS[p]`` followed by the field name: "per-step overhead (ms) (step_overhead_ms)"."""
    return f"{PARAM_LABELS[p]} ({p})" if p in PARAM_LABELS else p


@dataclass
class FitResult:
    values: dict[str, float]
    start: dict[str, float]
    table: pd.DataFrame            # per (case, metric) errors at the fitted values
    cost: float
    nfev: int
    wall_s: float
    status: str
    scenario: Scenario | None = None  # the fitted base scenario (``fit``)


def _check_params(params, bounds) -> tuple[list[str], dict[str, tuple[float, float]]]:
    params = list(params)
    if not params:
        raise ValueError("params: empty; allowed: " + ", ".join(FIT_BOUNDS))
    for p in params:
        if p not in FIT_BOUNDS:
            raise ValueError(f"params: unknown value {p!r}; allowed: {', '.join(FIT_BOUNDS)}")
    if len(set(params)) != len(params):
        raise ValueError(f"params: duplicate names in {params}")
    b = {p: FIT_BOUNDS[p] for p in params}
    for p, lohi in (bounds or {}).items():
        if p not in b:
            raise ValueError(f"bounds: {p!r} is not a fitted parameter ({', '.join(params)})")
        lo, hi = float(lohi[0]), float(lohi[1])
        glo, ghi = FIT_BOUNDS[p]
        if not (glo <= lo < hi <= ghi):
            raise ValueError(f"bounds: {p}: invalid range ({lo}, {hi}); allowed: within [{glo}, {ghi}], lo < hi")
        b[p] = (lo, hi)
    return params, b


def fit_cases(cases: list[Case], params=DEFAULT_PARAMS, bounds=None, start: dict | None = None,
              max_nfev: int = 60, diff_step: float = 0.02, loss: str = "soft_l1",
              log=None, workers: int | None = None, weights: dict[str, float] | None = None) -> FitResult:
    """Least-squares fit of ``params`` (shared by all cases) on relative errors.

    Residual per (case, fitted metric): simulated / measured - 1, times ``weights[metric]``
    (default 1; a tool file's fit: ``readers.FIT_METRIC_WEIGHTS``) (``soft_l1`` loss, so a
    few runs the model cannot reproduce do not dominate).  The request streams are
    fixed (each case's seed or trace), so the objective is deterministic.  Parameters
    are optimised on their range mapped to [0.25, 1.25], so the finite-difference step
    (``diff_step`` x value) is 0.5-2.5 % of the range: large enough to see through the
    small jumps that event reordering causes.  ``max_nfev`` caps scipy's iterations;
    the reported ``nfev`` counts every simulation of the case set, finite differences
    included.
    """
    from scipy.optimize import least_squares

    params, b = _check_params(params, bounds)
    if not cases:
        raise ValueError("data: no runs to fit")
    base_vals = {p: float(getattr(cases[0].scenario, p)) for p in params}
    x0 = np.array([float((start or {}).get(p, base_vals[p])) for p in params])
    lo = np.array([b[p][0] for p in params])
    hi = np.array([b[p][1] for p in params])
    x0 = np.clip(x0, lo, hi)
    # optimise z = (x - lo) / (hi - lo) + 0.25 in [0.25, 1.25]: scipy's relative finite-difference
    # step (diff_step x |z|) is then 0.5-2.5 % of each parameter's range, also at x = lo.
    def to_x(z):
        return np.clip(lo + (np.asarray(z, float) - 0.25) * (hi - lo), lo, hi)
    z0 = (x0 - lo) / (hi - lo) + 0.25
    cache: dict[tuple, list] = {}
    t0 = time.perf_counter()

    def sims_at(x) -> list[dict]:
        key = tuple(np.round(x, 12))
        if key not in cache:
            vals = dict(zip(params, map(float, x)))
            cache[key] = simulate_cases(cases, vals, workers)
            if log:
                log(f"  eval {len(cache):3d} ({time.perf_counter() - t0:.0f} s): "
                    + ", ".join(f"{p}={v:.4g}" for p, v in vals.items()))
        return cache[key]

    def resid(z):
        out = []
        for c, s in zip(cases, sims_at(to_x(z))):
            for k in c.fit_metrics:
                m = c.measured.get(k, math.nan)
                if not (math.isfinite(m) and m > 0):
                    continue
                r = _rel(s.get(k, math.nan), m)
                out.append((10.0 if not math.isfinite(r) else r) * (weights or {}).get(k, 1.0))
        return np.asarray(out, float)

    if resid(z0).size == 0:
        raise ValueError("data: no finite measured values of the fitted metrics")
    sol = least_squares(resid, z0, bounds=(np.full(len(params), 0.25), np.full(len(params), 1.25)),
                        loss=loss, f_scale=1.0, diff_step=diff_step, max_nfev=max_nfev,
                        xtol=1e-4, ftol=1e-6)
    sol.x = to_x(sol.x)
    values = typed_values(cases[0].scenario, dict(zip(params, map(float, sol.x))))
    table = error_table(cases, sims_at(sol.x))
    return FitResult(values=values, start=dict(zip(params, map(float, x0))), table=table,
                     cost=float(sol.cost), nfev=len(cache), wall_s=time.perf_counter() - t0,
                     status=str(sol.message))


def measurement_cases(base: Scenario, data: pd.DataFrame, metrics=None) -> list[Case]:
    """One Case per measurement row (the engine's own workload generator, ``base.seed``)."""
    metric_cols = data.attrs.get("metric_columns") or [c for c in METRIC_COLUMNS if c in data.columns]
    fitm = tuple(metrics) if metrics else tuple(metric_cols)
    for m in fitm:
        if m not in metric_cols:
            raise ValueError(f"metrics: {m!r} is not a column of the data; columns: {', '.join(metric_cols)}")
    cases = []
    for i in range(len(data)):
        sc = row_scenario(base, data, i)
        meas = {c: float(data[c].iloc[i]) for c in metric_cols}
        info = {c: data[c].iloc[i] for c in data.attrs.get("scenario_columns", [])}
        cases.append(Case(name=f"row {i + 1}", scenario=sc, measured=meas, metric_fn=engine_metrics,
                          fit_metrics=fitm, info=info))
    return cases


def fit(base: Scenario, data, params=DEFAULT_PARAMS, bounds=None, metrics=None, max_nfev: int = 60,
        log=None) -> FitResult:
    """Fit ``params`` of ``base`` to measured runs.

    ``data``: anything ``load_measurements`` reads, or a list of ``Case``.  Returns a
    FitResult whose ``scenario`` is ``base`` with the fitted values, ``values`` the
    parameter values and ``table`` the per-row error table (measured, simulated,
    relative error per metric).
    """
    if not isinstance(base, Scenario):
        raise ValueError(f"base: expected engine.Scenario, got {type(base).__name__}")
    base.validate()
    if isinstance(data, list) and data and isinstance(data[0], Case):
        cases = data
    else:
        df = data if isinstance(data, pd.DataFrame) and "metric_columns" in data.attrs else load_measurements(data)
        cases = measurement_cases(base, df, metrics)
    start = {p: getattr(base, p) for p in params if p in FIT_BOUNDS}
    res = fit_cases(cases, params, bounds, start=start, max_nfev=max_nfev, log=log)
    res.scenario = base.replace(**res.values).validate()
    return res


def at_bounds(values: dict[str, float], rel: float = 1e-3) -> list[str]:
    """Fitted parameters within ``rel`` of their range's ends (FIT_BOUNDS): the data push them
    past what the bounds call physical, a sign the model lacks something there."""
    out = []
    for k, v in values.items():
        lo, hi = FIT_BOUNDS[k]
        tol = rel * (hi - lo)
        if v <= lo + tol:
            out.append(f"{k} = {v:.4g} (at its lower bound {lo:g})")
        elif v >= hi - tol:
            out.append(f"{k} = {v:.4g} (at its upper bound {hi:g})")
    return out
