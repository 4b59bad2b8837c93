"""Scenario: every input of one simulation, as one frozen dataclass.

Units are in the field names (``_gb`` = GiB of memory, ``_gbps`` = 1e9 bytes/s,
``_ms``, ``_s``, ``_rps`` = requests per second).  ``validate()`` is the only gate
to the jitted loop: anything it lets through must simulate without error.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from . import prefix, presets
from .kernels import op_shapes
from .limits import FLOAT_RANGES, MAX_DRAIN_RATIO, MAX_QUOTE, MAX_RUN_TOKENS, clip, loads_json, short_repr
from .policies import EVICT_BELADY, STRATEGIES, hot_set_pins
from .presets.scenarios import TRACES
from .routers import ROUTERS
from .traces import TRACE_DIR, TRACE_FILE_COLUMNS, TRACE_TIME_SCALE_RANGE, _check_time_scale, shipped_trace_file  # noqa: F401  (re-exported: the trace files' reader lives in engine/traces.py)

ENUMS: dict[str, tuple[str, ...]] = {
    "service_mode": ("roofline", "fixed"),
    "cost_model": ("roofline", "kernel"),
    "load_mode": ("sync", "async"),
    "arrival_process": ("poisson", "gamma", "closed"),
    "popularity": ("zipf", "power"),
    "length_dist": ("fixed", "uniform", "lognormal"),
    "memory_mode": ("static", "unified"),
    "kv_allocator": ("paged", "contiguous"),
    "kv_reservation": ("full", "on_demand"),
    "target_modules": tuple(presets.TARGET_MODULES),
    "router": tuple(ROUTERS),
    "chunked_prefill": ("auto", "on", "off"),
    "lora_rank_padding": ("auto", "none", "batch_max", "max_rank"),
    "prefix_caching": ("auto", "on", "off"),
    "server": presets.SERVERS,
}

#: The tensor-parallel degrees a replica may have (``tensor_parallel_size``; vLLM and SGLang accept others that
#: divide the heads, the GPU counts of real nodes are these).
TP_SIZES = (1, 2, 4, 8)

#: Hard cap on the requests one simulation may generate (open loop: rate x duration).
MAX_REQUESTS = 2_000_000

#: Most GPUs one fleet simulation may hold (``num_replicas``), and most replica x adapter pairs (each
#: replica keeps its own adapter tables: about 200 bytes per pair).
MAX_REPLICAS = 64
MAX_REPLICA_ADAPTERS = 1_000_000

#: Extra key of ``to_dict`` / scenario.json carrying the definition of a model that is not a
#: built-in preset (one added with ``presets.register_model``); ``from_dict`` registers it.
#: Absent for preset models, so their JSON is unchanged.
MODEL_DEFINITION_KEY = "model_definition"
#: A scenario.json's definition of a device that is not a built-in GPU (a measured CPU); ``from_dict`` registers it.
DEVICE_DEFINITION_KEY = "device_definition"



#: Keys the dashboard's scenario.json adds to ``Scenario.to_dict()`` (``Scenario.from_export`` reads them).
EXPORT_STRATEGIES_KEY = "strategies"      # the compared strategies (the ``strategy`` field is the baseline)
EXPORT_REPLICATIONS_KEY = "replications"  # seeds per strategy (replication k uses seed + k)


def _json_object(text: str) -> dict:
    d = loads_json(text, "scenario.json")
    if not isinstance(d, dict):
        raise ValueError(f"scenario: expected a JSON object, got {type(d).__name__}")
    return dict(d)


@dataclass(frozen=True)
class Scenario:
    """All inputs of one run. See docs/model.md for the meaning of each field."""

    # hardware and model
    gpu: str = "rtx3090"
    model: str = "llama-7b"
    vram_budget_gb: float = 10.0          # GPU memory reserved for LoRA adapters (GiB)
    gpu_mem_util: float = 1.0             # share of GPU memory the server may use
    reserve_gb: float = 0.5               # activations, CUDA context, workspace (GiB)
    pcie_gbps: float = 16.0               # host->GPU bandwidth for adapter loads (GB/s)
    disk_gbps: float = 2.0                # disk->host bandwidth (GB/s)
    load_latency_ms: float = 0.5          # fixed cost per host->GPU adapter load
    disk_latency_ms: float = 5.0          # fixed cost per disk->host adapter read
    # policy
    server: str = ""                      # the server profile the cost and server fields came from ("" = stated; presets.servers)
    strategy: str = "naive"
    batch_window_ms: float = 25.0
    max_wait_ms: float = 500.0            # starvation bound for adapter-grouping policies
    max_batch_size: int = 32
    max_batched_tokens: int = 8192        # prefill tokens one step may process (chunked prefill: prefill + decode tokens)
    chunked_prefill: str = "auto"         # split long prompts over steps (vLLM V1); "auto": the strategy's default (vllm: on)
    max_loras: int = 0                    # GPU adapter slots (0 = limited by memory only)
    max_cpu_loras: int = 0                # host adapter cache, adapters (0 = unlimited)
    host_warm: bool = True                # host cache filled at start (else adapters start on disk)
    hot_set_k: int = -1                   # pinned adapters for hot_set (-1 = auto)
    load_mode: str = "sync"
    memory_mode: str = "static"
    kv_cache_gb: float = 0.0              # KV cache size (GiB); 0 = all memory left over
    kv_allocator: str = "paged"
    kv_reservation: str = "full"          # "full": prompt + output reserved at admission; "on_demand": vLLM (grow, preempt)
    kv_block_tokens: int = 16
    # adapters
    num_adapters: int = 500
    adapter_rank: int = 48
    adapter_ranks: tuple[int, ...] = ()
    target_modules: str = "qkvo"
    popularity: str = "zipf"
    zipf_s: float = 1.0
    power_alpha: float = 1.0
    # workload
    arrival_process: str = "poisson"
    arrival_rate_rps: float = 16.0
    arrival_cv: float = 1.0
    concurrency: int = 32
    max_in_system: int = 0                # open loop: arrivals finding this many requests in the server are refused (0 = no limit)
    prompt_tokens: int = 128
    output_tokens: int = 32
    length_dist: str = "fixed"
    length_spread: float = 0.5            # uniform: +-spread*mean; lognormal: CV
    trace: str = ""                       # a shipped trace (TRACES) replayed instead of the drawn stream; "" = drawn
    trace_time_scale: float = 1.0         # trace replay: arrival times divided by it (2 = twice the rate)
    duration_s: float = 60.0
    warmup_s: float = 5.0
    drain_s: float = 60.0                 # time after duration_s allowed to finish work
    seed: int = 0
    slo_ttft_ms: float = 50.0
    # cost model
    service_mode: str = "roofline"
    cost_model: str = "roofline"          # roofline step cost: "roofline" or "kernel" (dense GEMMs: docs/model.md 5.4)
    prefill_ms_per_token: float = 0.055   # fixed mode
    decode_ms_per_token: float = 8.5      # fixed mode: one decode iteration of the batch
    compute_eff: float = 0.6              # achieved share of dense FP16 peak
    bw_eff: float = 0.8                   # achieved share of HBM bandwidth
    step_overhead_ms: float = 0.5         # scheduler + launch cost per iteration
    frontend_ms: float = 0.0              # per request, outside the engine (HTTP, tokenize, IPC): added to TTFT
    lora_ms_per_adapter: float = 0.0      # per distinct adapter in the batch (kernel overhead; fitted by calibration)
    lora_ms_per_slot: float = 0.0         # per reserved adapter slot (vLLM pads to max_loras)
    lora_us_per_token_slot: float = 0.0   # per batch token per reserved slot (LoRA kernels launched over max_loras)
    cost_scale: float = 1.0               # every step's duration and frontend_ms times this (the planner's error band: docs/model.md 10)
    lora_rank_padding: str = "auto"       # LoRA cost at each adapter's rank ("none"), the step's largest ("batch_max"), the largest configured ("max_rank"); "auto": the strategy's (docs/model.md 5.5)
    # fleet (docs/model.md, "Fleet"): identical GPUs, each a full server of this scenario
    num_replicas: int = 1                 # 1 = one GPU (the single-GPU loop, unchanged)
    router: str = "round_robin"           # which replica an arriving request goes to (engine.routers.ROUTERS)
    affinity_load_slack: int = 2          # lora_affinity: extra outstanding requests over the least loaded that an adapter-holding replica may have and still win
    tensor_parallel_size: int = 1         # GPUs per replica, one tensor-parallel group (docs/model.md 5.7); memory fields are per GPU
    prefix_tokens: int = 0                # a shared system prompt: its tokens, prepended to a prefix_share of the prompts (docs/model.md 3.7)
    prefix_share: float = 0.0             # the share of requests that start with it (0 = no prefix)
    prefix_caching: str = "auto"          # cache prompt prefixes keyed by adapter; "auto": the strategy's (vllm, sglang: on)

    # ---------------------------------------------------------------- construction
    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> Scenario:
        if name not in presets.SCENARIOS:
            raise ValueError(
                f"preset: unknown value {name!r}; allowed: {', '.join(sorted(presets.SCENARIOS))}"
            )
        base = presets.preset_fields(name)  # a workload preset naming a server: over that profile's fields
        base.update(overrides)
        return cls.from_dict(base)

    def replace(self, **kw: Any) -> Scenario:
        d = self.to_dict()
        for field_, key in (("model", MODEL_DEFINITION_KEY), ("gpu", DEVICE_DEFINITION_KEY)):
            if field_ in kw and key not in kw:
                d.pop(key, None)  # the definition belongs to the old model / device
        d.update(kw)
        return Scenario.from_dict(d)

    def to_dict(self) -> dict[str, Any]:
        # every field is a scalar but adapter_ranks (a tuple of ints): what dataclasses.asdict gives, without its
        # recursive deep copy (a third of a dashboard rerun's Python time went to asdict)
        d = {name: getattr(self, name) for name in _FIELD_NAMES}
        d["adapter_ranks"] = list(self.adapter_ranks)
        if self.model in presets.MODELS and not presets.is_preset_model(self.model):
            d[MODEL_DEFINITION_KEY] = presets.model_to_dict(presets.MODELS[self.model])
        if self.gpu in presets.GPUS and not presets.is_preset_gpu(self.gpu):
            d[DEVICE_DEFINITION_KEY] = presets.gpu_to_dict(presets.GPUS[self.gpu])
        return d

    def __reduce_ex__(self, protocol):
        # A registered (non-preset) model lives in this process's presets.MODELS only: pickle the
        # scenario with its definition, so that a worker process (engine.sweep's spawn pool)
        # registers it too.  Scenarios of preset models pickle as before (the dataclass default).
        if (self.model in presets.MODELS and not presets.is_preset_model(self.model)) or \
                (self.gpu in presets.GPUS and not presets.is_preset_gpu(self.gpu)):
            return (Scenario.from_dict, (self.to_dict(),))
        return super().__reduce_ex__(protocol)

    def to_json(self, indent: int | None = 2) -> str:
        """The scenario as JSON, keys sorted; ``indent=None``: one compact line (a cache key: Python's C encoder
        writes it, about three times faster than the indented form)."""
        if indent is None:
            return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Scenario:
        """Build from a JSON-like dict, coercing strings; unknown keys are an error.

        A ``model_definition`` key (``MODEL_DEFINITION_KEY``, written by ``to_dict`` for a model
        that is not a preset) is registered with ``presets.register_model`` first.
        """
        if not isinstance(d, dict):
            raise ValueError(f"scenario: expected a JSON object, got {type(d).__name__}")
        d = dict(d)
        if MODEL_DEFINITION_KEY in d:
            presets.register_model_definition(d.pop(MODEL_DEFINITION_KEY), d.get("model", _DEFAULT_MODEL), MODEL_DEFINITION_KEY)
        if DEVICE_DEFINITION_KEY in d:
            presets.register_device_definition(d.pop(DEVICE_DEFINITION_KEY), d.get("gpu", cls.gpu), DEVICE_DEFINITION_KEY)
        names = set(cls.field_names())
        kw = {}
        for k, v in d.items():
            if k not in names:
                raise ValueError(f"{clip(str(k), MAX_QUOTE)}: unknown scenario field; allowed: {', '.join(sorted(names))}")
            kw[k] = coerce(k, v)
        return cls(**kw)

    @classmethod
    def from_json(cls, text: str) -> Scenario:
        return cls.from_dict(_json_object(text))

    @classmethod
    def from_export(cls, text: str) -> tuple[Scenario, list[str] | None, int | None]:
        """The scenario, compared strategies and replications of a scenario.json as the dashboard exports it
        (``to_dict()`` plus ``EXPORT_STRATEGIES_KEY`` and ``EXPORT_REPLICATIONS_KEY``; its ``strategy`` is the
        baseline).  A plain scenario file has neither: ``None``.  ValueError naming the problem."""
        d = _json_object(text)
        strategies = d.pop(EXPORT_STRATEGIES_KEY, None)
        replications = d.pop(EXPORT_REPLICATIONS_KEY, None)
        if strategies is not None:
            if isinstance(strategies, str):
                strategies = [strategies]
            if not isinstance(strategies, list) or not all(isinstance(x, str) for x in strategies):
                raise ValueError(f"{EXPORT_STRATEGIES_KEY}: expected a list of strategy names, got {strategies!r}")
        if replications is not None:
            if isinstance(replications, bool) or not isinstance(replications, (int, float)) \
                    or not math.isfinite(replications) or replications != int(replications):
                raise ValueError(f"{EXPORT_REPLICATIONS_KEY}: expected an integer, got {replications!r}")
            replications = int(replications)
        return cls.from_dict(d), strategies, replications

    # ---------------------------------------------------------------- derived values
    @property
    def gpu_spec(self) -> presets.GPU:
        return presets.get_gpu(self.gpu)

    @property
    def model_spec(self) -> presets.Model:
        return presets.get_model(self.model)

    def ranks(self) -> list[int]:
        """Rank of each adapter (round-robin over ``adapter_ranks``)."""
        rs = list(self.adapter_ranks) or [self.adapter_rank]
        return [rs[i % len(rs)] for i in range(self.num_adapters)]

    def adapter_sizes(self) -> list[int]:
        m = self.model_spec
        cache: dict[int, int] = {}
        out = []
        for r in self.ranks():
            if r not in cache:
                cache[r] = presets.adapter_bytes(m, r, self.target_modules, tp=self.tensor_parallel_size)
            out.append(cache[r])
        return out

    def chunked_prefill_on(self) -> bool:
        """Is chunked prefill on (``chunked_prefill``; "auto": the strategy's default, on for vllm only)?"""
        if self.chunked_prefill == "auto":
            pol = STRATEGIES.get(self.strategy)
            return bool(pol is not None and pol.chunked_prefill)
        return self.chunked_prefill == "on"

    def lora_rank_padding_mode(self) -> str:
        """The LoRA rank padding that runs (``lora_rank_padding``; "auto": the strategy's default, "none" for every
        strategy: docs/model.md 5.5)."""
        if self.lora_rank_padding == "auto":
            pol = STRATEGIES.get(self.strategy)
            return pol.lora_rank_padding if pol is not None else "none"
        return self.lora_rank_padding

    def max_adapter_bytes(self) -> int:
        rs = set(self.adapter_ranks) or {self.adapter_rank}
        return max(presets.adapter_bytes(self.model_spec, r, self.target_modules, tp=self.tensor_parallel_size)
                   for r in rs)

    def kv_bytes_per_token(self) -> int:
        """KV bytes of one token on each GPU (of the tensor-parallel group)."""
        return presets.kv_bytes_per_token(self.model_spec, tp=self.tensor_parallel_size)

    def memory_plan(self) -> dict[str, float]:
        """Memory split of each GPU (of the tensor-parallel group) in bytes: usable, weights, reserve, adapters, kv."""
        g, m = self.gpu_spec, self.model_spec
        usable = g.memory_gib * presets.GIB * self.gpu_mem_util
        weights = float(presets.weight_bytes(m, tp=self.tensor_parallel_size))
        reserve = self.reserve_gb * presets.GIB
        adapters = self.vram_budget_gb * presets.GIB
        kv = usable - weights - reserve - adapters
        if self.kv_cache_gb > 0:
            kv = min(kv, self.kv_cache_gb * presets.GIB)
        return {"usable": usable, "weights": weights, "reserve": reserve,
                "adapters": adapters, "kv": kv}

    def max_vram_budget_gb(self) -> float:
        """Largest adapter budget that leaves room for one longest request's KV."""
        plan = self.memory_plan()
        return max(0.0, (plan["usable"] - plan["weights"] - plan["reserve"] - self.max_request_kv_bytes()) / presets.GIB)

    def max_request_kv_bytes(self) -> int:
        """KV bytes one longest request reserves (whole blocks)."""
        blocks = -(-self.max_request_tokens() // self.kv_block_tokens)
        return blocks * self.kv_block_tokens * self.kv_bytes_per_token()

    def length_bounds(self, mean: int) -> tuple[int, int]:
        """Smallest and largest length the length distribution can draw."""
        if self.length_dist == "fixed":
            return mean, mean
        if self.length_dist == "uniform":
            return max(1, int(round(mean * (1 - self.length_spread)))), max(1, int(round(mean * (1 + self.length_spread))))
        return 1, max(1, int(math.ceil(mean * (1 + 3 * self.length_spread))))

    def max_request_tokens(self) -> int:
        """Prompt + output tokens of the longest request: the length bounds, or the replayed trace's longest."""
        if self.trace:
            _, pt, ot = self.trace_requests()
            return int((pt + ot).max()) if len(pt) else 1
        return self.length_bounds(self.prompt_tokens)[1] + self.length_bounds(self.output_tokens)[1] + prefix.prefix_len(self)

    def max_fitting_request_tokens(self) -> int:
        """Longest request (prompt + output tokens) whose KV cache fits in memory next to the adapter budget
        (unified mode: next to the largest adapter too), in whole KV blocks: the bound ``validate`` applies
        to ``max_request_tokens()`` and ``workload.read_trace`` to a trace's rows."""
        plan = self.memory_plan()
        room = plan["kv"]
        if self.memory_mode == "unified":
            room = min(room, plan["adapters"] + plan["kv"] - self.max_adapter_bytes())
        block = self.kv_block_tokens * self.kv_bytes_per_token()
        return max(0, int(room // block)) * self.kv_block_tokens

    def expected_requests(self) -> float:
        if self.trace:
            return float(len(self.trace_requests()[0]))  # the trace's requests in [0, duration_s)
        if self.arrival_process == "closed":
            return float(self.concurrency)  # bounded separately by the service rate
        return self.arrival_rate_rps * self.duration_s

    def trace_requests(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The shipped trace's requests this scenario replays: arrival times divided by ``trace_time_scale``,
        kept while < ``duration_s`` (a prefix of the file), with their prompt and output tokens."""
        arr, pt, ot = shipped_trace_file(self.trace)
        _check_time_scale(self.trace_time_scale)
        t = arr / self.trace_time_scale
        n = int(np.searchsorted(t, self.duration_s, side="left"))
        return t[:n], pt[:n], ot[:n]

    # ---------------------------------------------------------------- validation
    def __post_init__(self) -> None:
        self.check_fields()

    def check_fields(self) -> None:
        """Each field's type and range alone (``FLOAT_RANGES``, the integer ranges), checked whenever a
        Scenario is built, on every path (``Scenario(...)``, ``from_preset``, ``from_dict``, ``replace``,
        fitted files, uploads, the CLI); ``validate`` adds the checks that relate fields to each other."""
        def bad(name: str, allowed: str) -> None:
            raise ValueError(f"{name}: invalid value {short_repr(getattr(self, name))}; allowed: {allowed}")

        for name in ("gpu", "model", "strategy", "trace", *ENUMS):
            if not isinstance(getattr(self, name), str):
                bad(name, "a string")
        if not isinstance(self.host_warm, bool):
            bad("host_warm", "true or false")

        for name, (lo, lo_open, hi, why) in FLOAT_RANGES.items():
            v = getattr(self, name)
            if name == "arrival_rate_rps" and (self.arrival_process == "closed" or self.trace):
                lo, lo_open, hi = 0.0, False, math.inf  # not used: closed loops and traces set their own arrivals
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < lo or (lo_open and v == lo) or v > hi:  # (inf bounds print as "inf")
                bad(name, f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}]" + (f" ({why})" if why else ""))
        ints = {"max_batch_size": (1, 4096), "max_batched_tokens": (1, 1 << 20), "max_loras": (0, 4096),
                "max_cpu_loras": (0, 1 << 20), "hot_set_k": (-1, 1 << 20), "num_adapters": (1, 100_000),
                "adapter_rank": (1, 1024), "concurrency": (1, 10_000), "prompt_tokens": (1, 1 << 17),
                "max_in_system": (0, 10_000_000), "prefix_tokens": (0, 1 << 17),
                "output_tokens": (1, 1 << 17), "kv_block_tokens": (1, 1024), "seed": (0, 2**63 - 1)}
        for name, (lo, hi) in ints.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, int) and lo <= v <= hi):
                bad(name, f"an integer in [{lo}, {hi}]")
        tp = self.tensor_parallel_size
        if isinstance(tp, bool) or not isinstance(tp, int) or tp not in TP_SIZES:
            bad("tensor_parallel_size", ", ".join(map(str, TP_SIZES)) + " (GPUs per replica)")
        for name, hi in (("num_replicas", MAX_REPLICAS), ("affinity_load_slack", 100_000)):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, int) and (name != "num_replicas" or v >= 1) and 0 <= v <= hi):
                bad(name, f"an integer in [{1 if name == 'num_replicas' else 0}, {hi}]")
        if not isinstance(self.adapter_ranks, tuple) or len(self.adapter_ranks) > 64 or any(
                isinstance(r, bool) or not (isinstance(r, int) and 1 <= r <= 1024) for r in self.adapter_ranks):
            bad("adapter_ranks", "up to 64 integers in [1, 1024]")

    def validate(self) -> Scenario:
        """Raise ValueError naming the field, its value and what is allowed."""
        def bad(name: str, allowed: str) -> None:
            raise ValueError(f"{name}: invalid value {short_repr(getattr(self, name))}; allowed: {allowed}")

        # (each field's own type and range: checked when the frozen Scenario was built, ``check_fields``)
        if self.gpu not in presets.GPUS:
            bad("gpu", ", ".join(sorted(presets.GPUS)))
        if self.model not in presets.MODELS:  # (the presets only: other sessions' uploads are not listed)
            bad("model", ", ".join(sorted(m for m in presets.MODELS if presets.is_preset_model(m))) + " (or a model "
                "added with engine.presets.register_model, e.g. from engine.model_from_hf_config)")
        if self.strategy not in STRATEGIES:
            bad("strategy", ", ".join(STRATEGIES))
        for name, allowed in ENUMS.items():
            if name == "server":  # the live registry: built-in profiles and those register_profile added since
                if self.server and self.server not in presets.PROFILES:
                    bad(name, ", ".join(allowed) + " (or a profile added with engine.presets.register_profile)")
            elif getattr(self, name) not in allowed:
                bad(name, ", ".join(allowed))
        if self.trace and self.trace not in TRACES:
            bad("trace", "'' (the drawn workload) or a shipped trace: " + ", ".join(TRACES))
        _check_time_scale(self.trace_time_scale)
        prefix.check(self)  # (the shared prefix: before the memory checks, so that a prefix too long is named)
        if self.length_dist == "uniform" and self.length_spread >= 1:
            bad("length_spread", "a number in [0, 1) for uniform lengths")
        if self.warmup_s >= self.duration_s:
            bad("warmup_s", f"a number < duration_s ({self.duration_s})")
        if self.drain_s > MAX_DRAIN_RATIO * self.duration_s:
            bad("drain_s", f"at most {MAX_DRAIN_RATIO} x duration_s ({MAX_DRAIN_RATIO * self.duration_s:g} s): the "
                "time series has one bucket per duration_s / 200 over duration_s + drain_s")

        if self.num_replicas > 1:
            if self.num_replicas * self.num_adapters > MAX_REPLICA_ADAPTERS:
                bad("num_replicas", f"at most {MAX_REPLICA_ADAPTERS // self.num_adapters} with num_adapters "
                    f"{self.num_adapters} (num_replicas x num_adapters <= {MAX_REPLICA_ADAPTERS:,})")
            if self.arrival_process == "closed" and not self.trace:
                bad("num_replicas", "1 with arrival_process 'closed' (closed-loop clients are not routed across "
                    "replicas; use an open-loop arrival_process or a trace)")
            if ROUTERS[self.router].stateful and STRATEGIES[self.strategy].evict == EVICT_BELADY:
                bad("router", ", ".join(r for r, v in ROUTERS.items() if not v.stateful) + f" with strategy "
                    f"{self.strategy!r} and num_replicas {self.num_replicas} (Belady eviction needs each replica's "
                    "future requests, which a state-reading router decides only during the run)")
        # workload size (protects the hosted app and the machine)
        if self.trace and self.expected_requests() > MAX_REQUESTS:
            raise ValueError(
                f"trace_time_scale: trace {self.trace!r} at trace_time_scale {self.trace_time_scale:g} has "
                f"{self.expected_requests():.0f} requests in duration_s {self.duration_s} s; allowed: at most "
                f"{MAX_REQUESTS} (a smaller trace_time_scale or a shorter duration_s)")
        if self.expected_requests() > MAX_REQUESTS:
            raise ValueError(
                f"arrival_rate_rps: {self.arrival_rate_rps} req/s x duration_s {self.duration_s} s "
                f"= {self.expected_requests():.0f} requests; allowed: at most {MAX_REQUESTS}")
        mean_tokens = self.prompt_tokens + self.output_tokens + self.prefix_share * prefix.prefix_len(self)
        if self.arrival_process != "closed" and not self.trace and self.expected_requests() * mean_tokens > MAX_RUN_TOKENS:
            raise ValueError(
                f"arrival_rate_rps: {self.expected_requests():.0f} requests of {mean_tokens:.0f} tokens on average "
                f"(prompt + output + shared prefix) is more work than one run may ask for; allowed: at most "
                f"{MAX_RUN_TOKENS:,.0f} tokens per run (fewer requests or shorter ones)")

        tp = self.tensor_parallel_size
        if tp > 1:
            try:
                op_shapes(self.model_spec, tp)
            except ValueError as e:
                raise ValueError(f"tensor_parallel_size: {str(e).partition(': ')[2]}") from None
            if self.service_mode == "fixed":
                bad("tensor_parallel_size", "1 with service_mode 'fixed' (its per-token times are a measured "
                    "server's, at the tensor-parallel degree it ran; state them for the group, or use 'roofline')")
        # memory
        plan = self.memory_plan()
        g = self.gpu_spec
        if plan["weights"] + plan["reserve"] >= plan["usable"]:
            each = f" on each of {tp} GPUs (tensor_parallel_size {tp})" if tp > 1 else ""
            raise ValueError(
                f"model: invalid value {self.model!r}: its weights ({plan['weights'] / presets.GIB:.1f} GiB{each}) "
                f"plus reserve_gb ({self.reserve_gb}) do not fit in {self.gpu!r} "
                f"({g.memory_gib} GiB x gpu_mem_util {self.gpu_mem_util}); allowed: a smaller model, a larger GPU "
                f"or a larger tensor_parallel_size ({', '.join(map(str, TP_SIZES))})")
        max_budget = self.max_vram_budget_gb()
        if self.vram_budget_gb > max_budget + 1e-9:
            raise ValueError(
                f"vram_budget_gb: invalid value {self.vram_budget_gb}; allowed: at most {max_budget:.2f} GiB "
                f"on {self.gpu} with {self.model} (the rest holds the weights, the reserve and the KV of one "
                f"{self.max_request_tokens()}-token request)")
        if self.kv_cache_gb > 0 and self.kv_cache_gb * presets.GIB < self.max_request_kv_bytes():
            raise ValueError(
                f"kv_cache_gb: invalid value {self.kv_cache_gb}; allowed: 0 (all memory left) or at least "
                f"{self.max_request_kv_bytes() / presets.GIB:.4f} GiB, the KV of one longest request")
        amax = self.max_adapter_bytes()
        if self.memory_mode == "static" and amax > plan["adapters"]:
            raise ValueError(
                f"vram_budget_gb: invalid value {self.vram_budget_gb}; allowed: at least "
                f"{amax / presets.GIB:.3f} GiB, the size of the largest adapter (rank "
                f"{max(set(self.adapter_ranks) or {self.adapter_rank})}, {amax / presets.MIB:.1f} MiB)")
        if self.memory_mode == "unified" and amax > plan["adapters"] + plan["kv"] - self.max_request_kv_bytes():
            raise ValueError(
                f"vram_budget_gb: invalid value {self.vram_budget_gb}; allowed: a budget whose pool holds "
                f"the largest adapter and one request's KV")
        if self.chunked_prefill_on() and self.max_batched_tokens < self.max_batch_size:
            raise ValueError(
                f"max_batched_tokens: invalid value {self.max_batched_tokens}; allowed: at least max_batch_size "
                f"({self.max_batch_size}) with chunked prefill (chunked_prefill {self.chunked_prefill!r}, strategy "
                f"{self.strategy!r}: every running request's decode token counts against the budget; vLLM refuses "
                f"max_num_batched_tokens < max_num_seqs too), or chunked_prefill 'off'")
        if self.trace and not self.chunked_prefill_on():  # (chunked prefill splits a long prompt over steps)
            pmax = int(self.trace_requests()[1].max(initial=0))
            if pmax > self.max_batched_tokens:
                raise ValueError(
                    f"max_batched_tokens: invalid value {self.max_batched_tokens}; allowed: at least {pmax}, the "
                    f"longest prompt of trace {self.trace!r} in [0, duration_s) at trace_time_scale "
                    f"{self.trace_time_scale:g} (or replay less of it: a shorter duration_s or a smaller "
                    f"trace_time_scale)")
        pmax = self.length_bounds(self.prompt_tokens)[1]
        if pmax > self.max_batched_tokens and not self.trace and not self.chunked_prefill_on():
            raise ValueError(
                f"prompt_tokens: invalid value {self.prompt_tokens} (longest drawn prompt {pmax}); allowed: "
                f"at most max_batched_tokens ({self.max_batched_tokens}), or chunked_prefill 'on' (long prompts "
                f"split over steps)")
        if self.cost_model == "kernel" and self.service_mode == "fixed":
            raise ValueError("cost_model: invalid value 'kernel' with service_mode 'fixed'; allowed: 'roofline' "
                             "(fixed service has per-token times, no cost model; cost_model 'kernel' needs "
                             "service_mode 'roofline')")
        fam = STRATEGIES[self.strategy]
        if self.kv_reservation == "on_demand":
            if self.kv_allocator != "paged":
                raise ValueError(f"kv_reservation: invalid value 'on_demand' with kv_allocator "
                                 f"{self.kv_allocator!r}; allowed: 'full' (on-demand growth needs kv_allocator 'paged')")
        if fam.pins_hot_set and self.hot_set_k >= 0:
            fit = hot_set_pins(self, auto=True)
            if self.hot_set_k > len(fit):
                raise ValueError(
                    f"hot_set_k: invalid value {self.hot_set_k}; allowed: -1 (auto) or 0..{len(fit)} "
                    f"(pinned adapters must leave one swap slot in vram_budget_gb)")
            if self.hot_set_k > self.num_adapters:
                bad("hot_set_k", f"at most num_adapters ({self.num_adapters})")
        return self


_FIELD_TYPES = {f.name: f.type for f in fields(Scenario)}
_FIELD_NAMES = tuple(_FIELD_TYPES)
# Scenario.to_dict copies only adapter_ranks: every other field must stay a scalar (checked at import)
assert {t for k, t in _FIELD_TYPES.items() if k != "adapter_ranks"} <= {"str", "float", "int", "bool"}, _FIELD_TYPES
_DEFAULT_MODEL = Scenario.model


def coerce(name: str, value: Any) -> Any:
    """Convert a JSON/CLI/URL value to the field's type, or raise ValueError naming it."""
    if name not in _FIELD_TYPES:
        raise ValueError(f"{name}: unknown scenario field; allowed: {', '.join(sorted(_FIELD_TYPES))}")
    t = _FIELD_TYPES[name]
    try:
        if t == "str":
            if not isinstance(value, str):
                raise TypeError
            return value
        if t == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, (int, float)) and value in (0, 1):
                return bool(value)
            if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
                return value.strip().lower() in ("true", "1", "yes")
            raise TypeError
        if t == "int":
            if isinstance(value, bool):
                raise TypeError
            if isinstance(value, str):
                value = value.strip()
                f = float(value)
            else:
                f = float(value)
            if not math.isfinite(f) or f != int(f):
                raise TypeError
            return int(f)
        if t == "float":
            if isinstance(value, bool):
                raise TypeError
            f = float(value.strip()) if isinstance(value, str) else float(value)
            if math.isnan(f):
                raise TypeError
            return f
        if t.startswith("tuple"):
            if isinstance(value, str):
                parts = [p for p in value.replace(" ", "").split(",") if p]
            elif isinstance(value, (list, tuple)):
                parts = list(value)
            else:
                raise TypeError
            out = []
            for p in parts:
                if isinstance(p, bool):
                    raise TypeError
                f = float(p)
                if not math.isfinite(f) or f != int(f):
                    raise TypeError
                out.append(int(f))
            return tuple(out)
    except (TypeError, ValueError, OverflowError):
        kind = {"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false"}.get(t, "a comma-separated list of integers")
        raise ValueError(f"{name}: invalid value {short_repr(value)}; allowed: {kind}") from None
    raise AssertionError(t)  # pragma: no cover
