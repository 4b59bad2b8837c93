"""Chunked prefill (vLLM V1 scheduling; Scenario.chunked_prefill, docs/model.md 6.4).

Each step has a token budget (max_batched_tokens): the running requests are scheduled first (one token per
decoding request, the rest of an unfinished prefill), then waiting requests' prompts in FCFS order fill what
is left; a prompt longer than that is split and continues in later steps; its first token comes at the end
of the step that processes its last chunk.  Checked against hand-computed schedules (the step cost from
engine/costs.py), the unchunked loop where the budget never binds, and invariants on random scenarios.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from frames import frames_equal
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from legacy import legacy_preset
from test_engine_invariants import _check_invariants
from test_engine_invariants import scenarios as invariant_scenarios
from test_metrics_reference import check as check_summary_reference

from engine import ENUMS, STRATEGIES, Scenario, simulate
from engine import loop as L
from engine import sim as S
from engine.costs import load_seconds, step_seconds
from engine.workload import Workload

#: One GPU, one adapter, fixed service: every step's time is prefill_ms_per_token x its prefill tokens
#: + decode_ms_per_token if anything decodes + step_overhead_ms.
FIXED = dict(gpu="a100-80gb", model="llama-2-7b", service_mode="fixed", prefill_ms_per_token=0.05,
             decode_ms_per_token=8.5, step_overhead_ms=0.5, num_adapters=1, adapter_rank=16, vram_budget_gb=1.0,
             gpu_mem_util=0.9, reserve_gb=1.0, strategy="vllm", max_batch_size=32, duration_s=10.0, warmup_s=0.0,
             drain_s=600.0)
#: A loaded vLLM scenario with long, varied prompts against a small budget: chunking matters here.
LONG = dict(gpu="a100-80gb", model="llama-2-7b", vram_budget_gb=1.0, gpu_mem_util=0.9, reserve_gb=2.0,
            num_adapters=20, max_loras=4, zipf_s=1.0, prompt_tokens=1500, output_tokens=60,
            length_dist="lognormal", length_spread=0.8, arrival_rate_rps=8.0, duration_s=20.0, warmup_s=2.0,
            strategy="vllm", max_batched_tokens=512, max_batch_size=32, kv_reservation="on_demand")


def _trace(arrivals, prompts, outputs) -> Workload:
    n = len(arrivals)
    return Workload(np.asarray(arrivals, float), np.zeros(n, np.int64), np.asarray(prompts, np.int64),
                    np.asarray(outputs, np.int64))


def _frames_equal(a: S.SimResult, b: S.SimResult, skip=("chunked_prefill_on",)) -> None:
    frames_equal(a, b, skip)


def _first_s(req: pd.DataFrame) -> np.ndarray:
    return (req.arrival_s + (req.ttft_ms - req.frontend_ms) / 1e3).to_numpy()


# ---------------------------------------------------------------------------------------------- settings
def test_auto_is_on_for_vllm_only():
    for name, pol in STRATEGIES.items():
        sc = Scenario(strategy=name)
        assert sc.chunked_prefill == "auto"
        assert sc.chunked_prefill_on() == (name == "vllm") == pol.chunked_prefill
        assert Scenario(strategy=name, chunked_prefill="on").chunked_prefill_on()
        assert not Scenario(strategy=name, chunked_prefill="off").chunked_prefill_on()
    assert ENUMS["chunked_prefill"] == ("auto", "on", "off")
    r = simulate(legacy_preset("default", strategy="vllm", duration_s=20.0, warmup_s=2.0))
    assert r.summary["chunked_prefill_on"] is True
    assert simulate(legacy_preset("default", duration_s=20.0, warmup_s=2.0)).summary["chunked_prefill_on"] is False


@pytest.mark.parametrize("value", ["yes", "ON", "", "true"])
def test_invalid_value_is_refused_naming_field_value_and_allowed(value):
    with pytest.raises(ValueError) as e:
        Scenario(chunked_prefill=value).validate()
    assert str(e.value) == f"chunked_prefill: invalid value {value!r}; allowed: auto, on, off"
    with pytest.raises(ValueError, match=r"^chunked_prefill: invalid value 1; allowed: a string"):
        Scenario.from_dict({"chunked_prefill": 1})


def test_budget_below_the_batch_is_refused_with_chunking_only():
    sc = legacy_preset("default", strategy="vllm", max_batch_size=64, max_batched_tokens=48, prompt_tokens=40)
    with pytest.raises(ValueError) as e:
        sc.validate()
    msg = str(e.value)
    assert msg.startswith("max_batched_tokens: invalid value 48; allowed: at least max_batch_size (64)"), msg
    assert "chunked_prefill 'off'" in msg
    sc.replace(chunked_prefill="off").validate()
    sc.replace(strategy="naive").validate()  # auto: off
    with pytest.raises(ValueError, match=r"^max_batched_tokens: invalid value 48"):
        sc.replace(strategy="naive", chunked_prefill="on").validate()


def test_a_prompt_longer_than_the_budget_needs_chunking():
    sc = legacy_preset("default", strategy="vllm", prompt_tokens=3000, max_batched_tokens=1024)
    sc.validate()  # auto: on for vllm, the prompt is split
    for off in (sc.replace(chunked_prefill="off"), sc.replace(strategy="naive")):
        with pytest.raises(ValueError, match=r"^prompt_tokens: invalid value 3000 .*or chunked_prefill 'on'"):
            off.validate()
    # a trace's long prompts too
    tr = legacy_preset("azure-code-2023", max_batched_tokens=4096)
    with pytest.raises(ValueError, match=r"^max_batched_tokens: invalid value 4096"):
        tr.validate()
    tr.replace(chunked_prefill="on").validate()


# ------------------------------------------------------------------------------------- analytic oracles
@pytest.mark.parametrize("service_mode", ["fixed", "roofline"])
@pytest.mark.parametrize("prompt,budget", [(5000, 1024), (4096, 1024), (700, 1024), (3001, 1000)])
def test_one_long_prompt_ttft_is_the_sum_of_its_chunk_steps(service_mode, prompt, budget):
    """One request, prompt P, budget B: ceil(P / B) steps of min(B, rest) tokens each, after the adapter's load;
    step k costs step_seconds(P = c_k, attention pairs c_k^2 + 2 c_k (tokens before it), nothing decoding)."""
    sc = Scenario(**{**FIXED, "service_mode": service_mode, "max_batched_tokens": budget}).validate()
    wl = _trace([0.0], [prompt], [3])
    r = simulate(sc, trace=wl)
    arr = S._build(sc, wl)
    fp, ab = arr["fp"], float(arr["A_i"][L.AI_BYTES, 0])
    steps, done = [], 0
    while done < prompt:
        c = min(budget, prompt - done)
        steps.append(step_seconds(service_mode == "fixed", float(c), float(c * c + 2 * c * done), 0.0, 0.0, c * ab,
                                  ab, 1.0, float(sc.max_loras), fp[L.FP_PARAMS], fp[L.FP_WEIGHT_BYTES],
                                  fp[L.FP_FLOPS], fp[L.FP_BW], fp[L.FP_ATTN], fp[L.FP_KV_TOK], fp[L.FP_OVERHEAD],
                                  fp[L.FP_LORA_ADAPTER], fp[L.FP_LORA_SLOT], fp[L.FP_PREFILL_TOK],
                                  fp[L.FP_DECODE_STEP], fp[L.FP_LORA_TOKSLOT]))
        done += c
    assert len(steps) == math.ceil(prompt / budget)
    load = load_seconds(sc.adapter_sizes()[0], sc.pcie_gbps, sc.load_latency_ms)  # sync: the first step waits
    q = r.requests.iloc[0]
    assert q.ttft_ms == pytest.approx((load + sum(steps)) * 1e3, rel=1e-12)
    assert q.prefill_ms == pytest.approx(sum(steps) * 1e3, rel=1e-12)
    assert q.load_wait_ms == pytest.approx(load * 1e3, rel=1e-12) and abs(q.queue_ms) < 1e-9
    s = r.summary
    assert s["prefill_tokens_total"] == prompt and s["prefill_chunks_total"] == len(steps)
    assert s["peak_step_tokens"] == min(prompt, budget)
    assert s["steps"] == len(steps) + 2  # then two decode steps
    if prompt <= budget:  # one chunk: the unchunked schedule
        _frames_equal(r, simulate(sc.replace(chunked_prefill="off"), trace=wl))
    else:  # more chunks, more steps: TTFT grows by what the extra steps cost (the same FLOPs in all: overheads,
        # and a small chunk's memory-bound step)
        one = simulate(sc.replace(chunked_prefill="off", max_batched_tokens=prompt), trace=wl)
        assert one.summary["prefill_chunks_total"] == 1
        extra = (len(steps) - 1) * sc.step_overhead_ms
        if service_mode == "fixed":
            assert q.ttft_ms == pytest.approx(one.requests.ttft_ms.iloc[0] + extra, rel=1e-12)
        else:
            assert q.ttft_ms >= one.requests.ttft_ms.iloc[0] + extra - 1e-6


def test_decodes_take_their_tokens_first_and_the_prompt_fills_the_rest():
    """Request A (prompt 100, 20 tokens) decodes while B (prompt 1000) arrives: with a budget of 256, every step
    gives A its decode token and B 255 prompt tokens (255, 255, 255, 235), B's first token ends the 4th of them;
    hand-computed fixed-service times (ms): A's prefill 5.5, then 21.75 x 3 and 20.75, then 9.0 per step."""
    sc = Scenario(**{**FIXED, "max_batched_tokens": 256}).validate()
    wl = _trace([0.0, 1e-4], [100, 1000], [20, 5])
    r = simulate(sc, trace=wl)
    a, b = r.requests.iloc[0], r.requests.iloc[1]
    load = load_seconds(sc.adapter_sizes()[0], sc.pcie_gbps, sc.load_latency_ms)
    t1 = load + 5.5e-3  # A's prefill step (after the load stall)
    b_first = t1 + (3 * 21.75 + 20.75) * 1e-3
    assert _first_s(r.requests)[0] == pytest.approx(t1, rel=1e-12)
    assert _first_s(r.requests)[1] == pytest.approx(b_first, rel=1e-12)
    # B queued behind A's prefill (5.5 ms) and waited out the load stall while queued (load wait)
    assert b.queue_ms == pytest.approx(5.5, abs=1e-9)
    assert b.load_wait_ms == pytest.approx((load - 1e-4) * 1e3, rel=1e-9)
    assert b.prefill_ms == pytest.approx(3 * 21.75 + 20.75, rel=1e-12)
    # A: 19 more tokens, 4 of them in B's chunk steps, then 15 steps where both decode
    assert a.finish_s == pytest.approx(b_first + 15 * 9.0e-3, rel=1e-12)
    assert a.tpot_ms == pytest.approx((3 * 21.75 + 20.75 + 15 * 9.0) / 19, rel=1e-12)
    assert b.finish_s == pytest.approx(b_first + 4 * 9.0e-3, rel=1e-12)
    s = r.summary
    assert s["prefill_chunks_total"] == 1 + 4 and s["prefill_tokens_total"] == 1100
    assert s["peak_step_tokens"] == 256
    # unchunked (the same budget counts prefill only): B's whole prompt in one step, A's token waits for it
    off = simulate(sc.replace(chunked_prefill="off", max_batched_tokens=1000), trace=wl)
    assert _first_s(off.requests)[1] == pytest.approx(t1 + (1000 * 0.05 + 9.0) * 1e-3, rel=1e-12)
    assert off.summary["peak_step_tokens"] == 1001


# ----------------------------------------------------------------------- no chunking: today's schedule
@pytest.mark.parametrize("strategy", ["vllm", "naive", "slora", "batch"])
@pytest.mark.parametrize("kv", ["full", "on_demand"])
def test_a_budget_that_never_binds_gives_the_unchunked_schedule_exactly(strategy, kv):
    """With max_batched_tokens >= max_batch_size x (longest prompt + longest output) no step can reach the budget
    (not even recomputing preempted requests), so chunked and unchunked runs are the same, array for array.
    (max prompt + max batch is not enough: several prompts admitted in one step would be split.)"""
    sc = Scenario(**{**LONG, "strategy": strategy, "kv_reservation": kv, "prompt_tokens": 300,
                     "length_spread": 0.5, "max_batch_size": 8, "arrival_rate_rps": 30.0, "output_tokens": 40})
    budget = sc.max_batch_size * sc.max_request_tokens()
    on = sc.replace(chunked_prefill="on", max_batched_tokens=budget)
    off = sc.replace(chunked_prefill="off", max_batched_tokens=budget)
    try:
        on.validate()
    except ValueError:
        pytest.skip("configuration not valid for this strategy")
    a, b = simulate(on), simulate(off)
    assert a.summary["chunked_prefill_on"] and not b.summary["chunked_prefill_on"]
    assert a.summary["completed"] > 200 and a.summary["peak_step_tokens"] > sc.max_batch_size
    _frames_equal(a, b)
    if kv == "on_demand" and strategy == "vllm":
        # a budget of the longest prompt binds: chunking changes this schedule (the equality above is not vacuous)
        tight = sc.length_bounds(sc.prompt_tokens)[1]
        assert not simulate(on.replace(max_batched_tokens=tight)).requests.equals(
            simulate(off.replace(max_batched_tokens=tight)).requests)


@pytest.mark.parametrize("preset,kw", [
    ("default", dict(duration_s=40.0, warmup_s=4.0)),
    ("default", dict(duration_s=30.0, warmup_s=3.0, memory_mode="unified", kv_allocator="contiguous", load_mode="async",
                     arrival_rate_rps=30.0)),
    ("seed1-rtx3090", dict(duration_s=15.0, host_warm=False)),
    ("vllm-llama31-8b", dict(duration_s=60.0, warmup_s=5.0)),
])
def test_every_other_strategy_is_unchanged_by_auto(preset, kw):
    """auto is off for every strategy but vllm: the same arrays as chunked_prefill 'off'."""
    for name in STRATEGIES:
        if name == "vllm":
            continue
        sc = legacy_preset(preset, strategy=name, **kw)
        try:
            sc.validate()
        except ValueError:
            continue
        _frames_equal(simulate(sc), simulate(sc.replace(chunked_prefill="off")), skip=())


def test_chunking_changes_the_vllm_schedule_where_the_budget_binds():
    """The vLLM calibration preset (budget 2,048, up to 2,048 running requests, lognormal prompts): decodes eat the
    budget, prompts are split; the unchunked run prefills whole prompts next to any number of decodes."""
    sc = legacy_preset("vllm-llama31-8b", duration_s=60.0, warmup_s=5.0, arrival_rate_rps=15.0)
    on, off = simulate(sc), simulate(sc.replace(chunked_prefill="off"))
    assert on.summary["chunked_prefill_on"] and not off.summary["chunked_prefill_on"]
    assert on.summary["peak_step_tokens"] <= sc.max_batched_tokens < off.summary["peak_step_tokens"]
    assert on.summary["prefill_chunks_total"] > off.summary["prefill_chunks_total"]
    assert not on.requests.ttft_ms.equals(off.requests.ttft_ms)


# ---------------------------------------------------------------------------------- counters, breakdown
def test_prefill_tokens_are_conserved_across_chunks():
    r = simulate(Scenario(**LONG))
    s, q = r.summary, r.requests
    assert s["preemptions"] == 0 and q.completed.all()
    assert s["prefill_tokens_total"] == int(q.prompt_tokens.sum())
    # every prompt takes at least ceil(P / B) chunks; many take more (they start next to other work)
    need = int(np.ceil(q.prompt_tokens / LONG["max_batched_tokens"]).sum())
    assert need < s["prefill_chunks_total"]
    assert s["peak_step_tokens"] == LONG["max_batched_tokens"]
    check_summary_reference(r.scenario)  # every summary metric from the request table (tokens: emitted ones)


def test_the_ttft_breakdown_adds_up_when_prefills_span_steps():
    for kw in (dict(), dict(service_mode="fixed"), dict(max_loras=2, num_adapters=60, pcie_gbps=2.0)):
        r = simulate(Scenario(**{**LONG, **kw}))
        q = r.requests[r.requests.completed]
        np.testing.assert_allclose(q.queue_ms + q.load_wait_ms + q.prefill_ms + q.frontend_ms, q.ttft_ms, atol=1e-6)
        assert (q.queue_ms >= -1e-6).all() and (q.load_wait_ms >= -1e-9).all() and (q.prefill_ms > 0).all()
        # queueing ends at the first admission, less the load stalls waited out queued (docs/model.md 7)
        np.testing.assert_allclose(q.queue_ms, (q.admit_s - q.arrival_s) * 1e3 - q.load_wait_queued_ms, atol=1e-6)


def test_stalls_during_a_chunked_prefill_are_load_wait():
    """Sync loads stall the step; a prompt still being prefilled waits the stall out before its first token:
    adapter-load wait (like a queued request's), so its prefill time is its chunk steps only.  A (adapter 0,
    prompt 1000) takes the whole budget of 256 for three steps; B (adapter 1, prompt 50, arriving during A's
    first chunk) starts with the 24 tokens A's last chunk leaves, and its load stalls that step."""
    sc = Scenario(**{**FIXED, "num_adapters": 2, "max_loras": 2, "max_batched_tokens": 256,
                     "pcie_gbps": 2.0}).validate()
    wl = Workload(np.array([0.0, 0.02]), np.array([0, 1]), np.array([1000, 50]), np.array([2, 2]))
    r = simulate(sc, trace=wl)
    q = r.requests
    np.testing.assert_allclose(q.queue_ms + q.load_wait_ms + q.prefill_ms, q.ttft_ms, atol=1e-9)
    load = load_seconds(sc.adapter_sizes()[0], sc.pcie_gbps, sc.load_latency_ms)
    chunk = 256 * 0.05e-3 + 0.5e-3  # a full-budget prefill step, nothing decoding
    assert load < 0.02 < load + chunk  # B arrives after A's load, during A's first chunk
    t3 = load + 3 * chunk  # A's 4th chunk (232 tokens) and B's first (24) start here, after B's load
    a, b = q.iloc[0], q.iloc[1]
    assert _first_s(q)[0] == pytest.approx(t3 + load + chunk, rel=1e-12)
    assert a.load_wait_ms == pytest.approx(2 * load * 1e3, rel=1e-12)  # its own load and B's, mid-prefill
    assert a.prefill_ms == pytest.approx(4 * chunk * 1e3, rel=1e-12) and abs(a.queue_ms) < 1e-9
    # B: queued until t3, its own load, then its two chunks (24; 26 next to A's decode token)
    b_step = 26 * 0.05e-3 + 8.5e-3 + 0.5e-3
    assert _first_s(q)[1] == pytest.approx(t3 + load + chunk + b_step, rel=1e-12)
    assert b.queue_ms == pytest.approx((t3 - 0.02) * 1e3, rel=1e-9)
    assert b.load_wait_ms == pytest.approx(load * 1e3, rel=1e-12)
    assert b.prefill_ms == pytest.approx((chunk + b_step) * 1e3, rel=1e-12)
    s = r.summary
    assert s["prefill_tokens_total"] == 1050 and s["prefill_chunks_total"] == 4 + 2 and s["loads_total"] == 2


def test_a_prompt_preempted_mid_prefill_restarts_from_scratch():
    """On-demand KV with room for exactly A's 7 blocks and B's 126: A (prompt 100, 300 tokens) decodes, B (prompt
    2000) takes 255 tokens a step next to A's decode; when A's 12th token needs an 8th block, B (the last admitted)
    is preempted after 6 chunks (1530 tokens), waits for A to finish, and prefills its 2000 tokens again alone
    (7 x 256 + 208).  Hand-computed fixed-service times (ms): decode 9.0, decode + 255 prompt tokens 21.75,
    256 prompt tokens 13.3, 208 prompt tokens 10.9."""
    sc = Scenario(**{**FIXED, "max_batched_tokens": 256, "kv_reservation": "on_demand",
                     "kv_cache_gb": 133 * 8 / 1024}).validate()  # 133 blocks of 16 tokens x 0.5 MiB
    wl = _trace([0.0, 0.05], [100, 2000], [300, 2])
    r = simulate(sc, trace=wl)
    s, q = r.summary, r.requests
    assert s["kv_blocks_total"] == 133 and s["preemptions"] == 1 and list(q.preemptions) == [0, 1]
    assert s["prefill_tokens_total"] == 100 + 6 * 255 + 2000 and s["prefill_chunks_total"] == 1 + 6 + 8
    assert s["peak_step_tokens"] == 256
    load = load_seconds(sc.adapter_sizes()[0], sc.pcie_gbps, sc.load_latency_ms)
    t1 = load + 5.5e-3                      # A's first token
    b_admit = t1 + 5 * 9.0e-3               # the first iteration after B's arrival (A has 6 tokens)
    a_finish = b_admit + 6 * 21.75e-3 + 288 * 9.0e-3
    b_first = a_finish + (7 * 13.3 + 10.9) * 1e-3
    a, b = q.iloc[0], q.iloc[1]
    assert a.finish_s == pytest.approx(a_finish, rel=1e-12)
    assert b.admit_s == pytest.approx(b_admit, rel=1e-12)
    assert _first_s(q)[1] == pytest.approx(b_first, rel=1e-12)
    # its TTFT parts: queued until its first admission; the rest (chunks, back in the queue, the re-prefill) is
    # prefill time, as vLLM's own prefill-time metric counts it (first scheduling to first token)
    assert b.queue_ms == pytest.approx((b_admit - 0.05) * 1e3, rel=1e-9) and b.load_wait_ms == 0.0
    assert b.prefill_ms == pytest.approx((b_first - b_admit) * 1e3, rel=1e-9)
    assert b.finish_s == pytest.approx(b_first + 9.0e-3, rel=1e-12)


# ---------------------------------------------------------------------------------------- invariants
@st.composite
def chunked_scenarios(draw):
    sc = draw(invariant_scenarios())
    mb = sc.max_batch_size
    sc = sc.replace(chunked_prefill="on", max_batched_tokens=draw(st.integers(mb, mb + 400)),
                    prompt_tokens=draw(st.integers(1, 1200)), step_overhead_ms=draw(st.sampled_from([0.5, 2.0])))
    if sc.max_vram_budget_gb() < sc.vram_budget_gb:
        sc = sc.replace(vram_budget_gb=max(sc.max_adapter_bytes() / 2**30 * 1.01, sc.max_vram_budget_gb() * 0.9))
    try:
        return sc.validate()
    except ValueError:
        assume(False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunked_scenarios())
def test_chunked_invariants_on_random_scenarios(sc):
    r = simulate(sc)
    _check_invariants(r)  # the engine's invariants (breakdown, memory, evictions, loads)
    s, q = r.summary, r.requests
    B = sc.max_batched_tokens
    # no step schedules more tokens (prefill chunks + decodes) than the budget
    assert s["peak_step_tokens"] <= B
    first = q[q.ttft_ms.notna()]
    started = q.admit_s.notna()
    # prefill tokens conserved: every first-token request's prompt is prefilled (recomputations come on top;
    # a prefill cut off by the horizon counts what it did)
    assert s["prefill_tokens_total"] >= first.prompt_tokens.sum()
    pieces = int(np.ceil(first.prompt_tokens / B).sum())
    assert s["prefill_chunks_total"] >= pieces
    if s["preemptions"] == 0 and not (started & q.ttft_ms.isna()).any():
        assert s["prefill_tokens_total"] == first.prompt_tokens.sum()
    # no first token before the last chunk: a request's ceil(P / B) chunk steps (disjoint, each at least the step
    # overhead, and in fixed service prefill_ms_per_token x its chunk) lie between its admission and first token
    once = first[first.preemptions == 0]
    span = (_first_s(once) - once.admit_s.to_numpy()) * 1e3
    low = np.ceil(once.prompt_tokens.to_numpy() / B) * sc.step_overhead_ms
    if sc.service_mode == "fixed":
        low = low + once.prompt_tokens.to_numpy() * sc.prefill_ms_per_token
    assert (span >= low - 1e-6).all()
    # the emitted-token count of the window stays within what the request table implies
    if not s["events_truncated"]:
        check_summary_reference(sc)
