"""Seed 3: the vLLM multi-LoRA benchmark (presets ``seed3-*``).

``reproduce`` runs its design (``reproduce_seed3``); ``claims`` checks its published claims
S3-1 .. S3-5 (``evaluate_seed3``), also with the costs fitted in ``engine.calibration``.
"""
from .claims import CAL_SUFFIX, CAL_VIEW, cal_text, evaluate_seed3, seed3_calibrated_overrides, seed3_claim_specs
from .reproduce import (
                        SEED3_METRICS,
                        SEED3_PRESET,
                        SEED3_PUBLISHED_UNIFORM,
                        reproduce_seed3,
                        seed3_conditions,
                        seed3_grids,
                        seed3_memory_table,
                        seed3_published_comparison,
                        seed3_specs,
                        seed3_summary_text,
                        seed3_times,
)

__all__ = ["CAL_SUFFIX", "CAL_VIEW", "cal_text", "evaluate_seed3", "seed3_calibrated_overrides", "seed3_claim_specs",
           "SEED3_METRICS", "SEED3_PRESET", "SEED3_PUBLISHED_UNIFORM", "reproduce_seed3", "seed3_conditions",
           "seed3_grids", "seed3_memory_table", "seed3_published_comparison", "seed3_specs", "seed3_summary_text",
           "seed3_times"]
