"""Pieces every study shares: run modes, the service-time views, running a list of sweeps,
provenance, confidence-interval formatting, per-replication cells and line plots.

Every number is a mean over replications with a 95% Student-t interval; replication k
uses seed k for every strategy and grid point (common random numbers).
"""
from __future__ import annotations

import datetime as _dt
import math
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import ENGINE_VERSION
from ..metrics import mean_ci
from ..sweep import run_sweeps

#: The two views of service time (see docs/findings.md): the preset as specified
#: (decode iterations compete with prefill for the GPU) and decode_ms_per_token = 0,
#: which removes decode contention (approximates the seed's TTFT-only model).
VIEWS = {"contention": {}, "no_decode": {"decode_ms_per_token": 0.0}}


@dataclass(frozen=True)
class Mode:
    quick: bool
    replications: int
    duration_s: float
    warmup_s: float

    @property
    def name(self) -> str:
        return "quick" if self.quick else "full"


def mode(quick: bool, replications: int | None = None) -> Mode:
    if quick:
        return Mode(True, replications or 2, 20.0, 2.0)
    return Mode(False, replications or 10, 60.0, 5.0)


# ---------------------------------------------------------------------------- running
def run_specs(specs, m: Mode, workers: int | None, progress, backend: str | None = None,
              ray_address: str | None = None) -> dict[str, pd.DataFrame]:
    """Run ``[(experiment id, (base, grid, strategies))]`` in one pool: {id: runs}; the runs of specs that share
    an id are concatenated in spec order (a sweep whose fields move together: one spec per value).
    ``backend`` / ``ray_address``: where the runs go (``engine.sweep.parallel_map``: ``"process"`` by default,
    ``"thread"`` or ``"ray"``); the same runs whatever the backend."""
    dfs = run_sweeps([s for _, s in specs], m.replications, workers=workers, progress=progress,
                     desc="simulations", backend=backend, ray_address=ray_address)
    out: dict[str, list[pd.DataFrame]] = {}
    for (eid, _), df in zip(specs, dfs):
        out.setdefault(eid, []).append(df)
    return {k: v[0] if len(v) == 1 else pd.concat(v, ignore_index=True) for k, v in out.items()}


def provenance() -> dict[str, str]:
    try:
        root = Path(__file__).resolve().parents[2]  # the repository (engine/studies/common.py)
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "engine"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        git = (rev or "unknown") + ("+uncommitted engine changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        git = "unknown"
    return {"engine": ENGINE_VERSION, "git": git,
            "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")}


def fmt_ci(mean: float, lo: float, hi: float, digits: int = 2, pct: bool = False) -> str:
    if pct:
        mean, lo, hi = 100 * mean, 100 * lo, 100 * hi
    suf = "%" if pct else ""
    if not math.isfinite(mean):
        return "n/a"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{mean:.{digits}f}{suf}"
    return f"{mean:.{digits}f}{suf} [{lo:.{digits}f}, {hi:.{digits}f}]"


def cell(df: pd.DataFrame, metric: str, strategy: str | None = None, **where) -> np.ndarray:
    """Per-replication values of a metric at one grid point (ordered by replication)."""
    m = np.ones(len(df), bool)
    if strategy is not None:
        m &= (df["strategy"] == strategy).to_numpy()
    for k, v in where.items():
        m &= np.isclose(df[k].to_numpy(dtype=float), float(v))
    sub = df[m].sort_values("replication")
    if sub.empty:
        raise KeyError(f"no runs for {strategy} {where}")
    return sub[metric].to_numpy(dtype=float)


def ci_of(x: np.ndarray) -> tuple[float, float, float]:
    return mean_ci(np.asarray(x, float))


# ---------------------------------------------------------------------------- plotting
def pyplot():
    """matplotlib.pyplot on the Agg backend (imported on first use: plotting is optional)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_lines(path: Path, summ: pd.DataFrame, x: str, metric: str, series: str, title: str,
               xlabel: str, ylabel: str, scale: float = 1.0, logx: bool = False, logy: bool | None = None,
               series_label=str) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    d = summ[summ["metric"] == metric]
    allv = [v * scale for v in d["mean"] if math.isfinite(v)]
    pos = [v for v in allv if v > 0]
    if logy is None:
        logy = bool(pos) and len(pos) == len(allv) and max(pos) / min(pos) > 30
    floor = min(pos) / 3 if logy and pos else None
    for s, g in d.groupby(series, sort=False):
        g = g.sort_values(x)
        xs = g[x].to_numpy(float)
        mu, lo, hi = (g[c].to_numpy(float) * scale for c in ("mean", "ci_low", "ci_high"))
        if floor is not None:  # a CI reaching below 0 cannot be drawn on a log axis: clip it
            lo = np.maximum(lo, floor)
        ax.plot(xs, mu, marker="o", ms=4, label=series_label(s))
        ax.fill_between(xs, lo, hi, alpha=0.2)
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title("\n".join(textwrap.fill(t, 100) for t in title.split("\n")), fontsize=8.5)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
