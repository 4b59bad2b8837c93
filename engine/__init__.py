"""LoRA What-If engine: a Numba-jitted simulator of multi-LoRA serving on one GPU.

    >>> from engine import Scenario, simulate
    >>> r = simulate(Scenario.from_preset("seed1-rtx3090", strategy="batch"))
    >>> r.summary["ttft_p50_ms"]  # doctest: +SKIP

The public API is this module, ``engine.presets``, ``engine.calibration`` and
``engine.planner`` and ``engine.studies`` (their package namespaces). Everything else under
``engine/`` is internal: the app imports only the public API (an
import-linter contract in pyproject.toml checks it; docs/architecture.md maps
the layers).
"""
# jitcache first (alphabetical, too): it points Numba's cache at the jitted sources' digest before any loads
from . import jitcache, presets  # noqa: F401
from .bottlenecks import Cause, causes, effective_slots, run_causes
from .kernels import DENSE_OPS, KERNEL_PARAMS, dense_layer_ms, dense_op_ms
from .limits import csv_safe, loads_json, short_repr, write_csv
from .metrics import mean_ci
from .policies import STRATEGIES, contenders_excluded
from .presets import model_from_hf_config
from .presets.scenarios import TRACE_CITATION, TRACES
from .ranking import Ranking, rank
from .routers import ROUTERS
from .scenario import (
                       ENUMS,
                       EXPORT_REPLICATIONS_KEY,
                       EXPORT_STRATEGIES_KEY,
                       MAX_REPLICAS,
                       MAX_REQUESTS,
                       MODEL_DEFINITION_KEY,
                       TP_SIZES,
                       Scenario,
)
from .sequential import Decision, SequentialRun, decide, look_alpha, run_until_decided
from .sim import SimResult, compare, simulate, simulate_summary
from .workload import read_trace, shipped_trace

ENGINE_VERSION = "0.7.0"  # 0.7: tensor parallelism, the sglang strategy, prefix caching, the vLLM profile refitted at max_rank padding

__all__ = ["Scenario", "SimResult", "STRATEGIES", "ROUTERS", "ENUMS", "MAX_REQUESTS", "MAX_REPLICAS", "EXPORT_STRATEGIES_KEY", "EXPORT_REPLICATIONS_KEY", "simulate", "simulate_summary", "compare", "read_trace",
           "shipped_trace", "TRACES", "TRACE_CITATION",
           "mean_ci", "Cause", "causes", "run_causes", "effective_slots", "contenders_excluded", "rank", "Ranking", "presets", "model_from_hf_config", "ENGINE_VERSION",
           "dense_layer_ms", "dense_op_ms", "DENSE_OPS", "KERNEL_PARAMS", "csv_safe", "write_csv", "loads_json", "short_repr", "MODEL_DEFINITION_KEY",
           "TP_SIZES", "decide", "run_until_decided", "look_alpha", "Decision", "SequentialRun"]
