"""A deployment as its user states it (issue 24 items 1, 2, 4): model, GPU, server, adapters, traffic, SLO and
the decisions; its scenario comes from these inputs and the server's profile only, never from a preset, so the
same question gets the same simulation and the same plan whatever page or preset it was entered from.

A **server profile** (``PROFILES``) is what a serving engine does on a GPU with a model: its fitted cost
parameters (the calibrated preset it was fitted as, ``fitted_as``), the server's own configuration defaults
(vLLM's batch limits per GPU as its API server computes them: ``vllm_batch_defaults``; memory utilisation;
chunked prefill; KV allocated on demand) and where the numbers come from. On the GPU and model it was fitted on
a profile is *calibrated*; elsewhere its fitted values are carried over through the spec-sheet roofline
(*transferred*), with the measured transfer error (``engine.calibration.error_band``). What the simulation
assumes beyond the profile (host link, disk, reserve) is in ``ASSUMED``, each with its source.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .. import presets
from ..presets.scenarios import SCENARIOS, SEED3_DISK_TO_CPU_MS
from ..presets.servers import VLLM_CONFIG, VLLM_COST_FIELDS, vllm_batch_defaults
from ..scenario import Scenario
from .memory import vllm_slot_budget_gb

#: The cost fields a profile sets (the fitted ones; ``max_in_system``, a property of the benchmark's client in
#: the overloaded runs, is not part of a server).
COST_FIELDS = ("service_mode", "cost_model", *VLLM_COST_FIELDS)


@dataclass(frozen=True)
class ServerProfile:
    name: str                      # the server ("vllm", "slora")
    label: str
    fitted_as: str                 # the calibrated preset whose fitted cost fields this profile carries
    strategy: str                  # the scheduling the server runs (engine.policies.STRATEGIES)
    config: dict = field(default_factory=dict)   # the server's own defaults the simulation runs with
    source: str = ""

    @property
    def fitted_on(self) -> tuple[str, str]:
        p = SCENARIOS[self.fitted_as]
        return p["gpu"], p["model"]

    def cost(self) -> dict:
        base = Scenario()
        return {f: SCENARIOS[self.fitted_as].get(f, getattr(base, f)) for f in COST_FIELDS}

    def server_config(self, gpu: str) -> dict:
        cfg = dict(self.config)
        if self.name == "vllm":
            seqs, tokens, _ = vllm_batch_defaults(gpu)
            cfg.update(max_batch_size=seqs, max_batched_tokens=tokens)
        return cfg


PROFILES: dict[str, ServerProfile] = {
    "vllm": ServerProfile(
        "vllm", "vLLM ~0.8.5 (V1 engine)", "vllm-llama31-8b", VLLM_CONFIG["strategy"],
        config={k: v for k, v in VLLM_CONFIG.items() if k != "strategy"},  # presets/servers.py: one definition
        source="fitted to 30 of 163 real vLLM runs (Llama-3.1-8B, an H100 64 GB, unverified; engine/data/reference/"
               "vllm_llama31_8b_multilora_runs.csv), checked on 101 held out (docs/validation.md); batch limits: "
               "vLLM's API-server defaults per GPU (presets.servers.VLLM_BATCH_DEFAULTS); gpu_memory_utilization "
               "0.9 as in those runs"),
    "slora": ServerProfile(
        "slora", "S-LoRA (unified pool, asynchronous prefetch)", "slora-a10g-s1", "slora",
        config=dict(gpu_mem_util=0.9, memory_mode="unified", load_mode="async", kv_reservation="full",
                    chunked_prefill="auto", vram_budget_gb=0.0,
                    max_batch_size=SCENARIOS["slora-a10g-s1"]["max_batch_size"],
                    max_batched_tokens=SCENARIOS["slora-a10g-s1"]["max_batched_tokens"]),
        source="fitted to S-LoRA's own S1 runs on an A10G 24 GB (llama-7b; engine/data/reference/"
               "slora_s1_results.csv), checked on its held-out runs (docs/validation.md)"),
}

#: What a deployment's scenario assumes beyond the profile: field -> (value or "gpu", source).
ASSUMED = {
    "pcie_gbps": ("gpu", "the GPU preset's practical host-to-device bandwidth (engine/presets/gpus.py)"),
    "reserve_gb": (5.0, "activations and CUDA graphs, as in the vLLM fit (calibration.vllm_feasibility)"),
    "disk_latency_ms": (46.76, f"vLLM's measured repeat read of a rank-16 adapter, {SEED3_DISK_TO_CPU_MS:.2f} ms "
                               "in all (engine/data/reference/vllm_lora_load_times.csv)"),
    "disk_gbps": (0.3686, "the per-byte rate of the same measurements' rank sweep"),
    "host_warm": (True, "adapters registered at start (--lora-modules): in host memory from the start"),
    "kv_block_tokens": (16, "both servers page the KV cache in 16-token blocks on CUDA"),
}
#: The simulation's window for a deployment (the planner shortens each probe to about 6,000 arrivals).
WINDOW = dict(duration_s=600.0, warmup_s=60.0, drain_s=60.0, seed=0)


@dataclass(frozen=True)
class Deployment:
    """What a user knows about their deployment. ``scenario()`` is a function of these fields alone."""
    model: str = "llama-3.1-8b"
    gpu: str = "h100-80gb"
    server: str = "vllm"
    num_adapters: int = 100
    adapter_rank: int = 16
    adapter_ranks: tuple[int, ...] = ()          # a rank mix (cycled over the adapters); () = all adapter_rank
    target_modules: str = "qv"                  # PEFT's default for Llama-family models
    arrival_rate_rps: float = 10.0
    prompt_tokens: int = 222                    # ShareGPT-like means, as the real vLLM runs
    output_tokens: int = 194
    length_dist: str = "lognormal"
    length_spread: float = 1.0
    popularity: str = "zipf"
    zipf_s: float = 1.0
    max_loras: int = 16                         # decisions (a plan's grid usually sets them)
    max_cpu_loras: int = 0
    slo_ttft_ms: float = 500.0

    def profile(self) -> ServerProfile:
        if self.server not in PROFILES:
            raise ValueError(f"server: invalid value {self.server!r}; allowed: {', '.join(PROFILES)}")
        return PROFILES[self.server]

    def scenario(self) -> Scenario:
        """The scenario of this deployment: the profile's cost and server defaults, ``ASSUMED``, ``WINDOW``
        and the inputs; vLLM's adapter memory sized as it preallocates it (max_loras slots at max_lora_rank)."""
        p = self.profile()
        if self.gpu not in presets.GPUS:
            raise ValueError(f"gpu: invalid value {self.gpu!r}; allowed: {', '.join(sorted(presets.GPUS))}")
        assumed = {k: (presets.GPUS[self.gpu].pcie_gbps if v == "gpu" else v) for k, (v, _) in ASSUMED.items()}
        inputs = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "server"}
        if p.strategy == "vllm" and self.max_loras < 1:
            raise ValueError(f"max_loras: invalid value {self.max_loras!r}; allowed: at least 1 (vLLM's "
                             "--max-loras: the GPU adapter slots it preallocates)")
        sc = Scenario(**{**WINDOW, **assumed, **p.cost(), "vram_budget_gb": 1.0, **p.server_config(self.gpu),
                         "strategy": p.strategy, **inputs})
        if p.strategy == "vllm" and self.max_loras > 0:
            sc = sc.replace(vram_budget_gb=vllm_slot_budget_gb(sc))
        return sc

    def replace(self, **kw) -> Deployment:
        return dataclasses.replace(self, **kw)

    @classmethod
    def from_scenario(cls, sc: Scenario, server: str = "vllm") -> Deployment:
        """The inputs a scenario states (e.g. a preset's, to prefill a form); everything else is the profile's."""
        return cls(server=server, **{f.name: getattr(sc, f.name) for f in dataclasses.fields(cls)
                                     if f.name != "server"})

    def resolution(self) -> str:
        """Calibrated / transferred, in words: what the answer rests on."""
        p = self.profile()
        gpu, model = p.fitted_on
        if (self.gpu, self.model) == (gpu, model):
            return f"{p.label} profile, calibrated on this GPU and model ({p.fitted_as})"
        return (f"{p.label} profile fitted on {presets.GPUS[gpu].label} with {model} ({p.fitted_as}), transferred "
                f"to {presets.GPUS[self.gpu].label} with {self.model} through the spec-sheet roofline")
