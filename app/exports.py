"""Downloadable files built from engine results (pure pandas, no Streamlit)."""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from engine import Scenario


def _stack(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    parts = [df.assign(strategy=s)[["strategy", *df.columns]] for s, df in frames.items()]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({"strategy": []})


def requests_csv(requests: Mapping[str, pd.DataFrame]) -> bytes:
    """Every simulated request of every strategy: ``strategy`` + ``SimResult.requests`` columns."""
    return _stack(requests).to_csv(index=False).encode()


def timeseries_csv(timeseries: Mapping[str, pd.DataFrame]) -> bytes:
    """``strategy`` + ``SimResult.timeseries`` columns."""
    return _stack(timeseries).to_csv(index=False).encode()


def summary_frame(summaries: Mapping[str, Mapping]) -> pd.DataFrame:
    """One row per strategy, one column per ``SimResult.summary`` key."""
    return pd.DataFrame([{"strategy": s, **dict(m)} for s, m in summaries.items()])


def summary_csv(summaries: Mapping[str, Mapping]) -> bytes:
    return summary_frame(summaries).to_csv(index=False).encode()


def scenario_json(sc: Scenario) -> bytes:
    return (sc.to_json() + "\n").encode()
