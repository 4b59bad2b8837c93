"""The vLLM server as the simulation runs it by default (issue 24): its API server's batch limits per GPU
(``VLLM_BATCH_DEFAULTS``, read from vLLM's argument parser: tests/fixtures/server_flags.json) and its simulated
configuration and cost start values (``vllm_server_fields``: the vLLM fit, ``VLLM_FITTED_PRESET``). Model layer:
the calibration (fitting a ``vllm bench serve`` file as vLLM) and the planner (``planner.Deployment``) read it."""
from __future__ import annotations

from .gpus import GPUS, get_gpu
from .scenarios import SCENARIOS

#: vLLM's API-server (``vllm serve``) batch defaults per GPU: (the GPU, memory at least GiB, A100s excluded,
#: max_num_seqs, max_num_batched_tokens); the first row that matches applies.  Source: the notes on
#: --max-num-seqs ("api server: 256, or 1024 on >= 70 GiB non-A100 GPUs") and --max-num-batched-tokens
#: ("api server: 2048, 8192 on >= 70 GiB non-A100, 16384 on >= 160 GiB") in tests/fixtures/server_flags.json,
#: read from vllm 0.33.0 vllm/engine/arg_utils.py (the per-usage-context defaults; the offline ``LLM`` class
#: has its own, larger ones: not used, ``vllm serve`` is the API server).  The GPU's memory is its preset's
#: ``memory_gib`` (vLLM reads the device's total memory: an "80 GB" GPU reports about 79 GiB, still >= 70);
#: an A100 is a GPU whose preset name or label says "A100" (vLLM tests the device name).
VLLM_BATCH_DEFAULTS: tuple[tuple[str, float, bool, int, int], ...] = (
    ("GPUs of 160 GiB or more, not A100s", 160.0, True, 1024, 16384),
    ("GPUs of 70 GiB or more, not A100s", 70.0, True, 1024, 8192),
    ("GPUs under 70 GiB, and A100s", 0.0, False, 256, 2048),
)


def vllm_batch_defaults(gpu) -> tuple[int, int, str]:
    """vLLM's API-server ``(max_num_seqs, max_num_batched_tokens, the row's GPU rule)`` on ``gpu`` (a preset
    name or an ``engine.presets.GPU``): ``VLLM_BATCH_DEFAULTS``."""
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    a100 = "a100" in g.name.lower() or "a100" in g.label.lower()
    for rule, gib, no_a100, seqs, tokens in VLLM_BATCH_DEFAULTS:
        if g.memory_gib >= gib and not (no_a100 and a100):
            return seqs, tokens, rule
    raise AssertionError("VLLM_BATCH_DEFAULTS has no catch-all row")  # pragma: no cover


#: The ranks vLLM accepts for ``--max-lora-rank`` (vllm/config LoRAConfig.possible_max_ranks; the fixture's choices).
VLLM_MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_rank_holding(rank: int) -> int | None:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds adapters of ``rank``; None above the largest."""
    return next((v for v in VLLM_MAX_LORA_RANKS if v >= rank), None)


#: The calibrated preset whose fitted cost fields are vLLM's (the fit to the real vLLM runs).
VLLM_FITTED_PRESET = "vllm-llama31-8b"
#: The fitted cost fields the vLLM server carries (``max_in_system`` is the benchmark client's, not the server's).
VLLM_COST_FIELDS = ("compute_eff", "bw_eff", "step_overhead_ms", "lora_ms_per_adapter", "lora_ms_per_slot",
                    "lora_us_per_token_slot", "frontend_ms")
#: vLLM's simulated configuration: its scheduling, KV on demand with recompute preemption, chunked prefill
#: (V1's default), synchronous adapter loads, gpu_memory_utilization 0.9 (as in the fitted runs), the measured
#: activation latency (6 ms + bytes over the link: engine/data/reference/vllm_lora_load_times.csv).
VLLM_CONFIG = dict(strategy="vllm", kv_reservation="on_demand", chunked_prefill="auto", load_mode="sync",
                   memory_mode="static", gpu_mem_util=0.9, load_latency_ms=6.0)


def vllm_server_fields(gpu: str) -> dict:
    """Scenario fields of a vLLM server on ``gpu``: ``VLLM_CONFIG``, its batch limits there, the GPU's PCIe
    link and the vLLM fit's cost fields."""
    seqs, tokens, _ = vllm_batch_defaults(gpu)
    fit = SCENARIOS[VLLM_FITTED_PRESET]
    return {**VLLM_CONFIG, "max_batch_size": seqs, "max_batched_tokens": tokens, "pcie_gbps": GPUS[gpu].pcie_gbps,
            **{f: fit[f] for f in VLLM_COST_FIELDS}}
