"""The studies: reproductions of the published source studies and the check of their claims.

One sub-package per source study, each with its presets' use, its reproduction (figures,
tables, summary) and its claims: ``multilora_sim`` (seed 1, the multi-LoRA serving simulator,
presets ``seed1-*``), ``kv_interference`` (seed 2, the LoRA/KV interference benchmark, presets
``kv-*``, claims K-1 .. K-5) and ``vllm_multilora`` (seed 3, the vLLM multi-LoRA benchmark,
presets ``seed3-*``). Shared pieces: ``common`` (modes, views, provenance, CI cells, plots) and
``verdicts`` (claims, verdict rules). ``findings`` collects the runs and renders the report.

Invariants:

* the studies use the model's public API (``engine``, ``engine.presets``) and its modules, and
  ``engine.calibration``; nothing in the model imports ``engine.studies``, and the studies never
  import the CLI (``engine.cli`` holds the ``reproduce`` and ``findings`` commands);
* every result is deterministic for a seed: replication k uses seed k (seed1, seed3) or
  base seed + k (kv) for every strategy and grid point (common random numbers).
"""
from .common import VIEWS, Mode, fmt_ci, mode, provenance
from .findings import CLAIM_IDS, generate
from .kv_interference import run_kv_interference
from .multilora_sim import EXTRA_FIGURES, SEED1_FIGURES, SEED1_PRESET, reproduce_seed1
from .verdicts import HOLDS, NO, PARTLY, RULES, Claim, Result, direction_verdict, magnitude_verdict, range_verdict
from .vllm_multilora import (
    SEED3_PRESET,
    SEED3_ROOFLINE_PRESET,
    reproduce_seed3,
    seed3_memory_table,
    seed3_module_bytes,
    seed3_predictions,
)

__all__ = ["VIEWS", "Mode", "fmt_ci", "mode", "provenance", "CLAIM_IDS", "generate", "run_kv_interference",
           "EXTRA_FIGURES", "SEED1_FIGURES", "SEED1_PRESET", "reproduce_seed1", "HOLDS", "NO",
           "PARTLY", "RULES", "Claim", "Result", "direction_verdict", "magnitude_verdict", "range_verdict",
           "SEED3_PRESET", "SEED3_ROOFLINE_PRESET", "reproduce_seed3", "seed3_memory_table", "seed3_module_bytes",
           "seed3_predictions"]
