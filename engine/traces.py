"""The shipped request traces (``presets.scenarios.TRACES``): reading and checking their files, the replay's
time-scale range.  ``engine.scenario`` re-exports these names."""
from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np

from .limits import short_repr
from .presets.scenarios import TRACES

#: Where the shipped traces (``presets.scenarios.TRACES``) live, and the allowed ``trace_time_scale``.
TRACE_DIR = Path(__file__).resolve().parent / "data" / "traces"
TRACE_FILE_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
TRACE_TIME_SCALE_RANGE = (0.05, 50.0)


def _check_time_scale(v: float) -> None:
    lo, hi = TRACE_TIME_SCALE_RANGE
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and lo <= v <= hi):
        raise ValueError(f"trace_time_scale: invalid value {short_repr(v)}; allowed: a number in [{lo:g}, {hi:g}] "
                         "(the trace's arrival times are divided by it: 2 replays it twice as fast)")


@functools.cache
def shipped_trace_file(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arrival times (s), prompt and output tokens of a shipped trace (``TRACES``), read once and cached
    (read-only arrays); ValueError naming ``trace`` for an unknown name or a damaged file."""
    if name not in TRACES:
        raise ValueError(f"trace: invalid value {short_repr(name)}; allowed: {', '.join(TRACES)}")
    path = TRACE_DIR / TRACES[name]["file"]
    try:
        with open(path, encoding="utf-8") as f:
            header = tuple(f.readline().strip().split(","))
            data = np.loadtxt(f, delimiter=",", dtype=np.float64, ndmin=2)
    except (OSError, ValueError) as e:
        raise ValueError(f"trace: {name!r}: cannot read {path} ({e})") from None
    arr, pt, ot = (data[:, i].copy() for i in range(3)) if data.shape[1] == 3 else (None, None, None)
    if (header != TRACE_FILE_COLUMNS or arr is None or len(arr) != TRACES[name]["rows"]
            or not (np.all(np.isfinite(arr)) and arr[0] >= 0 and np.all(np.diff(arr) >= 0))
            or np.any(pt < 1) or np.any(ot < 1) or np.any(pt != np.floor(pt)) or np.any(ot != np.floor(ot))):
        raise ValueError(f"trace: {name!r}: {path} is not the shipped file (columns {', '.join(TRACE_FILE_COLUMNS)}, "
                         f"{TRACES[name]['rows']} rows, non-decreasing arrivals >= 0, token counts >= 1)")
    out = (arr, pt.astype(np.int64), ot.astype(np.int64))
    for a in out:
        a.setflags(write=False)
    return out
