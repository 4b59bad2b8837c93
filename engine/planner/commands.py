"""Server command lines to copy: a scenario as ``vllm serve ...`` and ``python -m sglang.launch_server ...``.

A command has two parts (issue 24 item 5):

* **The flags this answer sets** (``Command.argv`` / ``Command.text``): the model, the LoRA switch, the LoRA
  slots (``max_loras``), the host cache (``max_cpu_loras``), the rank, the memory share, a KV cap the scenario
  sets, and the batch limits only when the plan decided them (``decided``: the plan's grid fields).  Each flag
  has a trace ``(flag, value, source)``: the scenario field it comes from, or a rule named in ``RULES``.  A
  value equal to the server's own default (``SERVER_DEFAULTS``, ``VLLM_BATCH_DEFAULTS``) is not printed; it
  is listed in ``Command.at_default`` with its trace.
* **What the simulation assumed** (``Command.assumptions``): ``(server setting, plain words)`` for every
  setting of the server that the command starts where the simulated server differs (the batch cap, the
  token budget, chunked prefill, no prefix cache where the strategy has none, the longest request), both values
  said.  Never a flag.  The prefix cache: strategies vllm and sglang simulate it as both servers run it (on,
  keyed by adapter: nothing to say); ``prefix_caching`` 'off' prints the flag that turns it off
  (``--no-enable-prefix-caching``, ``--disable-radix-cache``).

No flag refuses part of the traffic: ``--max-model-len`` (vLLM) / ``--context-length`` (SGLang) is printed
only when the model's full context (``MODEL_CONTEXT``) does not fit in the KV cache at the scenario's memory
(vLLM's start-up check: one request of max_model_len tokens must fit in the KV cache), and it is then the
largest length that fits (rule ``kv_fit``), with a note.

Flag names, types and defaults were read from (tests/fixtures/server_flags.json):

* vLLM 0.33.0 (PyPI wheel, commit g4ba787ec9, files dated 2026-11-01): ``vllm/engine/arg_utils.py``,
  ``vllm/config/lora.py`` (``max_loras`` >= 1, default 1; ``max_lora_rank`` in 1, 8, ..., 512, default 16;
  ``--max-cpu-loras`` 0 or unset = ``max_loras``), ``vllm/config/cache.py`` (``gpu_memory_utilization``
  0.92), ``vllm/config/scheduler.py`` and ``arg_utils.py`` (the API server's ``max_num_seqs`` and
  ``max_num_batched_tokens`` per GPU: ``VLLM_BATCH_DEFAULTS``), ``vllm/v1/core/kv_cache_planning.py`` (the
  start-up check that one ``max_model_len`` request fits in the KV cache); cross-checked with
  vllm-project/vllm ``vllm/config/lora.py`` @01230b40.
* SGLang 0.5.23 (PyPI wheel, files dated 2026-10-30): ``sglang/srt/arg_groups/fields/{lora,schedule,model,
  memory}.py`` (the fields behind ``server_args.py``), ``arg_groups/lora_hook.py``, ``lora/mem_pool.py``.
  SGLang computes ``--max-running-requests``, ``--chunked-prefill-size`` and ``--mem-fraction-static`` at
  start from the GPU and the KV pool; the fixture records only their ``None`` (so they are never "equal to
  the default" here: a decided one is printed, an assumed one says the server computes its own).

Not mapped (no server flag, or the model's description of the hardware, not a setting): PCIe/disk
bandwidth and latencies, cost-model parameters, the workload, ``kv_block_tokens`` (both servers page the KV
cache in 16-token blocks on CUDA: ``SERVER_PAGE_TOKENS``), tensor parallelism (the model runs one GPU per
replica, so no ``--tensor-parallel-size``), the adapter paths and names (user-specific: a placeholder
comment is emitted), and the strategies without a server equivalent (``hot_set``, ``batch``, ``oracle``, the
KV-benchmark policies): for those the Command has ``supported=False`` and a note, never an invented flag.
"""
from __future__ import annotations

import math
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field

from .. import presets
from ..calibration import VLLM_MAX_MODEL_LEN, vllm_slot_bytes
from ..policies import STRATEGIES
from ..prefix import caching_on
from ..presets.servers import VLLM_BATCH_DEFAULTS, VLLM_MAX_LORA_RANKS, vllm_batch_defaults  # noqa: F401 (re-exported)
from ..scenario import Scenario
from .memory import vllm_max_lora_rank

SOURCES = {
    "vllm": "vllm 0.33.0 (PyPI wheel, commit g4ba787ec9, 2026-11-01): vllm/engine/arg_utils.py, vllm/config/lora.py",
    "sglang": "sglang 0.5.23 (PyPI wheel, 2026-10-30): sglang/srt/arg_groups/fields/lora.py, schedule.py, model.py",
}
FLAG_FIXTURE = "tests/fixtures/server_flags.json"

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
    "mem_fraction_static": "SGLang's static share (weights + LoRA pool + KV) = gpu_mem_util - reserve_gb / "
                           "GPU memory (reserve_gb: activations, CUDA graphs), rounded down to 0.001",
    "kv_tokens": "kv_cache_gb / KV bytes per token of the model",
    "kv_room": "the server's KV cache at the scenario's memory: GPU memory x gpu_mem_util - weights - reserve_gb "
               "- the server's LoRA slots (vLLM: --max-loras slots of all linear modules + embeddings at "
               "--max-lora-rank; SGLang: --max-loras-per-batch slots of the target modules at --max-lora-rank), "
               "at most kv_cache_gb when set",
    "kv_fit": "the model's full context (MODEL_CONTEXT) does not fit in the KV cache (rule kv_room): the "
              "largest length whose KV fits, in whole 16-token blocks (vLLM's start-up check)",
    "tokens_ge_seqs": "vLLM refuses max_num_batched_tokens < max_num_seqs: the scenario's max_batched_tokens, "
                      "at least the sequences",
    "whole_prompts": "without chunked prefill vLLM refuses max_num_batched_tokens < max_model_len: the longest "
                     "request the server accepts",
}

#: Scenario fields that are the simulation's assumption unless the plan decided them (its grid).
DECIDABLE = frozenset({"max_batch_size", "max_batched_tokens", "chunked_prefill"})

#: KV cache page of both servers on CUDA (vLLM's --block-size default 16; SGLang's page of 16 tokens as the
#: module docstring records); a length that fits is rounded down to whole pages.
SERVER_PAGE_TOKENS = 16


#: Server defaults of the settings this module prints or assumes, by argparse dest: (default, source).
#: None: computed by the server when it starts (``server_defaults`` fills the per-GPU and per-model ones).
SERVER_DEFAULTS: dict[str, dict[str, tuple[object, str]]] = {
    "vllm": {
        "enable_lora": (False, "--enable-lora unset (fixture default None): no LoRA"),
        "max_loras": (1, "vllm/config/lora.py LoRAConfig.max_loras (fixture)"),
        "max_cpu_loras": (None, "unset (or 0) = --max-loras (vllm/engine/arg_utils.py; fixture note)"),
        "max_lora_rank": (16, "vllm/config/lora.py LoRAConfig.max_lora_rank (fixture)"),
        "gpu_memory_utilization": (0.92, "vllm/config/cache.py CacheConfig.gpu_memory_utilization (fixture)"),
        "kv_cache_memory_bytes": (None, "unset: the KV cache takes what gpu_memory_utilization leaves (fixture)"),
        "max_num_seqs": (None, "per GPU: VLLM_BATCH_DEFAULTS (fixture note)"),
        "max_num_batched_tokens": (None, "per GPU: VLLM_BATCH_DEFAULTS (fixture note)"),
        "enable_chunked_prefill": (True, "unset = on in the V1 engine (fixture note)"),
        "enable_prefix_caching": (True, "--enable-prefix-caching default True (fixture)"),
        "max_model_len": (None, "the model's config.json: MODEL_CONTEXT (fixture note)"),
    },
    "sglang": {
        "enable_lora": (False, "--enable-lora unset (fixture default None): no LoRA"),
        "max_loras_per_batch": (8, "sglang/srt/arg_groups/fields/lora.py (fixture)"),
        "max_loaded_loras": (None, "None = no limit (fixture note)"),
        "lora_eviction_policy": ("lru", "sglang/srt/arg_groups/fields/lora.py (fixture)"),
        "max_lora_rank": (None, "None: inferred from the adapters given at start (fixture default None)"),
        "lora_target_modules": (None, "None: inferred from the adapters given at start (fixture default None)"),
        "mem_fraction_static": (None, "computed at start from the GPU (fixture default None; value not recorded)"),
        "max_running_requests": (None, "computed at start from the KV pool (fixture default None; value not "
                                       "recorded)"),
        "chunked_prefill_size": (None, "computed at start from the GPU (fixture default None; value not "
                                       "recorded)"),
        "context_length": (None, "the model's config.json: MODEL_CONTEXT"),
        "max_total_tokens": (None, "unset: the KV pool takes what --mem-fraction-static leaves (fixture)"),
        "disable_radix_cache": (False, "--disable-radix-cache default False: radix (prefix) cache on (fixture)"),
    },
}

#: The model's full context in tokens (config.json max_position_embeddings: the default max_model_len /
#: context_length of both servers) and where the number comes from.  The model presets have no such field
#: (engine/presets/models.py); a model missing here (e.g. one registered from an uploaded config.json) has an
#: unknown context: no --max-model-len is printed and a note gives the largest that fits.
MODEL_CONTEXT: dict[str, tuple[int, str]] = {
    "llama-7b": (2048, "huggyllama/llama-7b config.json max_position_embeddings (recalled, not re-read here)"),
    "llama-2-7b": (4096, "meta-llama/Llama-2-7b-hf config.json max_position_embeddings (recalled, not re-read "
                         "here)"),
    "llama-2-13b": (4096, "meta-llama/Llama-2-13b-hf config.json max_position_embeddings (recalled, not re-read "
                          "here)"),
    "llama-3.1-8b": (VLLM_MAX_MODEL_LEN, "meta-llama/Llama-3.1-8B config.json max_position_embeddings "
                                         "(engine.calibration.VLLM_MAX_MODEL_LEN)"),
    "mistral-7b": (32768, "mistralai/Mistral-7B-v0.1 config.json max_position_embeddings; its sliding window "
                          "(4096) does not cap it (recalled, not re-read here)"),
    "qwen2-0.5b": (131072, "Qwen/Qwen2-0.5B config.json max_position_embeddings (recalled, not re-read here)"),
    "qwen2-1.5b": (131072, "Qwen/Qwen2-1.5B config.json max_position_embeddings (recalled, not re-read here)"),
    "qwen2.5-7b": (131072, "Qwen/Qwen2.5-7B config.json max_position_embeddings (recalled, not re-read here)"),
    **{name: (int(cfg["max_position_embeddings"]), f"{repo} config.json max_position_embeddings, as stored in "
                                                   "engine/presets/hf.py")
       for name, (_, repo, cfg) in presets.HF_PRESET_CONFIGS.items() if "max_position_embeddings" in cfg},
}

#: Strategies with a real-server equivalent -> the server that is the closest.
CLOSEST = {"vllm": "vllm", "naive": "vllm", "preload_lru": "vllm", "slora": "sglang", "sglang": "sglang"}

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
    text: str = ""                                # shell line(s) to copy: the flags this answer sets
    trace: list[tuple[str, str, str]] = field(default_factory=list)  # (flag, value, scenario field or rule)
    supported: bool = True
    note: str = ""
    #: (server setting, what the simulation assumed): where the simulated server differs from this command's.
    assumptions: list[tuple[str, str]] = field(default_factory=list)
    #: (flag, value, source): the answer's value is the server's default, so the flag is not printed.
    at_default: list[tuple[str, str, str]] = field(default_factory=list)


class _Line:
    def __init__(self, server: str, head: list[str], defaults: dict[str, object]):
        self.server, self.head, self.defaults = server, head, defaults
        self.groups, self.trace, self.at_default, self.assumptions = [], [], [], []

    def add(self, flag: str, values, source: str) -> None:
        values = [] if values is None else [str(v) for v in (values if isinstance(values, list) else [values])]
        self.groups.append([flag, *values])
        self.trace.append((flag, " ".join(values), source))

    def set(self, flag: str, value, source: str, default=None) -> None:
        """``add`` unless ``value`` is the server's default (``default``, else ``defaults[dest]``)."""
        d = self.defaults.get(flag[2:].replace("-", "_")) if default is None else default
        if value == d:
            self.at_default.append((flag, str(value), source + f" = {_NAME[self.server]}'s default: not printed"))
        else:
            self.add(flag, value, source)

    def assume(self, setting: str, text: str) -> None:
        self.assumptions.append((setting, text))

    def command(self, comment: str, notes: list[str]) -> Command:
        lines = [shlex.join(self.head)] + [shlex.join(g) for g in self.groups]
        argv = self.head + [x for g in self.groups for x in g]
        return Command(self.server, argv, f"# {comment}\n" + " \\\n  ".join(lines), self.trace, True,
                       " ".join(notes), self.assumptions, self.at_default)


_NAME = {"vllm": "vLLM", "sglang": "SGLang"}


def _check(sc) -> Scenario:
    if not isinstance(sc, Scenario):
        raise ValueError(f"sc: invalid value of type {type(sc).__name__}; allowed: an engine.Scenario")
    return sc.validate()


def _decided(decided) -> frozenset[str]:
    if isinstance(decided, str) or not isinstance(decided, Iterable):
        raise ValueError(f"decided: invalid value {decided!r}; allowed: scenario field names (the plan's grid)")
    out = frozenset(decided)
    bad = sorted(str(f) for f in out - set(Scenario.field_names()))
    if bad:
        raise ValueError(f"decided: unknown scenario field {bad[0]!r}; allowed: scenario field names")
    return out


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


def model_context(sc: Scenario) -> tuple[int | None, str]:
    """The model's full context in tokens and its source (``MODEL_CONTEXT``); None for a model not listed."""
    if presets.is_preset_model(sc.model) and sc.model in MODEL_CONTEXT:
        return MODEL_CONTEXT[sc.model]
    return None, f"model {sc.model!r} is not a preset with a known context (MODEL_CONTEXT)"


def server_defaults(sc: Scenario, server: str) -> dict[str, object]:
    """The configuration ``server`` starts with on the scenario's GPU and model when no flag is given, by
    argparse dest: ``SERVER_DEFAULTS`` with the per-GPU batch limits (vLLM) and the model's context filled
    in.  None: computed by the server at start (not recorded), or, for vLLM's ``max_cpu_loras``, = max_loras."""
    if server not in SERVER_DEFAULTS:
        raise ValueError(f"server: invalid value {server!r}; allowed: {', '.join(SERVER_DEFAULTS)}")
    out = {k: v for k, (v, _) in SERVER_DEFAULTS[server].items()}
    ctx = model_context(sc)[0]
    if server == "vllm":
        out["max_num_seqs"], out["max_num_batched_tokens"], _ = vllm_batch_defaults(sc.gpu_spec)
        out["max_model_len"] = ctx
    else:
        out["context_length"] = ctx
    return out


def _kv_room(sc: Scenario, lora_bytes: float) -> float:
    """RULES['kv_room'], in bytes."""
    p = sc.memory_plan()
    kv = p["usable"] - p["weights"] - p["reserve"] - lora_bytes
    if sc.kv_cache_gb > 0:
        kv = min(kv, sc.kv_cache_gb * presets.GIB)
    return kv


def _length_fit(sc: Scenario, kv_bytes: float) -> int:
    """Largest request length (tokens, whole pages) whose KV fits in ``kv_bytes``."""
    page = SERVER_PAGE_TOKENS * sc.kv_bytes_per_token()
    return max(0, int(kv_bytes // page)) * SERVER_PAGE_TOKENS


def _limit(sc: Scenario, lora_bytes: float) -> dict:
    """The server's KV room (rule kv_room, bytes), the longest length that fits (``fit``), the model's context
    and its source, and the longest request the server accepts (``accepts``: the fit when the context does not
    fit, rule kv_fit; else the context; None when the context is unknown)."""
    kv = _kv_room(sc, lora_bytes)
    fit = _length_fit(sc, kv)
    ctx, src = model_context(sc)
    capped = ctx is not None and ctx > fit
    return {"kv": kv, "fit": fit, "context": ctx, "source": src, "capped": capped,
            "accepts": fit if capped else ctx}


def _no_kv(server: str, sc: Scenario, lim: dict, lora_what: str) -> Command | None:
    if lim["fit"] >= SERVER_PAGE_TOKENS:
        return None
    return Command(server, [], "", [], False,
                   f"{_NAME[server]} would not start: {lora_what} leave about {lim['kv'] / presets.GIB:.2f} GiB "
                   f"of KV at this memory (rule kv_room), less than one {SERVER_PAGE_TOKENS}-token block; lower "
                   "max_loras or vram_budget_gb, or raise gpu_mem_util.")


def _context(cmd: _Line, sc: Scenario, flag: str, lim: dict, lora_what: str) -> list[str]:
    """Emit ``flag`` (--max-model-len / --context-length) when the model's context does not fit (rule kv_fit),
    the assumption on the longest request; the notes."""
    name = _NAME[cmd.server]
    kv, fit, ctx, ctx_src, accepts = lim["kv"], lim["fit"], lim["context"], lim["source"], lim["accepts"]
    longest = sc.max_request_tokens()
    where = (f"about {kv / presets.GIB:.2f} GiB of KV at this memory (GPU memory x gpu_mem_util - weights - "
             f"reserve_gb - {lora_what}" + (", at most kv_cache_gb" if sc.kv_cache_gb > 0 else "") + "; "
             "reserve_gb is the scenario's estimate of activations and CUDA graphs, the server measures its own)")
    notes = []
    if ctx is None:
        notes.append(f"The model's context length is not known here ({ctx_src}): no {flag} is printed. If "
                     f"{name} refuses to start because one request of the full context does not fit in the KV "
                     f"cache, add {flag} {fit} (the largest length that fits in the {where}).")
    elif lim["capped"]:
        # SGLang admits prompt + output <= context-length - 1 and prompt <= context-length - 6
        served = longest <= fit if cmd.server == "vllm" else (
            longest + 1 <= fit and sc.length_bounds(sc.prompt_tokens)[1] + 6 <= fit)
        need = -(-ctx // SERVER_PAGE_TOKENS) * SERVER_PAGE_TOKENS * sc.kv_bytes_per_token()
        cmd.add(flag, fit, f"rule: kv_fit (the model's context {ctx} does not fit; rule: kv_room)")
        start = ("vLLM would refuse to start (one max-model-len request must fit in the KV cache)"
                 if cmd.server == "vllm" else "SGLang would only warn, and a request longer than its KV pool "
                                              "could never be served")
        notes.append(f"{flag} {fit:,}: the model's full context ({ctx:,} tokens; {ctx_src}) needs "
                     f"{need / presets.GIB:.2f} GiB of KV, more than the {where}, so {start}; {fit:,} tokens "
                     f"is the largest length that fits. Requests longer than {fit:,} tokens are refused"
                     + (f" (the simulated ones are at most {longest:,})." if served else
                        f": the simulated ones reach {longest:,} (the scenario's adapter memory is not the "
                        f"server's slots); lower the LoRA slots or raise the memory."))
    else:
        notes.append(f"No {flag}: the model's full context ({ctx:,} tokens) fits in the {where}, so {name} "
                     "starts with its default and refuses no request the model can take.")
    if ctx is not None and longest > ctx:
        notes.append(f"The simulated requests reach {longest:,} tokens, more than the model's context "
                     f"({ctx:,}): {name} refuses those.")
    if accepts != longest:
        limit = ("the model's context (from its config.json)" if accepts is None else
                 f"{accepts:,} ({flag}: what fits in the KV cache)" if lim["capped"] else
                 f"{accepts:,} (the model's context)")
        cmd.assume(flag[2:].replace("-", "_"), f"requests of at most {longest:,} tokens (prompt + output): the "
                                               f"simulation draws no longer one; the server accepts up to {limit}")
    return notes


def _common_notes(sc: Scenario, server: str) -> list[str]:
    memory_mode, load_mode = _modes(sc)
    out = []
    if memory_mode == "unified":
        out.append(f"{server}'s LoRA memory is a preallocated pool of fixed slots at the rank flag, separate "
                   "from the KV cache: the model's unified adapter/KV pool (S-LoRA) has no equivalent.")
    if load_mode == "async" and server == "vLLM":
        out.append("vLLM loads adapters synchronously in the step: the model's async loads/prefetch do not exist.")
    if sc.kv_reservation == "full":
        out.append(f"{server} allocates KV on demand and preempts; the model reserves prompt+output at admission.")
    if sc.kv_allocator == "contiguous":
        out.append(f"{server}'s KV cache is paged; the model's contiguous allocator (fragmentation) is not.")
    return out


_TP_SOURCE = ("tensor_parallel_size (one replica is a group of this many GPUs on one node; every memory figure "
              "here is per GPU)")


def vllm_command(sc: Scenario, decided: Iterable[str] = ()) -> Command:
    """``vllm serve`` for the scenario (closest server for strategies vllm, naive, preload_lru).

    ``decided``: the scenario fields the plan chose (its grid); of ``DECIDABLE`` only those become flags, the
    others are assumptions when they differ from vLLM's defaults."""
    sc = _check(sc)
    dec = _decided(decided)
    if (u := _unsupported("vllm", sc)) is not None:
        return u
    try:
        rank = vllm_max_lora_rank(sc)
    except ValueError as e:
        return Command("vllm", [], "", [], False, f"{e}: vLLM cannot serve these adapters.")
    slot = vllm_slot_bytes(rank, sc.model, tp=sc.tensor_parallel_size)
    model = _model_id(sc)
    slots = sc.max_loras if sc.max_loras > 0 else _slots(sc, slot)
    lora_what = f"{slots} LoRA slots of {slot / presets.MIB:.1f} MiB"
    lim = _limit(sc, slots * slot)
    if (u := _no_kv("vllm", sc, lim, lora_what)) is not None:
        return u
    cmd = _Line("vllm", ["vllm", "serve", model], server_defaults(sc, "vllm"))
    cmd.trace.append(("model", model, "model (rule: hf_repo_id)"))
    cmd.add("--enable-lora", None, "rule: always")
    if sc.tensor_parallel_size > 1:
        cmd.add("--tensor-parallel-size", sc.tensor_parallel_size, _TP_SOURCE)
    src = ("max_loras" if sc.max_loras > 0 else
           f"rule: memory_slots (max_loras 0; vLLM needs >= 1; vLLM slot {slot / presets.MIB:.1f} MiB)")
    cmd.set("--max-loras", slots, src)
    host, hsrc = _host_cache(sc, slots)
    cmd.set("--max-cpu-loras", host, hsrc + "; vLLM's 0/unset means = --max-loras (no host cache)", default=slots)
    cmd.set("--max-lora-rank", rank, f"adapter_rank/adapter_ranks: smallest of {VLLM_MAX_LORA_RANKS} "
                                     f">= max rank {max(sc.ranks())}")
    cmd.set("--gpu-memory-utilization", float(sc.gpu_mem_util), "gpu_mem_util")

    # the batch limits: flags when the plan decided them, else the simulation's assumptions
    seqs_d, tokens_d, gpu_rule = vllm_batch_defaults(sc.gpu_spec)
    on_gpu = f"vLLM's default on this GPU, its value for {gpu_rule}"
    seqs = sc.max_batch_size if "max_batch_size" in dec else seqs_d
    if "max_batch_size" in dec:
        cmd.set("--max-num-seqs", seqs, "max_batch_size (decided by the plan)")
    chunk_sim = sc.chunked_prefill_on()
    chunk = chunk_sim if "chunked_prefill" in dec else True
    tokens, tsrc = ((sc.max_batched_tokens, "max_batched_tokens (decided by the plan)")
                    if "max_batched_tokens" in dec else (tokens_d, ""))
    if tokens < seqs:
        tokens, tsrc = max(sc.max_batched_tokens, seqs), "max_batched_tokens (rule: tokens_ge_seqs)"
    if not chunk and lim["accepts"] is not None and tokens < lim["accepts"]:
        tokens, tsrc = lim["accepts"], "chunked_prefill off (rule: whole_prompts)"
    if tsrc:
        cmd.set("--max-num-batched-tokens", tokens, tsrc)
    if not chunk:
        cmd.add("--no-enable-chunked-prefill", None, f"chunked_prefill {sc.chunked_prefill!r} (decided by the plan)")
    ctx_notes = _context(cmd, sc, "--max-model-len", lim, lora_what)
    if sc.kv_cache_gb > 0:
        cmd.add("--kv-cache-memory-bytes", int(sc.kv_cache_gb * presets.GIB), "kv_cache_gb (GiB -> bytes)")

    if sc.max_batch_size != seqs:
        cmd.assume("max_num_seqs", f"the simulation caps the batch at {sc.max_batch_size:,} sequences "
                                   f"({seqs_d:,} is {on_gpu})")
    if sc.max_batched_tokens != tokens:
        what = ("prefill tokens" if not chunk_sim else "tokens (prefill + decode)")
        cmd.assume("max_num_batched_tokens", f"the simulation's steps take at most {sc.max_batched_tokens:,} "
                   f"{what} (" + (f"{tokens_d:,} is {on_gpu})" if not tsrc else
                                  f"this command sets {tokens:,}: {tsrc})"))
    if chunk_sim != chunk:
        cmd.assume("enable_chunked_prefill", "the simulation prefills each prompt whole, in one step (vLLM "
                                             "splits long prompts over steps by default: chunked prefill)")
    _prefix_cache(cmd, sc, "--no-enable-prefix-caching", "enable_prefix_caching",
                  "vLLM caches shared prompt prefixes by default, keyed by adapter, which shortens the prefill of "
                  "prompts that share a prefix")

    closest = CLOSEST[sc.strategy]
    notes = [{"vllm": "Same policy family: FCFS, at most --max-loras adapters per batch, LRU GPU slots behind "
                      "an LRU host cache, synchronous loads.",
              "naive": "Closest: vLLM's LRU slots; unlike 'naive', vLLM passes over a request whose adapter "
                       "has no slot instead of blocking the queue.",
              "preload_lru": "Closest: vLLM's LRU slots; vLLM does not fill the GPU slots before the first "
                             "requests (--lora-modules only fills the host cache).",
              "slora": "Approximate: SGLang is closer to S-LoRA; vLLM has fixed slots and sync loads.",
              "sglang": "Close: vLLM also caps the distinct adapters per batch (--max-loras) with LRU slots and "
                        "synchronous loads, but checks a request's tokens and KV before its adapter, and splits "
                        "prompts (chunked prefill) where the simulated SGLang prefills them whole."}[sc.strategy]]
    budget = slots * slot / presets.GIB
    if budget > sc.vram_budget_gb + 1e-9:
        plan = sc.memory_plan()
        kv_left = (plan["usable"] - plan["weights"] - plan["reserve"]) / presets.GIB - budget
        notes.append(f"vLLM preallocates {slots} slots x {slot / presets.MIB:.1f} MiB (all linear modules + "
                     f"embeddings at rank {rank}) = {budget:.2f} GiB, more than vram_budget_gb "
                     f"{sc.vram_budget_gb:g}: about {kv_left:.2f} GiB are left for KV; lower --max-loras "
                     "to the distinct adapters you expect per batch.")
    notes += _common_notes(sc, "vLLM")
    notes += ctx_notes
    if not chunk and lim["accepts"] is None:
        notes.append("Without chunked prefill vLLM refuses --max-num-batched-tokens below --max-model-len: set "
                     "both (the model's context is not known here).")
    notes.append(("vLLM's token budget counts decode tokens too and long prompts are split over steps "
                  "(chunked prefill, V1's default), as in the scenario. " if chunk_sim and chunk else "") +
                 "--lora-modules adapters are loaded into the host cache at start (host_warm); beyond "
                 "--max-cpu-loras they are re-read from disk; GPU loads cross PCIe inside the step.")
    if closest != "vllm":
        notes.append(f"Closest server for {sc.strategy!r}: {closest}.")
    return cmd.command("add your adapters: --lora-modules NAME=PATH [NAME=PATH ...] (user-specific)", notes)


def sglang_command(sc: Scenario, decided: Iterable[str] = ()) -> Command:
    """``python -m sglang.launch_server`` for the scenario (closest server for strategy slora); ``decided`` as
    in ``vllm_command``."""
    sc = _check(sc)
    dec = _decided(decided)
    if (u := _unsupported("sglang", sc)) is not None:
        return u
    rank = max(sc.ranks())
    slot = presets.adapter_bytes(sc.model_spec, rank, sc.target_modules, tp=sc.tensor_parallel_size)
    model = _model_id(sc)
    slots = sc.max_loras if sc.max_loras > 0 else _slots(sc, slot)
    lora_what = f"{slots} LoRA slots of {slot / presets.MIB:.1f} MiB"
    lim = _limit(sc, slots * slot)
    if (u := _no_kv("sglang", sc, lim, lora_what)) is not None:
        return u
    cmd = _Line("sglang", ["python", "-m", "sglang.launch_server"], server_defaults(sc, "sglang"))
    cmd.add("--model-path", model, "model (rule: hf_repo_id)")
    cmd.add("--enable-lora", None, "rule: always")
    if sc.tensor_parallel_size > 1:
        cmd.add("--tp-size", sc.tensor_parallel_size, _TP_SOURCE)
    src = "max_loras" if sc.max_loras > 0 else f"rule: memory_slots (max_loras 0; slot {slot / presets.MIB:.1f} MiB)"
    cmd.set("--max-loras-per-batch", slots, src)
    if sc.max_cpu_loras > 0:
        host, hsrc = _host_cache(sc, slots)
        cmd.add("--max-loaded-loras", host, hsrc)
    cmd.set("--lora-eviction-policy", "lru", "rule: lru")
    cmd.add("--max-lora-rank", rank, "adapter_rank/adapter_ranks (largest rank)")
    cmd.add("--lora-target-modules", list(presets.TARGET_MODULES[sc.target_modules]), "target_modules")
    frac = math.floor((sc.gpu_mem_util - sc.reserve_gb / sc.gpu_spec.memory_gib) * 1000) / 1000
    cmd.add("--mem-fraction-static", frac, "rule: mem_fraction_static (gpu_mem_util, reserve_gb)")
    if "max_batch_size" in dec:
        cmd.add("--max-running-requests", sc.max_batch_size, "max_batch_size (decided by the plan)")
    chunk_sim = sc.chunked_prefill_on()
    chunk_size = sc.max_batched_tokens if chunk_sim else -1
    chunk_decided = bool(dec & {"max_batched_tokens", "chunked_prefill"})
    if chunk_decided:
        cmd.add("--chunked-prefill-size", chunk_size, "max_batched_tokens (decided by the plan)" if chunk_sim else
                f"chunked_prefill {sc.chunked_prefill!r} (decided by the plan; -1 turns chunking off)")
    ctx_notes = _context(cmd, sc, "--context-length", lim, lora_what)
    if sc.kv_cache_gb > 0:
        cmd.add("--max-total-tokens", int(sc.kv_cache_gb * presets.GIB // sc.kv_bytes_per_token()),
                "kv_cache_gb (rule: kv_tokens)")

    computed = f"computed by SGLang at start from the GPU and the KV pool; the value is not recorded in {FLAG_FIXTURE}"
    if "max_batch_size" not in dec:
        cmd.assume("max_running_requests", f"the simulation caps the batch at {sc.max_batch_size:,} requests "
                                           f"(SGLang's default is {computed})")
    if not chunk_decided:
        cmd.assume("chunked_prefill_size",
                   f"the simulation's steps take at most {sc.max_batched_tokens:,} tokens, long prompts split over "
                   f"steps (SGLang's chunk size is {computed})" if chunk_sim else
                   f"the simulation prefills each prompt whole, in one step, at most {sc.max_batched_tokens:,} "
                   f"prompt tokens per step (SGLang splits long prompts by default, in chunks {computed})")
    _prefix_cache(cmd, sc, "--disable-radix-cache", "disable_radix_cache",
                  "SGLang's radix cache reuses shared prompt prefixes by default, per adapter")

    notes = []
    if sc.strategy == "sglang":
        notes.append("Same rules as the simulation (strategy 'sglang', docs/model.md 6.5, read in SGLang 0.5.23): "
                     "FCFS; a request whose adapter would take the batch (running and new requests) past "
                     "--max-loras-per-batch distinct adapters is passed over, not blocking the queue; a GPU pool of "
                     "--max-loras-per-batch slots, LRU eviction outside the batch; synchronous loads.")
    elif sc.strategy == "slora":
        notes.append("Closest to S-LoRA: SGLang's multi-LoRA serving (S-LoRA/Punica-style batched kernels, LRU "
                     "GPU slots), but its LoRA memory is a separate pool of --max-loras-per-batch slots at "
                     "--max-lora-rank, allocated before the KV pool inside --mem-fraction-static "
                     "(lora/mem_pool.py), not S-LoRA's unified paging with the KV cache; there is no prefetch "
                     "for queued requests (--enable-lora-overlap-loading overlaps loads but needs "
                     "--max-loaded-loras <= 2 x --max-loras-per-batch). Strategy 'sglang' simulates SGLang's own "
                     "scheduling: compare it before using this command.")
        if sc.max_loras == 0:
            notes.append(f"{slots} slots take {slots * slot / presets.GIB:.2f} GiB from the KV pool for the "
                         "whole run: lower --max-loras-per-batch to the distinct adapters you expect per batch.")
    else:
        notes.append(f"Approximate: SGLang also keeps LRU GPU slots; vLLM is the closest server for "
                     f"{sc.strategy!r}.")
    notes += [n for n in _common_notes(sc, "SGLang") if "unified" not in n or sc.strategy != "slora"]
    notes += ctx_notes
    notes.append(("--max-loaded-loras omitted: SGLang's default (no limit) is the scenario's max_cpu_loras 0. "
                  if sc.max_cpu_loras == 0 else "")
                 + "Adapters must be registered (--lora-paths or POST /load_lora_adapter); they are then in "
                   "host memory (host_warm); GPU loads are synchronous. --max-loras-per-batch counts "
                   "base-model requests too.")
    return cmd.command("add your adapters: --lora-paths NAME=PATH [NAME=PATH ...] (user-specific)", notes)


def _prefix_cache(cmd: _Line, sc: Scenario, flag: str, setting: str, default_says: str) -> None:
    """The prefix cache (docs/model.md 3.7): where the simulated server caches prefixes keyed by adapter as both
    servers do by default, nothing to print or assume; where the scenario turns caching off (prefix_caching
    'off'), the flag that turns it off; where the strategy has no prefix cache ("auto" off), an assumption."""
    if caching_on(sc):
        return
    if sc.prefix_caching == "off":
        cmd.add(flag, None, "prefix_caching 'off'")
        return
    cmd.assume(setting, f"the simulation has no prefix cache (strategy {sc.strategy!r}; prefix_caching 'on' "
                        f"simulates one): every prompt is computed in full ({default_says})")


def server_commands(sc: Scenario, decided: Iterable[str] = ()) -> list[Command]:
    """Both command lines (vLLM, SGLang); see ``Command.supported``, ``Command.note`` and
    ``Command.assumptions``.  ``decided``: the scenario fields the plan chose (its grid)."""
    return [vllm_command(sc, decided), sglang_command(sc, decided)]


def assumption_lines(cmd: Command) -> list[str]:
    """The two parts as comment lines for a terminal: what the simulation assumed, then the defaults kept."""
    out = []
    if cmd.assumptions:
        out.append("# what the simulation assumed (not flags; the server runs with its own setting):")
        out += [f"#   - {text} [{setting}]" for setting, text in cmd.assumptions]
    if cmd.at_default:
        out.append(f"# the answer's values that are {_NAME.get(cmd.server, cmd.server)}'s defaults (not printed): "
                   + ", ".join(f"{flag} {value}" for flag, value, _ in cmd.at_default))
    return out
