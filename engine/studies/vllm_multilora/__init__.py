"""Seed 3: the vLLM multi-LoRA benchmark (presets ``seed3-*``).

``reproduce`` runs its design on the preset derived from vLLM's LoRA defaults and the cost model fitted
to the real vLLM runs (``reproduce_seed3``), with its predictions for the results the source holds out;
``claims`` checks its published claims S3-1 .. S3-5 (``evaluate_seed3``), also on the older roofline
design for contrast; ``section`` writes the seed-3 section of docs/findings.md.
"""
from .claims import ROOFLINE_SUFFIX, ROOFLINE_VIEW, evaluate_seed3, seed3_claim_specs
from .reproduce import (
                        SEED3_MAX_LORAS,
                        SEED3_METRICS,
                        SEED3_PREDICT_COUNTS,
                        SEED3_PRESET,
                        SEED3_PUBLISHED_UNIFORM,
                        SEED3_ROOFLINE_PRESET,
                        SEED3_ZIPF_S,
                        reproduce_seed3,
                        seed3_conditions,
                        seed3_disk_ms,
                        seed3_grids,
                        seed3_memory_table,
                        seed3_module_bytes,
                        seed3_predictions,
                        seed3_published_comparison,
                        seed3_roofline_text,
                        seed3_specs,
                        seed3_summary_text,
                        seed3_times,
)
from .section import seed3_section

__all__ = ["ROOFLINE_SUFFIX", "ROOFLINE_VIEW", "evaluate_seed3", "seed3_claim_specs",
           "SEED3_MAX_LORAS", "SEED3_METRICS", "SEED3_PREDICT_COUNTS", "SEED3_PRESET", "SEED3_PUBLISHED_UNIFORM",
           "SEED3_ROOFLINE_PRESET", "SEED3_ZIPF_S", "reproduce_seed3", "seed3_conditions", "seed3_disk_ms",
           "seed3_grids", "seed3_memory_table", "seed3_module_bytes", "seed3_predictions",
           "seed3_published_comparison", "seed3_roofline_text", "seed3_specs", "seed3_summary_text", "seed3_times",
           "seed3_section"]
