"""Server command lines to copy: a scenario as ``vllm serve ...`` and ``python -m sglang.launch_server ...``.

Each flag comes with a trace ``(flag, value, source)``: the scenario field it comes from, or a
rule named in ``RULES``.  Flag names, types and defaults were read from (tests/fixtures/server_flags.json):

* vLLM 0.33.0 (PyPI wheel, commit g4ba787ec9, files dated 2026-11-01): ``vllm/engine/arg_utils.py``,
  ``vllm/config/lora.py`` (``max_loras`` >= 1, default 1; ``max_lora_rank`` in 1, 8, ..., 512, default 16;
  ``--max-cpu-loras`` 0 or unset = ``max_loras``), ``vllm/config/cache.py`` (``gpu_memory_utilization``
  0.92), ``vllm/v1/core/kv_cache_planning.py`` (the start-up check that one ``max_model_len`` request fits
  in the KV cache); cross-checked with vllm-project/vllm ``vllm/config/lora.py`` @01230b40.
* SGLang 0.5.23 (PyPI wheel, files dated 2026-10-30): ``sglang/srt/arg_groups/fields/{lora,schedule,model,
  memory}.py`` (the fields behind ``server_args.py``), ``arg_groups/lora_hook.py``, ``lora/mem_pool.py``.

Not mapped (no server flag, or the model's description of the hardware, not a setting): PCIe/disk
bandwidth and latencies, cost-model parameters, the workload, ``kv_block_tokens`` (both default to 16-token
pages on CUDA), the adapter paths and names (user-specific: a placeholder comment is emitted), and the
strategies without a server equivalent (``hot_set``, ``batch``, ``oracle``, the KV-benchmark policies):
for those the Command has ``supported=False`` and a note, never an invented flag.
"""
from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field

from .. import presets
from ..calibration import vllm_slot_bytes
from ..policies import STRATEGIES
from ..scenario import Scenario
from .memory import VLLM_MAX_LORA_RANKS, vllm_max_lora_rank

SOURCES = {
    "vllm": "vllm 0.33.0 (PyPI wheel, commit g4ba787ec9, 2026-11-01): vllm/engine/arg_utils.py, vllm/config/lora.py",
    "sglang": "sglang 0.5.23 (PyPI wheel, 2026-10-30): sglang/srt/arg_groups/fields/lora.py, schedule.py, model.py",
}

#: Derived values: rule name -> how it is computed from the scenario.
RULES = {
    "hf_repo_id": "the model preset's Hugging Face repo id (Model.source without ' (config.json)')",
    "always": "needed to serve adapters at all",
    "memory_slots": "max_loras 0 (slots limited by memory): adapters of the server's slot size at the rank "
                    "flag that the adapter memory holds (vram_budget_gb; unified: plus the KV left after one "
                    "longest request), capped by num_adapters and max_batch_size, at least 1",
    "host_cache_all": "max_cpu_loras 0 (no host cache limit): num_adapters, so every adapter stays in host "
                      "memory; at least the GPU slots (both servers require it)",
    "lru": "the model evicts the least recently used adapter",
    "no_prefix_cache": "the model has no prefix cache: drop the flag to let the server reuse shared prompts",
    "mem_fraction_static": "SGLang's static share (weights + LoRA pool + KV) = gpu_mem_util - reserve_gb / "
                           "GPU memory (reserve_gb: activations, CUDA graphs), rounded down to 0.001",
    "max_request_tokens": "prompt + output of the longest request the length distribution draws "
                          "(prompt_tokens, output_tokens, length_dist, length_spread)",
    "kv_tokens": "kv_cache_gb / KV bytes per token of the model",
}

#: Strategies with a real-server equivalent -> the server that is the closest.
CLOSEST = {"vllm": "vllm", "naive": "vllm", "preload_lru": "vllm", "slora": "sglang"}

_PIN = ("pinning has no vLLM/SGLang flag: vLLM cannot pin adapters; SGLang pins per adapter "
        "({\"pinned\": true} in a --lora-paths JSON entry or /load_lora_adapter), which names your adapters")
UNSUPPORTED = {
    "hot_set": f"hot-set {_PIN}; the nearest runnable setting is strategy 'vllm' (LRU slots)",
    "batch": "batch-by-adapter (batch_window_ms windows, admission grouped by adapter) has no vLLM/SGLang flag: "
             "both admit FCFS, and SGLang's --schedule-policy choices do not group by adapter",
    "oracle": "Belady's eviction needs the future requests: an offline lower bound, no server runs it",
    "single_adapter": "a benchmark baseline (all traffic on adapter 0): a property of the workload, not a flag",
    "round_robin_k1": "one resident adapter with strict FCFS blocking has no flag: --max-loras 1 "
                      "(--max-loras-per-batch 1) caps the batch at one adapter, but both servers pass over "
                      "waiting requests instead of blocking, and keep other adapters in host memory",
    "batch_t4_k2": "switching adapters only once 4 requests wait has no vLLM/SGLang flag (SGLang's "
                   "--lora-drain-wait-threshold drains after a wait time, not a queue-length threshold)",
    "hotset_32mb": f"pinning the most popular adapters within 32 MiB of KV memory: {_PIN}",
    "hotset_64mb": f"pinning the most popular adapters within 64 MiB of KV memory: {_PIN}",
    "hotset_batch_t4": f"pinning within 32 MiB plus threshold-4 grouping: {_PIN}; grouping has no flag either",
}


@dataclass
class Command:
    server: str                                   # "vllm" or "sglang"
    argv: list[str] = field(default_factory=list)
    text: str = ""                                # shell line(s) to copy
    trace: list[tuple[str, str, str]] = field(default_factory=list)  # (flag, value, scenario field or rule)
    supported: bool = True
    note: str = ""


class _Line:
    def __init__(self, server: str, head: list[str]):
        self.server, self.head, self.groups, self.trace = server, head, [], []

    def add(self, flag: str, values, source: str) -> None:
        values = [] if values is None else [str(v) for v in (values if isinstance(values, list) else [values])]
        self.groups.append([flag, *values])
        self.trace.append((flag, " ".join(values), source))

    def command(self, comment: str, notes: list[str]) -> Command:
        lines = [shlex.join(self.head)] + [shlex.join(g) for g in self.groups]
        argv = self.head + [x for g in self.groups for x in g]
        return Command(self.server, argv, f"# {comment}\n" + " \\\n  ".join(lines), self.trace, True,
                       " ".join(notes))


def _check(sc) -> Scenario:
    if not isinstance(sc, Scenario):
        raise ValueError(f"sc: invalid value of type {type(sc).__name__}; allowed: an engine.Scenario")
    return sc.validate()


def _unsupported(server: str, sc: Scenario) -> Command | None:
    if sc.strategy in CLOSEST:
        return None
    why = UNSUPPORTED.get(sc.strategy, "no mapping to a real server is defined")
    return Command(server, [], "", [], False, f"strategy {sc.strategy!r}: {why}.")


def _modes(sc: Scenario) -> tuple[str, str]:
    pol = STRATEGIES[sc.strategy]
    return pol.memory_mode or sc.memory_mode, pol.load_mode or sc.load_mode


def _slots(sc: Scenario, slot_bytes: int) -> int:
    """RULES['memory_slots']."""
    plan = sc.memory_plan()
    room = plan["adapters"]
    if _modes(sc)[0] == "unified":
        room += plan["kv"] - sc.max_request_kv_bytes()
    return max(1, min(int(room // slot_bytes), sc.num_adapters, sc.max_batch_size))


def _model_id(sc: Scenario) -> str:
    return sc.model_spec.source.split(" (")[0].strip()


def _host_cache(sc: Scenario, slots: int) -> tuple[int, str]:
    if sc.max_cpu_loras > 0:
        return max(sc.max_cpu_loras, slots), "max_cpu_loras" + (" (raised to the GPU slots)"
                                                                 if sc.max_cpu_loras < slots else "")
    return max(sc.num_adapters, slots), "rule: host_cache_all (max_cpu_loras 0 = no limit)"


def _common_notes(sc: Scenario, server: str) -> list[str]:
    memory_mode, load_mode = _modes(sc)
    out = []
    if memory_mode == "unified":
        out.append(f"{server}'s LoRA memory is a preallocated pool of fixed slots at the rank flag, separate "
                   "from the KV cache: the model's unified adapter/KV pool (S-LoRA) has no equivalent.")
    if load_mode == "async" and server == "vllm":
        out.append("vLLM loads adapters synchronously in the step: the model's async loads/prefetch do not exist.")
    if sc.kv_reservation == "full":
        out.append(f"{server} allocates KV on demand and preempts; the model reserves prompt+output at admission.")
    if sc.kv_allocator == "contiguous":
        out.append(f"{server}'s KV cache is paged; the model's contiguous allocator (fragmentation) is not.")
    return out


def vllm_command(sc: Scenario) -> Command:
    """``vllm serve`` for the scenario (closest server for strategies vllm, naive, preload_lru)."""
    sc = _check(sc)
    if (u := _unsupported("vllm", sc)) is not None:
        return u
    try:
        rank = vllm_max_lora_rank(sc)
    except ValueError as e:
        return Command("vllm", [], "", [], False, f"{e}: vLLM cannot serve these adapters.")
    slot = vllm_slot_bytes(rank, sc.model)
    cmd = _Line("vllm", ["vllm", "serve", _model_id(sc)])
    cmd.trace.append(("model", _model_id(sc), "model (rule: hf_repo_id)"))
    cmd.add("--enable-lora", None, "rule: always")
    if sc.max_loras > 0:
        slots, src = sc.max_loras, "max_loras"
    else:
        slots = _slots(sc, slot)
        src = ("rule: memory_slots (max_loras 0; vLLM needs >= 1 and defaults to 1, so it is emitted: "
               f"vLLM slot {slot / presets.MIB:.1f} MiB)")
    cmd.add("--max-loras", slots, src)
    host, hsrc = _host_cache(sc, slots)
    cmd.add("--max-cpu-loras", host, hsrc + "; vLLM's 0/unset means = --max-loras (no host cache)")
    cmd.add("--max-lora-rank", rank, f"adapter_rank/adapter_ranks: smallest of {VLLM_MAX_LORA_RANKS} "
                                     f">= max rank {max(sc.ranks())}")
    cmd.add("--gpu-memory-utilization", float(sc.gpu_mem_util), "gpu_mem_util")
    cmd.add("--max-num-seqs", sc.max_batch_size, "max_batch_size")
    cmd.add("--max-num-batched-tokens", sc.max_batched_tokens, "max_batched_tokens")
    if not sc.chunked_prefill_on():
        cmd.add("--no-enable-chunked-prefill", None, f"chunked_prefill {sc.chunked_prefill!r}")
    cmd.add("--max-model-len", sc.max_request_tokens(), "rule: max_request_tokens")
    if sc.kv_cache_gb > 0:
        cmd.add("--kv-cache-memory-bytes", int(sc.kv_cache_gb * presets.GIB), "kv_cache_gb (GiB -> bytes)")
    cmd.add("--no-enable-prefix-caching", None, "rule: no_prefix_cache")
    closest = CLOSEST[sc.strategy]
    notes = [{"vllm": "Same policy family: FCFS, at most --max-loras adapters per batch, LRU GPU slots behind "
                      "an LRU host cache, synchronous loads.",
              "naive": "Closest: vLLM's LRU slots; unlike 'naive', vLLM passes over a request whose adapter "
                       "has no slot instead of blocking the queue.",
              "preload_lru": "Closest: vLLM's LRU slots; vLLM does not fill the GPU slots before the first "
                             "requests (--lora-modules only fills the host cache).",
              "slora": "Approximate: SGLang is closer to S-LoRA; vLLM has fixed slots and sync loads."}[sc.strategy]]
    budget = slots * slot / presets.GIB
    if budget > sc.vram_budget_gb + 1e-9:
        plan = sc.memory_plan()
        kv_left = (plan["usable"] - plan["weights"] - plan["reserve"]) / presets.GIB - budget
        notes.append(f"vLLM preallocates {slots} slots x {slot / presets.MIB:.1f} MiB (all linear modules + "
                     f"embeddings at rank {rank}) = {budget:.2f} GiB, more than vram_budget_gb "
                     f"{sc.vram_budget_gb:g}: about {kv_left:.2f} GiB are left for KV; lower --max-loras "
                     "to the distinct adapters you expect per batch.")
    notes += _common_notes(sc, "vLLM")
    if sc.max_batched_tokens < sc.max_batch_size:
        notes.append("vLLM refuses to start: --max-num-batched-tokens must be >= --max-num-seqs.")
    notes.append("--max-model-len is the longest request, so vLLM's start-up check (one max-model-len request "
                 "fits in the KV cache) is the scenario validation's (vram_budget_gb <= max_vram_budget_gb). "
                 + ("vLLM's token budget counts decode tokens too and long prompts are split over steps "
                    "(chunked prefill, V1's default), as in the scenario. " if sc.chunked_prefill_on() else "") +
                 "--lora-modules adapters are loaded into the host cache at start (host_warm); beyond "
                 "--max-cpu-loras they are re-read from disk; GPU loads cross PCIe inside the step.")
    if closest != "vllm":
        notes.append(f"Closest server for {sc.strategy!r}: {closest}.")
    return cmd.command("add your adapters: --lora-modules NAME=PATH [NAME=PATH ...] (user-specific)", notes)


def sglang_command(sc: Scenario) -> Command:
    """``python -m sglang.launch_server`` for the scenario (closest server for strategy slora)."""
    sc = _check(sc)
    if (u := _unsupported("sglang", sc)) is not None:
        return u
    rank = max(sc.ranks())
    slot = presets.adapter_bytes(sc.model_spec, rank, sc.target_modules)
    model = _model_id(sc)
    cmd = _Line("sglang", ["python", "-m", "sglang.launch_server"])
    cmd.add("--model-path", model, "model (rule: hf_repo_id)")
    cmd.add("--enable-lora", None, "rule: always")
    if sc.max_loras > 0:
        slots, src = sc.max_loras, "max_loras"
    else:
        slots = _slots(sc, slot)
        src = f"rule: memory_slots (max_loras 0; SGLang's default is 8; slot {slot / presets.MIB:.1f} MiB)"
    cmd.add("--max-loras-per-batch", slots, src)
    if sc.max_cpu_loras > 0:
        host, hsrc = _host_cache(sc, slots)
        cmd.add("--max-loaded-loras", host, hsrc)
    cmd.add("--lora-eviction-policy", "lru", "rule: lru")
    cmd.add("--max-lora-rank", rank, "adapter_rank/adapter_ranks (largest rank)")
    cmd.add("--lora-target-modules", list(presets.TARGET_MODULES[sc.target_modules]), "target_modules")
    frac = math.floor((sc.gpu_mem_util - sc.reserve_gb / sc.gpu_spec.memory_gib) * 1000) / 1000
    cmd.add("--mem-fraction-static", frac, "rule: mem_fraction_static (gpu_mem_util, reserve_gb)")
    cmd.add("--max-running-requests", sc.max_batch_size, "max_batch_size")
    cmd.add("--chunked-prefill-size", sc.max_batched_tokens, "max_batched_tokens")
    pmax = sc.length_bounds(sc.prompt_tokens)[1]
    cmd.add("--context-length", max(sc.max_request_tokens() + 1, pmax + 6),
            "rule: max_request_tokens (+1: SGLang admits prompt+output <= context-length - 1, prompt <= -6)")
    if sc.kv_cache_gb > 0:
        cmd.add("--max-total-tokens", int(sc.kv_cache_gb * presets.GIB // presets.kv_bytes_per_token(sc.model_spec)),
                "kv_cache_gb (rule: kv_tokens)")
    cmd.add("--disable-radix-cache", None, "rule: no_prefix_cache")
    notes = []
    if sc.strategy == "slora":
        notes.append("Closest to S-LoRA: SGLang's multi-LoRA serving (S-LoRA/Punica-style batched kernels, LRU "
                     "GPU slots), but its LoRA memory is a separate pool of --max-loras-per-batch slots at "
                     "--max-lora-rank, allocated before the KV pool inside --mem-fraction-static "
                     "(lora/mem_pool.py), not S-LoRA's unified paging with the KV cache; there is no prefetch "
                     "for queued requests (--enable-lora-overlap-loading overlaps loads but needs "
                     "--max-loaded-loras <= 2 x --max-loras-per-batch).")
        if sc.max_loras == 0:
            notes.append(f"{slots} slots take {slots * slot / presets.GIB:.2f} GiB from the KV pool for the "
                         "whole run: lower --max-loras-per-batch to the distinct adapters you expect per batch.")
    else:
        notes.append(f"Approximate: SGLang also keeps LRU GPU slots; vLLM is the closest server for "
                     f"{sc.strategy!r}.")
    notes += [n for n in _common_notes(sc, "SGLang") if "unified" not in n or sc.strategy != "slora"]
    notes.append(("--max-loaded-loras omitted: SGLang's default (no limit) is the scenario's max_cpu_loras 0. "
                  if sc.max_cpu_loras == 0 else "")
                 + "Adapters must be registered (--lora-paths or POST /load_lora_adapter); they are then in "
                   "host memory (host_warm); GPU loads are synchronous. SGLang only warns when the KV pool "
                   "is smaller than --context-length. --max-loras-per-batch counts base-model requests too.")
    return cmd.command("add your adapters: --lora-paths NAME=PATH [NAME=PATH ...] (user-specific)", notes)


def server_commands(sc: Scenario) -> list[Command]:
    """Both command lines (vLLM, SGLang); see ``Command.supported`` and ``Command.note``."""
    return [vllm_command(sc), sglang_command(sc)]
