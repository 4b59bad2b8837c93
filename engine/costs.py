"""Cost model: the duration of one continuous-batching step, and adapter load times.

Roofline (docs/model.md, eq. 1-4):
    flops = 2 N (P + D) + 2 L d sum(p_i^2) + 4 L d C + sum_tokens(2 * adapter_params)
    bytes = W + kv_tok (C + P + D) + sum(bytes of adapters in the batch)
    t = max(flops / (peak * compute_eff), bytes / (hbm * bw_eff))
        + overhead + lora_ms_per_adapter * distinct + lora_ms_per_slot * slots
        + lora_us_per_token_slot * (P + D) * slots
where N = parameters, P = prefill tokens, D = decoding requests, C = their total
context, L d = layers x hidden size, W = weight bytes, slots = max_loras (vLLM's LoRA
kernels are launched over every slot, so their cost grows with tokens x slots).
Fixed mode: t = prefill_s_per_token * P + decode_s_per_step * [D > 0] + the same overheads.
The loop passes lora_flops / lora_bytes at each adapter's size, or padded to the step's or the configured largest
adapter (Scenario.lora_rank_padding, docs/model.md 5.5): (P + D) x padded bytes and distinct x padded bytes.

Kernel cost model (``cost_model = "kernel"``, docs/model.md 5.4; ``kernel_step_seconds``): the dense
projections and the LM head come from the per-operator kernel model (engine/kernels.py) at the spec
sheet's peak and bandwidth, the rest stays a roofline at compute_eff / bw_eff, and the two add up:
    t = L * dense_layer(P + D) + gemm(S, vocab, d)
        + max((2 L d sum(p_i^2) + 4 L d C + lora_flops) / (peak * compute_eff),
              (kv_tok (C + P + D) + lora_bytes) / (hbm * bw_eff))
        + the same overheads
where S = sequences that sample a token in the step (dense_layer at 0 tokens and gemm at S = 0 are 0).
"""
from __future__ import annotations

from numba import njit

from .kernels import DTYPE_BYTES, dense_layer_seconds, gemm_seconds
from .presets.interconnect import allreduce_terms, gpu_link


@njit(cache=True, nogil=True, _nrt=False)
def step_seconds(fixed, p_tokens, attn_prefill, n_dec, ctx, lora_flops, lora_bytes, distinct, slots,
                 params, weight_bytes, flops_per_s, bytes_per_s, attn_ld, kv_tok_bytes, overhead_s,
                 lora_adapter_s, lora_slot_s, prefill_s_tok, decode_s_step, lora_tok_slot_s):
    """Seconds for one step (see module docstring)."""
    extra = (overhead_s + lora_adapter_s * distinct + lora_slot_s * slots
             + lora_tok_slot_s * (p_tokens + n_dec) * slots)
    if fixed:
        t = prefill_s_tok * p_tokens
        if n_dec > 0:
            t += decode_s_step
        return t + extra
    # lora_flops is sum over tokens of adapter bytes = 2 flops x params at 2 bytes/param
    flops = 2.0 * params * (p_tokens + n_dec) + 2.0 * attn_ld * attn_prefill + 4.0 * attn_ld * ctx + lora_flops
    nbytes = weight_bytes + kv_tok_bytes * (ctx + p_tokens + n_dec) + lora_bytes
    tc = flops / flops_per_s
    tm = nbytes / bytes_per_s
    return (tc if tc > tm else tm) + extra


@njit(cache=True, nogil=True, _nrt=False)
def kernel_step_seconds(p_tokens, attn_prefill, n_dec, n_sample, ctx, lora_flops, lora_bytes, distinct, slots,
                        flops_per_s, bytes_per_s, attn_ld, kv_tok_bytes, overhead_s, lora_adapter_s, lora_slot_s,
                        lora_tok_slot_s, n_layers, n_dims, k_dims, kparams, peak_flops, peak_bytes_per_s, vocab,
                        hidden):
    """Seconds for one roofline-service step with ``cost_model = "kernel"`` (module docstring).

    ``flops_per_s`` / ``bytes_per_s`` include compute_eff / bw_eff (the attention, KV and LoRA roofline);
    ``peak_flops`` / ``peak_bytes_per_s`` are the spec sheet's (the kernel model has its own shares);
    ``n_dims`` / ``k_dims`` / ``kparams``: ``kernels.dense_dims`` and ``kernels.param_array``."""
    extra = (overhead_s + lora_adapter_s * distinct + lora_slot_s * slots
             + lora_tok_slot_s * (p_tokens + n_dec) * slots)
    m = p_tokens + n_dec  # prefill and decode tokens go through one set of GEMMs
    dense = 0.0
    if m > 0:
        dense = n_layers * dense_layer_seconds(m, n_dims, k_dims, peak_flops, peak_bytes_per_s, kparams)
    if n_sample > 0:  # the LM head: one row per sequence that samples a token
        dense += gemm_seconds(n_sample, vocab, hidden, peak_flops, peak_bytes_per_s, kparams[0], kparams[1],
                              kparams[2], kparams[3], kparams[4], kparams[5])
    flops = 2.0 * attn_ld * attn_prefill + 4.0 * attn_ld * ctx + lora_flops
    nbytes = kv_tok_bytes * (ctx + p_tokens + n_dec) + lora_bytes
    tc = flops / flops_per_s
    tm = nbytes / bytes_per_s
    return dense + (tc if tc > tm else tm) + extra


def load_seconds(nbytes: float, pcie_gbps: float, load_latency_ms: float, from_disk: bool = False,
                 disk_gbps: float = 2.0, disk_latency_ms: float = 5.0) -> float:
    """Unqueued time to bring one adapter to the GPU (host->GPU, plus disk->host if from disk)."""
    t = load_latency_ms / 1e3 + nbytes / (pcie_gbps * 1e9)
    if from_disk:
        t += disk_latency_ms / 1e3 + nbytes / (disk_gbps * 1e9)
    return t


#: All-reduces of one forward pass of a tensor-parallel group: two per layer (after the attention's o_proj and
#: after the MLP's down_proj, Megatron-style as vLLM and SGLang run it) and one for the vocabulary-parallel
#: input embedding (docs/model.md 5.7).
def allreduces_per_step(model) -> int:
    return 2 * model.n_layers + 1


def allreduce_step_terms(model, gpu: str, tp: int) -> tuple[float, float]:
    """(seconds per step, seconds per token in the step) of a tensor-parallel group's all-reduces: each of
    ``allreduces_per_step`` reduces tokens x hidden_size x 2 bytes over ``gpu``'s interconnect
    (``presets.interconnect.allreduce_terms``, linear in bytes), so a step of T tokens takes
    n (latency + 2 (tp - 1) / tp x T x hidden x 2 / bus bandwidth); not overlapped with compute.  (0, 0) at tp 1."""
    if tp <= 1:
        return 0.0, 0.0
    lat, per_byte = allreduce_terms(tp, gpu_link(gpu))
    n = allreduces_per_step(model)
    return n * lat, n * per_byte * DTYPE_BYTES * model.hidden_size
