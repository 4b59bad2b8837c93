"""The limits every input meets (issue 25): each float field's range, the work one run may ask for, how
much of a value an error quotes, and a JSON reader for text from users. Model layer: no engine imports."""
from __future__ import annotations

import json
from typing import Any

#: Every float field's physically meaningful range: name -> (low, low excluded, high, why). ``validate``
#: refuses a value outside (and any non-number, NaN or infinity) on every construction path. Latencies
#: and times are bounded by an hour, bandwidths by 1 TB/s, memory by 4 TiB; efficiencies and the memory
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
