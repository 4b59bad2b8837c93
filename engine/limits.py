"""The limits every input meets (issue 25): each float field's range, the work one run may ask for, how
much of a value an error quotes, and a JSON reader for text from users. Model layer: no engine imports."""
from __future__ import annotations

import json
from typing import Any

#: Every float field's physically meaningful range: name -> (low, low excluded, high, why). ``Scenario.check_fields``
#: refuses a value outside (and any non-number, NaN or infinity) on every construction path. Latencies
#: and times are bounded by an hour, disk bandwidth by 1 TB/s and PCIe by 1e6 GB/s (the KV study's "free loads"
#: ablation), memory by 4 TiB; efficiencies and the memory
#: share are fractions; the inter-arrival CV by what the Gamma generator draws in a bounded number of
#: chunks (S-LoRA's sweep went to 8).
FLOAT_RANGES: dict[str, tuple[float, bool, float, str]] = {
    "vram_budget_gb": (0.0, False, 4096.0, "GiB"),
    "gpu_mem_util": (0.0, True, 1.0, "a share of GPU memory"),
    "reserve_gb": (0.0, False, 4096.0, "GiB"),
    "pcie_gbps": (0.1, False, 1e6, "GB/s; 1e6 = loads practically free, as ablations use it"),
    "disk_gbps": (0.01, False, 1000.0, "GB/s"),
    "load_latency_ms": (0.0, False, 3.6e6, "ms, at most an hour"),
    "disk_latency_ms": (0.0, False, 3.6e6, "ms, at most an hour"),
    "batch_window_ms": (0.0, True, 3.6e6, "ms, at most an hour"),
    "max_wait_ms": (0.0, True, 3.6e6, "ms, at most an hour"),
    "kv_cache_gb": (0.0, False, 4096.0, "GiB; 0 = all memory left"),
    "zipf_s": (0.0, False, 10.0, ""),
    "power_alpha": (0.0, True, 100.0, ""),
    "arrival_rate_rps": (0.001, False, 100_000.0, "req/s"),
    "arrival_cv": (0.05, False, 10.0, "the Gamma generator's range"),
    "length_spread": (0.0, False, 10.0, ""),
    "duration_s": (0.01, False, 86400.0, "s, at most a day"),
    "warmup_s": (0.0, False, 86400.0, "s"),
    "drain_s": (0.0, False, 86400.0, "s, at most a day"),
    "slo_ttft_ms": (0.0, True, 3.6e6, "ms, at most an hour"),
    "prefill_ms_per_token": (0.0, True, 1000.0, "ms"),
    "decode_ms_per_token": (0.0, False, 60_000.0, "ms"),
    "compute_eff": (0.001, False, 1.0, "a share of peak FLOP/s"),
    "bw_eff": (0.001, False, 1.0, "a share of peak HBM bandwidth"),
    "step_overhead_ms": (0.0, False, 60_000.0, "ms per step"),
    "frontend_ms": (0.0, False, 3.6e6, "ms, at most an hour"),
    "lora_ms_per_adapter": (0.0, False, 1000.0, "ms"),
    "lora_ms_per_slot": (0.0, False, 1000.0, "ms"),
    "lora_us_per_token_slot": (0.0, False, 1000.0, "us"),
    "cost_scale": (0.1, False, 10.0, "a factor on every step's duration and the front-end latency"),
    "prefix_share": (0.0, False, 1.0, "a share of the requests"),
}
#: Expected requests x mean request (prompt + output tokens) one open-loop run may ask for: bounds the
#: steps a run takes (about one per output token of each request) whatever the rate and lengths.
MAX_RUN_TOKENS = 2e9
#: drain_s at most this many times duration_s (bounds the time series: 200 buckets per duration_s).
MAX_DRAIN_RATIO = 1000
#: Longest value representation an error message quotes (characters).
MAX_QUOTE = 200


def clip(text: str, limit: int = 2 * MAX_QUOTE) -> str:
    """``text`` cut to ``limit`` characters, the cut said: one-line messages stay short."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def short_repr(v: Any, limit: int = MAX_QUOTE) -> str:
    """``repr(v)``, cut to ``limit`` characters with the length said: error lines never echo a huge value."""
    r = repr(v) if not isinstance(v, (str, bytes)) or len(v) <= 4 * limit else repr(v[:limit])
    return r if len(r) <= limit else f"{r[:limit]}... ({len(r):,} characters)"


#: Largest JSON text any reader takes (bytes): far above every real scenario, config or result file.
MAX_JSON_BYTES = 64 * 1024 * 1024


def loads_json(text: str | bytes, what: str, **kw: Any) -> Any:
    """``json.loads`` for text from users: ValueError (naming ``what``) for invalid JSON, a text over
    ``MAX_JSON_BYTES`` and nesting deeper than the decoder's recursion limit, never another exception."""
    if len(text) > MAX_JSON_BYTES:
        raise ValueError(f"{what}: {len(text):,} bytes; allowed: at most {MAX_JSON_BYTES:,}")
    try:
        return json.loads(text, **kw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{what}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise ValueError(f"{what}: nested too deeply; allowed: JSON nested at most a few hundred levels") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{what}: not UTF-8 text ({e.reason})") from None


#: Characters a spreadsheet reads as the start of a formula (OWASP's CSV-injection rule): ``=``, ``+``, ``-``,
#: ``@``, a tab and a carriage return.
CSV_FORMULA_START = "=+-@\t\r"
_CSV_FORMULA_RE = r"[=+\-@\t\r]"


def _csv_text(v: Any) -> Any:
    """One text value made inert (``csv_safe``'s rule); anything else unchanged."""
    if not isinstance(v, str):
        return v
    quote = "'" if v[:1] in CSV_FORMULA_START and v else ""
    return quote + v.replace("\r\n", "\n").replace("\r", "\n")


def _csv_unsafe(v: Any) -> bool:
    return isinstance(v, str) and ((v[:1] in CSV_FORMULA_START and v != "") or "\r" in v)


def _csv_column(s: Any) -> Any:
    """A column with its text cells made inert, or None when nothing changes (numeric columns never change:
    only object, string and categorical columns hold text)."""
    import pandas as pd

    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        if not pd.api.types.is_object_dtype(dtype.categories) and not pd.api.types.is_string_dtype(dtype.categories):
            return None
        s = s.astype(object)
    elif not pd.api.types.is_object_dtype(dtype) and not pd.api.types.is_string_dtype(dtype):
        return None
    try:
        hit = s.str.match(_CSV_FORMULA_RE, na=False).fillna(False).astype(bool)
        cr = s.str.contains("\r", regex=False, na=False).fillna(False).astype(bool)
    except AttributeError:  # an object column without a single string (numbers, lists, None)
        return None
    if not hit.any() and not cr.any():
        return None
    if cr.any():
        s = s.where(~cr, s[cr].str.replace("\r\n", "\n", regex=False).str.replace("\r", "\n", regex=False))
    if hit.any():
        s = s.where(~hit, "'" + s[hit].astype(str))
    return s


def csv_safe(df: Any) -> Any:
    """``df`` ready for a CSV a spreadsheet may open: every TEXT cell (object, string or categorical columns,
    the column names, a text index) that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
    gets a leading single quote ``'`` (OWASP's CSV-injection rule), so Excel, LibreOffice or Sheets show it
    as text instead of evaluating it; NaN and None stay empty.  A carriage return inside text is written as
    a line feed: pandas quotes a cell holding a line feed but not one holding a bare CR, which spreadsheets
    (and pandas) read as the end of the row, so ``"a\\r=1+1"`` would start a new row with a formula.

    Numbers are never touched: a numeric column keeps its dtype and a negative number stays negative.  A
    number stored as text (``"-3"`` in an object column) is quoted like any other text: the writers of this
    repository keep numeric columns numeric, so a text cell here is text from a user or a label.

    A new frame; columns it changes are new, the others share their data with ``df`` (do not modify the
    result in place).  Vectorised (``Series.str`` on the text columns only): a 1M-row frame of numbers costs
    nothing, of text a fraction of a second."""
    import pandas as pd

    out = None
    for i in range(df.shape[1]):
        col = _csv_column(df.iloc[:, i])
        if col is not None:
            if out is None:
                out = df.copy(deep=False)
            out.isetitem(i, col)
    out = df.copy(deep=False) if out is None else out
    if any(_csv_unsafe(c) for c in out.columns):
        out.columns = [_csv_text(c) for c in out.columns]
    idx = out.index
    if (pd.api.types.is_object_dtype(idx.dtype) or pd.api.types.is_string_dtype(idx.dtype)) and any(
            _csv_unsafe(v) for v in idx):
        out.index = idx.map(_csv_text)
    return out


def write_csv(df: Any, path_or_buf: Any = None, **kw: Any) -> Any:
    """``df.to_csv(path_or_buf, **kw)`` through ``csv_safe``: every CSV this repository writes (the CLI's, the
    studies', the validation's and the dashboard's downloads) goes through it.  ``path_or_buf=None`` returns
    the text, as ``DataFrame.to_csv`` does."""
    return csv_safe(df).to_csv(path_or_buf, **kw)
