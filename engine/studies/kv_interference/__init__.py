"""Seed 2: the LoRA/KV interference benchmark (presets ``kv-*``).

``bench`` reproduces it (``run_kv_interference``: every policy x model x workload); ``runs``
collects the runs its claims need (``kv_collect``); ``claims`` checks K-1 .. K-5
(``evaluate_kv``); ``section`` writes its section of the findings report (``kv_section``).
"""
from .bench import MODELS, POLICIES, WORKLOADS, run_kv_interference
from .claims import evaluate_kv
from .runs import kv_collect, kv_conditions
from .section import kv_section

__all__ = ["MODELS", "POLICIES", "WORKLOADS", "run_kv_interference", "evaluate_kv", "kv_collect", "kv_conditions",
           "kv_section"]
