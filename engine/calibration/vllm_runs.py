"""Reference data: the vLLM Llama-3.1-8B multi-LoRA runs (``vllm_llama31_8b_multilora_runs.csv``):
the runs' constants, the LoRA slot size, and each completed run as a Case replaying its request stream."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import presets
from ..scenario import Scenario
from ..workload import Workload
from .cases import Case
from .refdata import _ref

#: vLLM run constants (README of the reference data; GPU unverified: most likely H100 64 GB).
VLLM_GPU = "h100-64gb"
VLLM_MODEL = "llama-3.1-8b"
VLLM_GPU_MEM_UTIL = 0.9
VLLM_MAX_MODEL_LEN = 131072          # Llama-3.1 config max_position_embeddings (vLLM default max_model_len)
VLLM_RESERVE_GIB = 5.0               # ASSUMED: profile-run activations + sampler warm-up + non-torch memory
VLLM_LORA_EXTRA_VOCAB = 256          # vLLM LoRAConfig.lora_extra_vocab_size default
#: Adapter activation (CPU->GPU): fixed latency + bytes / VLLM_PCIE_GBPS.  The Llama-3.1-8B constants in
#: vllm_lora_load_times.csv are 8.08, 7.87, 6.37 ms (ranks 8/16/32, max_lora_rank 32), mean 7.44 ms and
#: nearly size-independent; 6.0 ms + 80 MiB / 50 GB/s = 7.7 ms for a rank-16 all-module adapter.
VLLM_LOAD_LATENCY_MS = 6.0
VLLM_PCIE_GBPS = 50.0
SHAREGPT_MEAN_IN, SHAREGPT_MEAN_OUT = 222, 194
#: LoRA cost of every token at --max-lora-rank, as vLLM's LoRA kernels run it (its stacked LoRA buffers at
#: max_lora_rank; docs/model.md 5.5): the runs are fitted and checked under it (the fit was made at "none", each
#: adapter at its own rank, up to engine 0.6; the refit and the comparison: docs/model.md 5.5).
VLLM_LORA_RANK_PADDING = "max_rank"


def vllm_slot_bytes(max_lora_rank: int, model: str = VLLM_MODEL, embeddings: bool = True,
                    extra_vocab: int = VLLM_LORA_EXTRA_VOCAB, tp: int = 1) -> int:
    """GPU bytes vLLM reserves per LoRA slot (bf16 stacked A/B buffers at max_lora_rank).

    vLLM wraps every supported linear layer of Llama (qkv, o, gate_up, down) whatever
    modules an adapter targets, so the slot is the "all modules" size; with
    ``embeddings`` it also counts the embedding and lm_head LoRA buffers (vocab + extra
    vocab rows at the rank, plus the extra-vocab embedding tables).  On each GPU of a tensor-parallel group of
    ``tp``: the linear modules' shards (``presets.adapter_bytes``); the embedding buffers counted whole (an
    upper bound: not read in vLLM's sharded embedding layers).
    """
    m = presets.get_model(model)
    b = presets.adapter_bytes(m, max_lora_rank, "all", tp=tp)
    if embeddings:
        v = m.vocab_size + extra_vocab
        vp = -(-v // 256) * 256
        h = m.hidden_size
        b += 2 * (v * max_lora_rank + h * max_lora_rank + extra_vocab * h)      # embed_tokens
        b += 2 * (max_lora_rank * h + vp * max_lora_rank + extra_vocab * h)     # lm_head / logits
    return int(b)


def _lognormal_lengths(rng, mean: float, cv: float, n: int) -> np.ndarray:
    s2 = math.log1p(cv * cv)
    return rng.lognormal(math.log(mean) - s2 / 2, math.sqrt(s2), n)


def vllm_trace(rates, counts, duration_s: float, seed: int = 0, len_cv: float = 1.0) -> Workload:
    """Merged per-adapter Poisson streams with ShareGPT-like lognormal lengths.

    Adapter ids 0.. are assigned class by class (``counts[k]`` adapters at ``rates[k]``).
    Lengths: lognormal with means 222 (input) / 194 (output) tokens and CV ``len_cv``
    (an assumption; the data give only the means), then the filter of vLLM's ShareGPT
    sampler: prompt <= 1024, prompt + output <= 2048, both >= 4.
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1729]))
    arr, ad = [], []
    a = 0
    for rate, cnt in zip(rates, counts):
        for _ in range(int(cnt)):
            n = rng.poisson(rate * duration_s)
            arr.append(rng.random(n) * duration_s)
            ad.append(np.full(n, a, np.int64))
            a += 1
    t = np.concatenate(arr) if arr else np.zeros(0)
    ids = np.concatenate(ad) if ad else np.zeros(0, np.int64)
    o = np.argsort(t, kind="stable")
    t, ids = t[o], ids[o]
    n = len(t)
    p = np.clip(np.rint(_lognormal_lengths(rng, SHAREGPT_MEAN_IN, len_cv, n)), 4, 1024).astype(np.int64)
    q = np.rint(_lognormal_lengths(rng, SHAREGPT_MEAN_OUT, len_cv, n)).astype(np.int64)
    q = np.clip(q, 4, 2048 - p)
    return Workload(t, ids, p, q)


def vllm_metrics_factory(window_s: float, real_window_s: float = 3600.0, offered: float = math.nan):
    """Fixed-window metrics: requests finishing in [W, T) count (unfinished do not).

    Throughput = finishes in [W, T) / (T - W) (the warm-up W drops the cold start that
    the 3600 s measurement window amortises).  Mean TTFT over requests that arrived in
    [W, T) and finished before T.  When the simulated backlog grows (arrivals in the
    window exceed finishes by more than max(5 %, 20 requests)) the run is overloaded and
    its measured mean TTFT is set by the 3600 s window, not by the service: we then
    report the fluid-limit estimate for a FCFS backlog, (real_window / 2) x
    (1 - throughput / arrival rate), plus the simulated median TTFT.  This is an extrapolation, labelled as such in the validation report.
    """
    def fn(res, sc: Scenario) -> dict[str, float]:
        r = res.requests
        W, T = window_s, sc.duration_s
        fin = r["finish_s"].to_numpy()
        in_win = (fin >= W) & (fin < T)
        n = int(in_win.sum())
        thr = n / (T - W)
        out_thr = float(r["output_tokens"].to_numpy()[in_win].sum() / (T - W))
        m = (r["arrival_s"] >= W) & (r["arrival_s"] < T) & r["completed"] & (r["finish_s"] < T)
        ttft = r.loc[m, "ttft_ms"].to_numpy()
        tpot = r.loc[m, "tpot_ms"].dropna().to_numpy()
        mean_ttft = float(ttft.mean()) if len(ttft) else math.nan
        arr = r["arrival_s"].to_numpy()
        n_arr = int(((arr >= W) & (arr < T)).sum())
        backlog_growth = n_arr - n           # arrivals minus finishes in the window
        overloaded = math.isfinite(offered) and backlog_growth > max(0.05 * n_arr, 20)
        if overloaded and T < real_window_s:
            mu, lam = thr, n_arr / (T - W)
            base = float(np.median(ttft)) if len(ttft) else 0.0
            mean_ttft = 0.5 * real_window_s * max(0.0, 1.0 - mu / lam) * 1e3 + base
        return {"request_throughput": thr, "output_throughput": out_thr, "mean_ttft_ms": mean_ttft,
                "median_ttft_ms": float(np.median(ttft)) if len(ttft) else math.nan,
                "mean_tpot_ms": float(tpot.mean()) if len(tpot) else math.nan,
                # tails: reported per split, not fitted (the simulated window's own percentiles)
                "p99_ttft_ms": float(np.percentile(ttft, 99)) if len(ttft) else math.nan,
                "p99_tpot_ms": float(np.percentile(tpot, 99)) if len(tpot) else math.nan,
                "overloaded": float(overloaded)}
    return fn


def _parse_list(s) -> list[float]:
    return [float(x) for x in str(s).split(";") if x.strip()]


def vllm_cases(path=None, duration_s: float = 3600.0, warmup_s: float = 0.0, rows=None, seed: int = 0,
               len_cv: float = 1.0, lora_rank_padding: str = VLLM_LORA_RANK_PADDING) -> list[Case]:
    """The vLLM runs that completed (status ok) as Cases replaying their request streams.

    Simulated window ``duration_s`` (default: the real 3600 s, no warm-up, so queues build
    as they did in the runs; a shorter window extrapolates overloaded runs' TTFT, see
    ``vllm_metrics_factory``).  GPU slots = max_loras, host cache =
    max_cpu_loras (= adapters served, all warm), max_num_seqs 2048, a prefill budget of
    2048 tokens per step (vLLM V1's default for the API server on a GPU under 70 GiB, as
    we read vLLM 0.8.5; unverified), adapters sized for all linear modules (assumed), LoRA cost at
    ``lora_rank_padding`` (default ``VLLM_LORA_RANK_PADDING``: every token at --max-lora-rank, the runs' largest
    adapter rank).
    """
    df = pd.read_csv(_ref("vllm_llama31_8b_multilora_runs.csv", path))
    cases = []
    for i, r in df.iterrows():
        if r["status"] != "ok":
            continue
        if rows is not None and i not in rows:
            continue
        rates = _parse_list(r["adapter_rate_values_req_per_s"])
        counts = [int(x) for x in _parse_list(r["adapter_rate_counts"])]
        n_ad = int(sum(counts))
        ranks = tuple(int(x) for x in _parse_list(r["adapter_ranks_available"]))
        mlr = int(r["max_lora_rank"])
        ml = int(r["max_loras"])
        offered = float(r["offered_total_rate_req_per_s"])
        budget = ml * vllm_slot_bytes(mlr) / presets.GIB
        sc = Scenario(
            gpu=VLLM_GPU, model=VLLM_MODEL, strategy="vllm", gpu_mem_util=VLLM_GPU_MEM_UTIL,
            reserve_gb=VLLM_RESERVE_GIB, vram_budget_gb=round(budget + 1e-3, 4), max_loras=ml,
            max_cpu_loras=int(r["max_cpu_loras"]), host_warm=True, num_adapters=n_ad,
            adapter_rank=max(ranks), adapter_ranks=ranks, target_modules="all",
            arrival_rate_rps=offered, prompt_tokens=SHAREGPT_MEAN_IN, output_tokens=SHAREGPT_MEAN_OUT,
            length_dist="lognormal", length_spread=1.0, max_batch_size=2048, max_batched_tokens=2048,
            kv_reservation="on_demand", lora_rank_padding=lora_rank_padding,
            duration_s=duration_s, warmup_s=warmup_s, drain_s=0.0, seed=seed,
            load_latency_ms=VLLM_LOAD_LATENCY_MS, pcie_gbps=VLLM_PCIE_GBPS, compute_eff=0.6, bw_eff=0.8, step_overhead_ms=0.5,
            lora_ms_per_adapter=0.05, lora_ms_per_slot=0.0,
        ).validate()
        trace = vllm_trace(rates, counts, duration_s, seed=seed * 100003 + int(i), len_cv=len_cv)
        meas = {"request_throughput": float(r["request_throughput_req_per_s"]),
                "output_throughput": float(r["output_token_throughput_tok_per_s"]),
                "mean_ttft_ms": float(r["mean_ttft_ms"]),
                "median_ttft_ms": float(r["median_ttft_ms"]),
                "mean_tpot_ms": float(r["mean_tpot_ms"]),
                "p99_ttft_ms": float(r["p99_ttft_ms"]),
                "p99_tpot_ms": float(r["p99_tpot_ms"])}
        stable = float(r["request_throughput_req_per_s"]) >= 0.95 * offered
        fitm = ("request_throughput", "mean_tpot_ms", "mean_ttft_ms")
        name = f"loras={ml} cpu={int(r['max_cpu_loras'])} rank<={mlr} rate={offered:g}"
        info = {"dataset": "vllm", "max_loras": ml, "max_cpu_loras": int(r["max_cpu_loras"]),
                "max_lora_rank": mlr, "offered_rps": offered, "measured_stable": bool(stable),
                "src_row": int(i) + 2}
        cases.append(Case(name=name, scenario=sc, measured=meas,
                          metric_fn=vllm_metrics_factory(warmup_s, 3600.0, offered), trace=trace,
                          fit_metrics=fitm, info=info))
    return cases

