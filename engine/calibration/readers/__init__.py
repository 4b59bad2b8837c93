"""Readers for the result files benchmark tools write, and fitting the model to them.

Modules (no cycles between them): ``base`` (``ToolRun``, checks naming the key and index),
``vllm_bench`` (``vllm bench serve`` / ``benchmark_serving.py``), ``guidellm`` (GuideLLM report),
``aiperf`` (AIPerf ``profile_export_aiperf.json``), each with its reader and a writer of the same
layout from a simulation (round-trip tests); ``files`` (which format a file is, directories);
``replay`` (a ToolRun as a Case: the server's settings, the traffic replayed, the tool's metric
definitions); ``fit`` (hold-out split, fit, errors per split, diagnostics, provenance).

The keys each reader uses, the tool version and the source file they come from are in the
readers' docstrings and in tests/fixtures/tools/README.md.
"""
from ..measurements import TOOL_FORMATS, register_tool_reader, tool_format
from .aiperf import read_aiperf, to_aiperf_json
from .base import ToolRun
from .files import formats_understood, is_tool_file, measurement_rows, read_tool_file, read_tool_files, tool_paths
from .fit import (
    ERROR_FLAG,
    HEADLINE_METRICS,
    HOLD_OUT_CHOICES,
    ToolFit,
    choose_hold_out,
    fit_tool_runs,
    headline_errors,
    headline_text,
    large_errors,
    profile_args,
    profile_errors_of,
    provenance,
    tool_cases,
)
from .guidellm import read_guidellm, to_guidellm_json
from .replay import (
    DEFAULT_FIT_METRICS,
    FIT_METRIC_WEIGHTS,
    arrivals,
    case_scenario,
    fitted_workload,
    match_model,
    run_case,
    run_trace,
    server_scenario,
    simulate_run,
    ttft_distribution,
)
from .vllm_bench import read_vllm_bench, to_vllm_bench_json

register_tool_reader(measurement_rows)  # load_measurements routes tool files here

__all__ = [
    "TOOL_FORMATS", "tool_format", "ToolRun", "formats_understood", "read_tool_file", "read_tool_files", "tool_paths",
    "is_tool_file",
    "measurement_rows", "read_vllm_bench", "read_guidellm", "read_aiperf", "to_vllm_bench_json", "to_guidellm_json",
    "to_aiperf_json", "match_model", "server_scenario", "arrivals", "run_trace", "case_scenario", "run_case",
    "simulate_run", "ttft_distribution", "fitted_workload", "DEFAULT_FIT_METRICS", "FIT_METRIC_WEIGHTS", "ERROR_FLAG", "HOLD_OUT_CHOICES",
    "ToolFit", "choose_hold_out", "tool_cases", "fit_tool_runs", "large_errors", "provenance",
    "HEADLINE_METRICS", "headline_errors", "headline_text", "profile_errors_of", "profile_args",
]
