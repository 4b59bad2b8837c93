"""Comparison tables and noise-aware verdicts over paired replications, shared by the What-if page
(strategies) and the Fleet page (routers).

Pure functions, no Streamlit (tests/test_app_verdicts.py calls them directly).  The input of each is
``reps``: candidate -> the summaries of its replications, replication k of every candidate on the same
seed (common random numbers); ``ci_table`` gives a DataFrame, ``verdict`` a text and its kind.  The
ranking itself is ``engine.rank``; what a page says about it is that page's templates (``verdict_text``).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from engine import Ranking, mean_ci, rank

#: The unit of each summary metric the pages show; the What-if table's text (page_whatif.fmt_value) and the tables'
#: number formats (``COLUMN_FORMATS``) follow from it.
UNITS: dict[str, str] = {
    "ttft_p50_ms": "ms",
    "ttft_p99_ms": "ms",
    "ttft_mean_ms": "ms",
    "throughput_tok_s": "tok/s",
    "swap_rate": "share",
    "swap_share_of_ttft": "share",
    "slo_attainment": "share",
    "prefix_cache_hit_rate": "share",
    "load_imbalance": "ratio",
    "adapter_duplication": "ratio",
}
#: Number format (``st.column_config.NumberColumn(format=...)``) of a table column, by its metric's unit.
COLUMN_FORMATS: dict[str, str] = {"ms": "%.1f", "tok/s": "%.1f", "share": "%.3f", "ratio": "%.3f"}
#: Suffix of the column holding the half-width of a metric's 95 % CI.
CI_SUFFIX = " ±"

#: What ``judge`` can conclude (the verdict's kind).
KINDS = ("none", "single", "lead", "tie", "win")


def rep_values(reps: Mapping[str, Sequence[Mapping]], key: str) -> dict[str, list[float]]:
    """Per candidate, the metric's value in each replication (NaN where undefined)."""
    return {s: [float(m.get(key, math.nan)) for m in rs] for s, rs in reps.items()}


def ci_table(reps: Mapping[str, Sequence[Mapping]], columns: Sequence[tuple[str, str]],
             name: str = "candidate") -> pd.DataFrame:
    """One row per candidate (its name in column ``name``); for each ``(key, label)`` of ``columns``, the
    mean of the metric ``key`` over the replications (column ``label``) and the half-width of its 95 % CI
    (column ``label + " ±"``; NaN with fewer than two finite values)."""
    rows = []
    for cand, summaries in reps.items():
        row = {name: cand}
        for key, label in columns:
            m, lo, hi = mean_ci([float(s.get(key, math.nan)) for s in summaries])
            row[label] = m
            row[label + CI_SUFFIX] = (hi - lo) / 2 if math.isfinite(lo) else math.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=[name, *(c for _, label in columns for c in (label, label + CI_SUFFIX))])


def column_formats(columns: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Number format of each column ``ci_table(reps, columns)`` makes (a metric and its ``±`` alike), from the
    metric's unit (``UNITS``, ``COLUMN_FORMATS``); KeyError for a metric without a unit."""
    out = {}
    for key, label in columns:
        out[label] = out[label + CI_SUFFIX] = COLUMN_FORMATS[UNITS[key]]
    return out


@dataclass
class Judgement:
    """What paired replications say: ``kind`` (one of ``KINDS``), the ranking, the best and the candidates tied
    with it, the runner-up with the best's lead over it and the half-width of the lead's paired 95 % CI
    (``kind == "win"`` only), and the replications per candidate."""

    kind: str
    ranking: Ranking
    n: int
    best: str | None = None
    tied: list[str] = field(default_factory=list)
    runner_up: str | None = None
    lead: float = math.nan
    lead_half: float = math.nan


def judge(values: Mapping[str, Sequence[float]], higher_is_better: bool, exclude: Sequence[str] = ()) -> Judgement:
    """The noise-aware verdict over paired replications (``values[name][k]``: replication k's value).

    "none": no contender has a finite value; "single": one contender has; "lead": one replication (no CI, no
    verdict); "tie": some contenders' paired 95 % CI of the difference to the best includes zero (``tied``);
    "win": every such CI excludes zero.  ``exclude``d candidates (bounds, baselines) are ranked but never win.
    """
    r = rank(values, higher_is_better=higher_is_better, exclude=exclude)
    n = next(iter(r.stats.values()))["n"]
    if r.best is None:
        return Judgement("none", r, n)
    contenders = [s for s in r.order if s not in r.excluded and math.isfinite(r.stats[s]["mean"])]
    if len(contenders) == 1:
        return Judgement("single", r, n, r.best)
    if not r.has_ci:
        return Judgement("lead", r, n, r.best)
    if r.tied:
        return Judgement("tie", r, n, r.best, list(r.tied))
    second = contenders[1]
    d = r.stats[second]
    return Judgement("win", r, n, r.best, [], second, abs(d["diff_to_best"]),
                     (d["diff_ci_high"] - d["diff_ci_low"]) / 2)


def verdict_text(j: Judgement, texts: Mapping[str, str], fmt: Callable[[str, Mapping], str],
                 fmt_diff: Callable[[float], str] = "{:g}".format, **fields) -> str:
    """The page's sentence for a judgement: ``texts[j.kind]`` with its fields filled in.

    Fields: ``{best}``, ``{tied}`` (comma-separated), ``{second}`` (the runner-up): each ``fmt(name, stats)``
    (``stats``: the candidate's ``Ranking.stats``); ``{lead}`` and ``{half}`` (the runner-up's deficit and the
    half-width of its paired CI, by ``fmt_diff``); ``{n}`` (replications); and the keyword ``fields`` (e.g.
    ``label``)."""
    st_ = j.ranking.stats
    values = dict(fields, n=j.n)
    if j.best is not None:
        values["best"] = fmt(j.best, st_[j.best])
    if j.tied:
        values["tied"] = ", ".join(fmt(s, st_[s]) for s in j.tied)
    if j.runner_up is not None:
        values.update(second=fmt(j.runner_up, st_[j.runner_up]), lead=fmt_diff(j.lead), half=fmt_diff(j.lead_half))
    return texts[j.kind].format(**values)


def verdict(reps: Mapping[str, Sequence[Mapping]], metric: str, higher_is_better: bool, texts: Mapping[str, str],
            fmt: Callable[[str, Mapping], str], fmt_diff: Callable[[float], str] = "{:g}".format,
            exclude: Sequence[str] = (), **fields) -> tuple[str, str]:
    """``(text, kind)``: ``judge`` on ``metric`` over ``reps`` (candidate -> replications' summaries), said with
    the page's ``texts`` (``verdict_text``)."""
    j = judge(rep_values(reps, metric), higher_is_better, exclude)
    return verdict_text(j, texts, fmt, fmt_diff, **fields), j.kind
