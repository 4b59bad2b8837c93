"""Prefix caching keyed by adapter (Scenario.prefix_tokens / prefix_share / prefix_caching; docs/model.md 3.7).

A share of the requests start with one shared system prompt; the server (vllm, sglang: on by default) caches the
full KV blocks of that prefix once per adapter (the adapter is part of the cache key), so a request of an adapter
whose entry is ready skips those tokens of its prefill and shares the blocks.  Checked: off by default and bit for
bit the engine without the fields; with caching off the only change is the longer prompts; the hit rate's closed
form with one adapter and with N adapters once warm; its fall with N under tight KV; conservation of prompt
tokens; no sharing across adapters (two adapters alternating, and a pure-Python reference of the cache rules on
random sequential workloads); one-line errors; TTFT falling when the cache hits and the cached KV in the time
series.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from frames import frames_equal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Scenario, simulate
from engine import loop as L
from engine import sim as S
from engine.workload import Workload, generate

#: One GPU, fixed service (every step: prefill_ms_per_token x its prefill tokens + decode_ms_per_token if anything
#: decodes + step_overhead_ms): cheap and exact.  llama-2-7b: 0.5 MiB of KV per token, 8 MiB per 16-token block.
FIXED = dict(gpu="a100-80gb", model="llama-2-7b", service_mode="fixed", prefill_ms_per_token=0.05,
             decode_ms_per_token=8.5, step_overhead_ms=0.5, num_adapters=1, adapter_rank=16, vram_budget_gb=1.0,
             gpu_mem_util=0.9, reserve_gb=1.0, strategy="vllm", max_batch_size=32, duration_s=60.0, warmup_s=0.0,
             drain_s=600.0, prompt_tokens=200, output_tokens=16, arrival_rate_rps=2.0, max_batched_tokens=4096)
P = 1000                  # the shared prefix
BT = 16
C = (P // BT) * BT        # its tokens in full blocks: what a hit serves from the cache (992)
BLOCK_GB = 8 / 1024       # one KV block of llama-2-7b, GiB


def _sc(**kw) -> Scenario:
    return Scenario(**{**FIXED, **kw}).validate()


def _frames_equal(a, b, skip=()) -> None:
    frames_equal(a, b, skip)


def _with_prefix(sc: Scenario) -> np.ndarray:
    """Each request's prefix tokens (0 or P), as the workload draws them."""
    return generate(sc).prefix


# ------------------------------------------------------------------ (a) off by default, bit for bit
@pytest.mark.parametrize("preset,strategy", [("default", "vllm"), ("default", "sglang"), ("default", "slora"),
                                             ("vllm-llama31-8b", "vllm")])
def test_defaults_change_nothing(preset, strategy):
    """The new fields at their defaults (and "auto", which turns caching on for vllm and sglang, with no prefix in
    the workload) run the loop exactly as before; prefix_tokens with share 0 is no prefix."""
    sc = Scenario.from_preset(preset, strategy=strategy, duration_s=10.0, warmup_s=1.0)
    a = simulate(sc)
    for kw in (dict(prefix_caching="on" if strategy != "slora" else "off"), dict(prefix_tokens=500),
               dict(prefix_share=0.7), dict(prefix_caching="off")):
        _frames_equal(a, simulate(sc.replace(**kw)), skip=("prefix_caching_on",))
    s = a.summary
    assert s["prefix_cache_hit_rate"] == 0.0 and s["prefix_cached_tokens"] == 0
    assert s["prefix_cached_tokens_total"] == 0 and s["prefix_cache_hits_total"] == 0
    assert (a.requests.cached_tokens == 0).all() and (a.timeseries.prefix_cached_blocks == 0).all()
    assert a.timeseries.columns[-1] == "prefix_cached_blocks"


@pytest.mark.parametrize("strategy", ["vllm", "sglang", "naive"])
def test_caching_off_only_lengthens_the_prompts(strategy):
    """With a prefix and caching off, the run is the run without a prefix on the same stream with each prompt
    prefix_tokens longer where it has the prefix (drawn on its own stream: no other draw moves)."""
    sc = _sc(strategy=strategy, num_adapters=8, prefix_tokens=P, prefix_share=0.6, prefix_caching="off")
    plain = sc.replace(prefix_tokens=0, prefix_share=0.0)
    wl0, wl = generate(plain), generate(sc)
    for f in ("arrival_s", "adapter", "output_tokens"):
        np.testing.assert_array_equal(getattr(wl0, f), getattr(wl, f))
    np.testing.assert_array_equal(wl.prompt_tokens, wl0.prompt_tokens + wl.prefix)
    assert set(np.unique(wl.prefix)) == {0, P} and abs((wl.prefix > 0).mean() - 0.6) < 0.1
    a = simulate(sc)
    b = simulate(plain, trace=Workload(wl.arrival_s, wl.adapter, wl.prompt_tokens, wl.output_tokens))
    _frames_equal(a, b)
    assert a.summary["prefix_cache_hit_rate"] == 0.0


# ------------------------------------------------------------------ (b) one adapter: the closed form
def test_one_adapter_hit_rate_closed_form():
    """One adapter, ample memory, low load: the first prefix request computes the prefix; every prefix request
    admitted after its prefill ended hits and is served C = floor(P / 16) x 16 tokens.  Measured from after that
    point: hit rate = share' x C / (prompt + share' x P), share' the realised share (exact)."""
    sc = _sc(prefix_tokens=P, prefix_share=0.5, duration_s=120.0)
    r = simulate(sc)
    q = r.requests
    pfx = _with_prefix(sc)[: len(q)] > 0
    first = np.flatnonzero(pfx)[0]
    t_ready = q.arrival_s[first] + (q.ttft_ms[first] - q.frontend_ms[first]) / 1e3
    hit = pfx & (q.admit_s.to_numpy() >= t_ready)
    np.testing.assert_array_equal(q.cached_tokens.to_numpy(), np.where(hit, C, 0))
    assert (hit == pfx).sum() >= len(q) - 2  # low load: at most the first (and one that came during it) miss
    warm = sc.replace(warmup_s=math.ceil(t_ready + 1.0))
    s = simulate(warm).summary
    m = (q.arrival_s >= warm.warmup_s) & (q.arrival_s < warm.duration_s) & q.completed
    share = pfx[m.to_numpy()].mean()
    assert s["prefix_cache_hit_rate"] == pytest.approx(share * C / (FIXED["prompt_tokens"] + share * P), rel=1e-12)
    assert s["prefix_cached_tokens"] + s["prefix_computed_tokens"] == q.prompt_tokens[m].sum()
    assert s["prefix_cache_hits_total"] == hit.sum() and s["prefix_cache_evictions"] == 0


# ------------------------------------------------------------------ (c) N adapters
def _misses(q: pd.DataFrame, pfx: np.ndarray) -> np.ndarray:
    """Prefix requests admitted before their adapter's entry was ready (the end of the first prefill of a prefix
    request of that adapter): the only misses with ample memory."""
    first_s = (q.arrival_s + (q.ttft_ms - q.frontend_ms) / 1e3).to_numpy()
    ready = pd.Series(np.where(pfx, first_s, np.inf)).groupby(q.adapter.to_numpy()).transform("min").to_numpy()
    return pfx & (q.admit_s.to_numpy() < ready)


@pytest.mark.parametrize("n", [1, 4, 16])
def test_n_adapters_ample_memory_same_hit_rate_once_warm(n):
    """Uniform popularity, a global prefix, ample memory: each adapter's first prefix request misses (the cache is
    keyed by adapter), every later one hits.  Counting those first misses exactly, the hit rate is the same
    closed form for every N (the prefix flags are drawn on their own stream: the same for every N)."""
    sc = _sc(num_adapters=n, zipf_s=0.0, prefix_tokens=P, prefix_share=0.8, duration_s=60.0)
    r = simulate(sc)
    q = r.requests
    pfx = _with_prefix(sc)[: len(q)] > 0
    miss = _misses(q, pfx)
    np.testing.assert_array_equal(q.cached_tokens.to_numpy(), np.where(pfx & ~miss, C, 0))
    seen = len(np.unique(q.adapter[pfx]))
    assert seen <= miss.sum() <= seen + 2  # one per adapter (and rarely one arriving during that first prefill)
    s = r.summary
    assert s["prefix_cache_hits_total"] == (pfx & ~miss).sum() and s["prefix_cache_evictions"] == 0
    share = pfx.mean()
    closed = share * C / (FIXED["prompt_tokens"] + share * P)
    prompt = q.prompt_tokens.sum()
    assert s["prefix_cache_hit_rate"] == pytest.approx(closed - miss.sum() * C / prompt, rel=1e-12)


def test_tight_kv_hit_rate_falls_with_adapters():
    """Under tight KV (room for a few cached entries next to the running requests), more adapters share the same
    prefix traffic over more entries: evictions rise and the hit rate falls."""
    rates, evictions = [], []
    for n in (1, 4, 32):
        s = simulate(_sc(num_adapters=n, zipf_s=0.0, prefix_tokens=P, prefix_share=0.8, arrival_rate_rps=6.0,
                         kv_cache_gb=300 * BLOCK_GB)).summary
        rates.append(s["prefix_cache_hit_rate"])
        evictions.append(s["prefix_cache_evictions"])
    assert rates[0] > rates[1] > rates[2] and evictions[0] <= evictions[1] < evictions[2]
    assert rates[0] > 0.6 and rates[2] < 0.3


# ------------------------------------------------------------------ (d) conservation
@pytest.mark.parametrize("kw", [dict(), dict(kv_reservation="on_demand", kv_cache_gb=200 * BLOCK_GB,
                                             arrival_rate_rps=8.0, num_adapters=6, output_tokens=200),
                                dict(strategy="sglang", num_adapters=5, arrival_rate_rps=5.0)])
def test_conservation_of_prompt_tokens(kw):
    """Tokens served from the cache + tokens computed = prompt tokens + tokens recomputed after preemption (a
    readmitted request recomputes its prompt and generated tokens: those count on both sides, every admission)."""
    sc = _sc(prefix_tokens=P, prefix_share=0.7, duration_s=30.0, **kw)
    arr = S._run(sc, generate(sc))
    R_i, S_i = arr["R_i"], arr["S_i"]
    started = ~np.isnan(arr["R_f"][L.RF_FIRST])
    # every request finished its prefill; preempted ones recomputed prompt + generated tokens (once each time)
    assert started.all() and (R_i[L.RI_STATUS] == L.ST_DONE).all()
    pf_total = int(S_i[L.SI_PFTOKENS]) + int(S_i[L.SI_PCTOK])
    prompt = int(R_i[L.RI_PROMPT].sum())
    if S_i[L.SI_PREEMPTS] == 0:
        assert pf_total == prompt
    else:
        assert "on_demand" in kw.values() and pf_total > prompt
    s = simulate(sc).summary
    assert s["prefix_cached_tokens"] + s["prefix_computed_tokens"] == simulate(sc).requests.prompt_tokens[
        simulate(sc).requests.completed].sum()
    # the KV left at the end: exactly the cached entries (requests all gone)
    assert S_i[L.SI_KV_BLOCKS] == S_i[L.SI_PCBLOCKS] == (arr["A_i"][L.AI_PCBLOCKS]).sum()
    assert S_i[L.SI_PCIDLE] == S_i[L.SI_PCBLOCKS] and (arr["A_i"][L.AI_PCUSERS] == 0).all()


# ------------------------------------------------------------------ (e) never shared across adapters
def _seq_trace(adapters, prefixed, gap=10.0, drawn=200, out=4) -> Workload:
    """Requests far apart (each finishes before the next arrives)."""
    n = len(adapters)
    pfx = np.where(np.asarray(prefixed, bool), P, 0).astype(np.int64)
    return Workload(np.arange(n) * gap, np.asarray(adapters, np.int64), drawn + pfx, np.full(n, out, np.int64),
                    prefix=pfx)


def test_two_adapters_alternating_never_share():
    """A, B, A, B, ...: each adapter's first request misses (B's first finds only A's entry: a different key), every
    later one hits its own adapter's entry; the cache holds one entry per adapter seen, never more."""
    sc = _sc(num_adapters=2, prefix_tokens=P, prefix_share=1.0, duration_s=100.0, prompt_tokens=200)
    wl = _seq_trace([0, 1] * 5, [True] * 10)
    arr = S._run(sc, wl)
    r = simulate(sc, trace=wl)
    np.testing.assert_array_equal(r.requests.cached_tokens.to_numpy(), [0, 0] + [C] * 8)
    assert arr["S_i"][L.SI_PCMADE] == 2 and (arr["A_i"][L.AI_PCBLOCKS] == P // BT).all()
    assert r.timeseries.prefix_cached_blocks.max() <= 2 * (P // BT) + 1e-9
    # and a hit's prefill is the drawn prompt plus the prefix tokens beyond its full blocks
    assert r.summary["prefill_tokens_total"] == 2 * (200 + P) + 8 * (200 + P - C)


def _reference(adapters, prefixed, cap, drawn, out):
    """The cache rules on sequential requests (each alone in the server): full reservation of ceil((prompt +
    output) / 16) blocks, less the shared ones on a hit; before a request is refused, idle entries are evicted
    least recently used (never the one it hits); a miss's prefix becomes its adapter's entry when its prefill ends.
    Returns each request's cached tokens and the evictions."""
    entries: dict[int, int] = {}  # adapter -> last use
    cached, evictions = [], 0
    b = P // BT
    for i, (a, p) in enumerate(zip(adapters, prefixed)):
        total = -(-(drawn + (P if p else 0) + out) // BT)
        hit = p and a in entries
        need = total - (b if hit else 0)
        while b * len(entries) + need > cap:
            victim = min((e for e in entries if not (hit and e == a)), key=lambda e: (entries[e], e))
            del entries[victim]
            evictions += 1
        cached.append(C if hit else 0)
        if p:
            entries[a] = i
    return cached, evictions


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 4), st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=12),
       st.integers(0, 4), st.sampled_from([50, 300]))
def test_matches_a_reference_of_the_cache_rules(n_adapters, reqs, spare_entries, drawn):
    """Random sequential workloads (adapters, which requests have the prefix) against ``_reference``, with KV for
    one longest request plus ``spare_entries`` cached entries."""
    adapters = [a % n_adapters for a, _ in reqs]
    prefixed = [p for _, p in reqs]
    out = 4
    longest = -(-(drawn + P + out) // BT)
    cap = longest + spare_entries * (P // BT)
    sc = _sc(num_adapters=n_adapters, prefix_tokens=P, prefix_share=0.5, duration_s=10.0 * len(reqs) + 1,
             prompt_tokens=drawn, output_tokens=out, kv_cache_gb=cap * BLOCK_GB + 1e-9)
    wl = _seq_trace(adapters, prefixed, drawn=drawn, out=out)
    arr = S._run(sc, wl)
    assert arr["ip"][L.IP_KV_BLOCKS] == cap
    cached, evictions = _reference(adapters, prefixed, cap, drawn, out)
    np.testing.assert_array_equal(arr["R_i"][L.RI_PCHIT], cached)
    assert arr["S_i"][L.SI_PCEVICTS] == evictions
    assert arr["S_i"][L.SI_PCMADE] - evictions == (arr["A_i"][L.AI_PCBLOCKS] > 0).sum() <= len(set(adapters))
    assert arr["S_i"][L.SI_REJECTS] == 0


# ------------------------------------------------------------------ (f) one-line errors
@pytest.mark.parametrize("kw,field,needle", [
    (dict(prefix_tokens=-1), "prefix_tokens", "an integer in [0, 131072]"),
    (dict(prefix_share=1.5), "prefix_share", "[0, 1]"),
    (dict(prefix_share=-0.1), "prefix_share", "[0, 1]"),
    (dict(prefix_caching="maybe"), "prefix_caching", "auto, on, off"),
    (dict(prefix_tokens=5000, prefix_share=0.5, strategy="sglang", max_batched_tokens=4096), "prefix_tokens",
     "at most 3896"),
    (dict(prefix_tokens=P, prefix_share=0.5, kv_cache_gb=60 * BLOCK_GB), "prefix_tokens", "fit in the KV cache"),
    (dict(prefix_tokens=P, prefix_share=0.5, kv_allocator="contiguous"), "prefix_caching", "'contiguous'"),
    (dict(prefix_caching="on", kv_allocator="contiguous"), "prefix_caching", "'contiguous'"),
    (dict(prefix_tokens=P, prefix_share=0.5, strategy="slora", prefix_caching="on"), "prefix_caching", "'off' with memory_mode 'unified'"),
    (dict(prefix_tokens=P, prefix_share=0.5, num_replicas=2), "prefix_caching", "num_replicas 2"),
    (dict(prefix_tokens=P, prefix_share=0.5, trace="azure-conv-2023"), "prefix_tokens", "as recorded"),
])
def test_invalid_inputs_are_one_line_errors(kw, field, needle):
    with pytest.raises(ValueError) as e:
        _sc(**kw)
    msg = str(e.value)
    assert msg.startswith(f"{field}: invalid value") and needle in msg and "\n" not in msg and "allowed" in msg


def test_uploaded_trace_without_prefixes_is_refused():
    sc = _sc(prefix_tokens=P, prefix_share=0.5)
    wl = _seq_trace([0], [True])
    with pytest.raises(ValueError, match=r"^prefix_tokens: invalid value 1000 with an uploaded trace; allowed: 0"):
        simulate(sc, trace=Workload(wl.arrival_s, wl.adapter, wl.prompt_tokens, wl.output_tokens))
    with pytest.raises(ValueError, match=r"^trace: invalid prefix; allowed"):
        simulate(sc, trace=Workload(wl.arrival_s, wl.adapter, wl.prompt_tokens, wl.output_tokens, prefix=wl.prefix + 1))


# ------------------------------------------------------------------ (g) what users see
@pytest.mark.parametrize("strategy", ["vllm", "sglang"])
def test_ttft_falls_when_the_cache_hits_and_the_cache_holds_kv(strategy):
    sc = _sc(strategy=strategy, num_adapters=4, zipf_s=0.0, prefix_tokens=P, prefix_share=0.8, warmup_s=5.0)
    on, off = simulate(sc), simulate(sc.replace(prefix_caching="off"))
    assert on.summary["prefix_caching_on"] and not off.summary["prefix_caching_on"]
    assert on.summary["prefix_cache_hit_rate"] > 0.6
    assert on.summary["ttft_p50_ms"] < 0.5 * off.summary["ttft_p50_ms"]
    assert on.summary["prefill_tokens_total"] < off.summary["prefill_tokens_total"]
    ts = on.timeseries
    late = ts[(ts.t_s > 10.0) & (ts.t_s < 59.0)]  # (the last bucket ends with the run)
    np.testing.assert_allclose(late.prefix_cached_blocks, 4 * (P // BT), rtol=1e-9)  # four adapters' entries, once warm
    # the cached KV is in the KV in use (idle entries stay resident until KV is needed)
    kv_blocks = late.kv_bytes_used / (BT * 512 * 1024)
    assert (kv_blocks >= late.prefix_cached_blocks - 1e-6).all()
    assert (off.timeseries.prefix_cached_blocks == 0).all()
