"""Capacity planner: the inverse question — which GPU, ``--max-loras``, policy, and how much traffic.

Invariants:

* the planner only *uses* the model (``simulate``, the scenario, the sweep pool) and the
  calibration's vLLM memory rule (``vllm_slot_bytes``); nothing below imports it;
* a plan is deterministic for a base scenario, SLO, grid and replication count, whatever the
  number of workers (common random numbers: replication k uses seed ``base.seed + k`` everywhere);
* a configuration that cannot run stays in the table as infeasible, with its reason.

Modules: ``slo`` (SLO metrics and the stability rule), ``search`` (bracketing searches of one
configuration: max rate, max adapters, min replicas), ``memory`` (memory split, vLLM slot sizing),
``prices`` (GPU US$/h presets), ``commands`` (server command lines), ``plan`` (``plan()``, the ranked table),
``ties`` (the stated tie-break and the grid-edge notes), ``band`` (the error band: each answer again with the cost
model slower and faster by its measured error), ``deployment`` (a deployment as its user states it, on a server
profile: the same inputs give the same scenario whatever preset they were entered from).
"""
from .band import band_sentence
from .commands import Command, server_commands, sglang_command, vllm_command
from .deployment import PROFILES, Deployment, ServerProfile
from .memory import memory_sentence, memory_split, vllm_max_lora_rank
from .plan import (
    MAX_CONFIGS,
    MAX_REPLICAS_SEARCH,
    MAX_SEARCHES,
    OBJECTIVES,
    VALUE_COLUMNS,
    PlanResult,
    plan,
    plan_commands,
    plan_summary,
)
from .prices import GPU_PRICES_USD_PER_HOUR, cost_per_mtok_usd, price_table
from .slo import SLO_METRICS, check_slo, meets, stable

__all__ = ["Command", "server_commands", "vllm_command", "sglang_command", "plan", "PlanResult", "plan_summary", "plan_commands", "OBJECTIVES", "VALUE_COLUMNS", "MAX_CONFIGS", "MAX_SEARCHES",
           "MAX_REPLICAS_SEARCH", "SLO_METRICS",
           "check_slo", "meets", "stable", "GPU_PRICES_USD_PER_HOUR", "price_table", "cost_per_mtok_usd",
           "memory_split", "memory_sentence", "vllm_max_lora_rank", "Deployment", "ServerProfile", "PROFILES",
           "band_sentence"]
