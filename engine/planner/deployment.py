"""A deployment as its user states it (issue 24 items 1, 2, 4): model, GPU, server, adapters, traffic, SLO and
the decisions; its scenario comes from these inputs and the server's profile only, never from a preset, so the
same question gets the same simulation and the same plan whatever page or preset it was entered from.

The server profiles (``PROFILES``: fitted cost parameters, the server's own configuration defaults per GPU,
what the simulation assumes beyond them, ``ASSUMED``) live in ``engine.presets.servers``, where the scenario
presets resolve them too.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import presets
from ..presets.servers import ASSUMED, COST_FIELDS, PROFILES, ServerProfile, profile_fields
from ..scenario import Scenario
from .memory import vllm_slot_budget_gb

__all__ = ["ASSUMED", "COST_FIELDS", "PROFILES", "WINDOW", "Deployment", "ServerProfile"]

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
    tensor_parallel_size: int = 1               # GPUs per replica (a 70B model needs 4 x 80 GB); memory is per GPU

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
        inputs = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "server"}
        if p.strategy == "vllm" and self.max_loras < 1:
            raise ValueError(f"max_loras: invalid value {self.max_loras!r}; allowed: at least 1 (vLLM's "
                             "--max-loras: the GPU adapter slots it preallocates)")
        sc = Scenario(**{**WINDOW, "vram_budget_gb": 1.0, **profile_fields(self.server, self.gpu),
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
