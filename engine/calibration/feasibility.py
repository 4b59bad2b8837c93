"""vLLM start-up feasibility: a pure memory check predicting which vLLM runs refuse to start
(``failed_insufficient_KV_cache_memory``)."""
from __future__ import annotations

import math

import pandas as pd

from .. import presets
from .refdata import _ref
from .vllm_runs import VLLM_GPU, VLLM_GPU_MEM_UTIL, VLLM_MAX_MODEL_LEN, VLLM_MODEL, VLLM_RESERVE_GIB, vllm_slot_bytes


def vllm_feasibility(max_loras: int, max_lora_rank: int, gpu: str = VLLM_GPU, model: str = VLLM_MODEL,
                     gpu_mem_util: float = VLLM_GPU_MEM_UTIL, max_model_len: int = VLLM_MAX_MODEL_LEN,
                     reserve_gib: float = VLLM_RESERVE_GIB, embeddings: bool = True) -> dict:
    """Does vLLM start?  Pure function of the launch arguments.

    KV memory = GPU memory x gpu_mem_util - weights - reserve - max_loras x slot bytes;
    vLLM (V1) refuses to start when that is less than the KV of one max_model_len
    sequence.  Returns ``feasible`` and the terms in GiB.
    """
    g, m = presets.get_gpu(gpu), presets.get_model(model)
    G = presets.GIB
    usable = g.memory_gib * gpu_mem_util
    weights = presets.weight_bytes(m) / G
    lora = max_loras * vllm_slot_bytes(max_lora_rank, model, embeddings) / G
    kv_avail = usable - weights - reserve_gib - lora
    kv_need = max_model_len * presets.kv_bytes_per_token(m) / G
    return {"feasible": bool(kv_avail >= kv_need), "usable_gib": usable, "weights_gib": weights,
            "reserve_gib": reserve_gib, "lora_gib": lora, "kv_available_gib": kv_avail,
            "kv_needed_gib": kv_need, "margin_gib": kv_avail - kv_need}


def feasibility_table(path=None, **kw) -> pd.DataFrame:
    """Predicted vs actual start-up outcome of every vLLM run (incomplete runs did start)."""
    df = pd.read_csv(_ref("vllm_llama31_8b_multilora_runs.csv", path))
    rows = []
    for _, r in df.iterrows():
        f = vllm_feasibility(int(r["max_loras"]), int(r["max_lora_rank"]), **kw)
        actual = r["status"] != "failed_insufficient_KV_cache_memory"
        rows.append({"max_loras": int(r["max_loras"]), "max_cpu_loras": int(r["max_cpu_loras"]),
                     "max_lora_rank": int(r["max_lora_rank"]), "status": r["status"],
                     "actual_starts": actual, "predicted_starts": f["feasible"],
                     "margin_gib": round(f["margin_gib"], 3), "correct": actual == f["feasible"]})
    return pd.DataFrame(rows)


def feasibility_accuracy(path=None, **kw) -> float:
    t = feasibility_table(path, **kw)
    return float(t["correct"].mean())


def feasibility_reserve_bracket(path=None, embeddings: bool = True) -> tuple[float, float]:
    """Range of reserve_gib for which every run is classified correctly (nan, nan if none)."""
    t = feasibility_table(path, reserve_gib=0.0, embeddings=embeddings)
    # with reserve r the margin is margin0 - r: starts need margin0 >= r, failures margin0 < r
    ok = t.loc[t["actual_starts"], "margin_gib"]
    bad = t.loc[~t["actual_starts"], "margin_gib"]
    lo = float(bad.max()) if len(bad) else -math.inf
    hi = float(ok.min()) if len(ok) else math.inf
    return (lo, hi) if lo < hi else (math.nan, math.nan)
