"""Reference data: S-LoRA setting S1 (``slora_s1_results.csv``), each run a Case replaying the
request stream it received."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import presets
from ..scenario import Scenario
from ..workload import Workload
from .cases import Case
from .refdata import _ref

_SLORA_GPU = {"A10G-24GB": "a10g", "A100-80GB": "a100-80gb"}


def _range_mid(s: str) -> tuple[int, float]:
    lo, hi = (int(x) for x in str(s).split("-"))
    hi_incl = hi - 1                    # numpy integers(lo, hi): hi exclusive
    mid = (lo + hi_incl) / 2
    return int(round(mid)), (hi_incl - lo) / 2 / mid


#: S-LoRA's benchmark client seeds numpy's legacy global generator with 42 (its --seed default).
SLORA_SEED = 42


def slora_trace(num_adapters: int, alpha: float, rate: float, cv: float, duration_s: float,
                input_range: tuple[int, int], output_range: tuple[int, int], seed: int = SLORA_SEED) -> Workload:
    """The request stream of S-LoRA's synthetic benchmark, draw for draw.

    The generator as the reference data's README describes it: rate x duration requests;
    adapter = floor(num_adapters x X), X ~ power(alpha); input and output lengths uniform
    integers in [lo, hi); arrival = cumulative Gamma(1/cv^2, cv^2/rate) gaps (so the last
    arrival may fall well after ``duration_s`` when cv is large).  Drawn in that order from
    ``numpy.random.RandomState(seed)`` (the legacy generator the client seeds), so with the
    client's seed 42 it replays the stream the measured runs received.
    """
    rs = np.random.RandomState(seed)
    n = int(rate * duration_s)
    adapter = (rs.power(alpha, n) * max(1, num_adapters)).astype(np.int64)
    prompt = rs.randint(input_range[0], input_range[1], n).astype(np.int64)
    output = rs.randint(output_range[0], output_range[1], n).astype(np.int64)
    arrival = np.cumsum(rs.gamma(1.0 / (cv * cv), cv * cv / rate, n))
    return Workload(arrival, adapter, prompt, output)


def slora_metrics(res, sc: Scenario) -> dict[str, float]:
    """S-LoRA's own definitions: completed / total time (to the last finish), means over all requests."""
    r = res.requests
    done = r[r["completed"]]
    total = float(done["finish_s"].max()) if len(done) else math.nan
    ttft = done["ttft_ms"].to_numpy()
    return {
        "request_throughput": len(done) / total if total and total > 0 else math.nan,
        "mean_ttft_ms": float(ttft.mean()) if len(ttft) else math.nan,
        "slo_attainment": float((ttft < sc.slo_ttft_ms).sum() / max(len(r), 1)),
        "mean_latency_ms": float(done["e2e_ms"].mean()) if len(done) else math.nan,
    }


def slora_cases(path=None, duration_scale: float = 1.0, suites=None, include_ablation: bool = False,
                seed: int = 0) -> list[Case]:
    """S-LoRA setting S1 runs as Cases (strategy slora, llama-7b, rank 8 on q,k,v,o).

    The unified pool is sized to the run's ``kv_pool_tokens`` (KV bytes per token x
    tokens) by setting ``reserve_gb`` = GPU memory - weights - pool.  The per-step
    prefill budget is lightllm's default ``batch_max_tokens`` = max(pool / 6, 1024)
    (as we read lightllm; unverified for S-LoRA's fork).  Each case replays the request
    stream the run received (``slora_trace``: S-LoRA's generator with its client's seed), all
    of it, so ``duration_s`` is the span of its arrivals.  ``duration_scale`` < 1 shortens the
    runs (quick mode): offered rate is unchanged.
    """
    df = pd.read_csv(_ref("slora_s1_results.csv", path))
    m = presets.get_model("llama-7b")
    kv_tok = presets.kv_bytes_per_token(m)
    w_gib = presets.weight_bytes(m) / presets.GIB
    cases = []
    for i, row in df.iterrows():
        suite = row["suite"]
        if suites and suite not in suites:
            continue
        ablation = suite == "ablation-no-mem"
        if ablation and not include_ablation:
            continue
        gpu = _SLORA_GPU[row["gpu"]]
        pool_gib = float(row["kv_pool_tokens"]) * kv_tok / presets.GIB
        reserve = presets.get_gpu(gpu).memory_gib - w_gib - pool_gib
        p_mid, p_spread = _range_mid(row["input_len_range"])
        o_mid, o_spread = _range_mid(row["output_len_range"])
        n_ad = max(1, int(row["num_adapters"]))
        dur = float(row["duration_s"]) * duration_scale
        lo_in, hi_in = (int(x) for x in str(row["input_len_range"]).split("-"))
        lo_out, hi_out = (int(x) for x in str(row["output_len_range"]).split("-"))
        trace = slora_trace(n_ad, float(row["alpha"]), float(row["req_rate_req_per_s"]), float(row["cv"]), dur,
                            (lo_in, hi_in), (lo_out, hi_out))
        # every generated request is sent, however late its Gamma-spaced arrival: simulate them all
        span = max(dur, math.ceil(float(trace.arrival_s[-1])) + 1.0) if len(trace.arrival_s) else dur
        sc = Scenario(
            gpu=gpu, model="llama-7b", strategy="slora", memory_mode="unified", load_mode="async",
            gpu_mem_util=1.0, reserve_gb=round(reserve, 4), vram_budget_gb=0.0,
            num_adapters=n_ad, adapter_rank=int(row["adapter_ranks"]), target_modules="qkvo",
            popularity="power", power_alpha=float(row["alpha"]),
            arrival_process="gamma", arrival_rate_rps=float(row["req_rate_req_per_s"]), arrival_cv=float(row["cv"]),
            prompt_tokens=p_mid, output_tokens=o_mid, length_dist="uniform",
            length_spread=round(max(p_spread, o_spread), 6),
            max_batch_size=1024, max_batched_tokens=max(int(row["kv_pool_tokens"]) // 6, 1024),
            duration_s=span, warmup_s=0.0, drain_s=max(900.0, 3 * dur), slo_ttft_ms=6000.0, seed=seed,
            compute_eff=0.6, bw_eff=0.8, step_overhead_ms=0.5, lora_ms_per_adapter=0.05,
            load_latency_ms=0.5,
        ).validate()
        meas = {"request_throughput": float(row["throughput_req_per_s"]),
                "mean_ttft_ms": float(row["avg_first_token_latency_s"]) * 1e3,
                "slo_attainment": float(row["avg_attainment"]),
                "mean_latency_ms": float(row["avg_latency_s"]) * 1e3}
        name = f"{gpu} {suite} n={int(row['num_adapters'])} rate={row['req_rate_req_per_s']} cv={row['cv']}"
        info = {"dataset": "slora_s1", "gpu": gpu, "suite": suite, "num_adapters": int(row["num_adapters"]),
                "rate": float(row["req_rate_req_per_s"]), "cv": float(row["cv"]), "src_row": int(i) + 2}
        cases.append(Case(name=name, scenario=sc, measured=meas, metric_fn=slora_metrics, trace=trace,
                          fit_metrics=("request_throughput", "mean_ttft_ms"), info=info))
    return cases
