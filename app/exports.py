"""Downloadable files built from engine results (pure pandas, no Streamlit), and the reader of
the scenario.json the app writes."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from engine import EXPORT_REPLICATIONS_KEY, EXPORT_STRATEGIES_KEY, Scenario, write_csv

#: Keys a scenario.json written by the app carries besides the scenario's fields.
STRATEGIES_KEY = EXPORT_STRATEGIES_KEY      # the compared strategies (the ``strategy`` field is the baseline)
REPLICATIONS_KEY = EXPORT_REPLICATIONS_KEY  # seeds per strategy (replication k uses seed + k)


def csv_bytes(df: pd.DataFrame) -> bytes:
    """``df`` as the bytes of a CSV download (no index): every download button serves this, through
    ``engine.write_csv``, so a text cell starting like a spreadsheet formula (``=``, ``+``, ``-``, ``@``, tab,
    CR) is quoted (OWASP's CSV-injection rule) and numbers are untouched."""
    return write_csv(df, index=False).encode()


def _stack(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    parts = [df.assign(strategy=s)[["strategy", *df.columns]] for s, df in frames.items()]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame({"strategy": []})


def requests_csv(requests: Mapping[str, pd.DataFrame]) -> bytes:
    """Every simulated request of every strategy: ``strategy`` + ``SimResult.requests`` columns."""
    return csv_bytes(_stack(requests))


def timeseries_csv(timeseries: Mapping[str, pd.DataFrame]) -> bytes:
    """``strategy`` + ``SimResult.timeseries`` columns."""
    return csv_bytes(_stack(timeseries))


def _cell(v: Any) -> Any:
    """A scenario field as one CSV cell: lists and dicts as JSON."""
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, tuple, dict)) else v


def scenario_columns(sc: Scenario) -> dict[str, Any]:
    """The scenario's fields as CSV columns (not ``strategy``: each row has its own)."""
    return {k: _cell(v) for k, v in sc.to_dict().items() if k != "strategy"}


def summary_frame(summaries: Mapping[str, Mapping], scenario: Scenario | None = None) -> pd.DataFrame:
    """One row per strategy: ``strategy``, one column per ``SimResult.summary`` key, then (with ``scenario``)
    one column per scenario field the summary does not already report (e.g. ``load_mode``), so that the
    file says what was simulated."""
    rows = [{"strategy": s, **dict(m)} for s, m in summaries.items()]
    if scenario is not None:
        extra = scenario_columns(scenario)
        rows = [{**r, **{k: v for k, v in extra.items() if k not in r}} for r in rows]
    return pd.DataFrame(rows)


def summary_csv(summaries: Mapping[str, Mapping], scenario: Scenario | None = None) -> bytes:
    return csv_bytes(summary_frame(summaries, scenario))


def scenario_json(sc: Scenario, strategies: Sequence[str] | None = None, replications: int | None = None) -> bytes:
    """Every field of ``sc`` (its ``strategy`` is the baseline), plus the compared ``strategies`` and the
    ``replications`` when given.  ``read_scenario_json`` reads it back (and plain scenario files)."""
    d = sc.to_dict()
    if strategies is not None:
        d[STRATEGIES_KEY] = list(strategies)
    if replications is not None:
        d[REPLICATIONS_KEY] = int(replications)
    return (json.dumps(d, indent=2, sort_keys=True) + "\n").encode()


def read_scenario_json(text: str) -> tuple[Scenario, list[str] | None, int | None]:
    """The scenario, the compared strategies and the replications of a scenario.json.

    A plain scenario (an older export, the engine CLI's ``scenario.json``) has neither: ``None``.  Raises
    ValueError naming the problem (not JSON, an unknown field, a bad ``strategies`` or ``replications``).
    """
    return Scenario.from_export(text)
