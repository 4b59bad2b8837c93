"""Service-level objectives on summary metrics, and the stability rule.

An SLO is a dict ``{metric: threshold}`` over summary metrics of one run
(``engine.simulate(...).summary``).  Latency-like metrics are upper bounds,
attainment-like metrics are lower bounds (``SLO_METRICS``).  A run *meets* the
SLO when every metric is finite and on the right side of its threshold, and the
server is *stable* (``engine.metrics.stable``): it keeps up with the offered
load instead of building a queue that the measurement window hides.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ..metrics import stable

#: Summary metrics an SLO may bound: metric -> "max" (at most) or "min" (at least).
SLO_METRICS: dict[str, str] = {
    "ttft_mean_ms": "max",
    "ttft_p50_ms": "max",
    "ttft_p90_ms": "max",
    "ttft_p99_ms": "max",
    "tpot_mean_ms": "max",
    "tpot_p90_ms": "max",
    "tpot_p99_ms": "max",
    "e2e_mean_ms": "max",
    "e2e_p99_ms": "max",
    "queue_mean_ms": "max",
    "load_wait_mean_ms": "max",
    "swap_rate": "max",
    "slo_attainment": "min",
    "hit_rate_gpu": "min",
}
def check_slo(slo) -> dict[str, float]:
    """Validate an SLO dict; return it with float thresholds. Raises ValueError naming the bad item."""
    if not isinstance(slo, Mapping) or not slo:
        raise ValueError(f"slo: invalid value {slo!r}; allowed: a non-empty dict of metric -> threshold, "
                         f"metrics: {', '.join(SLO_METRICS)}")
    out = {}
    for k, v in slo.items():
        if k not in SLO_METRICS:
            raise ValueError(f"slo: unknown metric {k!r}; allowed: {', '.join(SLO_METRICS)}")
        if isinstance(v, bool):
            raise ValueError(f"slo: {k}: invalid threshold {v!r}; allowed: a finite number")
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"slo: {k}: invalid threshold {v!r}; allowed: a finite number") from None
        if not math.isfinite(x) or x < 0:
            raise ValueError(f"slo: {k}: invalid threshold {v!r}; allowed: a finite number >= 0")
        if k in ("slo_attainment", "hit_rate_gpu", "swap_rate") and x > 1:
            raise ValueError(f"slo: {k}: invalid threshold {v!r}; allowed: a fraction in [0, 1]")
        out[k] = x
    return out


def meets(summary: Mapping, slo: Mapping[str, float]) -> bool:
    """Every SLO metric of the run is finite and within its threshold."""
    for k, thr in slo.items():
        v = float(summary.get(k, math.nan))
        if not math.isfinite(v):
            return False
        if (SLO_METRICS[k] == "max" and v > thr) or (SLO_METRICS[k] == "min" and v < thr):
            return False
    return True


def verdict(summary: Mapping, slo: Mapping[str, float], arrival_rate_rps: float, window_s: float
            ) -> tuple[bool, str]:
    """(passes, why not): stability first, then the first SLO metric that breaks."""
    if not stable(summary, window_s):
        return False, (f"unstable at {arrival_rate_rps:.4g} req/s (throughput "
                       f"{summary.get('throughput_req_s', math.nan):.4g} req/s, "
                       f"{summary.get('not_completed', 0)} of {summary.get('requests', 0)} requests not completed)")
    for k, thr in slo.items():
        v = float(summary.get(k, math.nan))
        sign = "<=" if SLO_METRICS[k] == "max" else ">="
        if not meets({k: v}, {k: thr}):
            return False, f"{k} = {v:.4g} (SLO {sign} {thr:.4g})"
    return True, ""
