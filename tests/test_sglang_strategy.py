"""The ``sglang`` strategy: SGLang's LoRA admission rules (docs/model.md 6.5).

* (a) more adapters than ``max_loras`` (--max-loras-per-batch) slots: the passed-over requests wait for an
  adapter of the batch to drain, and the median TTFT jumps; with a slot per adapter it does not;
* (b) a plain-Python reference of the rules, written from SGLang's scheduler (not from engine/loop.py), against
  the jitted loop on random small workloads in fixed service mode: every request's admission, first-token and
  finish time, and whether it loaded its adapter, equal;
* (c) the one rule that differs from the ``vllm`` strategy (the adapter is checked before the token budget) on a
  workload built to show it;
* (d) the settings the strategy forces.

The generic invariants and the fast-path references pick the strategy up from ``STRATEGIES``.
"""
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import STRATEGIES, Scenario, simulate
from engine.sim import effective
from engine.workload import Workload

# The cliff: a Poisson stream spread evenly over the adapters (zipf_s 0), A100 80 GB, Llama-2-7B, roofline.
CLIFF = dict(strategy="sglang", gpu="a100-80gb", model="llama-2-7b", zipf_s=0.0, arrival_rate_rps=16.0,
             prompt_tokens=256, output_tokens=128, max_batch_size=64, vram_budget_gb=4.0, duration_s=40.0,
             warmup_s=5.0)


def _median_ttft(adapters: int, slots: int) -> float:
    return float(np.median([simulate(Scenario(**CLIFF, num_adapters=adapters, max_loras=slots, seed=s))
                            .summary["ttft_p50_ms"] for s in range(3)]))


def test_more_adapters_than_slots_makes_requests_wait():
    fit = _median_ttft(8, 8)       # every adapter has a slot
    over = _median_ttft(16, 8)     # 16 adapters on 8 slots
    wide = _median_ttft(16, 16)    # 16 on 16
    assert fit < 60.0 and wide < 60.0, (fit, wide)
    assert over > 4 * fit, (fit, over)
    assert wide < 1.2 * fit, (fit, wide)


def test_passed_over_requests_wait_for_a_batch_adapter_to_drain():
    """The waiting is queueing behind the slot cap, not load time: loads stay a small part of the TTFT."""
    r = simulate(Scenario(**CLIFF, num_adapters=16, max_loras=8, seed=0))
    req = r.requests[r.requests.completed]
    assert r.summary["loads_total"] > 16  # adapters did swap through the slots
    assert req.queue_ms.median() > 5 * req.load_wait_ms.median()


# ------------------------------------------------------------------------------------------------ reference
def reference(sc: Scenario, wl: Workload, kv_blocks: int) -> dict:
    """SGLang's admission (sglang/srt/managers/scheduler.py ``_get_new_batch_prefill_raw``, lora/lora_manager.py
    ``validate_lora_batch``, lora/mem_pool.py ``prepare_lora_batch``) on the simulator's step: FCFS over the
    waiting queue, at each request in this order:

    1. the pass's budget spent (no prompt token or no free KV block left): stop;
    2. its adapter neither in the batch (running and already admitted requests) nor able to join it (the
       batch holds ``max_loras`` distinct adapters): pass over (``continue``);
    3. the batch full (``max_batch_size``): stop;
    4. its prompt past the token budget (unless it is the first), or its KV (prompt + output, whole blocks)
       not free: stop;
    5. admit; an adapter not in the pool is loaded into a free slot, else into the slot of the least recently
       used adapter outside the batch; loads queue on the PCIe link and the step starts when they are done.

    Then one step of fixed cost: prompts prefill, every other running request decodes one token."""
    n = len(wl)
    arr, ad = wl.arrival_s, wl.adapter
    prompt, out = wl.prompt_tokens, wl.output_tokens
    blocks = -(-(prompt + out) // sc.kv_block_tokens)
    size = sc.adapter_sizes()
    lat, bps = sc.load_latency_ms / 1e3, sc.pcie_gbps * 1e9
    pf_s, dec_s, over = sc.prefill_ms_per_token / 1e3, sc.decode_ms_per_token / 1e3, sc.step_overhead_ms / 1e3
    horizon = sc.duration_s + sc.drain_s
    slots, max_tok, max_batch = sc.max_loras, sc.max_batched_tokens, sc.max_batch_size
    res = {k: np.full(n, math.nan) for k in ("admit", "first", "finish")}
    loaded = np.zeros(n, bool)
    gen = np.zeros(n, np.int64)
    waiting: list[int] = []
    running: list[int] = []
    pool: list[int] = []          # adapters in the GPU pool
    last: dict[int, int] = {}     # LRU recency: a tick at each admission and each finish
    uses = dict.fromkeys(range(sc.num_adapters), 0)
    ready: dict[int, float] = {}
    t, nxt, tick, kv_used, pcie_free = 0.0, 0, 0, 0, 0.0
    while True:
        while nxt < n and arr[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        if t > horizon:
            break
        batch = {int(ad[r]) for r in running}
        new: list[int] = []
        tokens = 0
        loads = 0
        for r in list(waiting):
            a = int(ad[r])
            if tokens >= max_tok or kv_used >= kv_blocks:
                break
            if a not in batch and len(batch) >= slots:
                continue
            if len(running) >= max_batch:
                break
            if (tokens > 0 and tokens + prompt[r] > max_tok) or kv_used + blocks[r] > kv_blocks:
                break
            if a not in pool:
                if len(pool) >= slots:
                    pool.remove(min((b for b in pool if uses[b] == 0), key=last.__getitem__))
                s = pcie_free if pcie_free > t else t
                ready[a] = pcie_free = s + lat + size[a] / bps
                pool.append(a)
                loads += 1
                loaded[r] = True
            waiting.remove(r)
            running.append(r)
            new.append(r)
            res["admit"][r] = t
            tokens += int(prompt[r])
            kv_used += int(blocks[r])
            uses[a] += 1
            tick += 1
            last[a] = tick
            batch.add(a)
        if not running:
            if nxt < n:
                t = float(arr[nxt])
                continue
            break
        start = t
        if loads:
            start = max([t] + [ready[int(ad[r])] for r in new])
        dt = pf_s * float(sum(int(prompt[r]) for r in new))
        if len(running) > len(new):
            dt += dec_s
        t_end = start + (dt + over)
        k = 0
        while k < len(running):  # the loop's order: a finished request's place takes the last one
            r = running[k]
            gen[r] += 1
            if gen[r] == 1:
                res["first"][r] = t_end
            if gen[r] >= out[r]:
                res["finish"][r] = t_end
                kv_used -= int(blocks[r])
                uses[int(ad[r])] -= 1
                tick += 1
                last[int(ad[r])] = tick
                running[k] = running[-1]
                running.pop()
                continue
            k += 1
        t = t_end
    return {**res, "loaded": loaded}


FIXED = dict(strategy="sglang", gpu="a100-80gb", model="llama-2-7b", service_mode="fixed", adapter_rank=16,
             vram_budget_gb=1.0, prefill_ms_per_token=0.055, decode_ms_per_token=8.5, step_overhead_ms=0.5,
             load_latency_ms=0.5, pcie_gbps=16.0, duration_s=10.0, warmup_s=0.0, drain_s=600.0)


@st.composite
def small_runs(draw):
    n = draw(st.integers(1, 40))
    n_ad = draw(st.integers(1, 6))
    # bursts: arrivals on a coarse grid, several at once, so that queues build up
    arr = np.sort(np.array(draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)), float) * 0.01)
    ad = np.array(draw(st.lists(st.integers(0, n_ad - 1), min_size=n, max_size=n)), np.int64)
    prompt = np.array(draw(st.lists(st.integers(1, 200), min_size=n, max_size=n)), np.int64)
    out = np.array(draw(st.lists(st.integers(1, 40), min_size=n, max_size=n)), np.int64)
    sc = Scenario(**FIXED, num_adapters=n_ad, max_loras=draw(st.integers(1, 4)),
                  max_batch_size=draw(st.integers(1, 8)), max_batched_tokens=draw(st.integers(200, 600)),
                  kv_cache_gb=draw(st.sampled_from([0.0, 0.125, 0.25, 0.5])))
    return sc, Workload(arr, ad, prompt, out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=small_runs())
def test_loop_equals_the_reference(run):
    sc, wl = run
    r = simulate(sc, trace=wl)
    req = r.requests
    assert req.completed.all()
    want = reference(sc, wl, r.summary["kv_blocks_total"])
    np.testing.assert_array_equal(req.admit_s.to_numpy(), want["admit"])
    np.testing.assert_array_equal(req.finish_s.to_numpy(), want["finish"])
    np.testing.assert_allclose(req.ttft_ms.to_numpy(), (want["first"] - wl.arrival_s) * 1e3, rtol=1e-12, atol=1e-9)
    np.testing.assert_array_equal(req.loaded.to_numpy(), want["loaded"])
    assert r.summary["loads_total"] == int(want["loaded"].sum())


# ------------------------------------------------------------------------------------------------ vs vllm
def test_adapter_checked_before_the_token_budget():
    """One slot, 300 prompt tokens per step.  After r0 (adapter 0) runs, r1 (adapter 0, 200 tokens), r2 (adapter
    1, 200 tokens: no slot while adapter 0 runs) and r3 (adapter 0, 50 tokens) wait.  SGLang passes r2 over at
    its adapter check and admits r3 with r1; the vllm strategy checks r2's tokens first (200 + 200 > 300),
    stops, and r3 starts a step later."""
    wl = Workload(np.array([0.0, 0.001, 0.001, 0.001]), np.array([0, 0, 1, 0]), np.array([200, 200, 200, 50]),
                  np.array([5, 5, 5, 5]))
    sc = Scenario(**FIXED, num_adapters=2, max_loras=1, max_batch_size=8, max_batched_tokens=300)
    sg = simulate(sc, trace=wl).requests
    vl = simulate(sc.replace(strategy="vllm", chunked_prefill="off"), trace=wl).requests
    assert sg.admit_s[3] == sg.admit_s[1] < sg.admit_s[2]
    assert vl.admit_s[1] < vl.admit_s[3] < vl.admit_s[2]
    for r in (sg, vl):
        assert r.admit_s[2] >= max(r.finish_s[[0, 1, 3]])  # adapter 1 waits until adapter 0 has drained


def test_forced_settings():
    pol = STRATEGIES["sglang"]
    assert pol.lora_first and not pol.chunked_prefill and not pol.prefetch and pol.role == "policy"
    sc = Scenario(strategy="sglang", load_mode="async", memory_mode="unified", max_loras=4)
    eff = effective(sc)
    assert (eff["load_mode"], eff["memory_mode"], eff["slots"]) == ("sync", "static", 4)
    assert not sc.chunked_prefill_on()
    assert all(not p.lora_first for name, p in STRATEGIES.items() if name != "sglang")


def test_same_as_vllm_when_no_request_is_passed_over_at_the_budget():
    """Equal prompt lengths: a slot-less request never meets a budget the next one would fit, so the
    strategies' one difference never shows and the runs are equal (vllm without its chunked prefill)."""
    sc = Scenario(**CLIFF, num_adapters=16, max_loras=8, seed=1)
    a = simulate(sc).requests
    b = simulate(sc.replace(strategy="vllm", chunked_prefill="off")).requests
    np.testing.assert_array_equal(a.admit_s.to_numpy(), b.admit_s.to_numpy())
    np.testing.assert_array_equal(a.finish_s.to_numpy(), b.finish_s.to_numpy())


def test_a_plan_comparing_sglang_prints_sglangs_line_from_sglangs_scheduling():
    """With strategy sglang in the grid, the SGLang command line rests on the sglang strategy (the pick's, or the
    best SGLang-scheduled configuration meeting the SLO), never on another strategy's simulation."""
    from engine.planner import Deployment, plan, plan_commands, server_commands
    res = plan(Deployment(num_adapters=16, max_loras=8, arrival_rate_rps=10.0), {"ttft_p99_ms": 1000},
               grid={"strategy": ["vllm", "sglang"]}, replications=1, probe_requests=600, band=None)
    assert res.best is not None
    vllm, sglang = plan_commands(res)
    assert vllm.text == server_commands(res.scenario(res.best["config"]), decided=res.grid)[0].text
    assert "Same rules as the simulation (strategy 'sglang'" in sglang.note
    if res.best["strategy"] != "sglang":
        assert sglang.note.startswith("From the best configuration simulated with SGLang's scheduling")
    res1 = plan(Deployment(num_adapters=16, max_loras=8, arrival_rate_rps=10.0), {"ttft_p99_ms": 1000},
                grid={"max_loras": [8]}, replications=1, probe_requests=600, band=None)
    assert "Same rules" not in plan_commands(res1)[1].note  # a vllm-only plan: SGLang's line says it is approximate
