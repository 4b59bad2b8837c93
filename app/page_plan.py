"""Plan page: the inverse question. Which GPU, ``--max-loras`` and policy serve a traffic within an SLO, and at
what cost?

Two ways in (``K_MODE``).  **Your deployment** (the default, issue 24 item 4): one form of what a user knows
(server, model, candidate GPUs, adapters, traffic, SLO, candidate ``max_loras``, what to find), prefilled from the
sidebar's scenario the first time (``planner.Deployment.from_scenario``), then kept; submitting plans
``planner.Deployment(...).scenario()``, built from the form's values and the server's profile only, never from a
preset, so the same values give the same plan whatever preset or page they came from (item 2).  Its controls are
bound to the URL under ``plan_d_*`` keys.  **The sidebar scenario (advanced)**: the sidebar's scenario is the
base; the page's own controls (an objective, one or two SLO rows, candidate GPUs,
``max_loras`` and ``max_cpu_loras`` values, strategies, routers, replications, GPU price overrides) are bound to the URL
under ``plan_`` keys, never a Scenario field's name.  ``sanitize_query`` cleans those URL parameters before any
widget binds to them (registered with ``controls.PAGE_PARAMS``, so their warnings name them like the scenario's).

Everything decided here comes from ``engine.planner``: the search, the ranking and its ties (paired CIs over
common random numbers), costs, the memory split and the server command lines.  A plan takes seconds, so it runs
on a button, bounded to ``MAX_PLAN_SEARCHES`` configurations x replications, and its result is cached keyed on
the inputs and ``ENGINE_VERSION``.  Every plan carries its error band (``planner.plan(band=...)``: the answer again
with the cost model slower and faster by its measured error) and, from the form, the profile's resolution
(``Deployment.resolution``: calibrated, or transferred and from what).
"""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from app import charts, controls, exports, page_whatif
from app.text import md_escape
from engine import ENGINE_VERSION, ENUMS, ROUTERS, STRATEGIES, TP_SIZES, Scenario, planner, presets

PREFIX = "plan_"
K_OBJECTIVE = "plan_objective"
K_SLO_METRIC, K_SLO = "plan_slo_metric", "plan_slo"
K_SLO2_METRIC, K_SLO2 = "plan_slo2_metric", "plan_slo2"
K_GPUS = "plan_gpus"
K_MAX_LORAS = "plan_max_loras"
K_CPU_LORAS = "plan_cpu_loras"
K_STRATEGIES = "plan_strategies"
K_ROUTERS = "plan_routers"
K_REPS = "plan_reps"
PRICE_PREFIX = "plan_price_"            # + GPU preset name, e.g. plan_price_h100-80gb=2.5
K_RUN, K_OPEN, K_COST_AXIS = "plan_run", "plan_open_whatif", "plan_cost_axis"  # not in the URL
LAST_KEY, ERROR_KEY = "_plan_last", "_plan_error"
WHATIF_PAGE = "whatif"
NONE = "none"                           # no second SLO row

#: The page's work cap: configurations x replications of one plan (the engine allows planner.MAX_SEARCHES).
MAX_PLAN_SEARCHES = 48
MAX_REPLICATIONS = 5
DEFAULT_REPLICATIONS = 3
DEFAULT_OBJECTIVE = "max_rate"
DEFAULT_GPUS = ["a100-80gb", "h100-80gb"]
DEFAULT_MAX_LORAS = [8, 32]
DEFAULT_STRATEGIES = ["vllm", "slora"]
MAX_LORAS_OPTIONS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256]
CPU_LORAS_OPTIONS = [0, 16, 32, 64, 128, 256, 512, 1024]
#: Integer ranges of the candidate values (those of ``engine.Scenario``'s validation).
INT_RANGES = {K_MAX_LORAS: (0, 4096), K_CPU_LORAS: (0, 1 << 20)}
PRICE_RANGE = (0.01, 1000.0)
#: SLO metrics bounded by a fraction in [0, 1]; the others are milliseconds (at most MAX_THRESHOLD_MS).
FRACTIONS = {"slo_attainment", "hit_rate_gpu", "swap_rate"}
MAX_THRESHOLD_MS = 600_000.0
DEFAULT_METRIC = "ttft_p99_ms"
DEFAULT_THRESHOLDS = {
    "ttft_mean_ms": 200.0, "ttft_p50_ms": 200.0, "ttft_p90_ms": 400.0, "ttft_p99_ms": 500.0,
    "tpot_mean_ms": 50.0, "tpot_p90_ms": 75.0, "tpot_p99_ms": 100.0, "e2e_mean_ms": 5000.0, "e2e_p99_ms": 10000.0,
    "queue_mean_ms": 100.0, "load_wait_mean_ms": 50.0, "swap_rate": 0.5, "slo_attainment": 0.9, "hit_rate_gpu": 0.9,
}
#: Which plan the page shows: the deployment form (the default) or the sidebar's scenario with a free grid.
K_MODE = "plan_mode"
MODE_DEPLOYMENT, MODE_SIDEBAR = "deployment", "sidebar"
MODES = {MODE_DEPLOYMENT: "Your deployment", MODE_SIDEBAR: "The sidebar scenario (advanced)"}
#: The advanced path's URL parameters: a link with one of them (and no plan_mode) opens that path.
ADVANCED_KEYS = (K_OBJECTIVE, K_SLO_METRIC, K_SLO, K_SLO2_METRIC, K_SLO2, K_GPUS, K_MAX_LORAS, K_CPU_LORAS,
                 K_STRATEGIES, K_ROUTERS, K_REPS)
#: The deployment form (``st.form``) and its controls, bound to the URL under plan_d_* keys.
FORM_KEY = "plan_deployment_form"
K_D_SERVER, K_D_MODEL, K_D_GPUS = "plan_d_server", "plan_d_model", "plan_d_gpus"
K_D_ADAPTERS, K_D_RANKS, K_D_MODULES = "plan_d_adapters", "plan_d_ranks", "plan_d_modules"
K_D_RATE, K_D_PROMPT, K_D_OUTPUT = "plan_d_rate", "plan_d_prompt", "plan_d_output"
K_D_LENGTHS, K_D_SPREAD = "plan_d_lengths", "plan_d_spread"
K_D_POPULARITY, K_D_ZIPF = "plan_d_popularity", "plan_d_zipf"
K_D_SLO_METRIC, K_D_SLO, K_D_SLO2_METRIC, K_D_SLO2 = "plan_d_slo_metric", "plan_d_slo", "plan_d_slo2_metric", "plan_d_slo2"
K_D_TTFT = "plan_d_ttft"
K_D_MAX_LORAS, K_D_CPU_LORAS = "plan_d_max_loras", "plan_d_cpu_loras"
K_D_OBJECTIVE, K_D_REPS, K_D_BAND = "plan_d_objective", "plan_d_reps", "plan_d_band"
K_D_TP = "plan_d_tp"
#: Every control of the form, in its order (a test fills them all: nothing else may reach the plan).
FORM_KEYS = (K_D_SERVER, K_D_MODEL, K_D_GPUS, K_D_TP, K_D_ADAPTERS, K_D_RANKS, K_D_MODULES, K_D_RATE, K_D_PROMPT,
             K_D_OUTPUT, K_D_LENGTHS, K_D_SPREAD, K_D_POPULARITY, K_D_ZIPF, K_D_SLO_METRIC, K_D_SLO,
             K_D_SLO2_METRIC, K_D_SLO2, K_D_TTFT, K_D_OBJECTIVE, K_D_MAX_LORAS, K_D_CPU_LORAS, K_D_REPS, K_D_BAND)
#: The form's numbers: key -> (min, max, integer) (the ranges of ``engine.Scenario``'s validation).
D_NUMBERS = {K_D_ADAPTERS: (1, 100_000, True), K_D_RATE: (0.001, 100_000.0, False),
             K_D_PROMPT: (1, 1 << 17, True), K_D_OUTPUT: (1, 1 << 17, True), K_D_SPREAD: (0.0, 10.0, False),
             K_D_ZIPF: (0.0, 10.0, False), K_D_TTFT: (1.0, 3.6e6, False), K_D_CPU_LORAS: (0, 1 << 20, True),
             K_D_REPS: (1, MAX_REPLICATIONS, True)}
#: A rank mix: at most this many ranks (``Scenario.adapter_ranks``), each in RANK_RANGE.
MAX_RANKS, RANK_RANGE = 64, (1, 1024)
DEFAULT_D_MAX_LORAS = (16, 32)
DEFAULT_BAND = "auto"
OBJECTIVE_HELP = {
    "max_rate": "the largest arrival rate (req/s) each configuration serves stably within the SLO",
    "max_adapters": "the most adapters each configuration serves within the SLO at the sidebar's arrival rate",
    "min_cost": "the cheapest configuration (US$ per million output tokens) that meets the SLO at the sidebar's "
                "arrival rate",
    "min_replicas": "the fewest replicas (GPUs, each a full server, behind the router) that serve the sidebar's "
                    "arrival rate (the fleet's total) stably within the SLO; then the cheaper fleet",
}
#: Headline column of each objective in the planner's table, with its display label and format.
VALUE_COLUMN = {"max_rate": ("max_rate_rps", "Max rate (req/s)", "%.2f"),
                "max_adapters": ("max_adapters", "Max adapters", "%.0f"),
                "min_cost": ("meets_slo_frac", "Replications meeting the SLO", "percent"),
                "min_replicas": ("replicas_needed", "Replicas needed (mean)", "%.2f")}
GRID_LABELS = {"gpu": "GPU", "max_loras": "max_loras", "max_cpu_loras": "max_cpu_loras", "strategy": "Strategy",
               "router": "Router"}


def objective_help(objective: str, deployment: bool = False) -> str:
    """``OBJECTIVE_HELP`` of ``objective``, said of the form's traffic ("your") or of the sidebar's."""
    text = OBJECTIVE_HELP[objective]
    return text.replace("the sidebar's", "your") if deployment else text


def default_threshold(metric: str) -> float:
    return DEFAULT_THRESHOLDS.get(metric, 0.9 if metric in FRACTIONS else 500.0)


def threshold_range(metric: str) -> tuple[float, float, float]:
    """(min, max, step) of an SLO threshold for ``metric``."""
    return (0.0, 1.0, 0.01) if metric in FRACTIONS else (0.0, MAX_THRESHOLD_MS, 10.0)


def _num(v: float) -> str:
    s = f"{v:g}"
    return s if float(s) == v else repr(v)


# ------------------------------------------------------------------ URL parameters (pure)
def sanitize_query(params: Mapping[str, Sequence[str]]) -> tuple[dict[str, str | list[str]], list[controls.Issue]]:
    """Clean the page's URL parameters (``plan_*`` key -> values) before its widgets bind to them.

    Unknown keys and malformed values are dropped, numbers out of range clamped, unknown options removed, each
    with an Issue naming the parameter.  Returns the parameters in ``st.query_params.from_dict`` form (one value:
    a string; several: a list), the shape ``controls.normalize_query`` gives.
    """
    clean: dict[str, str | list[str]] = {}
    issues: list[controls.Issue] = []

    def warn(key: str, msg: str, kind: str = "adjusted") -> None:
        issues.append(controls.Issue(key, f"URL parameter `{key}`{msg}", kind))

    single: dict[str, str] = {}
    multi: dict[str, list[str]] = {}
    for key, vals in params.items():
        vals = [str(v) for v in (vals if isinstance(vals, (list, tuple)) else [vals])]
        if key in (K_GPUS, K_STRATEGIES, K_ROUTERS, K_MAX_LORAS, K_CPU_LORAS, K_D_GPUS):
            multi[key] = [x.strip() for v in vals for x in v.split(",") if x.strip()]
        elif (key in (K_OBJECTIVE, K_SLO_METRIC, K_SLO, K_SLO2_METRIC, K_SLO2, K_REPS, K_MODE) or key in FORM_KEYS
              or key.startswith(PRICE_PREFIX)):
            if len(vals) != 1:
                warn(key, f" given {len(vals)} times; using the last value")
            single[key] = vals[-1].strip()
        else:
            issues.append(controls.Issue(key, f"Unknown URL parameter `{key}` ignored: it is not a control of the "
                                              "Plan page", "unknown"))

    for key, opts, default in ((K_OBJECTIVE, list(planner.OBJECTIVES), DEFAULT_OBJECTIVE),
                               (K_SLO_METRIC, list(planner.SLO_METRICS), DEFAULT_METRIC),
                               (K_SLO2_METRIC, [NONE, *planner.SLO_METRICS], NONE)):
        if key in single:
            if single[key] in opts:
                clean[key] = single[key]
            else:
                warn(key, f"={single[key]!r} dropped: not one of {', '.join(opts)}; using {default!r}", "malformed")
    m1, m2 = clean.get(K_SLO_METRIC, DEFAULT_METRIC), clean.get(K_SLO2_METRIC, NONE)
    if m2 != NONE and m2 == m1:
        warn(K_SLO2_METRIC, f"={m2!r} dropped: the first SLO row already bounds that metric", "malformed")
        del clean[K_SLO2_METRIC]
        m2 = NONE

    def number(key: str, lo: float, hi: float, integer: bool = False) -> None:
        raw = single[key]
        try:
            v = float(raw)
            if not math.isfinite(v):
                raise ValueError
        except ValueError:
            warn(key, f"={raw!r} dropped (not a finite number); using the default", "malformed")
            return
        if integer and v != int(v):
            warn(key, f"={raw!r} dropped (not an integer); using the default", "malformed")
            return
        if v < lo or v > hi:
            c = lo if v < lo else hi
            warn(key, f": {_num(v)} is {'below the minimum' if v < lo else 'above the maximum'} {_num(c)}; "
                      f"clamped to {_num(c)}")
            v = c
        clean[key] = str(int(v)) if integer else _num(v)

    for key, metric in ((K_SLO, m1), (K_SLO2, m2)):
        if key not in single:
            continue
        if metric == NONE:
            warn(key, " ignored: there is no second SLO metric (set plan_slo2_metric)", "ignored")
            continue
        lo, hi, _ = threshold_range(metric)
        number(key, lo, hi)
    if K_REPS in single:
        number(K_REPS, 1, MAX_REPLICATIONS, integer=True)
    for key in [k for k in single if k.startswith(PRICE_PREFIX)]:
        gpu = key[len(PRICE_PREFIX):]
        if gpu not in presets.GPUS:
            warn(key, f" dropped: {gpu!r} is not a GPU preset ({', '.join(presets.GPUS)})", "malformed")
            continue
        number(key, *PRICE_RANGE)

    for key, opts in ((K_GPUS, list(presets.GPUS)), (K_STRATEGIES, list(STRATEGIES)), (K_ROUTERS, list(ROUTERS))):
        if key not in multi:
            continue
        good = list(dict.fromkeys(x for x in multi[key] if x in opts))
        bad = [x for x in multi[key] if x not in opts]
        if bad:
            warn(key, f": unknown value(s) {', '.join(map(repr, bad))} dropped (allowed: {', '.join(opts)})"
                      + ("" if good else "; using the default"), "adjusted" if good else "malformed")
        if good or not multi[key]:
            clean[key] = good[0] if len(good) == 1 else good if good else ""
    for key in (K_MAX_LORAS, K_CPU_LORAS):
        if key not in multi:
            continue
        lo, hi = INT_RANGES[key]
        good, bad = [], []
        for x in multi[key]:
            try:
                f = float(x)
                if not math.isfinite(f) or f != int(f):
                    raise ValueError
                v = int(f)
            except ValueError:
                bad.append(x)
                continue
            if v < lo or v > hi:
                c = min(max(v, lo), hi)
                warn(key, f": {v} is outside [{lo}, {hi}]; clamped to {c}")
                v = c
            if v not in good:
                good.append(v)
        if bad:
            warn(key, f": {', '.join(map(repr, bad))} dropped (not an integer)" + ("" if good else "; using the default"),
                 "adjusted" if good else "malformed")
        if good or not multi[key]:
            vals = [str(v) for v in good]
            clean[key] = vals[0] if len(vals) == 1 else vals if vals else ""
    clean.update(_sanitize_deployment(single, multi, warn))
    return clean, issues


def _sanitize_deployment(single: Mapping[str, str], multi: Mapping[str, list[str]],
                         warn: Callable[..., None]) -> dict[str, str | list[str]]:
    """``sanitize_query``'s part for the mode and the deployment form's plan_d_* parameters (same rules)."""
    clean: dict[str, str | list[str]] = {}
    choices = {K_MODE: list(MODES), K_D_SERVER: server_options(), K_D_MODEL: controls.model_options(),
               K_D_MODULES: list(presets.TARGET_MODULES), K_D_LENGTHS: list(ENUMS["length_dist"]),
               K_D_POPULARITY: list(ENUMS["popularity"]), K_D_SLO_METRIC: list(planner.SLO_METRICS),
               K_D_SLO2_METRIC: [NONE, *planner.SLO_METRICS], K_D_OBJECTIVE: list(planner.OBJECTIVES)}
    for key, opts in choices.items():
        if key in single:
            if single[key] in opts:
                clean[key] = single[key]
            else:
                shown = ", ".join(opts) if len(opts) <= 12 else f"{', '.join(opts[:12])}, ..."
                warn(key, f"={single[key]!r} dropped: not one of {shown}; using the default", "malformed")
    m1, m2 = clean.get(K_D_SLO_METRIC, DEFAULT_METRIC), clean.get(K_D_SLO2_METRIC, NONE)
    if m2 != NONE and m2 == m1:
        warn(K_D_SLO2_METRIC, f"={m2!r} dropped: the first SLO row already bounds that metric", "malformed")
        del clean[K_D_SLO2_METRIC]
    numbers = {**D_NUMBERS, K_D_SLO: threshold_range(m1)[:2] + (False,)}
    if K_D_SLO2 in single and single[K_D_SLO2]:  # empty: no second threshold
        numbers[K_D_SLO2] = threshold_range(m2 if m2 != NONE else DEFAULT_METRIC)[:2] + (False,)
    for key, (lo, hi, integer) in numbers.items():
        if key not in single:
            continue
        raw = single[key]
        try:
            v = float(raw)
            if not math.isfinite(v) or (integer and v != int(v)):
                raise ValueError
        except ValueError:
            warn(key, f"={raw!r} dropped (not {'an integer' if integer else 'a finite number'}); using the "
                      "default", "malformed")
            continue
        if v < lo or v > hi:
            c = lo if v < lo else hi
            warn(key, f": {_num(v)} is {'below the minimum' if v < lo else 'above the maximum'} {_num(c)}; "
                      f"clamped to {_num(c)}")
            v = c
        clean[key] = str(int(v)) if integer else _num(v)
    if K_D_SLO2 in single and not single[K_D_SLO2]:
        clean[K_D_SLO2] = ""
    for key, parse in ((K_D_RANKS, parse_ranks), (K_D_MAX_LORAS, parse_max_loras), (K_D_BAND, parse_band),
                       (K_D_TP, parse_tp)):
        if key in single:
            try:
                parse(single[key])
                clean[key] = single[key]
            except ValueError as e:
                warn(key, f"={single[key]!r} dropped ({e}); using the default", "malformed")
    if K_D_GPUS in multi:
        opts = list(presets.GPUS)
        good = list(dict.fromkeys(x for x in multi[K_D_GPUS] if x in opts))
        bad = [x for x in multi[K_D_GPUS] if x not in opts]
        if bad:
            warn(K_D_GPUS, f": unknown value(s) {', '.join(map(repr, bad))} dropped (allowed: {', '.join(opts)})"
                           + ("" if good else "; using the default"), "adjusted" if good else "malformed")
        if good or not multi[K_D_GPUS]:
            clean[K_D_GPUS] = good[0] if len(good) == 1 else good if good else ""
    return clean


controls.PAGE_PARAMS[PREFIX] = sanitize_query


# ------------------------------------------------------------------ inputs (pure)
@dataclass(frozen=True)
class Inputs:
    """What one plan depends on (hashable; ``key()`` is the cache key)."""

    base_json: str
    objective: str
    slo: tuple[tuple[str, float], ...]
    grid: tuple[tuple[str, tuple], ...]
    replications: int
    prices: tuple[tuple[str, float], ...]
    band: str = DEFAULT_BAND            # the error band: "auto", "none" or a fraction (``parse_band``)
    deployment: str = ""                # the deployment form's ``planner.Deployment`` (JSON); "": the sidebar's

    @property
    def mode(self) -> str:
        return MODE_DEPLOYMENT if self.deployment else MODE_SIDEBAR

    @property
    def configurations(self) -> int:
        return math.prod(len(v) for _, v in self.grid)

    @property
    def searches(self) -> int:
        return self.configurations * self.replications

    def key(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=list)


def int_values(key: str, values: Sequence, label: str) -> list[int]:
    """Candidate integers from a multiselect (options are ints; typed values are strings); ValueError naming
    the bad ones."""
    lo, hi = INT_RANGES[key]
    out, bad = [], []
    for v in values:
        try:
            f = float(v)
            if not math.isfinite(f) or f != int(f) or not lo <= f <= hi:
                raise ValueError
            if int(f) not in out:
                out.append(int(f))
        except (TypeError, ValueError):
            bad.append(v)
    if bad:
        raise ValueError(f"{label}: {', '.join(map(repr, bad))} not allowed; allowed: integers in [{lo}, {hi}]")
    return sorted(out)


def build_grid(gpus: Sequence[str], max_loras: Sequence[int], cpu_loras: Sequence[int],
               strategies: Sequence[str], routers: Sequence[str] = ()) -> tuple[tuple[str, tuple], ...]:
    """The planner's grid (field -> candidate values) from the page's choices; max_cpu_loras and router only if
    chosen."""
    grid = [("gpu", tuple(gpus)), ("max_loras", tuple(max_loras))]
    if cpu_loras:
        grid.append(("max_cpu_loras", tuple(cpu_loras)))
    grid.append(("strategy", tuple(strategies)))
    if routers:
        grid.append(("router", tuple(routers)))
    return tuple(grid)


def _int_list(text: str, lo: int, hi: int, what: str, most: int = 64) -> list[int]:
    """Integers typed as a list ("8, 16,64"; commas or spaces), in order; ValueError naming the bad ones."""
    items = [x for x in str(text).replace(",", " ").split() if x]
    if not items:
        raise ValueError(f"{what}: none given; allowed: integers in [{lo}, {hi}] separated by commas")
    if len(items) > most:
        raise ValueError(f"{what}: {len(items)} values; allowed: at most {most}")
    out, bad = [], []
    for x in items:
        try:
            f = float(x)
            if not math.isfinite(f) or f != int(f) or not lo <= f <= hi:
                raise ValueError
            out.append(int(f))
        except ValueError:
            bad.append(x)
    if bad:
        raise ValueError(f"{what}: {', '.join(map(repr, bad))} not allowed; allowed: integers in [{lo}, {hi}]")
    return out


def parse_ranks(text: str) -> tuple[int, tuple[int, ...]]:
    """The form's adapter rank(s): "16" -> (16, ()) (every adapter rank 16); "8,16,64" -> (64, (8, 16, 64)), a
    mix cycled over the adapters in the order given (``Scenario.ranks``), ``adapter_rank`` its largest."""
    ranks = _int_list(text, *RANK_RANGE, "adapter ranks", MAX_RANKS)
    return (ranks[0], ()) if len(ranks) == 1 else (max(ranks), tuple(ranks))


def ranks_text(rank: int, ranks: Sequence[int]) -> str:
    """``parse_ranks``'s inverse: the form's text for a scenario's rank or rank mix."""
    return ",".join(map(str, ranks)) if len(ranks) > 1 else str(ranks[0] if ranks else rank)


def parse_max_loras(text: str) -> list[int]:
    """The form's candidate ``max_loras`` values ("16,32"): distinct, sorted."""
    return sorted(set(_int_list(text, *INT_RANGES[K_MAX_LORAS], "max_loras values")))


def parse_tp(text: str) -> list[int]:
    """The form's tensor-parallel degrees ("4,8"): GPUs per replica, distinct, sorted; ValueError naming others."""
    vals = sorted(set(_int_list(text, 1, 8, "GPUs per replica")))
    bad = [t for t in vals if t not in TP_SIZES]
    if bad:
        raise ValueError(f"GPUs per replica: {', '.join(map(str, bad))} not allowed; allowed: "
                         f"{', '.join(map(str, TP_SIZES))}")
    return vals


def parse_band(text: str) -> str:
    """The error band as typed: "auto" (the profile's measured error), "none" (no band) or a fraction in [0, 5]
    such as 0.2 (the cost model 20 % slower and faster), normalised; ValueError otherwise."""
    t = str(text).strip().lower()
    if t in ("auto", "none"):
        return t
    try:
        v = float(t.rstrip("%")) / (100 if t.endswith("%") else 1)
        if not (math.isfinite(v) and 0 <= v <= 5):
            raise ValueError
    except ValueError:
        raise ValueError("error band: allowed: auto, none or a fraction in [0, 5] such as 0.2") from None
    return _num(v)


def server_options() -> list[str]:
    """The form's servers: the built-in profiles and the ones this session fitted (never another session's)."""
    return [k for k in planner.PROFILES if not planner.PROFILES[k].user] + controls.session_profiles()


def band_arg(band: str):
    """``parse_band``'s text as ``planner.plan``'s ``band`` argument."""
    return None if band == "none" else "auto" if band == "auto" else float(band)


def form_prefill(sc: Scenario | None) -> dict:
    """The form's first values: what the scenario states (``Deployment.from_scenario``; the engine's defaults if
    there is none), the page's SLO and objective defaults.  Control key -> value."""
    server = (sc.server if sc is not None and sc.server in server_options() else
              "slora" if sc is not None and sc.strategy == "slora" else "vllm")
    d = planner.Deployment() if sc is None else planner.Deployment.from_scenario(sc, server)
    ml = sorted({*DEFAULT_D_MAX_LORAS, *([d.max_loras] if d.max_loras >= 1 else [])})
    return {K_D_SERVER: server, K_D_MODEL: d.model, K_D_GPUS: [d.gpu], K_D_ADAPTERS: d.num_adapters,
            K_D_RANKS: ranks_text(d.adapter_rank, d.adapter_ranks), K_D_MODULES: d.target_modules,
            K_D_RATE: float(d.arrival_rate_rps), K_D_PROMPT: d.prompt_tokens, K_D_OUTPUT: d.output_tokens,
            K_D_LENGTHS: d.length_dist, K_D_SPREAD: float(d.length_spread), K_D_POPULARITY: d.popularity,
            K_D_ZIPF: float(d.zipf_s), K_D_SLO_METRIC: DEFAULT_METRIC, K_D_SLO: default_threshold(DEFAULT_METRIC),
            K_D_SLO2_METRIC: NONE, K_D_SLO2: None, K_D_TTFT: float(d.slo_ttft_ms),
            K_D_MAX_LORAS: ",".join(map(str, ml)), K_D_CPU_LORAS: d.max_cpu_loras, K_D_OBJECTIVE: DEFAULT_OBJECTIVE,
            K_D_REPS: DEFAULT_REPLICATIONS, K_D_BAND: DEFAULT_BAND, K_D_TP: str(d.tensor_parallel_size)}


def deployment_inputs(v: Mapping) -> tuple[Inputs | None, str | None]:
    """The plan of the form's values ``v`` (control key -> value): ``planner.Deployment(...).scenario()`` as the
    base, the candidate GPUs and ``max_loras`` values as the grid; or why there is none.  A function of ``v``
    alone (no preset, no sidebar), so the same values give the same plan.

    The base's GPU is the first candidate (in ``presets.GPUS``' order, whatever order they were chosen in)
    whose scenario validates; the grid then sets each candidate's GPU."""
    try:
        rank, ranks = parse_ranks(v[K_D_RANKS])
        ml = parse_max_loras(v[K_D_MAX_LORAS])
        band = parse_band(v[K_D_BAND])
        tps = parse_tp(v[K_D_TP])
    except ValueError as e:
        return None, str(e)
    gpus = [g for g in presets.GPUS if g in (v[K_D_GPUS] or [])]
    if not gpus:
        return None, "Choose at least one candidate GPU."
    server = v[K_D_SERVER]
    if planner.PROFILES[server].strategy == "vllm" and ml[0] < 1:
        return None, "max_loras values: 0 is not allowed for vLLM (--max-loras: at least 1 slot)."
    m1, t1, m2, t2 = v[K_D_SLO_METRIC], v[K_D_SLO], v[K_D_SLO2_METRIC], v[K_D_SLO2]
    slo = {m1: t1}
    if m2 != NONE:
        if m2 == m1:
            return None, f"The two SLO rows bound the same metric ({m1}): choose another second metric or 'none'."
        if t2 is None:
            return None, f"Give the second SLO threshold ({m2}), or set its metric to 'none'."
        slo[m2] = t2
    for m, t in slo.items():
        if t is None:
            return None, f"Give the SLO threshold ({m})."
        if m in FRACTIONS and not 0 <= t <= 1:
            return None, f"{m} is a share: its threshold must be in [0, 1], not {t:g}."
    try:
        d = planner.Deployment(
            model=v[K_D_MODEL], gpu=gpus[0], server=server, num_adapters=int(v[K_D_ADAPTERS]), adapter_rank=rank,
            adapter_ranks=ranks, target_modules=v[K_D_MODULES], arrival_rate_rps=float(v[K_D_RATE]),
            prompt_tokens=int(v[K_D_PROMPT]), output_tokens=int(v[K_D_OUTPUT]), length_dist=v[K_D_LENGTHS],
            length_spread=float(v[K_D_SPREAD]), popularity=v[K_D_POPULARITY], zipf_s=float(v[K_D_ZIPF]),
            max_loras=ml[0], max_cpu_loras=int(v[K_D_CPU_LORAS]), slo_ttft_ms=float(v[K_D_TTFT]))
        base, first = None, None
        for g, tp in ((g, tp) for tp in tps for g in gpus):  # the smallest group that fits, on the first GPU
            try:
                base = d.replace(gpu=g, tensor_parallel_size=tp).scenario().validate()
                d = d.replace(gpu=g, tensor_parallel_size=tp)
                break
            except ValueError as e:
                first = first or f"{g}: {e}"
    except (ValueError, TypeError) as e:
        return None, f"This deployment cannot be simulated: {e}"
    if base is None:
        return None, f"This deployment cannot run on any candidate GPU ({first})."
    return Inputs(base_json=base.to_json(), objective=v[K_D_OBJECTIVE],
                  slo=tuple((m, float(t)) for m, t in slo.items()),
                  grid=(("gpu", tuple(gpus)), ("max_loras", tuple(ml)),
                        *((("tensor_parallel_size", tuple(tps)),) if len(tps) > 1 else ())),
                  replications=int(v[K_D_REPS]), prices=(),
                  band=band, deployment=json.dumps(dataclasses.asdict(d), sort_keys=True)), None


def deployment_of(inputs: Inputs) -> planner.Deployment:
    """The ``planner.Deployment`` an Inputs from the form carries."""
    d = json.loads(inputs.deployment)
    return planner.Deployment(**{**d, "adapter_ranks": tuple(d["adapter_ranks"])})


def rank_labels(table: pd.DataFrame) -> list[str]:
    """The planner's order in words: 'best', 'tie' (within the noise of the best: not a loser), then 2, 3, ...
    for the other SLO-meeting rows, 'fails SLO' or 'infeasible'."""
    out, k = [], 1
    for _, r in table.iterrows():
        if bool(r["recommended"]):
            out.append("best")
        elif bool(r["tie_with_best"]):
            out.append("tie")
        elif bool(r["meets_slo"]):
            k += 1
            out.append(str(k))
        else:
            out.append("fails SLO" if bool(r["feasible"]) else "infeasible")
    return out


def _ci_text(lo: float, hi: float, fmt: str) -> str:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "n/a"
    return f"{lo:{fmt}} – {hi:{fmt}}"


def display_table(table: pd.DataFrame, objective: str, fields: Sequence[str], slo: Mapping[str, float]
                  ) -> pd.DataFrame:
    """The planner's ranked table as shown: rank, grid values, the objective with its 95% CI, the SLO metrics at
    the optimum, throughput, price, US$/Mtok, memory, and why a row fails (its order is the planner's)."""
    col, _, _ = VALUE_COLUMN[objective]
    fmt = ".0f" if objective == "max_adapters" else ".2f"
    d = pd.DataFrame({"rank": rank_labels(table)}, index=table.index)
    for f in fields:
        d[f] = table[f].astype(str)
    d["value"] = table[col].astype(float)
    if objective == "min_cost":
        d["ci"] = ["" for _ in range(len(table))]
    else:
        d["ci"] = [_ci_text(lo, hi, fmt) for lo, hi in zip(table[f"{col}_ci_low"], table[f"{col}_ci_high"])]
    if objective == "min_replicas":
        if "router" not in d.columns:
            d["router"] = table["router"].astype(str)
        d["replicas_needed_max"] = table["replicas_needed_max"].astype(float)
        d["replicas_by_replication"] = table["replicas_by_replication"].fillna("").astype(str)
    for c in band_columns(table, objective):
        d[c] = table[c] if c in ("band_status", "band_basis") else table[c].astype(float)
        if c.endswith(("_pessimistic", "_optimistic")):  # no measured band: no bounds (not the point twice)
            d.loc[table["band"].isna().to_numpy(), c] = math.nan
    for m in slo:
        d[m] = table[m].astype(float)
    extra = ("fleet_price_usd_per_hour", "load_imbalance") if objective == "min_replicas" else ()
    for m in ("ttft_p99_ms", "throughput_tok_s", "price_usd_per_hour", *extra, "cost_per_mtok_usd", "adapters_fit",
              "kv_gib"):
        if m not in d.columns:
            d[m] = table[m]
    d["reason"] = table["reason"].fillna("").astype(str)
    return d.reset_index(drop=True)


def band_stem(table: pd.DataFrame) -> str | None:
    """The stem of the plan's band columns (``<stem>_pessimistic`` / ``_optimistic``; e.g. max_rate_rps,
    replicas), or None when the plan ran without a band."""
    stems = [c[:-len("_pessimistic")] for c in table.columns
             if c.endswith("_pessimistic") and c != "gpus_pessimistic"]
    return stems[0] if stems and "band" in table.columns else None


def band_columns(table: pd.DataFrame, objective: str) -> list[str]:
    """The band columns shown, in order: GPUs for the stated demand and their bounds (max_rate, max_adapters), the
    band, the objective's bounds, and where the band comes from."""
    stem = band_stem(table)
    gpus = ["gpus"] if objective in ("max_rate", "max_adapters") and "gpus" in table.columns else []
    if stem is None:
        return gpus
    if gpus:
        gpus += ["gpus_pessimistic", "gpus_optimistic"]
    return [*gpus, "band", f"{stem}_pessimistic", f"{stem}_optimistic", "band_status", "band_basis"]


def memory_table(split: Mapping[str, float]) -> pd.DataFrame:
    """The recommendation's memory as a table (part, GiB), from ``planner.memory_split`` (the breakdown the
    memory sentence comes from): the parts sum to the last row, the GPU's memory."""
    rows = [("Weights", split["weights_gib"]), ("Reserve", split["reserve_gib"]),
            (f"Adapter slots: {split['adapter_slots']} x {split['slot_mib']:.1f} MiB", split["slots_gib"]),
            ("Adapter budget in no whole slot", split["adapter_spare_gib"]), ("KV cache", split["kv_gib"]),
            ("Unallocated (kv_cache_gb caps the KV)", split["unallocated_gib"]),
            ("Outside gpu_mem_util", split["headroom_gib"]), ("GPU memory", split["gpu_gib"])]
    return pd.DataFrame(rows, columns=["part", "GiB"])


def chart_inputs(table: pd.DataFrame, objective: str) -> tuple[pd.DataFrame, str]:
    """The (table, objective) the plan chart (``charts.plan_frontier``) draws for ``objective``.

    min_replicas: every candidate that meets the SLO serves the same rate, so the chart is min_cost's (the
    throughput at the base rate against the cost) with the fleet's price (replicas to deploy x GPU price) on the
    US$/h axis; the other objectives draw their own table as it is."""
    if objective != "min_replicas":
        return table, objective
    t = table.copy()
    t["price_usd_per_hour"] = t["fleet_price_usd_per_hour"]
    return t, "min_cost"


def table_config(objective: str, slo: Mapping[str, float]) -> dict:
    _, label, fmt = VALUE_COLUMN[objective]
    cc = st.column_config
    conf = {
        "rank": cc.TextColumn("Rank", help="The planner's order: 'tie' = within the noise of the best (the 95% CI "
                                           "of the paired difference over the replications includes 0), not a "
                                           "loser; then the other configurations that meet the SLO."),
        "gpu": cc.TextColumn("GPU"), "max_loras": cc.TextColumn("max_loras"),
        "max_cpu_loras": cc.TextColumn("max_cpu_loras"), "strategy": cc.TextColumn("Strategy"),
        "router": cc.TextColumn("Router"),
        "replicas_needed_max": cc.NumberColumn("Replicas to deploy", format="%d",
                                               help="The most replicas any replication needed (conservative)."),
        "replicas_by_replication": cc.TextColumn("Per replication", help="Replicas each replication needed "
                                                                         "(seed, seed+1, ...); >N: none up to N."),
        "fleet_price_usd_per_hour": cc.NumberColumn("Fleet US$/h", format="$%.2f",
                                                    help="Replicas to deploy x GPU price."),
        "load_imbalance": cc.NumberColumn("Load imbalance", format="%.2f",
                                          help="Busiest replica's requests / the mean (1 = even), at the answer."),
        "value": cc.NumberColumn(label, format=fmt, help=OBJECTIVE_HELP[objective] + " (mean over replications)."),
        "ci": cc.TextColumn("95% CI", help="Student-t interval of the mean over replications (n/a with one)."),
        "ttft_p99_ms": cc.NumberColumn("TTFT p99 (ms)", format="%.1f"),
        "throughput_tok_s": cc.NumberColumn("Tokens/s", format="%.0f", help="At the optimum."),
        "price_usd_per_hour": cc.NumberColumn("US$/h", format="$%.2f", help="GPU price (indicative preset or your "
                                                                            "override)."),
        "cost_per_mtok_usd": cc.NumberColumn("US$/Mtok", format="$%.3f",
                                             help="US$ per million output tokens at the optimum: price (of every "
                                                  "GPU of the fleet) / (tokens/s x 3600) x 1e6."),
        "adapters_fit": cc.NumberColumn("Adapters on GPU", format="%d"),
        "kv_gib": cc.NumberColumn("KV (GiB)", format="%.1f"),
        "reason": cc.TextColumn("Why not", help="Why the configuration is infeasible or fails the SLO.",
                                width="large"),
    }
    bound = {"max_rate": ("Max rate", "%.2f"), "max_adapters": ("Max adapters", "%.0f"),
             "min_replicas": ("Replicas", "%.0f"), "min_cost": ("Meeting the SLO", "percent")}[objective]
    slower = "with the cost model slower by the band"
    conf.update({
        "gpus": cc.NumberColumn("GPUs for your demand", format="%d",
                                help="GPUs this configuration needs for the stated arrival rate (max_rate) or "
                                     "adapter count (max_adapters): ceil(demand / the value found)."),
        "gpus_pessimistic": cc.NumberColumn("GPUs if slower", format="%d", help=f"The same, {slower}."),
        "gpus_optimistic": cc.NumberColumn("GPUs if faster", format="%d",
                                           help="The same, with the cost model faster by the band."),
        "band": cc.NumberColumn("Error band", format="percent",
                                help="How far the cost model is known to be off: every step and the front end "
                                     "slowed down and sped up by this (the 90th percentile of its held-out |error|; "
                                     "engine.calibration.error_band; docs/model.md 10)."),
        "band_status": cc.TextColumn("Profile", help="calibrated, transferred or uncalibrated (given: a band "
                                                     "typed in the form)."),
        "band_basis": cc.TextColumn("Band from", width="medium", help="Where the band's error was measured."),
    })
    for table_col, side, words in (("_pessimistic", "if slower", slower),
                                   ("_optimistic", "if faster", "with the cost model faster by the band")):
        for stem in ("max_rate_rps", "max_adapters", "replicas", "meets_slo_frac"):
            conf[f"{stem}{table_col}"] = cc.NumberColumn(f"{bound[0]} {side}", format=bound[1],
                                                         help=f"The answer {words} (same seeds and search).")
    for m in slo:
        if m not in conf:
            frac = m in FRACTIONS
            conf[m] = cc.NumberColumn(f"{m} (SLO)", format="percent" if frac else "%.1f")
        else:
            conf[m] = cc.NumberColumn(f"{conf[m].get('label', m)} (SLO)", format="%.1f")
    return conf


def slo_text(slo: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {'<=' if planner.SLO_METRICS[k] == 'max' else '>='} {v:g}" for k, v in slo.items())


def conditions_text(inputs: Inputs) -> str:
    base = Scenario.from_json(inputs.base_json)
    fields = ", ".join(k for k, _ in inputs.grid)
    slo = dict(inputs.slo)
    overrides = ", ".join(f"{g} US${p:g}/h" for g, p in inputs.prices)
    fleet = (f" min_replicas: {base.arrival_rate_rps:g} req/s is the fleet's total, served by 1 to "
             f"{planner.MAX_REPLICAS_SEARCH} replicas." if inputs.objective == "min_replicas" else "")
    band = ("the profile's measured error" if inputs.band == "auto" else "none" if inputs.band == "none" else
            f"±{float(inputs.band):.0%} (given)")
    if inputs.deployment:
        d = deployment_of(inputs)
        p = d.profile()
        return (f"Base: your deployment on the {p.label} profile ({controls.conditions(base)}), built from the "
                f"form alone: no preset and no sidebar field; each candidate changes only {fields} (the host link "
                f"and the server's batch limits are those of {base.gpu}, PCIe {base.pcie_gbps:g} GB/s). SLO: "
                f"{slo_text(slo)}. {inputs.replications} replication(s) (seeds {base.seed} to "
                f"{base.seed + inputs.replications - 1}), common random numbers. Error band: {band}. Prices are "
                "indicative presets (engine.planner.GPU_PRICES_USD_PER_HOUR), not quotes; override them on the "
                "advanced path." + fleet)
    return (f"Base: the sidebar's scenario ({controls.conditions(base)}); each candidate changes only {fields} "
            f"(every other field, e.g. PCIe {base.pcie_gbps:g} GB/s, stays the sidebar's). SLO: {slo_text(slo)}. "
            f"{inputs.replications} replication(s) (seeds {base.seed} to {base.seed + inputs.replications - 1}), "
            "common random numbers: every configuration sees the same request streams, so their differences are "
            "paired. Prices are indicative presets (engine.planner.GPU_PRICES_USD_PER_HOUR), not quotes"
            + (f"; overridden: {overrides}" if overrides else "; override them under 'GPU prices'") + "." + fleet)


# ------------------------------------------------------------------ the plan (cached)
#: Results just computed, handed to the cache by ``run_plan`` (see ``_cached``).
_FRESH: dict[tuple[str, str], dict] = {}


@st.cache_data(max_entries=16, show_spinner=False)
def _cached(key: str, engine_version: str) -> dict:
    """The plan of ``key`` (``Inputs.key()``) for this engine version, once ``run_plan`` computed it.

    The computation itself runs outside the cached function: it drives a progress bar, and Streamlit would
    record those updates to replay them on a cache hit.  A miss raises KeyError, which is not cached.
    """
    return _FRESH.pop((key, engine_version))


def compute(inputs: Inputs, progress: Callable[[int, int], None] | None = None) -> dict:
    """Run ``engine.planner.plan`` for ``inputs``: the table, the recommendation, its scenario, commands and
    memory sentence, as plain data.  ValueError (naming the bad input) from the planner."""
    # the form's deployment itself: a grid over its GPU rebuilds it from the server's profile on each GPU
    base = deployment_of(inputs) if inputs.deployment else Scenario.from_json(inputs.base_json)
    res = planner.plan(base, dict(inputs.slo), {k: list(v) for k, v in inputs.grid},
                       replications=inputs.replications, objective=inputs.objective,
                       gpu_prices_usd_per_hour=dict(inputs.prices) or None, progress=progress or False,
                       band=band_arg(inputs.band))
    out = {"table": res.table, "runs": res.runs, "best": res.best, "summary": planner.plan_summary(res),
           "objective": res.objective, "slo": dict(res.slo), "fields": list(res.grid), "scenario_json": None,
           "commands": [], "memory": "", "memory_split": {}, "tie_break": res.tie_break,
           "notes": band_first(list(res.notes), res.best, inputs.band), "resolution": "", "resolutions": {}}
    if inputs.deployment:
        d = deployment_of(inputs)
        gpus = dict(inputs.grid)["gpu"]
        out["resolutions"] = {g: d.replace(gpu=g).resolution() for g in gpus}
        if res.best is not None:
            out["resolution"] = out["resolutions"][res.best["gpu"]]
    if res.best is not None:
        sc = res.scenario(res.best["config"])
        out["scenario_json"] = sc.to_json()
        out["commands"] = [dataclasses.asdict(c) for c in planner.server_commands(sc)]
        out["memory"] = planner.memory_sentence(sc)
        out["memory_split"] = planner.memory_split(sc)
    return out


BAND_NOTE = "How far it could move:"


def band_first(notes: list[str], best: Mapping | None, band: str) -> list[str]:
    """The plan's notes with the error band's sentence first, and said when there is none: the band is off
    ("none"), or no error was measured for this cost model (the planner's band column is then NaN and its
    sentence empty; ``band_basis`` says why)."""
    if best is None:
        return notes
    rest = [n for n in notes if not n.startswith(BAND_NOTE)]
    said = [n for n in notes if n.startswith(BAND_NOTE) and n[len(BAND_NOTE):].strip()]
    if said:
        return [said[0], *rest]
    if band == "none":
        why = "not computed (error band: none)."
    else:
        basis = str(best.get("band_basis") or "").strip().removeprefix("no measured error:").strip()
        why = "unknown: no measured error for this cost model" + (f" ({basis.rstrip('.')})." if basis else ".")
    return [f"{BAND_NOTE} {why}", *rest]


def run_plan(inputs: Inputs, progress: Callable[[int, int], None] | None = None) -> dict:
    """The cached plan of ``inputs`` (keyed on them and ENGINE_VERSION), computed with ``progress`` on a miss."""
    key = inputs.key()
    try:
        return _cached(key, ENGINE_VERSION)
    except KeyError:
        pass
    _FRESH[(key, ENGINE_VERSION)] = compute(inputs, progress)
    return _cached(key, ENGINE_VERSION)


# ------------------------------------------------------------------ widgets
def _threshold(value_key: str, metric: str, label: str):
    lo, hi, step = threshold_range(metric)
    ss = st.session_state
    if value_key in ss and ss[value_key] is not None and not lo <= ss[value_key] <= hi:
        ss[value_key] = min(max(float(ss[value_key]), lo), hi)
    return st.number_input(label, min_value=lo, max_value=hi, value=default_threshold(metric), step=step,
                           format="%g", key=value_key, bind="query-params",
                           help=f"{metric} must be {'at most' if planner.SLO_METRICS[metric] == 'max' else 'at least'}"
                                f" this ({'a fraction' if metric in FRACTIONS else 'milliseconds'}) in every probe "
                                "the search accepts, on a stable server.")


def _reset_threshold(value_key: str, metric_key: str) -> None:
    m = st.session_state.get(metric_key)
    if m in planner.SLO_METRICS:
        st.session_state[value_key] = default_threshold(m)


def _controls(state: controls.AppState) -> tuple[Inputs | None, str | None]:
    """Draw the page's controls; the plan's inputs, or why there are none."""
    with st.container(border=True):
        r1 = st.columns([1.3, 1.3, 1, 1.3, 1], gap="medium")
        objective = r1[0].selectbox(
            "Objective", list(planner.OBJECTIVES), key=K_OBJECTIVE, bind="query-params",
            help="What each configuration is scored on:\n\n" + "\n".join(
                f"- **{k}**: {v}." for k, v in OBJECTIVE_HELP.items()))
        m1 = r1[1].selectbox("SLO metric", list(planner.SLO_METRICS), index=list(planner.SLO_METRICS).index(
            DEFAULT_METRIC), key=K_SLO_METRIC, bind="query-params", on_change=_reset_threshold, args=(K_SLO, K_SLO_METRIC),
            help="Summary metric the SLO bounds (latencies from above, attainment and hit rate from below).")
        with r1[2]:
            t1 = _threshold(K_SLO, m1, "Threshold")
        m2 = r1[3].selectbox("Second SLO metric (optional)", [NONE, *planner.SLO_METRICS], key=K_SLO2_METRIC,
                             bind="query-params", on_change=_reset_threshold, args=(K_SLO2, K_SLO2_METRIC),
                             help="A second bound every accepted probe must also meet; 'none' for one SLO row.")
        t2 = None
        if m2 != NONE:
            with r1[4]:
                t2 = _threshold(K_SLO2, m2, "Second threshold")

        r2 = st.columns([1.6, 1.2, 1.2, 1.6, 1], gap="medium")
        gpus = r2[0].multiselect("Candidate GPUs", list(presets.GPUS), default=DEFAULT_GPUS, key=K_GPUS,
                                 bind="query-params", placeholder="Choose GPUs",
                                 help="GPU presets (engine.presets.GPUS) to try; every other field stays the "
                                      "sidebar's.")
        max_loras = r2[1].multiselect("max_loras values", MAX_LORAS_OPTIONS, default=DEFAULT_MAX_LORAS,
                                      key=K_MAX_LORAS, bind="query-params", accept_new_options=True,
                                      placeholder="Type or choose",
                                      help="GPU adapter slots to try (vLLM's --max-loras; 0 = limited by memory "
                                           "only). Type another integer to add it.")
        cpu_loras = r2[2].multiselect("max_cpu_loras values (optional)", CPU_LORAS_OPTIONS, default=[],
                                      key=K_CPU_LORAS, bind="query-params", accept_new_options=True,
                                      placeholder="The sidebar's value",
                                      help="Host adapter cache sizes to try (--max-cpu-loras; 0 = no limit). "
                                           "Empty: every candidate keeps the base scenario's.")
        strategies = r2[3].multiselect("Candidate strategies", list(STRATEGIES), default=DEFAULT_STRATEGIES,
                                       key=K_STRATEGIES, bind="query-params", placeholder="Choose strategies",
                                       help="Policies to try (engine.STRATEGIES); vllm, naive, preload_lru and slora "
                                            "map to real server flags, the others get no command line.")
        reps = r2[4].slider("Replications", 1, MAX_REPLICATIONS, DEFAULT_REPLICATIONS, key=K_REPS,
                            bind="query-params",
                            help="Seeds per configuration (seed, seed+1, ...; common random numbers): the CIs and "
                                 "ties come from them; one replication gives no CI.")
        r3 = st.columns([1.6, 3.4], gap="medium", vertical_alignment="bottom")
        routers = r3[0].multiselect(
            "Candidate routers (optional)", list(ROUTERS), default=[], key=K_ROUTERS, bind="query-params",
            placeholder="The sidebar's router",
            help="Fleet routers to try (engine.ROUTERS). They matter on a fleet: with min_replicas, or with more "
                 "than one replica in the sidebar; on one GPU every router is the same. Empty: the sidebar's.")
        if objective == "min_replicas":
            r3[1].caption(f"min_replicas searches num_replicas from 1 to {planner.MAX_REPLICAS_SEARCH} for each "
                          "configuration (doubling, then bisection); the sidebar's arrival rate is the fleet's "
                          "total.")
        prices: dict[str, float] = {}
        with st.expander("GPU prices (US$/h)", icon=":material/payments:"):
            st.caption("Indicative presets (engine.planner.GPU_PRICES_USD_PER_HOUR; sources in "
                       "engine/planner/prices.py), not quotes: enter your own contract prices.")
            cols = st.columns(4)
            for i, g in enumerate(gpus):
                preset = planner.GPU_PRICES_USD_PER_HOUR.get(g)
                v = cols[i % 4].number_input(g, min_value=PRICE_RANGE[0], max_value=PRICE_RANGE[1], value=preset,
                                             step=0.05, format="%.2f", key=f"{PRICE_PREFIX}{g}", bind="query-params",
                                             help=f"Preset: {'none' if preset is None else f'US${preset:g}/h'}.")
                if v is not None and v != preset:
                    prices[g] = float(v)
    slo = {m1: float(t1)}
    if m2 != NONE:
        if m2 == m1:
            return None, f"The two SLO rows bound the same metric ({m1}): choose another second metric or 'none'."
        slo[m2] = float(t2)
    if not gpus:
        return None, "Choose at least one candidate GPU."
    if not strategies:
        return None, "Choose at least one candidate strategy."
    try:
        ml = int_values(K_MAX_LORAS, max_loras, "max_loras values")
        cl = int_values(K_CPU_LORAS, cpu_loras, "max_cpu_loras values")
    except ValueError as e:
        return None, str(e)
    if not ml:
        return None, "Choose at least one max_loras value."
    inputs = Inputs(base_json=state.scenario.to_json(), objective=objective, slo=tuple(slo.items()),
                    grid=build_grid(gpus, ml, cl, strategies, routers), replications=int(reps),
                    prices=tuple(sorted(prices.items())))
    return inputs, None


def _deployment_form(state: controls.AppState) -> tuple[Inputs | None, str | None, bool]:
    """Draw the "Your deployment" form; (the plan of its submitted values or None, why there is none, whether it
    was submitted in this run).  Prefilled from the sidebar's scenario the first time (``form_prefill``), then
    each control keeps the user's value (session-wide, and in the URL under its plan_d_* key)."""
    pre = form_prefill(state.scenario)
    models = controls.model_options()
    if pre[K_D_MODEL] not in models:
        pre[K_D_MODEL] = models[0]
    kw = dict(bind="query-params", persist_state="session")
    v: dict = {}
    with st.form(FORM_KEY, border=True, enter_to_submit=False):
        st.markdown("**Your deployment**: what you know about it. The plan simulates it on the server's profile "
                    "(its fitted cost model and its own defaults), from these values alone; it started from the "
                    "sidebar's scenario.")
        st.caption("Server and model (another model: add its Hugging Face config.json on the What-if page, "
                   "'Add a base model'; it joins this list for the session)")
        r = st.columns([1, 1.6, 2.4], gap="medium")
        v[K_D_SERVER] = r[0].selectbox(
            "Server", server_options(), index=server_options().index(pre[K_D_SERVER]), key=K_D_SERVER,
            **kw, help="The serving engine (" + ", ".join(f"{k}: {planner.PROFILES[k].label}" for k in server_options())
            + "); its profile (planner.PROFILES) sets the cost model, the scheduling and the "
                 "server's own defaults (batch limits per GPU, memory utilisation).")
        v[K_D_MODEL] = r[1].selectbox(
            "Model", models, index=models.index(pre[K_D_MODEL]), key=K_D_MODEL, **kw,
            help="A model preset or a model uploaded in this session. Another model: add its Hugging Face "
                 "config.json on the What-if page ('Add a base model'); it then joins this list.")
        v[K_D_GPUS] = r[2].multiselect(
            "Candidate GPUs", list(presets.GPUS), default=pre[K_D_GPUS], key=K_D_GPUS, placeholder="Choose GPUs",
            **kw, help="The GPUs to compare (the plan's gpu grid); each runs one server.")
        v[K_D_TP] = st.text_input(
            "GPUs per replica (tensor parallel)", value=pre[K_D_TP], key=K_D_TP, **kw,
            help="One replica as a tensor-parallel group of this many GPUs (vLLM --tensor-parallel-size, SGLang "
                 "--tp-size; 1, 2, 4 or 8), or several to compare (4,8): the plan counts GPUs as replicas x this. "
                 "A 70B model needs 4 x 80 GB. Its all-reduces rest on an assumed latency (docs/model.md 5.7).")
        st.caption("Adapters")
        r = st.columns(3, gap="medium")
        v[K_D_ADAPTERS] = r[0].number_input(
            "Adapters", *D_NUMBERS[K_D_ADAPTERS][:2], value=pre[K_D_ADAPTERS], step=1, key=K_D_ADAPTERS, **kw,
            help="How many LoRA adapters the server holds (registered; the max_adapters objective searches it).")
        v[K_D_RANKS] = r[1].text_input(
            "Rank, or a rank mix", value=pre[K_D_RANKS], key=K_D_RANKS, **kw,
            help="One rank (16), or a mix such as 8,16,64: the adapters take the ranks in turn, in that order.")
        v[K_D_MODULES] = r[2].selectbox(
            "Target modules", list(presets.TARGET_MODULES), index=list(presets.TARGET_MODULES).index(
                pre[K_D_MODULES]), key=K_D_MODULES, **kw,
            help="The layers each adapter changes (PEFT's target_modules): they size every adapter. " + "; ".join(
                f"{k}: {', '.join(m)}" for k, m in presets.TARGET_MODULES.items()) + ".")
        st.caption("Traffic")
        r = st.columns([1.2, 1, 1, 1.2, 1, 1, 1], gap="small")
        v[K_D_RATE] = r[0].number_input(
            "Arrival rate (req/s)", *D_NUMBERS[K_D_RATE][:2], value=pre[K_D_RATE], step=1.0, format="%g",
            key=K_D_RATE, **kw, help="Your traffic, all adapters together (Poisson arrivals). max_rate searches the "
                                     "rate itself: this one then counts the GPUs it needs.")
        v[K_D_PROMPT] = r[1].number_input("Prompt tokens (mean)", *D_NUMBERS[K_D_PROMPT][:2],
                                          value=pre[K_D_PROMPT], step=1, key=K_D_PROMPT, **kw)
        v[K_D_OUTPUT] = r[2].number_input("Output tokens (mean)", *D_NUMBERS[K_D_OUTPUT][:2],
                                          value=pre[K_D_OUTPUT], step=1, key=K_D_OUTPUT, **kw)
        lengths = list(ENUMS["length_dist"])
        v[K_D_LENGTHS] = r[3].selectbox(
            "Length distribution", lengths, index=lengths.index(pre[K_D_LENGTHS]), key=K_D_LENGTHS, **kw,
            help="fixed: every request has the mean lengths; uniform: mean ± spread x mean; lognormal: the spread "
                 "is the coefficient of variation (real chat traffic: lognormal, CV about 1).")
        v[K_D_SPREAD] = r[4].number_input("Spread", *D_NUMBERS[K_D_SPREAD][:2], value=pre[K_D_SPREAD], step=0.1,
                                          format="%g", key=K_D_SPREAD, **kw,
                                          help="uniform: a fraction below 1; lognormal: the CV; fixed: unused.")
        pops = list(ENUMS["popularity"])
        v[K_D_POPULARITY] = r[5].selectbox(
            "Popularity", pops, index=pops.index(pre[K_D_POPULARITY]), key=K_D_POPULARITY, **kw,
            help="How requests spread over the adapters: zipf (exponent s below), or power (a power law, "
                 "alpha 1).")
        v[K_D_ZIPF] = r[6].number_input("Zipf s", *D_NUMBERS[K_D_ZIPF][:2], value=pre[K_D_ZIPF], step=0.1,
                                        format="%g", key=K_D_ZIPF, **kw,
                                        help="Zipf exponent: 0 = uniform, 1 = classic Zipf (zipf popularity only).")
        st.caption("SLO")
        r = st.columns([1.3, 1, 1.3, 1, 1.2], gap="medium")
        metrics = list(planner.SLO_METRICS)
        v[K_D_SLO_METRIC] = r[0].selectbox("SLO metric", metrics, index=metrics.index(DEFAULT_METRIC),
                                           key=K_D_SLO_METRIC, **kw,
                                           help="Summary metric the SLO bounds (latencies from above, attainment "
                                                "and hit rate from below).")
        v[K_D_SLO] = r[1].number_input(
            "Threshold", 0.0, MAX_THRESHOLD_MS, value=pre[K_D_SLO], step=10.0, format="%g", key=K_D_SLO, **kw,
            help="Milliseconds for the latencies; a share in [0, 1] for slo_attainment, hit_rate_gpu, swap_rate.")
        v[K_D_SLO2_METRIC] = r[2].selectbox("Second SLO metric (optional)", [NONE, *metrics], index=0,
                                            key=K_D_SLO2_METRIC, **kw,
                                            help="A second bound every accepted probe must also meet.")
        v[K_D_SLO2] = r[3].number_input("Second threshold", 0.0, MAX_THRESHOLD_MS, value=pre[K_D_SLO2], step=10.0,
                                        format="%g", key=K_D_SLO2, placeholder="none", **kw)
        v[K_D_TTFT] = r[4].number_input(
            "TTFT target per request (ms)", *D_NUMBERS[K_D_TTFT][:2], value=pre[K_D_TTFT], step=10.0,
            format="%g", key=K_D_TTFT, **kw,
            help="slo_attainment is the share of requests whose TTFT is at most this.")
        st.caption("What to find")
        r = st.columns([1.3, 1.3, 1, 0.8, 0.9], gap="medium")
        objectives = list(planner.OBJECTIVES)
        v[K_D_OBJECTIVE] = r[0].selectbox(
            "Find", objectives, index=objectives.index(DEFAULT_OBJECTIVE), key=K_D_OBJECTIVE, **kw,
            help="What each configuration is scored on:\n\n" + "\n".join(
                f"- **{k}**: {objective_help(k, True)}." for k in objectives))
        v[K_D_MAX_LORAS] = r[1].text_input(
            "max_loras values", value=pre[K_D_MAX_LORAS], key=K_D_MAX_LORAS, **kw,
            help="The GPU adapter slots to try (vLLM's --max-loras), typed: 16,32,64.")
        v[K_D_CPU_LORAS] = r[2].number_input(
            "max_cpu_loras", *D_NUMBERS[K_D_CPU_LORAS][:2], value=pre[K_D_CPU_LORAS], step=1, key=K_D_CPU_LORAS,
            **kw, help="Host adapter cache (--max-cpu-loras), in adapters; 0 = no limit.")
        v[K_D_REPS] = r[3].number_input(
            "Replications", *D_NUMBERS[K_D_REPS][:2], value=pre[K_D_REPS], step=1, key=K_D_REPS, **kw,
            help="Seeds per configuration (common random numbers): the CIs and ties come from them.")
        v[K_D_BAND] = r[4].text_input(
            "Error band", value=pre[K_D_BAND], key=K_D_BAND, **kw,
            help="auto: the profile's measured error (calibrated, transferred or uncalibrated); none; or a "
                 "fraction such as 0.2. The answer is searched again with the cost model that much slower and "
                 "faster.")
        submitted = st.form_submit_button("Plan my deployment", type="primary", key=K_RUN,
                                          icon=":material/play_arrow:")
    inputs, why = deployment_inputs(v)
    return inputs, why, submitted


# ------------------------------------------------------------------ results
def _open_on_whatif() -> None:
    """Button callback: load the recommended scenario (at its optimum) into the shared controls."""
    ss = st.session_state
    last = ss.get(LAST_KEY)
    if not last or not last["result"]["scenario_json"]:
        return
    res = last["result"]
    sc = Scenario.from_json(res["scenario_json"])
    issues = controls.apply_scenario(sc)
    ss.pop("_upload_error", None)
    fields = ", ".join(f"{f}={res['best'][f]}" for f in res["fields"])
    ss["_upload_msg"] = controls.restored_message(
        f"Loaded the plan's recommended configuration ({fields}) at {sc.arrival_rate_rps:.4g} req/s.", issues)


def _commands(res: dict) -> None:
    """The two parts of each server command: the flags this answer sets, and what the simulation assumed."""
    cmds = res["commands"]
    if res.get("scenario_json") and set(res["fields"]) & planner.commands.DECIDABLE:
        # a batch limit the plan decided (a grid field) is a flag, not an assumption
        cmds = [dataclasses.asdict(c) for c in planner.server_commands(Scenario.from_json(res["scenario_json"]),
                                                                         decided=res["fields"])]
    tabs = st.tabs([{"vllm": "vLLM", "sglang": "SGLang"}.get(c["server"], c["server"]) for c in cmds])
    for tab, c in zip(tabs, cmds):
        with tab:
            if not c["supported"]:
                st.info(f"No real-server equivalent: {c['note']}", icon=":material/block:")
                continue
            st.markdown("**The flags this answer sets** (a flag equal to the server's default is left out)")
            st.code(c["text"], language="bash", wrap_lines=True)
            if c.get("assumptions"):
                st.markdown("**What the simulation assumed**: not flags, the server runs with its own setting "
                            "where these differ\n\n" + "\n".join(f"- {text} (`{setting}`)"
                                                                  for setting, text in c["assumptions"]))
            if c["note"]:
                st.caption(c["note"])
            with st.expander("Where each flag comes from"):
                rows = [*map(tuple, c["trace"]), *map(tuple, c.get("at_default", []))]
                st.dataframe(pd.DataFrame(rows, columns=["flag", "value", "source"]), hide_index=True,
                             width="stretch", key=f"plan_trace_{c['server']}")


def _recommendation(res: dict, objective: str, fields: Sequence[str], deployment: bool) -> None:
    """The answer: the recommended configuration, its value, notes (the error band first), what it rests on
    (from the form: calibrated or transferred) and its memory."""
    best = res["best"]
    what = objective_help(objective, deployment)
    fleet = objective == "min_replicas"
    if best is None:
        if res.get("resolutions"):
            st.caption("What the answers rest on: " + "; ".join(
                f"{g}: {md_escape(r)}" for g, r in res["resolutions"].items()) + ".")
        return
    st.subheader("Recommended: " + " · ".join(f"{f} {best[f]}" for f in fields))
    col, label, _ = VALUE_COLUMN[objective]
    k = st.columns(4)
    if fleet:
        k[0].metric("Replicas to deploy", f"{int(best['replicas_needed_max'])}",
                    help=what + f": the most any replication needed (per replication "
                    f"{best['replicas_by_replication']}; mean {best[col]:.3g}).")
    else:
        k[0].metric(label, f"{best[col]:.0%}" if objective == "min_cost" else
                    f"{best[col]:,.0f}" if objective == "max_adapters" else f"{best[col]:.3g}",
                    help=what + ".")
    p99 = float(best["ttft_p99_ms"])
    k[1].metric("TTFT p99 at the optimum", f"{p99:,.1f} ms" if math.isfinite(p99) else "n/a")
    k[2].metric("US$ per million tokens", "n/a" if not math.isfinite(best["cost_per_mtok_usd"]) else
                f"${best['cost_per_mtok_usd']:.3f}")
    if fleet:
        k[3].metric("Fleet price", f"${best['fleet_price_usd_per_hour']:.2f}/h",
                    help=f"{int(best['replicas_needed_max'])} x ${best['price_usd_per_hour']:.2f}/h per GPU.")
    else:
        k[3].metric("GPU price", f"${best['price_usd_per_hour']:.2f}/h")
    if res.get("notes"):
        st.info("\n".join(f"- {n}" for n in res["notes"]), icon=":material/lightbulb:")
    if res.get("resolution"):
        st.markdown("**What the answer rests on:** " + md_escape(res["resolution"]))
    if res.get("tie_break"):
        st.caption(res["tie_break"])
    st.markdown(f"**Memory:** {res['memory']}.")
    if res.get("memory_split"):
        with st.expander("Memory breakdown (GiB)"):
            st.dataframe(memory_table(res["memory_split"]), hide_index=True, key="plan_memory",
                         column_config={"GiB": st.column_config.NumberColumn("GiB", format="%.2f")})


def _results(last: dict, current: Inputs | None) -> None:
    res, inputs = last["result"], last["inputs"]
    objective, slo, fields = res["objective"], res["slo"], res["fields"]
    table: pd.DataFrame = res["table"]
    st.divider()
    if current is not None and current.mode != inputs.mode:
        st.info(f"The last plan, run from {MODES[inputs.mode].lower()}: run the one above to replace it.",
                icon=":material/update:")
    elif current is not None and current != inputs:
        st.info("The inputs (page controls or sidebar scenario) changed since this plan ran; run it again to "
                "update it.", icon=":material/update:")
    best = res["best"]
    (st.success if best is not None else st.warning)(res["summary"], icon=":material/target:")
    st.caption(conditions_text(inputs))

    _recommendation(res, objective, fields, bool(inputs.deployment))

    st.subheader("Ranked configurations")
    st.dataframe(display_table(table, objective, fields, slo), hide_index=True, width="stretch", key="plan_table",
                 column_config=table_config(objective, slo))
    if "capped" in table.columns and table["capped"].astype(bool).any():
        st.caption("Some searches still met the SLO at their upper bound (the engine's request cap per run): "
                   "those values are lower bounds.")
    failing = table[table["reason"].fillna("") != ""]
    if best is None and len(failing):
        st.markdown("Why no configuration qualifies:\n\n" + "\n".join(
            f"- **{charts.plan_label(r, fields)}**: {r['reason']}" for _, r in failing.iterrows()))
    st.download_button("Plan CSV", exports.csv_bytes(table), file_name="plan.csv", mime="text/csv",
                       on_click="ignore", key="dl_plan", icon=":material/download:")

    fleet = objective == "min_replicas"
    head, tog = st.columns([3, 1.4], vertical_alignment="bottom")
    head.subheader("Replicas needed and what the fleet costs" if fleet else "Goodput against cost")
    axis = tog.segmented_control("Cost axis", list(charts.PLAN_COST), key=K_COST_AXIS,
                                 default="cost_per_mtok_usd" if objective == "min_cost" else "price_usd_per_hour",
                                 format_func=lambda k: "US$/h" if k == "price_usd_per_hour" else "US$/Mtok",
                                 help=("The fleet's price per hour (replicas to deploy x GPU price)" if fleet else
                                       "GPU price per hour") + ", or the cost of a million output tokens at each "
                                      "candidate's optimum.") or "price_usd_per_hour"
    if fleet:
        st.altair_chart(charts.unvalidated(charts.plan_replicas_chart(table, res.get("runs"), axis, fields)),
                        width="content")
        st.caption("One row per candidate that meets the SLO, in the planner's order (best on top). Left: the bar "
                   "reaches the replicas to deploy (the most any replication needed), the black line spans the "
                   "replications' range (fewest to most) and each dot is one replication (seed, seed+1, ...; common "
                   "random numbers). Right: what that fleet costs, " + ("per hour (replicas to deploy x GPU price)."
                   if axis == "price_usd_per_hour" else "per million output tokens at the sidebar's rate.")
                   + " Candidates that need more replicas than the search tries are only in the table.")
    c_table, c_objective = chart_inputs(table, objective)
    st.altair_chart(charts.unvalidated(charts.plan_frontier(c_table, c_objective, axis, fields)), width="stretch")
    if fleet:
        st.caption("Every candidate that meets the SLO serves the same rate, so this chart compares what its fleet "
                   "costs: US$/h is the fleet's (replicas to deploy x GPU price), the throughput is the fleet's at "
                   "the sidebar's rate. Ringed: the recommendation (fewest replicas, then the cheaper fleet). "
                   "Candidates that need more replicas than the search tries have no fleet price: like the "
                   "infeasible ones, they are only in the table.")
    else:
        st.caption("Green dashed line: the Pareto frontier of the SLO-meeting candidates (nothing else is as cheap "
                   "and as good); ringed: the recommendation; bars: 95% CIs over replications; crosses: feasible "
                   "candidates that fail the SLO. Infeasible candidates are only in the table.")

    if best is None:
        return
    _commands(res)
    if st.button("Open on What-if", type="primary", key=K_OPEN, icon=":material/arrow_forward:",
                 on_click=_open_on_whatif,
                 help="Loads the recommended configuration at its optimum (e.g. its max rate) into the scenario "
                      "controls and opens the What-if page."):
        st.switch_page(st.Page(page_whatif.render, url_path=WHATIF_PAGE), query_params={})


# ------------------------------------------------------------------ page
def _mode() -> str:
    """The plan the page shows (``K_MODE``): the deployment form unless chosen otherwise; a link holding the
    advanced path's parameters (and no plan_mode) opens the advanced path.

    In the URL as ``plan_mode=sidebar`` (nothing for the form): set here rather than with ``bind``, which would
    put the radio's labels in the URL."""
    ss, q = st.session_state, st.query_params
    if K_MODE not in ss:
        ss[K_MODE] = (q[K_MODE] if q.get(K_MODE) in MODES else MODE_SIDEBAR if any(
            k in ADVANCED_KEYS or k.startswith(PRICE_PREFIX) for k in q) else MODE_DEPLOYMENT)
    mode = st.radio("What to plan", list(MODES), format_func=MODES.get, key=K_MODE, horizontal=True,
                    label_visibility="collapsed",
                    help="Your deployment: a form of what you know, planned on the server's profile. The sidebar "
                         "scenario: every field of the sidebar's scenario, with a free grid of candidates.")
    if mode == MODE_DEPLOYMENT:
        q.pop(K_MODE, None)
    elif q.get(K_MODE) != mode:
        q[K_MODE] = mode
    return mode


def render() -> None:
    state = controls.current()
    mode = _mode()
    controls.show_header(state, "Plan", "The inverse question: which GPU, `--max-loras` and policy serve your "
                         "traffic within an SLO, and at what cost? Each candidate configuration is searched for its "
                         "largest SLO-meeting arrival rate (or adapter count, or its fewest replicas), ranked with "
                         "ties inside the noise, again with the cost model as far off as it is known to be (the "
                         "error band), and the winner comes with vLLM and SGLang command lines.",
                         badge=mode != MODE_DEPLOYMENT)
    ss = st.session_state
    run = False
    if mode == MODE_DEPLOYMENT:
        if state.error:
            st.caption("The sidebar's scenario cannot be simulated, so the form started from the engine's "
                       "defaults; it does not need the sidebar.")
        inputs, why, run = _deployment_form(state)
        if inputs is not None:  # the badge of what the form plans (its server's profile on its first GPU)
            controls.show_calibration(Scenario.from_json(inputs.base_json))
    else:
        if state.error:
            st.error(f"This scenario cannot be simulated. {state.error}", icon=":material/error:")
            return
        inputs, why = _controls(state)
    if why:
        st.warning(why, icon=":material/checklist:")
    elif inputs is not None:
        shape = " x ".join(f"{len(v)} {k}" for k, v in inputs.grid)
        too_many = inputs.searches > MAX_PLAN_SEARCHES
        probed = ("about 2 to 8 replica counts" if inputs.objective == "min_replicas" else
                  "about 5 to 15 arrival rates")
        band = "" if inputs.band == "none" else (" With an error band, each search runs twice more (the cost model "
                                                 "slower, then faster).")
        st.caption(f"{shape} = {inputs.configurations} configurations x {inputs.replications} replication(s) = "
                   f"{inputs.searches} searches (at most {MAX_PLAN_SEARCHES} on this page); each search probes "
                   f"{probed} of about 6,000 requests each." + band)
        if too_many:
            st.error(f"This plan has {inputs.searches} searches ({inputs.configurations} configurations x "
                     f"{inputs.replications} replications), above this page's limit of {MAX_PLAN_SEARCHES} "
                     f"(MAX_PLAN_SEARCHES). Remove candidates or lower the replications, or run it with "
                     f"`python -m engine plan` (up to {planner.MAX_SEARCHES}).", icon=":material/block:")
        if mode == MODE_SIDEBAR:
            run = st.button("Run the plan", type="primary", key=K_RUN, icon=":material/play_arrow:",
                            disabled=too_many)
        if run and not too_many:
            ss.pop(ERROR_KEY, None)
            bar = st.progress(0.0, text="Planning...")

            def tick(done: int, total: int) -> None:
                if total:
                    bar.progress(done / total, text=f"Searched {done} of {total} configurations...")

            try:
                ss[LAST_KEY] = {"inputs": inputs, "result": run_plan(inputs, tick)}
            except ValueError as e:
                ss[ERROR_KEY] = str(e)
            bar.empty()
    if ss.get(ERROR_KEY):
        st.error(f"The planner refused these inputs: {ss[ERROR_KEY]}", icon=":material/error:")
    last = ss.get(LAST_KEY)
    if last:
        _results(last, inputs)
