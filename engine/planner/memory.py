"""GPU memory split of a configuration, in words a user can check, and vLLM's slot sizing."""
from __future__ import annotations

from .. import presets
from ..calibration import vllm_slot_bytes
from ..scenario import Scenario

#: The ranks vLLM accepts for ``--max-lora-rank`` (vllm/config LoRAConfig.possible_max_ranks).
VLLM_MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_max_lora_rank(sc: Scenario) -> int:
    """Smallest rank vLLM accepts that holds the scenario's largest adapter rank."""
    r = max(sc.ranks())
    for v in VLLM_MAX_LORA_RANKS:
        if v >= r:
            return v
    raise ValueError(f"adapter_rank: invalid value {r}; allowed: at most {VLLM_MAX_LORA_RANKS[-1]} for vLLM")


def vllm_slot_budget_gb(sc: Scenario) -> float:
    """GiB vLLM preallocates for ``max_loras`` slots at ``--max-lora-rank`` (all linear modules and the
    embedding/lm_head buffers: ``engine.calibration.vllm_slot_bytes``)."""
    return sc.max_loras * vllm_slot_bytes(vllm_max_lora_rank(sc), sc.model) / presets.GIB


def request_kv_bytes(sc: Scenario) -> int:
    """KV bytes of one request of mean length (prompt + output tokens, whole blocks)."""
    blocks = -(-(sc.prompt_tokens + sc.output_tokens) // sc.kv_block_tokens)
    return blocks * sc.kv_block_tokens * presets.kv_bytes_per_token(sc.model_spec)


def memory_split(sc: Scenario) -> dict:
    """Weights / adapters / KV in GiB, adapters that fit, and requests of mean length the KV holds at once."""
    plan = sc.memory_plan()
    g = presets.GIB
    amax = sc.max_adapter_bytes()
    fit = int(plan["adapters"] // amax) if amax else 0
    if sc.max_loras > 0:
        fit = min(fit, sc.max_loras) if sc.memory_mode != "unified" else fit
    kv_req = request_kv_bytes(sc)
    return {
        "weights_gib": plan["weights"] / g,
        "reserve_gib": plan["reserve"] / g,
        "adapters_gib": plan["adapters"] / g,
        "kv_gib": plan["kv"] / g,
        "adapter_mib": amax / presets.MIB,
        "adapters_fit": fit,
        "kv_concurrent_requests": int(plan["kv"] // kv_req) if kv_req else 0,
    }


def memory_sentence(sc: Scenario) -> str:
    """E.g. "16 slots of 26 MiB (0.4 GiB) leave 61 GiB of KV: about 480 requests of 256+128 tokens at once"."""
    m = memory_split(sc)
    what = f"{sc.max_loras} slots" if sc.strategy == "vllm" and sc.max_loras > 0 else f"{m['adapters_fit']} adapters"
    return (f"{m['weights_gib']:.1f} GiB of weights; {what} of {m['adapter_mib']:.0f} MiB "
            f"({m['adapters_gib']:.2f} GiB) leave {m['kv_gib']:.1f} GiB of KV: about "
            f"{m['kv_concurrent_requests']:,} requests of {sc.prompt_tokens}+{sc.output_tokens} tokens at once"
            + (f" (the batch is capped at {sc.max_batch_size})" if sc.max_batch_size < m["kv_concurrent_requests"]
               else ""))

