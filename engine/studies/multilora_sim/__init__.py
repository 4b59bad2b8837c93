"""Seed 1: the multi-LoRA serving simulator (presets ``seed1-*``).

``reproduce`` re-runs its six figures (``reproduce_seed1``); ``claims`` checks its published
claims S1-1 .. S1-11 (``evaluate_seed1``).
"""
from .claims import (
                     HALF,
                     HOTS,
                     PRELOAD,
                     co_arrival_bound,
                     evaluate_seed1,
                     half_hot_set_k,
                     half_k_text,
                     preload_summary,
                     seed1_claim_specs,
)
from .reproduce import (
                     EXTRA_FIGURES,
                     SEED1_FIGURES,
                     SEED1_METRICS,
                     SEED1_PRESET,
                     SEED1_PUBLISHED,
                     SEED1_STRATEGIES,
                     Figure,
                     crossover,
                     reproduce_seed1,
                     seed1_conditions,
                     seed1_grids,
                     seed1_specs,
                     seed1_summary_text,
                     winners_table,
)

__all__ = ["HALF", "HOTS", "PRELOAD", "co_arrival_bound", "evaluate_seed1", "half_hot_set_k", "half_k_text",
           "preload_summary", "seed1_claim_specs", "EXTRA_FIGURES", "SEED1_FIGURES", "SEED1_METRICS", "SEED1_PRESET",
           "SEED1_PUBLISHED", "SEED1_STRATEGIES", "Figure", "crossover", "reproduce_seed1", "seed1_conditions",
           "seed1_grids", "seed1_specs", "seed1_summary_text", "winners_table"]
