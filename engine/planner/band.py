"""The error band of a plan (issue 24 item 3): every answer again with the cost model slowed down and sped up
by the error the model is known to make, so that a recommendation says how far it could move.

Rule (docs/model.md 10): for a configuration whose scenario has the band ``e`` (``engine.calibration.error_band``:
the 90th percentile of the held-out |relative error| of throughput and per-step time (TPOT) of the profile it
rests on, calibrated, transferred or uncalibrated), the *pessimistic* search runs with every step and the front
end ``1 + e`` times slower (``Scenario.cost_scale``), the *optimistic* one ``1 + e`` times faster, on the first
seed of the nominal answer (common random numbers) and with the same search. One replication per side: the
band reports how far the model's error moves the answer, and the nominal answer already carries the noise's
CI (three replications per side took the default plan from 3.5 to 14 s). Each bound is clipped to the
nominal value on its side (a bisection within ``rel_tol`` can land a few per cent
either way; the band says how far the model's error moves the answer, not the search's tolerance).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..scenario import Scenario

#: Columns the band adds per objective: (the value column it brackets, the name stem of its bounds).
BOUNDED = {"max_rate": ("max_rate_rps", "max_rate_rps"), "max_adapters": ("max_adapters", "max_adapters"),
           "min_replicas": ("replicas_needed_max", "replicas"), "min_cost": ("meets_slo_frac", "meets_slo_frac")}
#: Larger is better for these values (a slower model lowers them); replicas: smaller is better.
LARGER_IS_BETTER = {"max_rate": True, "max_adapters": True, "min_replicas": False, "min_cost": True}


def default_band(sc: Scenario) -> dict:
    """``engine.calibration.error_band`` of ``sc`` (the planner's default source of ``e``)."""
    from ..calibration import error_band  # (the planner sits above the calibration layer)
    return error_band(sc)


def scaled(sc: Scenario, e: float, side: str) -> Scenario:
    """``sc`` with its cost model ``1 + e`` times slower ("pessimistic") or faster ("optimistic"):
    ``engine.calibration.scaled_cost``, the What-if band's rule too."""
    from ..calibration import scaled_cost
    return scaled_cost(sc, e, side)


def run(configs: list, feasible: list[int], objective: str, task_args: Callable[..., tuple], band,
        pmap: Callable, nominal: dict[int, float] | None = None) -> tuple[dict[int, dict], dict[int, dict[str, float]]]:
    """The band's searches: for each feasible configuration ``i`` (``configs[i][1]`` its scenario) with a band
    ``e`` > 0, ``pmap`` (the plan's pool) of ``task_args(scaled(sc, e, side), start)`` for both sides, started
    from ``nominal[i]`` (its first seed's answer) moved by the band (``_start``).
    ``band``: "auto" (``default_band`` per configuration), a number (the same ``e`` for all) or None (off).
    Returns ({config: band dict}, {config: {side: bound}})."""
    if band is None:
        return {}, {}
    bands = {}
    for i in feasible:
        sc = configs[i][1]
        if band == "auto":
            bands[i] = default_band(sc)
        else:
            bands[i] = {"band": float(band), "status": "given", "note": f"a band of {float(band):.0%} given to the plan"}
    todo = [(i, side) for i in feasible if bands[i].get("band", math.nan) > 0 for side in ("pessimistic", "optimistic")]
    results = pmap([task_args(scaled(configs[i][1], bands[i]["band"], side),
                              _start(objective, (nominal or {}).get(i), bands[i]["band"], side))
                    for i, side in todo]) if todo else []
    bounds: dict[int, dict[str, float]] = {}
    for (i, side), rs in zip(todo, results):
        bounds.setdefault(i, {})[side] = aggregate(objective, [r["value"] for r in rs])
    return bands, bounds


def _start(objective: str, value, e: float, side: str):
    """Where a bound's search starts: the nominal answer moved by the band (rate and adapters scale with the
    cost model's speed; the search then brackets from there, as a replication does from the first's answer)."""
    if objective not in ("max_rate", "max_adapters") or value is None or not value > 0:
        return None
    v = value / (1.0 + e) if side == "pessimistic" else value * (1.0 + e)
    return max(1, int(round(v))) if objective == "max_adapters" else v


def aggregate(objective: str, values: list[float]) -> float:
    """One bound from the replications' values: the mean (max_rate, max_adapters, min_cost's pass share), the
    most any replication needed (min_replicas, as ``replicas_needed_max``); NaN if a replication found none."""
    v = np.asarray(values, float)
    if objective == "min_cost":
        return float(np.mean(v > 0)) if len(v) else math.nan
    if not len(v) or (v <= 0).any():
        return math.nan
    return float(v.max()) if objective == "min_replicas" else float(v.mean())


def add_columns(table: pd.DataFrame, objective: str, bands: dict[int, dict], bounds: dict[int, dict[str, float]],
                gpus: Callable[[int, float], float]) -> pd.DataFrame:
    """The band's columns on the plan table: ``band`` (e), ``band_status``, ``band_basis``, and per side the
    bounded value (``<stem>_pessimistic`` / ``_optimistic``, clipped to the nominal value on its side) and,
    where the objective has one, the GPUs it would take (``gpus_pessimistic`` / ``_optimistic``)."""
    value, stem = BOUNDED[objective]
    up = LARGER_IS_BETTER[objective]
    t = table.copy()
    for col in ("band", f"{stem}_pessimistic", f"{stem}_optimistic", "gpus_pessimistic", "gpus_optimistic"):
        t[col] = math.nan
    t["band_status"] = ""
    t["band_basis"] = ""
    for i in t.index:
        c = int(t.at[i, "config"])
        if c not in bands or not math.isfinite(float(bands[c].get("band", math.nan))):
            continue  # no measured error for this configuration: no band (never the point as its own bounds)
        t.at[i, "band"] = bands[c]["band"]
        t.at[i, "band_status"] = bands[c].get("status", "")
        t.at[i, "band_basis"] = bands[c].get("note", "")
        nominal = float(t.at[i, value])
        for side in ("pessimistic", "optimistic"):
            v = bounds.get(c, {}).get(side, math.nan) if bands[c]["band"] > 0 else nominal
            if math.isfinite(v) and math.isfinite(nominal):
                worse = side == "pessimistic"
                v = (min(v, nominal) if worse else max(v, nominal)) if up else (max(v, nominal) if worse
                                                                                 else min(v, nominal))
            t.at[i, f"{stem}_{side}"] = v
            t.at[i, f"gpus_{side}"] = gpus(c, v) if math.isfinite(v) else math.nan
    return t


def band_note(best: dict, objective: str) -> str:
    """The plan's first note: how far the recommendation could move, or why that is not known."""
    text = band_sentence(best, objective)
    if text:
        return f"How far it could move: {text}"
    return ("How far it could move: not measured for this configuration (no error basis applies: "
            f"{best.get('band_basis') or 'docs/validation/profile_errors.csv has no row for it'}).")


def band_sentence(best: dict, objective: str) -> str:
    """E.g. "1 GPU (2 if the model is as far off as its worst tenth of held-out runs, 1 if as far the other way)"."""
    if best is None or not math.isfinite(float(best.get("band", math.nan))):
        return ""
    e = float(best["band"])
    _, stem = BOUNDED[objective]
    g, gp, go = (best.get(k, math.nan) for k in ("gpus", "gpus_pessimistic", "gpus_optimistic"))
    vp, vo = best.get(f"{stem}_pessimistic", math.nan), best.get(f"{stem}_optimistic", math.nan)

    def n(x) -> str:
        return "none within the search" if not math.isfinite(float(x)) else f"{float(x):.4g}"
    measured = best.get("band_status", "") != "given"
    why = ", as far off as its worst tenth of held-out runs" if measured else ""
    if objective in ("max_rate", "max_adapters", "min_replicas") and math.isfinite(float(g)):
        head = f"{int(g)} GPU(s) ({n(gp)} if the cost model is {e:.0%} slower{why}; {n(go)} if {e:.0%} faster)"
    else:
        head = f"with the cost model {e:.0%} slower: {n(vp)}; {e:.0%} faster: {n(vo)}"
    unit = {"max_rate": " req/s", "max_adapters": " adapters", "min_replicas": " replicas", "min_cost": ""}[objective]
    detail = f"; {stem.replace('_', ' ')}: {n(vp)}-{n(vo)}{unit}" if objective != "min_cost" else ""
    return f"{head}{detail}. Error band: {best.get('band_basis', '')}"
