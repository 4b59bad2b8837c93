"""The engine tests' fixed base scenarios: the dashboard's ``default`` and ``a100-light`` presets as they were up
to engine 0.5 (an uncalibrated spec-sheet roofline on an A100 80 GB with Llama-2-7B, stated, no server profile).

Since issue 24 those presets run on the vLLM server profile, and the product's default may move again; tests of
engine mechanisms (oracles, fast paths against their references, invariants) need a base that does not move
with it, so they build on these.  ``legacy_preset(name, **kw)`` is ``Scenario.from_preset`` for any other name.
"""
from __future__ import annotations

from engine import Scenario

LEGACY = {
    "default": dict(
        gpu="a100-80gb", model="llama-2-7b", vram_budget_gb=1.0, pcie_gbps=25.0, num_adapters=200,
        adapter_rank=32, zipf_s=1.0, arrival_rate_rps=16.0, prompt_tokens=256, output_tokens=64,
        max_batch_size=64, duration_s=660.0, warmup_s=30.0, slo_ttft_ms=200.0, service_mode="roofline",
        gpu_mem_util=0.9, reserve_gb=2.0, load_mode="sync", batch_window_ms=20.0, hot_set_k=8,
    ),
    "a100-light": dict(
        gpu="a100-80gb", model="llama-2-7b", vram_budget_gb=2.0, pcie_gbps=25.0, num_adapters=200,
        adapter_rank=16, zipf_s=1.0, arrival_rate_rps=20.0, prompt_tokens=256, output_tokens=64,
        max_batch_size=64, duration_s=600.0, warmup_s=30.0, slo_ttft_ms=200.0, service_mode="roofline",
        gpu_mem_util=0.9, reserve_gb=2.0, load_mode="sync", batch_window_ms=20.0, hot_set_k=48,
    ),
}


def legacy_preset(name: str, **overrides) -> Scenario:
    if name in LEGACY:
        return Scenario.from_dict({**LEGACY[name], **overrides})
    return Scenario.from_preset(name, **overrides)
