"""Noise-aware ranking: a winner only when the paired CI of its lead excludes zero.

Replications are paired (common random numbers: replication k of every candidate uses the same
seed), so a candidate is compared with the best through the per-replication differences.  The
best is the candidate with the best mean; a candidate whose paired difference to the best has a
95 % CI that includes zero is *tied* with it.  A "winner" exists only when nothing is tied with
the best.  Candidates marked as bounds (an offline optimum) or baselines are reported but never
win and never tie.  With one replication there is no CI: only an exact equality is a tie, and
the result says so (``has_ci``).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .metrics import mean_ci


@dataclass
class Ranking:
    """``order``: candidates best first (excluded ones last); ``best``: the best eligible candidate (None if
    none has a finite value); ``tied``: eligible candidates tied with it; ``winner``: ``best`` when nothing is
    tied, else None; ``stats``: per candidate mean, ci_low, ci_high, and the paired difference to the best."""

    order: list[str]
    best: str | None
    tied: list[str]
    winner: str | None
    has_ci: bool
    higher_is_better: bool
    stats: dict[str, dict] = field(default_factory=dict)
    excluded: list[str] = field(default_factory=list)


def rank(values: Mapping[str, Sequence[float]], higher_is_better: bool, exclude: Sequence[str] = (),
         level: float = 0.95) -> Ranking:
    """Rank candidates by their paired replications (``values[name][k]``: replication k's value).

    Non-finite values (a run whose metric is undefined) make a candidate ineligible for the best.
    Raises ValueError when the candidates' replication counts differ (they would not be paired).
    """
    if not values:
        raise ValueError("values: empty; allowed: a dict of candidate -> per-replication values")
    arr = {k: np.asarray(list(v), dtype=float) for k, v in values.items()}
    n = {len(a) for a in arr.values()}
    if len(n) != 1 or 0 in n:
        raise ValueError(f"values: replication counts differ or are zero ({ {k: len(a) for k, a in arr.items()} }); "
                         f"allowed: the same number of paired replications per candidate")
    reps = n.pop()
    sign = 1.0 if higher_is_better else -1.0
    stats = {}
    for k, a in arr.items():
        m, lo, hi = mean_ci(a, level) if np.isfinite(a).all() else (math.nan, math.nan, math.nan)
        stats[k] = {"mean": m, "ci_low": lo, "ci_high": hi, "n": reps}
    excluded = [k for k in arr if k in set(exclude)]
    eligible = [k for k in arr if k not in excluded and math.isfinite(stats[k]["mean"])]
    key = {k: -sign * stats[k]["mean"] for k in eligible}
    order = sorted(eligible, key=lambda k: key[k]) + [k for k in arr if k not in eligible]
    if not eligible:
        return Ranking(order, None, [], None, reps > 1, higher_is_better, stats, excluded)
    best = order[0]
    tied = []
    for k in order[1:len(eligible)]:
        d = arr[best] - arr[k]
        m, lo, hi = mean_ci(d, level)
        stats[k].update({"diff_to_best": m, "diff_ci_low": lo, "diff_ci_high": hi})
        if reps > 1 and math.isfinite(lo):
            if lo <= 0 <= hi:
                tied.append(k)
        elif m == 0:
            tied.append(k)
    return Ranking(order, best, tied, None if tied else best, reps > 1, higher_is_better, stats, excluded)
