"""TTFT decomposition under sync loads: time queued behind other requests' load stalls is adapter-load
wait (docs/model.md 7), and the PCIe link's busy time is measured."""
import numpy as np
import pytest

from engine import Scenario, simulate
from engine.costs import load_seconds

# Two closed-loop clients, one request at a time, a fresh adapter almost every request (1,000 uniform
# adapters, room for one): every step is [load stall L][prefill P], and the other client's request is
# queued through all of it.
TWO_CLIENTS = dict(
    gpu="a100-80gb", model="llama-2-7b", service_mode="fixed", max_batch_size=1, output_tokens=1,
    prompt_tokens=100, prefill_ms_per_token=0.05, step_overhead_ms=0.0, num_adapters=1000, popularity="zipf",
    zipf_s=0.0, adapter_rank=16, vram_budget_gb=32 / 1024, gpu_mem_util=0.9, reserve_gb=1.0, load_mode="sync",
    strategy="naive", arrival_process="closed", concurrency=2, pcie_gbps=2.0, load_latency_ms=0.5,
    duration_s=30.0, warmup_s=0.0, drain_s=5.0, host_warm=True, seed=4,
)


def test_queued_stall_is_load_wait_closed_loop_oracle():
    r = simulate(Scenario(**TWO_CLIENTS))
    q = r.requests[r.requests.completed]
    L = load_seconds(32 * 2**20, 2.0, 0.5) * 1e3  # one adapter's load, ms
    P = 100 * 0.05                                 # prefill of one step, ms
    loaded = q[q.loaded]
    assert len(loaded) > 0.95 * len(q)
    # its own step's stall: exactly L when its adapter was loaded
    own = (loaded.load_wait_ms - loaded.load_wait_queued_ms).to_numpy()
    np.testing.assert_allclose(own, L, rtol=1e-9)
    # every step is waited out by exactly one queued request: sum of queued stalls = sum of stalls
    stalls_ms = r.summary["loads_total"] * L
    assert q.load_wait_queued_ms.sum() == pytest.approx(stalls_ms, rel=0.02)
    # queueing is what is left: waiting for the other request's prefill, P (no stall booked as queueing)
    steady = q.iloc[5:-5]
    both_loaded = steady[steady.loaded & (steady.load_wait_queued_ms > 0)]
    np.testing.assert_allclose(both_loaded.queue_ms, P, atol=1e-6)
    np.testing.assert_allclose(both_loaded.load_wait_queued_ms, L, rtol=1e-9)
    # parts still add up to TTFT
    np.testing.assert_allclose(q.queue_ms + q.load_wait_ms + q.prefill_ms + q.frontend_ms, q.ttft_ms, atol=1e-6)


def test_pcie_busy_fills_what_compute_leaves_in_a_saturated_sync_server():
    r = simulate(Scenario(**TWO_CLIENTS))
    s = r.summary
    # always a request waiting: the GPU computes or stalls on the link, never idles
    assert s["gpu_busy_frac"] + s["pcie_busy_frac"] == pytest.approx(1.0, abs=0.01)
    assert 0.1 < s["pcie_busy_frac"] < 0.9
    ts = r.timeseries
    assert ts.pcie_busy_frac.between(0, 1 + 1e-9).all()
    window = ts[(ts.t_s >= 1.0) & (ts.t_s < 29.0)]
    assert window.pcie_busy_frac.mean() == pytest.approx(s["pcie_busy_frac"], abs=0.02)


def test_fast_link_and_async_loads_book_nothing_as_queued_stall():
    # the fastest link the range allows (1,000 GB/s): 32 MiB take 0.034 ms, and with two clients a load
    # queues behind at most one other
    fast = simulate(Scenario(**{**TWO_CLIENTS, "pcie_gbps": 1000.0, "load_latency_ms": 0.0}))
    assert fast.requests.load_wait_queued_ms.max() < 0.07
    slora = simulate(Scenario.from_preset("default", strategy="slora", duration_s=60.0, pcie_gbps=2.0))
    assert (slora.requests.load_wait_queued_ms.fillna(0) == 0).all()
    assert slora.summary["pcie_busy_frac"] > 0
