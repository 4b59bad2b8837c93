"""Analytic oracles: the engine against closed-form results."""
import numpy as np
import pytest
from legacy import legacy_preset
from scipy.optimize import brentq

from engine import Scenario, simulate
from engine.policies import hot_set_pins
from engine.workload import popularity

# A scenario where the GPU serves one request at a time with a fixed service time.
SERIAL = dict(
    gpu="a100-80gb", model="llama-2-7b", service_mode="fixed", max_batch_size=1, output_tokens=1,
    prompt_tokens=100, prefill_ms_per_token=0.01, step_overhead_ms=0.0, lora_ms_per_adapter=0.0,
    load_latency_ms=0.0, num_adapters=1, adapter_rank=16, vram_budget_gb=1.0, gpu_mem_util=0.9,
    reserve_gb=1.0, load_mode="sync", strategy="naive", drain_s=600.0,
)


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_md1_queueing_delay_matches_pollaczek_khinchine(rho):
    """One adapter, no swaps, batch 1, one output token, fixed service: M/D/1."""
    S = 100 * 0.01e-3  # service time, s
    lam = rho / S
    waits = []
    for seed in range(4):
        sc = Scenario(**SERIAL, arrival_rate_rps=lam, duration_s=150.0, warmup_s=5.0, seed=seed)
        r = simulate(sc)
        req = r.requests[(r.requests.arrival_s >= 5.0) & (r.requests.arrival_s < 150.0)]
        assert req.completed.all()
        assert np.allclose(req.prefill_ms, S * 1e3)
        waits.append(req.queue_ms.to_numpy())
    w = np.concatenate(waits).mean()
    pk = rho * S / (2 * (1 - rho)) * 1e3
    assert abs(w - pk) / pk < 0.03, (w, pk)


def che_hit_rate(p: np.ndarray, c: int) -> float:
    """Che's approximation for an LRU cache of c items under the independent reference model."""
    T = brentq(lambda T: np.sum(1 - np.exp(-p * T)) - c, 1e-9, 1e9)
    return float(np.sum(p * (1 - np.exp(-p * T))))


@pytest.mark.parametrize("zipf_s", [0.8, 1.2])
def test_naive_lru_hit_rate_matches_che(zipf_s):
    """naive + batch 1 = LRU over the arrival-order reference stream."""
    c = 20
    sc = Scenario(**{**SERIAL, "num_adapters": 200, "vram_budget_gb": 4.0}, max_loras=c, zipf_s=zipf_s,
                  arrival_rate_rps=200.0, duration_s=400.0, warmup_s=20.0, seed=3)
    r = simulate(sc)
    got = r.summary["hit_rate_gpu"]
    want = che_hit_rate(popularity(sc), c)
    assert abs(got - want) < 0.01, (got, want)


def test_hot_set_without_spare_slot_hits_pinned_mass():
    """Pinned top-k plus one swap slot: hit = pinned mass + repeats in the swap slot."""
    size_gib = 32 / 1024  # llama-2-7b rank 16 qkvo = 32 MiB
    k = 20
    sc = Scenario(**{**SERIAL, "num_adapters": 300, "vram_budget_gb": (k + 1) * size_gib,
                     "strategy": "hot_set"}, zipf_s=1.0, arrival_rate_rps=200.0, duration_s=300.0,
                  warmup_s=5.0, seed=1)
    pins = hot_set_pins(sc)
    assert len(pins) == k and pins == list(range(k))
    p = popularity(sc)
    m_h = p[:k].sum()
    rest = p[k:]
    want = m_h + np.sum(rest ** 2) / (1 - m_h)
    r = simulate(sc)
    n = r.summary["requests"]
    got = r.summary["hit_rate_gpu"]
    se = np.sqrt(want * (1 - want) / n)
    assert abs(got - want) < 4 * se, (got, want, se)


def test_littles_law_on_timeseries():
    """Integral of requests in system over time equals the sum of their sojourn times."""
    sc = legacy_preset("default", duration_s=60.0, warmup_s=5.0, strategy="batch")
    r = simulate(sc)
    assert r.requests.completed.all()
    ts = r.timeseries
    bucket = ts.t_s.iloc[1] - ts.t_s.iloc[0]
    area = (ts.in_system * bucket).sum()
    sojourn = r.requests.e2e_ms.sum() / 1e3
    assert area == pytest.approx(sojourn, rel=1e-6)
    # L = lambda W over the whole run
    T = r.summary["end_s"]
    lam = len(r.requests) / T
    assert area / T == pytest.approx(lam * r.requests.e2e_ms.mean() / 1e3, rel=1e-6)


def test_load_time_is_bytes_over_bandwidth_plus_latency():
    """A lone request for a cold adapter waits exactly latency + bytes / PCIe (sync)."""
    sc = Scenario(**{**SERIAL, "num_adapters": 2, "load_latency_ms": 2.0}, arrival_rate_rps=0.5,
                  duration_s=20.0, warmup_s=0.0, pcie_gbps=10.0, seed=5)
    r = simulate(sc)
    first = r.requests.iloc[0]
    assert first.loaded
    nbytes = 32 * 1024 ** 2
    assert first.load_wait_ms == pytest.approx(2.0 + nbytes / 10e9 * 1e3, rel=1e-9)
    assert first.ttft_ms == pytest.approx(first.load_wait_ms + 1.0, rel=1e-9)


def test_roofline_decode_step_is_weight_bound():
    """One decoding request on the roofline: step = weights / (HBM x bw_eff) + overhead."""
    sc = legacy_preset("default", arrival_rate_rps=0.2, duration_s=30.0, warmup_s=0.0,
                              prompt_tokens=16, output_tokens=11, length_dist="fixed",
                              step_overhead_ms=0.0, lora_ms_per_adapter=0.0, seed=2)
    r = simulate(sc)
    g, m = sc.gpu_spec, sc.model_spec
    from engine import presets
    w = presets.weight_bytes(m)
    kv = presets.kv_bytes_per_token(m)
    adapter = presets.adapter_bytes(m, sc.adapter_rank)
    req = r.requests.iloc[0]
    # decode steps with context prompt + g, g = 1..10
    bw = g.hbm_gbps * 1e9 * sc.bw_eff
    # a step's bytes: weights + KV read (context 16 + k) + KV written (1 token) + the adapter
    steps = [(w + kv * (16 + k + 1) + adapter) / bw for k in range(1, 11)]
    assert req.tpot_ms == pytest.approx(np.mean(steps) * 1e3, rel=1e-6)


def test_token_throughput_counts_tokens_generated_in_the_window():
    """Stable open loop: tokens/s = arrival rate x output tokens (within sampling error);
    closed loop, batch fits every client, fixed service: tokens/s = clients / decode step."""
    sc = legacy_preset("default", duration_s=300.0, warmup_s=20.0, arrival_rate_rps=10.0)
    r = simulate(sc)
    lam = r.summary["requests"] / (sc.duration_s - sc.warmup_s)
    assert r.summary["throughput_tok_s"] == pytest.approx(lam * sc.output_tokens, rel=0.02)
    c = Scenario(**{**SERIAL, "max_batch_size": 8, "output_tokens": 200, "decode_ms_per_token": 10.0},
                 arrival_process="closed", concurrency=8, duration_s=60.0, warmup_s=10.0)
    rc = simulate(c)
    # the clients move in lockstep: one step prefills all 8 prompts (8 x 100 tokens x 0.01 ms) and
    # emits their first tokens, then 199 decode steps of 10 ms emit the rest; 1,600 tokens per round
    per_round_s = 8 * 100 * 0.01e-3 + 199 * 0.010
    assert rc.summary["throughput_tok_s"] == pytest.approx(8 * 200 / per_round_s, rel=0.01)


def test_lora_step_costs_per_adapter_slot_and_token_slot():
    """Fixed service, one request: each step adds lora_ms_per_adapter x distinct adapters
    + lora_ms_per_slot x max_loras + lora_us_per_token_slot x tokens x max_loras."""
    sc = Scenario(**{**SERIAL, "output_tokens": 11, "decode_ms_per_token": 10.0, "lora_ms_per_adapter": 0.3,
                     "strategy": "vllm"}, lora_ms_per_slot=0.5, lora_us_per_token_slot=2.0, max_loras=4,
                  arrival_rate_rps=0.2, duration_s=5.0, warmup_s=0.0, seed=3)
    r = simulate(sc)
    req = r.requests.iloc[0]
    slots, extra = 4, 0.3 + 0.5 * 4
    prefill_ms = 100 * 0.01 + extra + 2e-3 * 100 * slots
    decode_ms = 10.0 + extra + 2e-3 * 1 * slots
    assert req.ttft_ms == pytest.approx(req.load_wait_ms + prefill_ms, rel=1e-9)
    assert req.tpot_ms == pytest.approx(decode_ms, rel=1e-9)


def test_frontend_latency_adds_to_ttft_and_e2e_only():
    """frontend_ms is outside the engine: the schedule is unchanged, every request's TTFT and
    end-to-end latency grow by exactly frontend_ms, TPOT and throughput do not move."""
    sc = legacy_preset("default", duration_s=30.0, warmup_s=0.0, seed=4)
    a, b = simulate(sc), simulate(sc.replace(frontend_ms=7.5))
    np.testing.assert_allclose(b.requests.ttft_ms - a.requests.ttft_ms, 7.5, atol=1e-9)
    np.testing.assert_allclose(b.requests.e2e_ms - a.requests.e2e_ms, 7.5, atol=1e-9)
    np.testing.assert_array_equal(b.requests.tpot_ms, a.requests.tpot_ms)
    assert b.summary["throughput_tok_s"] == a.summary["throughput_tok_s"]
    assert b.summary["frontend_mean_ms"] == 7.5 and a.summary["frontend_mean_ms"] == 0.0


def test_max_in_system_one_is_an_erlang_loss_system():
    """One request at a time and max_in_system = 1: an M/G/1/1 loss system, whose blocking
    probability is insensitive to the service distribution: B = rho / (1 + rho)."""
    sc = Scenario(**SERIAL, arrival_rate_rps=50.0, duration_s=2000.0, warmup_s=0.0, seed=7, max_in_system=1)
    r = simulate(sc)
    service_s = 100 * 0.01e-3  # one 100-token prefill step at 0.01 ms/token: the whole service
    rho = sc.arrival_rate_rps * service_s
    n = len(r.requests)
    blocked = r.requests.dropped.mean()
    se = np.sqrt(rho / (1 + rho) * (1 - rho / (1 + rho)) / n)
    assert blocked == pytest.approx(rho / (1 + rho), abs=4 * se)
    assert r.summary["dropped_total"] == int(r.requests.dropped.sum()) > 0
    assert not r.requests[r.requests.dropped].completed.any()
    assert r.requests[~r.requests.dropped].completed.all()
    # without the cap nothing is refused
    assert not simulate(sc.replace(max_in_system=0)).requests.dropped.any()
