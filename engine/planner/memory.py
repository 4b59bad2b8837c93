"""GPU memory of a configuration: one breakdown in bytes (``memory_breakdown``), and the sentence and the table
columns computed from it (``memory_sentence``, ``memory_split``); vLLM's slot sizing.

The breakdown adds up by construction: ``gpu = usable + headroom``; ``usable = weights + reserve + adapter budget +
kv + unallocated``; ``adapter budget = slots x slot + spare``.  A *slot* is what one resident adapter takes: for
strategy ``vllm`` with ``max_loras`` set, vLLM's slot (``engine.calibration.vllm_slot_bytes``: every linear module
plus the embedding and lm_head buffers at ``--max-lora-rank``, whatever modules an adapter targets), otherwise the
largest adapter's own bytes (its ``target_modules`` at its rank).  The two differ: a rank-16 Llama-3.1-8B adapter
of q/k/v/o is 26 MiB, of every linear module 80 MiB, and vLLM's slot at rank 16 is 92.1 MiB.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import presets
from ..calibration import vllm_slot_bytes
from ..presets.servers import VLLM_MAX_LORA_RANKS, vllm_rank_holding
from ..scenario import Scenario
from ..sim import effective


def vllm_max_lora_rank(sc: Scenario) -> int:
    """Smallest rank vLLM accepts that holds the scenario's largest adapter rank."""
    r = max(sc.ranks())
    if (v := vllm_rank_holding(r)) is not None:
        return v
    raise ValueError(f"adapter_rank: invalid value {r}; allowed: at most {VLLM_MAX_LORA_RANKS[-1]} for vLLM")


def vllm_slot_budget_gb(sc: Scenario) -> float:
    """GiB vLLM preallocates for ``max_loras`` slots at ``--max-lora-rank`` (all linear modules and the
    embedding/lm_head buffers: ``engine.calibration.vllm_slot_bytes``)."""
    return sc.max_loras * vllm_slot_bytes(vllm_max_lora_rank(sc), sc.model, tp=sc.tensor_parallel_size) / presets.GIB


def sglang_slot_budget_gb(sc: Scenario) -> float:
    """GiB SGLang preallocates for ``max_loras`` (--max-loras-per-batch) slots: its LoRA pool holds each target
    module at --max-lora-rank (lora/mem_pool.py), i.e. the largest adapter's bytes per slot."""
    return sc.max_loras * sc.max_adapter_bytes() / presets.GIB


def request_kv_bytes(sc: Scenario) -> int:
    """KV bytes of one request of mean length (prompt + output tokens, whole blocks)."""
    blocks = -(-(sc.prompt_tokens + sc.output_tokens) // sc.kv_block_tokens)
    return blocks * sc.kv_block_tokens * sc.kv_bytes_per_token()


@dataclass(frozen=True)
class MemoryBreakdown:
    """One configuration's GPU memory in whole bytes (``Scenario.memory_plan`` rounded to bytes).

    ``slots`` adapter slots of ``slot`` bytes each sit in the adapter budget (``vram_budget_gb``); ``spare`` is
    the budget no whole slot uses.  ``slot_kind``: ``"vllm"`` (vLLM's slot at ``max_lora_rank``) or
    ``"adapter"`` (the largest adapter).  ``slots_wanted``: the slots the configuration asks for (``max_loras``
    for vLLM; else ``slots``).  ``adapters_fit``: adapters the simulation keeps resident at most (the budget in
    adapters of their own size, under ``max_loras`` and the policy's cap).  ``kv_request``: KV bytes of one
    request of mean length.  ``unified``: adapters and KV share one pool (S-LoRA).  ``slot_cap``: resident
    adapters at most (``max_loras`` or the policy's cap; 0 = memory only).
    """

    gpu: int
    usable: int
    weights: int
    reserve: int
    adapter_budget: int
    slots: int
    slot: int
    slot_kind: str
    slots_wanted: int
    max_lora_rank: int
    adapter: int
    adapters_fit: int
    kv: int
    kv_request: int
    unified: bool
    slot_cap: int = 0

    @property
    def slots_total(self) -> int:
        """``slots x slot``."""
        return self.slots * self.slot

    @property
    def spare(self) -> int:
        """Adapter budget that no whole slot uses."""
        return self.adapter_budget - self.slots_total

    @property
    def unallocated(self) -> int:
        """Usable memory outside weights, reserve, adapter budget and KV (``kv_cache_gb`` caps the KV)."""
        return self.usable - self.weights - self.reserve - self.adapter_budget - self.kv

    @property
    def headroom(self) -> int:
        """GPU memory outside ``gpu_mem_util``."""
        return self.gpu - self.usable

    @property
    def pool_adapters(self) -> int:
        """Unified memory: adapters of the largest size the whole pool (budget + KV) holds with no KV in use,
        under ``slot_cap``."""
        n = int((self.adapter_budget + self.kv) // self.adapter) if self.adapter and self.kv > 0 else 0
        return min(n, self.slot_cap) if self.slot_cap > 0 else n

    @property
    def kv_requests(self) -> int:
        """Requests of mean length whose KV fits at once."""
        return int(self.kv // self.kv_request) if self.kv_request and self.kv > 0 else 0

    def parts(self) -> dict[str, int]:
        """The named amounts, in bytes, that sum to ``gpu``."""
        return {"weights": self.weights, "reserve": self.reserve, "adapter_slots": self.slots_total,
                "adapter_spare": self.spare, "kv": self.kv, "unallocated": self.unallocated,
                "headroom": self.headroom}


def memory_breakdown(sc: Scenario) -> MemoryBreakdown:
    """The breakdown of ``sc`` (see the module docstring)."""
    g, m = sc.gpu_spec, sc.model_spec
    gpu = round(g.memory_gib * presets.GIB)
    usable = round(g.memory_gib * presets.GIB * sc.gpu_mem_util)
    weights = int(presets.weight_bytes(m, tp=sc.tensor_parallel_size))
    reserve = round(sc.reserve_gb * presets.GIB)
    budget = round(sc.vram_budget_gb * presets.GIB)
    free = usable - weights - reserve - budget
    kv = min(free, round(sc.kv_cache_gb * presets.GIB)) if sc.kv_cache_gb > 0 else free
    amax = int(sc.max_adapter_bytes())
    eff = effective(sc)
    cap = eff["slots"]
    fit = budget // amax if amax else 0
    fit = min(fit, cap) if cap > 0 else fit
    rank, kind, slot, slots, wanted = 0, "adapter", amax, fit, fit
    if sc.strategy == "vllm" and sc.max_loras > 0:
        try:
            rank = vllm_max_lora_rank(sc)
        except ValueError:
            rank = 0
        if rank:
            kind, slot, wanted = "vllm", int(vllm_slot_bytes(rank, sc.model, tp=sc.tensor_parallel_size)), int(sc.max_loras)
            slots = min(wanted, budget // slot)
    return MemoryBreakdown(gpu=gpu, usable=usable, weights=weights, reserve=reserve, adapter_budget=budget,
                           slots=int(max(slots, 0)), slot=slot, slot_kind=kind, slots_wanted=int(max(wanted, 0)),
                           max_lora_rank=rank, adapter=amax, adapters_fit=int(max(fit, 0)), kv=kv,
                           kv_request=request_kv_bytes(sc), unified=eff["memory_mode"] == "unified",
                           slot_cap=int(max(cap, 0)))


def memory_split(sc: Scenario) -> dict:
    """The breakdown as table columns: amounts in GiB (``*_gib``; the parts sum to ``gpu_gib``), the slot and the
    largest adapter in MiB, ``adapter_slots`` (count), ``adapters_fit`` (resident at most in the simulation) and
    ``kv_concurrent_requests`` (requests of mean length the KV holds at once)."""
    b = memory_breakdown(sc)
    g, mib = presets.GIB, presets.MIB
    return {
        "gpu_gib": b.gpu / g,
        "usable_gib": b.usable / g,
        "weights_gib": b.weights / g,
        "reserve_gib": b.reserve / g,
        "adapters_gib": b.adapter_budget / g,
        "adapter_slots": b.slots,
        "slot_mib": b.slot / mib,
        "slots_gib": b.slots_total / g,
        "adapter_spare_gib": b.spare / g,
        "kv_gib": b.kv / g,
        "unallocated_gib": b.unallocated / g,
        "headroom_gib": b.headroom / g,
        "adapter_mib": b.adapter / mib,
        "adapters_fit": b.adapters_fit,
        "kv_concurrent_requests": b.kv_requests,
    }


def _gib(x: float) -> str:
    return f"{x / presets.GIB:.2f} GiB"


def memory_sentence(sc: Scenario, b: MemoryBreakdown | None = None) -> str:
    """The breakdown in words; every number is the breakdown's, rounded (GiB to 0.1 or 0.01, MiB to 0.1).

    E.g. "57.6 GiB usable (64 GiB x gpu_mem_util 0.9): 15.0 GiB of weights, 5.0 GiB reserve, 32 slots x 92.1 MiB
    = 2.88 GiB of adapters (...), 34.8 GiB of KV: about 684 requests of 222+194 tokens at once".
    """
    b = b or memory_breakdown(sc)
    g, mib = presets.GIB, presets.MIB
    own = f"{sc.target_modules} at rank {max(sc.ranks())}"
    if b.slot_kind == "vllm":
        why = (f"vLLM's slot at --max-lora-rank {b.max_lora_rank}: every linear module plus the embedding and "
               f"lm_head buffers; one adapter, {own}, is {b.adapter / mib:.1f} MiB")
        if b.slots < b.slots_wanted:
            adapters = (f"{b.slots} slots x {b.slot / mib:.1f} MiB = {_gib(b.slots_total)} of adapters, all the "
                        f"{_gib(b.adapter_budget)} adapter budget holds of the {b.slots_wanted} slots vLLM reserves "
                        f"for --max-loras {b.slots_wanted} ({_gib(b.slots_wanted * b.slot)}; {why}; the simulation "
                        f"keeps up to {b.adapters_fit} adapters of their own size in the budget)")
        else:
            adapters = f"{b.slots} slots x {b.slot / mib:.1f} MiB = {_gib(b.slots_total)} of adapters ({why})"
    else:
        adapters = (f"{b.slots} adapters x {b.slot / mib:.1f} MiB = {_gib(b.slots_total)} of adapters "
                    f"(the largest adapter: {own})")
    if b.spare >= 0.005 * g:
        adapters += f" + {_gib(b.spare)} of the adapter budget unused"
    parts = [f"{b.weights / g:.1f} GiB of weights", f"{b.reserve / g:.1f} GiB reserve", adapters,
             f"{b.kv / g:.1f} GiB of KV"]
    if b.unallocated >= 0.05 * g:
        parts.append(f"{b.unallocated / g:.1f} GiB unallocated (kv_cache_gb {sc.kv_cache_gb:g} caps the KV)")
    head = f"{b.usable / g:.1f} GiB usable ({sc.gpu_spec.memory_gib:g} GiB x gpu_mem_util {sc.gpu_mem_util:g}): "
    tail = (f": about {b.kv_requests:,} requests of {sc.prompt_tokens}+{sc.output_tokens} tokens at once"
            + (f" (the batch is capped at {sc.max_batch_size})" if sc.max_batch_size < b.kv_requests else ""))
    pool = (f"; adapters and KV share one pool of {_gib(b.adapter_budget + b.kv)} (unified memory): up to "
            f"{b.pool_adapters:,} adapters of {b.adapter / mib:.1f} MiB when no KV is in use" if b.unified else "")
    return head + ", ".join(parts) + tail + pool
