"""Scenario.cost_scale (the planner's error band, docs/model.md 10): every step's duration and the front-end
latency times the factor; 1.0 changes nothing. Oracles: a lone request's TTFT and TPOT scale exactly; the
fleet's shortcuts (their step-time lower bound scales too) still equal the step-by-step reference."""
from __future__ import annotations

import numpy as np
import pytest
from legacy import legacy_preset

from engine import loop as L
from engine import simulate
from tests.test_fast_paths import _fleet_equals_reference

#: one client, one adapter already resident, fixed per-token times: no queueing, no loads
LONE = dict(service_mode="fixed", arrival_process="closed", concurrency=1, num_adapters=1, strategy="naive",
            duration_s=30.0, warmup_s=1.0, prefill_ms_per_token=0.05, decode_ms_per_token=7.0, frontend_ms=3.0,
            step_overhead_ms=0.0)


@pytest.mark.parametrize("scale", [0.5, 2.0, 3.7])
def test_a_lone_request_scales_exactly(scale):
    base = legacy_preset("default", **LONE)
    r1 = simulate(base).requests
    r2 = simulate(base.replace(cost_scale=scale)).requests
    n = min(len(r1), len(r2), 50)
    assert n > 10
    # the first request waits for its adapter's copy over PCIe: a transfer, not a step, so not scaled
    np.testing.assert_array_equal(r2.load_wait_ms.to_numpy()[:n], r1.load_wait_ms.to_numpy()[:n])
    assert r1.load_wait_ms.iloc[0] > 0 and (r1.load_wait_ms.iloc[1:n] == 0).all()
    for col in ("ttft_ms", "tpot_ms", "frontend_ms", "prefill_ms"):
        np.testing.assert_allclose(r2[col].to_numpy()[1:n], scale * r1[col].to_numpy()[1:n], rtol=1e-9, err_msg=col)


def test_one_changes_nothing_bit_for_bit():
    sc = legacy_preset("default", duration_s=40.0, warmup_s=2.0)
    a, b = simulate(sc), simulate(sc.replace(cost_scale=1.0))
    assert a.requests.equals(b.requests) and a.summary == b.summary


def test_a_slower_cost_model_serves_less():
    sc = legacy_preset("default", duration_s=60.0, warmup_s=5.0, arrival_rate_rps=40.0)
    fast, slow = (simulate(sc.replace(cost_scale=s)).summary for s in (0.5, 2.0))
    assert slow["throughput_tok_s"] < fast["throughput_tok_s"] and slow["ttft_p50_ms"] > fast["ttft_p50_ms"]


@pytest.mark.parametrize("scale", [0.4, 2.5])
def test_fleet_shortcuts_hold_under_a_scaled_cost(monkeypatch, scale):
    sc = legacy_preset("default", num_replicas=3, router="least_loaded", arrival_rate_rps=24.0,
                              duration_s=40.0, warmup_s=4.0, cost_scale=scale)
    _fleet_equals_reference(monkeypatch, sc, L.IP_QUIET)


def test_the_range_and_the_calibration_status():
    from engine.calibration import calibration_status
    with pytest.raises(ValueError, match=r"^cost_scale: invalid value 0\.0"):
        legacy_preset("default", cost_scale=0.0)
    sc = legacy_preset("vllm-llama31-8b")
    assert calibration_status(sc).kind == "calibrated"
    assert calibration_status(sc.replace(cost_scale=1.2)).kind == "modified"
