"""LoRA What-If engine: a Numba-jitted simulator of multi-LoRA serving on one GPU.

    >>> from engine import Scenario, simulate
    >>> r = simulate(Scenario.from_preset("seed1-rtx3090", strategy="batch"))
    >>> r.summary["ttft_p50_ms"]  # doctest: +SKIP
"""
from .policies import STRATEGIES
from .scenario import Scenario
from .sim import SimResult, compare, simulate
from .workload import read_trace

ENGINE_VERSION = "0.2.0"

__all__ = ["Scenario", "SimResult", "STRATEGIES", "simulate", "compare", "read_trace", "ENGINE_VERSION"]
