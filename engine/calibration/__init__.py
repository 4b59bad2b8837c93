"""Calibration: fit the cost model's free parameters to measured serving runs, and check them.

Invariants:

* the calibration uses the model (``engine.scenario``, ``engine.sim``, ``engine.workload``,
  ``engine.presets``); the model never imports the calibration;
* the calibration never imports ``engine.studies`` or the CLI (``engine.cli``, whose
  ``engine/cli/calibration.py`` holds the ``calibrate`` and ``validate`` commands);
* fits are deterministic for given data and seeds (fixed request streams: common random numbers).

Modules, from the bottom up (no cycles between them):

* ``measurements``: reading a measurement file (``vllm bench serve`` / ``benchmark_serving.py``
  metric columns plus Scenario fields as extra columns);
* ``cases``: a ``Case`` (one measured run), simulating cases, error tables;
* ``fitting``: ``fit(base, data)`` and ``fit_cases``, bounded least squares on relative error;
* ``refdata``: where the reference data live (``engine/data/reference``, inside the package);
* ``slora_s1``, ``vllm_runs``: the reference datasets as Cases; ``feasibility``: which vLLM
  runs refuse to start (``failed_insufficient_KV_cache_memory``);
* ``status``: whether a scenario's cost model is a calibrated preset's (``calibration_status``), with its
  errors;
* ``bands``: the error bases of the planner's band (docs/validation/profile_errors.csv: the calibrated fits'
  held-out errors, a measured transfer error, the uncalibrated roofline's error on the vLLM runs), read by
  ``error_bases``, and a scenario's band (``error_band``);
* ``report``: the validation report (``run_validation``, docs/validation.md);
* ``kernel_fit``: Vidur's profiled linear operators (``kernel_profiles/vidur_linear_ops.csv``), the fit
  of the dense-layer kernel model (``engine.kernels``), its hold-out checks and report section;
* ``readers``: benchmark tools' result files (``vllm bench serve``, GuideLLM, AIPerf) as runs,
  replayed as Cases, fitted with a hold-out split and diagnostics (``fit_tool_runs``).

Import the names from this package, not from its modules.
"""
from .bands import (
    BAND_RULE,
    BASES,
    PROFILE_ERRORS_CSV,
    basis_stats,
    calibrated_runs,
    error_band,
    error_bases,
    profile_errors,
    scaled_cost,
    winner_band,
    write_profile_errors,
)
from .cases import Case, engine_metrics, error_table, simulate_case, simulate_cases, summarize_errors, typed_values
from .feasibility import feasibility_accuracy, feasibility_reserve_bracket, feasibility_table, vllm_feasibility
from .fitting import (
    DEFAULT_PARAMS,
    FIT_BOUNDS,
    PARAM_LABELS,
    FitResult,
    _check_params,  # noqa: F401  (the CLI validates --params before loading data)
    fit,
    fit_cases,
    measurement_cases,
    param_label,
)
from .kernel_fit import (
    HOLD_OUTS,
    KERNEL_CSV,
    KERNEL_TARGETS,
    VIDUR_GPUS,
    KernelFit,
    error_summary,
    fit_kernel_params,
    kernel_section,
    kernel_validation,
    layer_table,
    load_kernel_profiles,
    op_table,
    roofline_ms,
)
from .measurements import EXTRA_METRICS, METRIC_COLUMNS, TOOL_FORMATS, load_measurements, row_scenario, tool_format
from .observed_replay import replay_observed
from .readers import (
    DEFAULT_FIT_METRICS,
    ERROR_FLAG,
    FIT_METRIC_WEIGHTS,
    HEADLINE_METRICS,
    HOLD_OUT_CHOICES,
    ToolFit,
    ToolRun,
    choose_hold_out,
    fit_tool_runs,
    formats_understood,
    headline_errors,
    headline_text,
    is_tool_file,
    match_model,
    profile_args,
    profile_errors_of,
    provenance,
    read_tool_file,
    read_tool_files,
    server_scenario,
    simulate_run,
    to_aiperf_json,
    to_guidellm_json,
    to_vllm_bench_json,
    tool_cases,
    tool_paths,
    ttft_distribution,
)
from .refdata import REF_DIR
from .reference_report import (
    REFERENCE_PARAMS,
    REFERENCE_TARGETS,
    ReferenceValidation,
    reference_fit,
    reference_validation,
)
from .reference_runs import DESIGN as REFERENCE_DESIGN
from .reference_runs import TRAIN_GROUPS as REFERENCE_TRAIN_GROUPS
from .reference_runs import run_table as reference_run_table
from .reference_runs import unpack as unpack_reference_runs
from .report import (
    DATASET_LABELS,
    FEASIBILITY_TARGET,
    SLORA_PARAMS,
    SLORA_TRAIN_SUITES,
    TARGETS,
    VLLM_MAX_NFEV,
    VLLM_PARAMS,
    VLLM_START,
    _vllm_train,  # noqa: F401  (the tests pick the vLLM training split with it)
    at_bounds,
    dataset_targets,
    run_validation,
)
from .slora_s1 import SLORA_SEED, slora_cases, slora_metrics, slora_trace
from .status import CALIBRATED, FITTED_FIELDS, Calibration, CalibrationStatus, calibration_status
from .vllm_runs import (
    SHAREGPT_MEAN_IN,
    SHAREGPT_MEAN_OUT,
    VLLM_GPU,
    VLLM_GPU_MEM_UTIL,
    VLLM_LOAD_LATENCY_MS,
    VLLM_LORA_EXTRA_VOCAB,
    VLLM_LORA_RANK_PADDING,
    VLLM_MAX_MODEL_LEN,
    VLLM_MODEL,
    VLLM_PCIE_GBPS,
    VLLM_RESERVE_GIB,
    vllm_cases,
    vllm_metrics_factory,
    vllm_slot_bytes,
    vllm_trace,
)

__all__ = [
    # measurement files
    "METRIC_COLUMNS", "EXTRA_METRICS", "load_measurements", "row_scenario",
    # benchmark tools' result files
    "TOOL_FORMATS", "tool_format", "ToolRun", "formats_understood", "read_tool_file", "read_tool_files", "tool_paths",
    "is_tool_file", "match_model", "server_scenario", "tool_cases", "simulate_run", "ttft_distribution", "to_vllm_bench_json",
    "to_guidellm_json", "to_aiperf_json", "DEFAULT_FIT_METRICS", "FIT_METRIC_WEIGHTS", "ERROR_FLAG", "HOLD_OUT_CHOICES", "ToolFit",
    "choose_hold_out", "fit_tool_runs", "provenance", "HEADLINE_METRICS", "headline_errors", "headline_text",
    "profile_errors_of", "profile_args",
    # observed runs (engine.live.observe) and the reference-server dataset
    "replay_observed", "REFERENCE_PARAMS", "REFERENCE_TARGETS", "ReferenceValidation", "reference_fit",
    "reference_validation", "REFERENCE_DESIGN", "REFERENCE_TRAIN_GROUPS",
    "reference_run_table", "unpack_reference_runs",
    # cases and errors
    "Case", "engine_metrics", "typed_values", "simulate_case", "simulate_cases", "error_table",
    "summarize_errors",
    # fitting
    "FIT_BOUNDS", "DEFAULT_PARAMS", "PARAM_LABELS", "param_label", "FitResult", "fit_cases", "measurement_cases", "fit",
    # reference data
    "REF_DIR",
    "SLORA_SEED", "slora_trace", "slora_metrics", "slora_cases",
    "VLLM_GPU", "VLLM_MODEL", "VLLM_GPU_MEM_UTIL", "VLLM_MAX_MODEL_LEN", "VLLM_RESERVE_GIB",
    "VLLM_LORA_EXTRA_VOCAB", "VLLM_LORA_RANK_PADDING", "VLLM_LOAD_LATENCY_MS", "VLLM_PCIE_GBPS", "SHAREGPT_MEAN_IN", "SHAREGPT_MEAN_OUT",
    "vllm_slot_bytes", "vllm_trace", "vllm_metrics_factory", "vllm_cases",
    "vllm_feasibility", "feasibility_table", "feasibility_accuracy", "feasibility_reserve_bracket",
    # dense-layer kernel model (Vidur's profiled linear operators)
    "KERNEL_CSV", "KERNEL_TARGETS", "VIDUR_GPUS", "HOLD_OUTS", "KernelFit", "load_kernel_profiles", "op_table",
    "fit_kernel_params", "layer_table", "roofline_ms", "error_summary", "kernel_validation", "kernel_section",
    # whether a scenario is calibrated (the dashboard's badge)
    "CALIBRATED", "FITTED_FIELDS", "Calibration", "CalibrationStatus", "calibration_status",
    # error bases of the planner's band
    "BASES", "BAND_RULE", "PROFILE_ERRORS_CSV", "basis_stats", "calibrated_runs", "profile_errors",
    "write_profile_errors", "error_bases", "error_band", "scaled_cost", "winner_band",
    # validation report
    "TARGETS", "FEASIBILITY_TARGET", "SLORA_PARAMS", "SLORA_TRAIN_SUITES", "VLLM_PARAMS", "VLLM_START",
    "VLLM_MAX_NFEV", "at_bounds", "run_validation", "DATASET_LABELS", "dataset_targets",
]
