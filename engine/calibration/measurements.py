"""Measurement files: the metric columns of a ``vllm bench serve`` / ``benchmark_serving.py``
result plus any Scenario field as an extra column (the row's scenario).

A benchmark tool's own result file (``tool_format``: vllm bench serve, GuideLLM, AIPerf) is routed
to the tool readers (``engine.calibration.readers``, which register themselves with
``register_tool_reader``: this module imports nothing above it), which turn each run into a row
whose Scenario columns state the run's traffic."""
from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd

from ..limits import clip
from ..scenario import Scenario, coerce

#: Metric columns of a ``vllm bench serve`` result (ms for latencies, req/s and tok/s).
METRIC_COLUMNS = ("request_throughput", "output_throughput", "mean_ttft_ms", "median_ttft_ms",
                  "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms")
#: Extra metric some datasets carry (share of requests meeting slo_ttft_ms).
EXTRA_METRICS = ("slo_attainment",)
#: Benchmark tools' result files the readers understand (``tool_format`` names).
TOOL_FORMATS = {
    "vllm-bench-serve": "`vllm bench serve --save-result` / benchmarks/benchmark_serving.py result JSON "
                        "(with or without --save-detailed; JSON Lines from --append-result)",
    "guidellm": "GuideLLM benchmark report (benchmarks.json, report schema version 2)",
    "aiperf": "AIPerf profile_export_aiperf.json",
}
_tool_rows = None  # set by engine.calibration.readers: path -> list of row dicts


def register_tool_reader(fn) -> None:
    """Route tool result files through ``fn(path) -> rows`` (called by engine.calibration.readers)."""
    global _tool_rows
    _tool_rows = fn


def tool_format(obj) -> str | None:
    """Which tool wrote this parsed JSON object (a ``TOOL_FORMATS`` key), or None."""
    if not isinstance(obj, dict):
        return None
    bl = obj.get("benchmarks")
    if isinstance(bl, list) and (isinstance(obj.get("metadata"), dict) or any(
            isinstance(b, dict) and b.get("type_") == "generative_benchmark" for b in bl)):
        return "guidellm"
    if "aiperf_version" in obj or (isinstance(obj.get("input_config"), dict)
                                   and isinstance(obj.get("request_throughput"), dict)):
        return "aiperf"
    if ("request_rate" in obj or "duration" in obj) and ("completed" in obj or "request_throughput" in obj) \
            and ("total_input_tokens" in obj or "num_prompts" in obj or "input_lens" in obj):
        return "vllm-bench-serve"
    return None


def _tool_file(src) -> bool:
    """Is ``src`` a path (or JSON text) of a tool result file?"""
    text = None
    if isinstance(src, (str, Path)) and not (isinstance(src, str) and "\n" in src):
        p = Path(src)
        if p.is_file() and p.suffix.lower() in (".json", ".jsonl"):
            try:
                text = p.read_text()
            except OSError:
                return False
    if text is None:
        return False
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    for chunk in (text, first):
        try:
            return tool_format(json.loads(chunk)) is not None
        except (json.JSONDecodeError, ValueError, RecursionError):
            continue
    return False


def load_measurements(src, base: Scenario | None = None) -> pd.DataFrame:
    """Read measured runs from a CSV / JSON / JSONL path, CSV text or a DataFrame.

    Returns a DataFrame with float metric columns and the scenario-field columns
    coerced to their types; ``df.attrs`` lists ``metric_columns``, ``scenario_columns``
    and ``ignored_columns``.  Raises ValueError naming the column (and the 1-based
    data row) of the first problem.  With ``base``, every row's scenario is also
    validated (``row N: <field>: ...``).
    """
    if _tool_file(src):
        if _tool_rows is None:
            raise ValueError(f"data: {src} is a benchmark tool's result file; import engine.calibration to read it")
        src = _tool_rows(src)
    df = _read_table(src)
    if len(df) == 0:
        raise ValueError("measurements: no rows")
    if not any(c in df.columns for c in METRIC_COLUMNS + EXTRA_METRICS):
        raise ValueError(f"request_throughput: missing, and no other metric column either; a measurement file "
                         f"needs at least one of: {', '.join(METRIC_COLUMNS + EXTRA_METRICS)}; or be a tool result "
                         f"file: {'; '.join(TOOL_FORMATS.values())}")
    names = set(Scenario.field_names())
    metric_cols = [c for c in METRIC_COLUMNS + EXTRA_METRICS if c in df.columns]
    scen_cols = [c for c in df.columns if c in names]
    ignored = [c for c in df.columns if c not in names and c not in metric_cols]
    out = pd.DataFrame(index=range(len(df)))
    for c in metric_cols:
        vals = []
        for i, v in enumerate(df[c].tolist()):
            x = _to_float(v)
            if x is None or (math.isfinite(x) and x < 0):
                raise ValueError(f"{c}: row {i + 1}: invalid value {v!r}; allowed: a number >= 0 or empty")
            vals.append(x)
        out[c] = vals
    for c in scen_cols:
        vals = []
        for i, v in enumerate(df[c].tolist()):
            try:
                vals.append(coerce(c, v))
            except ValueError as e:
                raise ValueError(f"{c}: row {i + 1}: {str(e).split(': ', 1)[1]}") from None
        out[c] = pd.Series(vals, dtype=object)
    for i in range(len(out)):
        if not any(math.isfinite(out.at[i, c]) for c in metric_cols):
            raise ValueError(f"{metric_cols[0]}: row {i + 1}: no metric value in this row; allowed: a number >= 0 in "
                             f"at least one of {', '.join(metric_cols)}")
    out.attrs.update(metric_columns=metric_cols, scenario_columns=scen_cols, ignored_columns=ignored)
    if base is not None:
        for i in range(len(out)):
            row_scenario(base, out, i)
    return out


def _to_float(v) -> float | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return math.nan
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        v = v.strip()
        if v == "":
            return math.nan
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if not math.isinf(x) else None


def _read_table(src) -> pd.DataFrame:
    if isinstance(src, pd.DataFrame):
        return src.reset_index(drop=True)
    if isinstance(src, (list, dict)):
        return pd.DataFrame(src if isinstance(src, list) else [src])
    text = None
    if isinstance(src, str) and ("\n" in src or src.lstrip().startswith(("{", "["))):
        text = src
    else:
        p = Path(src)
        if not p.is_file():
            raise ValueError(f"data: no such file {str(src)!r}")
        text = p.read_text()
    s = text.lstrip()
    try:
        if s.startswith("["):
            return pd.DataFrame(json.loads(s))
        if s.startswith("{"):
            lines = [ln for ln in s.splitlines() if ln.strip()]
            try:
                return pd.DataFrame([json.loads(s)])
            except json.JSONDecodeError:
                return pd.DataFrame([json.loads(ln) for ln in lines])
    except (json.JSONDecodeError, ValueError) as e:
        raise ValueError(f"data: not valid JSON ({clip(str(e))})") from None
    except RecursionError:
        raise ValueError("data: JSON nested too deeply; allowed: at most a few hundred levels") from None
    try:
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except Exception as e:  # pandas raises many types for malformed CSV
        raise ValueError(f"data: not a readable CSV ({e})") from None


def row_scenario(base: Scenario, data: pd.DataFrame, i: int) -> Scenario:
    """``base`` with row ``i``'s scenario columns applied, validated."""
    cols = data.attrs.get("scenario_columns", [])
    over = {c: data[c].iloc[i] for c in cols}
    try:
        return base.replace(**over).validate()
    except ValueError as e:
        raise ValueError(f"row {i + 1}: {e}") from None
