"""Every summary metric of ``simulate(sc).summary`` recomputed from the per-request table by a plain
NumPy reference, written from the definitions of docs/model.md section 8 (not from engine/metrics.py).

Measurement window [warmup_s, duration_s); "in-window" requests arrived in it, "done" ones of them
completed.  Percentiles are by linear interpolation between closest ranks (written out below, not
``np.percentile``).  Metrics the per-request table cannot give exactly (tokens generated in the
window, busy time) are bounded by what the table and the time series imply.
"""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine import STRATEGIES, Scenario, presets, simulate


def percentile(x: np.ndarray, q: float) -> float:
    """Linear interpolation between the closest ranks: rank h = (n - 1) q / 100 of the sorted values."""
    if len(x) == 0:
        return math.nan
    s = sorted(float(v) for v in x)
    h = (len(s) - 1) * q / 100.0
    lo = math.floor(h)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (h - lo) * (s[hi] - s[lo])


def mean(x) -> float:
    x = list(x)
    return math.fsum(x) / len(x) if x else math.nan


def reference(sc: Scenario, req) -> dict:
    """docs/model.md 8, from the request table alone."""
    arrival = req["arrival_s"].to_numpy()
    completed = req["completed"].to_numpy(bool)
    dropped = req["dropped"].to_numpy(bool)
    loaded = req["loaded"].to_numpy(bool)
    tier = req["tier"].astype(str).to_numpy()
    out = req["output_tokens"].to_numpy()
    finish = req["finish_s"].to_numpy()
    ttft = req["ttft_ms"].to_numpy()
    fe = req["frontend_ms"].to_numpy()
    window = sc.duration_s - sc.warmup_s

    inwin = (arrival >= sc.warmup_s) & (arrival < sc.duration_s)
    done = inwin & completed
    served = inwin & ~dropped  # a refused request never got an adapter or a tier
    first = arrival + (ttft - fe) / 1e3  # first token time (engine side; ttft includes the frontend)
    multi = done & (out > 1)
    tpot = (finish[multi] - first[multi]) * 1e3 / (out[multi] - 1)
    e2e = (finish[done] - arrival[done]) * 1e3 + fe[done]
    n_req, n_done = int(inwin.sum()), int(done.sum())
    t_done = ttft[done]
    finished_in_window = completed & (finish >= sc.warmup_s) & (finish < sc.duration_s)
    return {
        "requests": n_req,
        "completed": n_done,
        "not_completed": n_req - n_done,
        "ttft_mean_ms": mean(t_done),
        "ttft_p50_ms": percentile(t_done, 50),
        "ttft_p90_ms": percentile(t_done, 90),
        "ttft_p99_ms": percentile(t_done, 99),
        "frontend_mean_ms": mean(fe[done]),
        "queue_mean_ms": mean(req["queue_ms"].to_numpy()[done]),
        "load_wait_mean_ms": mean(req["load_wait_ms"].to_numpy()[done]),
        "prefill_mean_ms": mean(req["prefill_ms"].to_numpy()[done]),
        "tpot_mean_ms": mean(tpot),
        "tpot_p90_ms": percentile(tpot, 90),
        "tpot_p99_ms": percentile(tpot, 99),
        "e2e_mean_ms": mean(e2e),
        "e2e_p99_ms": percentile(e2e, 99),
        "throughput_req_s": int(finished_in_window.sum()) / window,
        "swap_rate": int((done & loaded).sum()) / n_done if n_done else math.nan,
        "swap_share_of_ttft": (math.fsum(req["load_wait_ms"].to_numpy()[done]) / math.fsum(t_done)
                               if math.fsum(t_done) > 0 else 0.0),
        "hit_rate_gpu": 1.0 - int((served & loaded).sum()) / int(served.sum()) if served.any() else math.nan,
        "tier_gpu_frac": int((served & (tier == "gpu")).sum()) / int(served.sum()) if served.any() else math.nan,
        "tier_disk_frac": int((served & (tier == "disk")).sum()) / int(served.sum()) if served.any() else math.nan,
        "slo_attainment": int((done & (ttft <= sc.slo_ttft_ms)).sum()) / n_req if n_req else math.nan,
    }


def close(a, b, rel=1e-9) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


def tokens_bounds(sc: Scenario, req) -> tuple[int, int]:
    """Output tokens emitted by steps ending in the window: each request emits its tokens at step ends
    from its first token (``first``) to its finish; all of them count if both lie in the window, some
    of them if its token span overlaps the window, none otherwise."""
    arrival = req["arrival_s"].to_numpy()
    first = arrival + (req["ttft_ms"].to_numpy() - req["frontend_ms"].to_numpy()) / 1e3
    finish = req["finish_s"].to_numpy()
    completed = req["completed"].to_numpy(bool)
    out = req["output_tokens"].to_numpy()
    eps = 1e-9  # first is recovered from ttft_ms: allow its rounding
    lo = completed & (first >= sc.warmup_s + eps) & (finish < sc.duration_s - eps)
    started = np.nan_to_num(first, nan=np.inf) < sc.duration_s + eps
    hi = started & (~completed | (finish >= sc.warmup_s - eps))
    return int(out[lo].sum()), int(out[hi].sum())


def busy_bounds(sc: Scenario, ts) -> tuple[float, float]:
    """Busy seconds in the window from the time series (busy share per bucket of duration_s / 200):
    at least the busy time of the buckets inside the window, at most that of the buckets touching it."""
    b = sc.duration_s / 200.0
    t0 = ts["t_s"].to_numpy()
    busy = ts["gpu_busy_frac"].to_numpy() * b
    inside = (t0 >= sc.warmup_s - 1e-12) & (t0 + b <= sc.duration_s + 1e-12)
    touching = (t0 + b > sc.warmup_s) & (t0 < sc.duration_s)
    return float(busy[inside].sum()), float(busy[touching].sum())


def check(sc: Scenario) -> dict:
    r = simulate(sc)
    s, req = r.summary, r.requests
    ref = reference(sc, req)
    loose = {"tpot_mean_ms", "tpot_p90_ms", "tpot_p99_ms", "e2e_mean_ms", "e2e_p99_ms"}
    bad = {k: (s[k], v) for k, v in ref.items() if not close(s[k], v, 1e-6 if k in loose else 1e-9)}
    window = sc.duration_s - sc.warmup_s
    # throughput_tok_s: the window's token count / window, and that count within the table's bounds
    lo, hi = tokens_bounds(sc, req)
    if not close(s["throughput_tok_s"] * window, s["tokens_in_window"]):
        bad["throughput_tok_s"] = (s["throughput_tok_s"], s["tokens_in_window"] / window)
    if not lo <= s["tokens_in_window"] <= hi:
        bad["tokens_in_window"] = (s["tokens_in_window"], (lo, hi))
    # gpu_busy_frac: busy time in the window / window, within the time series' bounds
    blo, bhi = busy_bounds(sc, r.timeseries)
    if not close(s["gpu_busy_frac"], s["busy_s_in_window"] / window):
        bad["gpu_busy_frac"] = (s["gpu_busy_frac"], s["busy_s_in_window"] / window)
    if not blo - 1e-9 <= s["busy_s_in_window"] <= bhi + 1e-9:
        bad["busy_s_in_window"] = (s["busy_s_in_window"], (blo, bhi))
    assert not bad, f"summary != reference for {sc.to_dict()}:\n" + "\n".join(
        f"  {k}: summary {a!r}, reference {b!r}" for k, (a, b) in bad.items())
    return ref


@st.composite
def scenarios(draw):
    model = draw(st.sampled_from(["llama-2-7b", "qwen2-1.5b", "llama-3.1-8b"]))
    base = Scenario(gpu="a100-80gb", model=model, num_adapters=draw(st.integers(1, 80)),
                    adapter_rank=draw(st.sampled_from([8, 16, 32])),
                    adapter_ranks=draw(st.sampled_from([(), (8, 32)])))
    amax = base.max_adapter_bytes() / presets.GIB
    duration = draw(st.floats(2.0, 6.0))
    sc = base.replace(
        strategy=draw(st.sampled_from(list(STRATEGIES))),
        vram_budget_gb=amax * draw(st.floats(1.05, 20.0)),
        gpu_mem_util=0.9, reserve_gb=1.0,
        zipf_s=draw(st.floats(0.0, 1.5)),
        arrival_process=draw(st.sampled_from(["poisson", "poisson", "gamma", "closed"])),
        arrival_rate_rps=draw(st.floats(2.0, 150.0)),
        arrival_cv=draw(st.floats(0.5, 3.0)),
        concurrency=draw(st.integers(1, 16)),
        max_batch_size=draw(st.integers(1, 32)),
        max_loras=draw(st.sampled_from([0, 0, 2, 4])),
        max_cpu_loras=draw(st.sampled_from([0, 0, 5])),
        host_warm=draw(st.booleans()),
        prompt_tokens=draw(st.integers(1, 400)),
        output_tokens=draw(st.integers(1, 48)),
        length_dist=draw(st.sampled_from(["fixed", "uniform", "lognormal"])),
        frontend_ms=draw(st.sampled_from([0.0, 0.0, 7.5])),
        max_in_system=draw(st.sampled_from([0, 0, 4])),
        load_mode=draw(st.sampled_from(["sync", "async"])),
        memory_mode=draw(st.sampled_from(["static", "unified"])),
        service_mode=draw(st.sampled_from(["roofline", "fixed"])),
        duration_s=duration,
        warmup_s=duration * draw(st.floats(0.05, 0.5)),
        drain_s=draw(st.sampled_from([0.0, 0.3, 600.0])),  # short drains leave requests unfinished
        slo_ttft_ms=draw(st.floats(5.0, 500.0)),
        seed=draw(st.integers(0, 10_000)),
    )
    if sc.max_vram_budget_gb() < sc.vram_budget_gb:
        sc = sc.replace(vram_budget_gb=max(amax * 1.01, sc.max_vram_budget_gb() * 0.9))
    try:
        return sc.validate()
    except ValueError:
        assume(False)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_summary_matches_the_reference_on_random_scenarios(sc):
    check(sc)


@pytest.mark.parametrize("preset,kw", [
    ("default", dict(duration_s=40.0, warmup_s=4.0)),
    ("default", dict(strategy="slora", duration_s=15.0, warmup_s=3.0, arrival_rate_rps=25.0, drain_s=0.5,
                     length_dist="lognormal", frontend_ms=5.0, slo_ttft_ms=80.0)),
    ("seed1-rtx3090", dict(duration_s=10.0, warmup_s=2.0, max_in_system=40, host_warm=False)),
    ("vllm-llama31-8b", dict(duration_s=20.0, warmup_s=4.0)),
])
def test_summary_matches_the_reference_on_presets(preset, kw):
    sc = Scenario.from_preset(preset, **kw)
    ref = check(sc)
    # these runs separate the statistics a wrong definition would swap
    assert ref["completed"] >= 50
    assert ref["ttft_p50_ms"] < ref["ttft_p90_ms"] < ref["ttft_p99_ms"]
    assert ref["tpot_p90_ms"] != ref["tpot_p99_ms"] and ref["ttft_mean_ms"] != ref["ttft_p50_ms"]


def test_reference_percentile_is_linear_interpolation():
    assert percentile(np.array([1.0, 2.0, 3.0, 4.0]), 50) == 2.5
    assert percentile(np.array([10.0, 0.0, 20.0]), 99) == pytest.approx(19.8)
    assert percentile(np.array([5.0]), 90) == 5.0 and math.isnan(percentile(np.array([]), 50))
