"""Live servers: the reference server (vLLM's CPU build over a small random-weight Llama and peft adapters built on
local disk), the observer that drives any OpenAI-compatible server with a scenario's traffic and records every
request and a ``/metrics`` time series, and this machine's CPU measured as a device.

Invariants:

* the live layer uses the model (``engine.scenario``, ``engine.workload``, ``engine.presets``) and nothing above it;
  ``engine.calibration`` reads what it writes (``engine.calibration.readers.observed``);
* nothing here talks to an address it was not given; the reference server listens on 127.0.0.1 only;
* every observation is bounded (requests, duration, per-request and drain time-outs) and records every request it
  sent, failed ones included.

Import the names from this package.
"""
from .hosted import HOSTED_LIMITS, OBSERVE_URLS_ENV, allowed_urls, check_allowed, normalise_url
from .observe import (
    FORMAT,
    FORMAT_VERSION,
    MAX_REQUESTS,
    REQUEST_COLUMNS,
    TIMESERIES_COLUMNS,
    Observation,
    observe,
    parse_metrics,
    prompt_text,
    resolve_adapters,
    server_models,
    summarize_requests,
    write_observation,
)
from .reference import (
    CPU_BLOCK_TOKENS,
    ReferenceServer,
    ReferenceSpec,
    build_assets,
    engine_target_modules,
    live_python,
    scenario_fields,
    server_args,
)

__all__ = ["FORMAT", "FORMAT_VERSION", "MAX_REQUESTS", "REQUEST_COLUMNS", "TIMESERIES_COLUMNS", "Observation",
           "observe", "parse_metrics", "prompt_text", "resolve_adapters", "server_models", "summarize_requests",
           "write_observation", "CPU_BLOCK_TOKENS", "ReferenceServer", "ReferenceSpec", "build_assets",
           "engine_target_modules", "live_python", "scenario_fields", "server_args", "HOSTED_LIMITS",
           "OBSERVE_URLS_ENV", "allowed_urls", "check_allowed", "normalise_url"]
