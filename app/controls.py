"""Scenario controls: defined once, rendered in the sidebar, bound to the URL.

Every control is a ``Control`` in ``CONTROLS`` (dependency order: a control's
range may depend on the ones before it, e.g. the VRAM budget's maximum is
``Scenario.max_vram_budget_gb()`` for the chosen GPU, model and lengths).  Its
``key`` is the ``engine.Scenario`` field name, which is also its URL query
parameter (``bind="query-params"``).  The pure part (``resolve``,
``sanitize_query``, ``build_scenario``, ``share_query``) has no Streamlit
dependency; ``render_sidebar`` and friends draw the widgets.

Only the pages that use this shared scenario (What-if, Sweeps, Crossover) draw the
controls (``render_sidebar``); the others (``render_stored``) get the same ``AppState``
from the values remembered in session state (see "Persistence" below).

No hidden state: a control's range may depend on others (the VRAM budget's maximum on the GPU),
its value never silently does.  The hot-set size keeps the user's value whatever the budget; the
run pins what fits (``fit_hot_set``) and a note says so.  A budget that a GPU change forces down
shows a note and comes back when the range allows it (``_keep_valid``).  The share link
(``share_query``) carries only what differs from the preset.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from app import exports
from app.text import md_escape, md_message
from engine import (
    ENUMS,
    MODEL_DEFINITION_KEY,
    ROUTERS,
    STRATEGIES,
    TP_SIZES,
    TRACE_CITATION,
    TRACES,
    Scenario,
    loads_json,
    model_from_hf_config,
    presets,
    short_repr,
)
from engine.calibration import calibration_status, error_band
from engine.planner import memory_sentence

PRESET_KEY = "preset"
STRATEGY_KEY = "strategy"              # the compared set; URL: ?strategy=a&strategy=b
STRATEGY_ALIASES = ("strategies",)     # accepted in URLs, rewritten to ``strategy``
BASELINE_KEY = "baseline"              # What-if page: strategy the deltas are against
DEFAULT_PRESET = "default"
DEFAULT_STRATEGIES = ["naive", "hot_set", "batch", "vllm", "slora"]

#: Hosted-app cap on the work of one simulation (open loop: rate x duration).
MAX_REQUESTS_PER_RUN = 200_000
#: Closed-loop runs have no fixed request count; their duration is capped instead.
MAX_CLOSED_DURATION_S = 600.0
#: Largest adapter count (and hot-set size) the controls offer.
MAX_ADAPTERS = 2000
#: Most replicas the Fleet controls offer (the engine allows engine.MAX_REPLICAS).
MAX_UI_REPLICAS = 16

SECTIONS = ["Preset", "Strategies", "Hardware and model", "Adapters", "Traffic", "Fleet", "Run"]

Ctx = dict  # resolved values so far, plus "_base": the preset's scenario dict


def preset_dict(name: str) -> dict:
    return Scenario.from_preset(name).to_dict()


def _scenario(ctx: Ctx, **kw) -> Scenario:
    """Unvalidated Scenario from the base fields and the controls resolved so far."""
    base = ctx.get("_fields") or ctx["_base"]
    d = dict(base)
    d.update({k: v for k, v in ctx.items() if not k.startswith("_") and k in _FIELDS})
    d.update(kw)
    d.pop("strategy", None)
    return Scenario.from_dict(presets.follow_profile(d, base, keep=_control_keys(ctx, kw)))


def _control_keys(values: Mapping[str, Any], extra: Mapping[str, Any] = ()) -> set[str]:
    """The scenario fields the user's controls set (a server's profile never overrides them)."""
    return {k for k in values if k in _FIELDS and k not in _PROFILE_FOLLOWERS} | set(extra)


_FIELDS = set(Scenario.field_names())
#: Controls whose change re-resolves the server profile rather than standing as an override of it.
_PROFILE_FOLLOWERS = {"server", "gpu", "model"}


def _server_label(v: str) -> str:
    if not v:
        return "as the preset states (its own cost model)"
    p = presets.PROFILES.get(v)
    if p is None:
        return v
    return f"{v}: {p.label}" + (f" (calibrated on {p.fitted_on[0]} / {p.fitted_on[1]})" if p.user else "")


#: Session-state key: the server profiles this session fitted (Validation page, "Use as my server profile").
FITTED_PROFILES_KEY = "_fitted_profiles"


def session_profiles() -> list[str]:
    """The server profiles this session fitted (none outside a Streamlit session).  Every session's are in
    ``presets.PROFILES`` (one registry per process, so that ``Scenario.validate`` accepts them), but the Server
    control offers, and a URL may select, only the built-in ones and these."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return []
    return [n for n in st.session_state.get(FITTED_PROFILES_KEY) or [] if n in presets.PROFILES]


@dataclass(frozen=True)
class Control:
    key: str
    label: str
    help: str
    section: str
    kind: str                      # "select" | "slider" | "number" | "multiselect"
    dtype: type = float
    options: Callable[[Ctx], list] | None = None
    bounds: Callable[[Ctx], tuple[float, float, float]] | None = None   # (min, max, step)
    default: Callable[[Ctx], Any] | None = None
    fmt: str | None = None
    applies: Callable[[Ctx], bool] = field(default=lambda ctx: True)
    note: Callable[[Ctx, Any], str] | None = None                       # caption under the widget
    labels: Callable[[Any], str] | None = None                          # select: how an option reads

    @property
    def is_field(self) -> bool:
        return self.key in _FIELDS and self.key != STRATEGY_KEY


def _base(key: str) -> Callable[[Ctx], Any]:
    return lambda ctx: ctx["_base"][key]


def _const(lo, hi, step) -> Callable[[Ctx], tuple]:
    return lambda ctx: (lo, hi, step)


def _vram_bounds(ctx: Ctx) -> tuple[float, float, float]:
    step = 0.25
    try:
        mx = _scenario(ctx).max_vram_budget_gb()
    except ValueError:
        mx = 0.0
    hi = math.floor(mx / step + 1e-9) * step
    return step, max(hi, 2 * step), step


def _vram_default(ctx: Ctx) -> float:
    lo, hi, _ = _vram_bounds(ctx)
    return min(max(float(ctx["_base"]["vram_budget_gb"]), lo), hi)


def _pcie_default(ctx: Ctx) -> float:
    base = ctx["_base"]
    if ctx.get("gpu", base["gpu"]) == base["gpu"]:
        return float(base["pcie_gbps"])
    return float(presets.get_gpu(ctx["gpu"]).pcie_gbps)


def hot_set_limit(sc: Scenario) -> int:
    """Most adapters hot_set can pin in ``sc``: the budget's slots minus the swap slot it keeps (and under
    ``max_loras - 1`` and ``num_adapters``), as ``hot_set_k = -1`` pins them."""
    try:
        slots = int(sc.memory_plan()["adapters"] // sc.max_adapter_bytes())
    except ZeroDivisionError:
        slots = 0
    hi = min(int(sc.num_adapters), slots - 1)
    if sc.max_loras > 0:
        hi = min(hi, int(sc.max_loras) - 1)
    return max(hi, 0)


def _hot_note(ctx: Ctx, v: int) -> str:
    try:
        sc = _scenario(ctx)
        hi = hot_set_limit(sc)
    except ValueError:
        return ""
    if v < 0:
        return f"-1 (auto): pins {hi}, all that fit while keeping one swap slot."
    if v > hi:
        return (f":orange[This budget pins at most {hi} (one slot kept for swaps): hot_set pins {hi} in this run, "
                f"not {v}. Your {v} stays set (and in the link); it applies again when the budget allows.]")
    return ""  # within what the budget pins: nothing to add


def _gpu_note(ctx: Ctx, v: str) -> str:
    g = presets.get_gpu(v)
    return f"{g.label}: {g.memory_gib:g} GiB, {g.hbm_gbps:,.0f} GB/s HBM, {g.fp16_tflops:g} TFLOPS FP16, PCIe {g.pcie_gbps:g} GB/s"


def _model_note(ctx: Ctx, v: str) -> str:
    m = presets.get_model(v)
    try:
        sc = _scenario(ctx)
        plan = sc.memory_plan()
        return (f"{m.label}: {m.n_params / 1e9:.2f} B params, weights {plan['weights'] / presets.GIB:.1f} GiB "
                f"of {plan['usable'] / presets.GIB:.1f} GiB usable")
    except ValueError:
        return m.label


def _vram_note(ctx: Ctx, v: float) -> str:
    """The budget's maximum, and the memory split in words: adapters that fit, KV left, requests it holds."""
    try:
        strategies = [x for x in (ctx.get(STRATEGY_KEY) or []) if x in STRATEGIES]
        kw = {"strategy": strategies[0]} if strategies else {}
        sc = _scenario(ctx, vram_budget_gb=v, **kw)
        return f"Up to {sc.max_vram_budget_gb():.2f} GiB on this GPU and model. {memory_sentence(sc)}."
    except (ValueError, ZeroDivisionError):
        return ""


def model_options() -> list[str]:
    """The base-model menu: the built-in presets, then the models this session uploaded (``session_models``;
    none outside a Streamlit session).  Another session's uploads are in ``presets.MODELS`` too (the engine's
    registry is per process) but never offered, accepted from a URL or named here."""
    mine = [n for n in session_models() if n in presets.MODELS and not presets.is_preset_model(n)]
    return [n for n in presets.MODELS if presets.is_preset_model(n)] + mine


def _rate_note(ctx: Ctx, v: float) -> str:
    return f"Cap: arrival rate x duration <= {MAX_REQUESTS_PER_RUN:,} requests per strategy (longer runs are shortened)."


CONTROLS: list[Control] = [
    Control(PRESET_KEY, "Scenario preset", "Starting point for every control below (engine.presets.SCENARIOS). "
            "'default': vLLM serving Llama-3.1-8B on an H100 80 GB; 'seed1-rtx3090': the source simulator's RTX 3090 "
            "setup. "
            "Changing it resets the controls to the preset's values.", "Preset", "select", str,
            options=lambda ctx: list(presets.SCENARIOS), default=lambda ctx: DEFAULT_PRESET),
    Control(STRATEGY_KEY, "Strategies to compare", "Scheduling and caching policies simulated side by side on "
            "the same request stream (common random numbers):\n\n" + "\n".join(
                f"- **{p.name}**: {p.description}" for p in STRATEGIES.values()),
            "Strategies", "multiselect", str, options=lambda ctx: list(STRATEGIES),
            default=lambda ctx: list(DEFAULT_STRATEGIES)),
    Control("gpu", "GPU", "GPU preset (engine.presets.GPUS): memory, HBM bandwidth and FP16 peak set the "
            "service time; choosing one also resets the PCIe bandwidth to its host link.",
            "Hardware and model", "select", str, options=lambda ctx: list(presets.GPUS), default=_base("gpu"),
            note=_gpu_note),
    Control("model", "Base model", "Base LLM (engine.presets.MODELS), fp16 weights. Its size and the GPU decide "
            "how much memory is left for adapters and the KV cache.", "Hardware and model", "select", str,
            options=lambda ctx: model_options(), default=_base("model"), note=_model_note),
    Control("tensor_parallel_size", "GPUs per replica (tensor parallel)", "A replica as a tensor-parallel group of "
            "this many GPUs of one node (vLLM --tensor-parallel-size, SGLang --tp-size): each GPU holds a share of "
            "the weights, KV cache and adapters, and every step adds the group's all-reduces (docs/model.md 5.7: an "
            "assumed all-reduce latency, not validated). Memory controls are per GPU. A 70B model needs 4 x 80 GB.",
            "Hardware and model", "select", int, options=lambda ctx: list(TP_SIZES),
            default=_base("tensor_parallel_size")),
    Control("server", "Server profile", "The serving engine whose cost model and own defaults the simulation runs "
            "with (engine.presets.PROFILES): its fitted cost parameters, its batch limits on the chosen GPU, memory "
            "utilisation, KV allocation and adapter load path, whatever preset you started from. Every compared "
            "strategy runs on it, so the comparison stays on one cost model. Blank: the preset's own stated cost "
            "model (a source document's or benchmark's setup). The badge above the results says whether the "
            "profile is calibrated on this GPU and model or transferred, and its measured error band.",
            "Hardware and model", "select", str, options=lambda ctx: [*presets.SERVERS, *session_profiles()],
            default=_base("server"), labels=_server_label),
    Control("trace", "Traffic source", "Empty: generated traffic (the controls below). Or replay a real "
            "request trace shipped with the app: Azure's LLM inference traces of 2023 (conversation, coding; about "
            "one hour each) give the arrival times and prompt/output lengths; each request's adapter is drawn from "
            "the popularity model with the seed (the same for every strategy). " + TRACE_CITATION,
            "Traffic", "select", str, options=lambda ctx: ["", *TRACES], default=_base("trace"),
            note=lambda ctx, v: f"Replaying {v}: arrival rate, process and lengths come from the trace." if v
            else ""),
    Control("trace_time_scale", "Trace speed-up (x)", "Time compression of the replayed trace: arrival times are "
            "divided by it, so 2 replays it twice as fast (twice the request rate), 0.5 at half the rate.",
            "Traffic", "slider", float, bounds=_const(0.05, 10.0, 0.05), default=_base("trace_time_scale"),
            fmt="%.2f", applies=lambda ctx: bool(ctx.get("trace"))),
    Control("prompt_tokens", "Prompt length (tokens)", "Mean prompt length per request, in tokens "
            "(prefill work; spread by the length distribution below).", "Traffic", "slider", int,
            bounds=_const(16, 4096, 16), default=_base("prompt_tokens"), applies=lambda ctx: not ctx.get("trace")),
    Control("output_tokens", "Output length (tokens)", "Mean generated tokens per request (decode steps).",
            "Traffic", "slider", int, bounds=_const(1, 1024, 1), default=_base("output_tokens"),
            applies=lambda ctx: not ctx.get("trace")),
    Control("length_dist", "Length distribution", "How prompt and output lengths vary around their means: "
            "**fixed** (every request the same), **uniform** (± spread × mean) or **lognormal** (coefficient of "
            "variation = spread; chat traffic such as ShareGPT is a mix of short and long requests, which is why "
            "the default draws lognormal lengths).", "Traffic", "select", str,
            options=lambda ctx: list(ENUMS["length_dist"]), default=_base("length_dist"),
            applies=lambda ctx: not ctx.get("trace")),
    Control("length_spread", "Length spread", "uniform: half-width as a share of the mean (below 1); lognormal: "
            "the coefficient of variation (dimensionless).", "Traffic", "slider", float,
            bounds=lambda ctx: (0.0, 0.95, 0.05) if ctx.get("length_dist") == "uniform" else (0.0, 3.0, 0.05),
            default=_base("length_spread"), fmt="%.2f",
            applies=lambda ctx: not ctx.get("trace") and ctx.get("length_dist") != "fixed"),
    Control("prefix_tokens", "Shared system prompt (tokens)", "A system prompt of this many tokens, the same text "
            "under every adapter, that the share of requests below start with (added to their prompt). vLLM and "
            "SGLang cache prompt prefixes by default, keyed by adapter: each adapter computes it once and later "
            "requests of that adapter reuse its full 16-token KV blocks, so more adapters mean fewer hits "
            "(docs/model.md 3.7). 0 = no shared prefix.", "Traffic", "slider", int, bounds=_const(0, 4096, 16),
            default=_base("prefix_tokens"), applies=lambda ctx: not ctx.get("trace")),
    Control("prefix_share", "Requests with the system prompt", "Share of requests whose prompt starts with the "
            "shared system prompt above (0 to 1).", "Traffic", "slider", float, bounds=_const(0.0, 1.0, 0.05),
            default=_base("prefix_share"), fmt="%.2f",
            applies=lambda ctx: not ctx.get("trace") and ctx.get("prefix_tokens", 0) > 0),
    Control("num_adapters", "Number of adapters", "Distinct LoRA adapters the traffic is spread over.",
            "Adapters", "slider", int, bounds=_const(1, MAX_ADAPTERS, 1), default=_base("num_adapters")),
    Control("adapter_rank", "Adapter rank", "LoRA rank r of every adapter; its size is r x (in + out) x 2 bytes "
            "per targeted module per layer.", "Adapters", "slider", int, bounds=_const(1, 256, 1),
            default=_base("adapter_rank")),
    Control("target_modules", "Adapter target modules", "Linear layers every adapter adapts (its size, load time "
            "and LoRA compute scale with them): **qkvo** = attention q/k/v/o projections; **qv** = q and v only; "
            "**all** = attention and MLP (gate/up/down). vLLM's GPU slots are sized for every linear module "
            "whatever the adapters target.", "Adapters", "select", str,
            options=lambda ctx: list(ENUMS["target_modules"]), default=_base("target_modules")),
    Control("vram_budget_gb", "Adapter VRAM budget (GiB)", "GPU memory reserved for resident LoRA adapters, in GiB. "
            "The maximum leaves room for the weights, the reserve and the KV cache of one request on the chosen "
            "GPU and model (Scenario.max_vram_budget_gb()); the rest of memory is KV cache.",
            "Hardware and model", "slider", float, bounds=_vram_bounds, default=_vram_default, fmt="%.2f",
            note=_vram_note),
    Control("pcie_gbps", "PCIe bandwidth (GB/s)", "Host-to-GPU copy bandwidth for adapter loads, in GB/s "
            "(1e9 bytes/s). Defaults to the chosen GPU's practical host link rate.", "Hardware and model",
            "slider", float, bounds=_const(1.0, 64.0, 0.5), default=_pcie_default, fmt="%.1f"),
    Control("zipf_s", "Popularity skew (Zipf s)", "Zipf exponent of adapter popularity: 0 = uniform, "
            "1 = classic Zipf, larger = a few adapters get most requests (dimensionless).", "Adapters", "slider",
            float, bounds=_const(0.0, 3.0, 0.05), default=_base("zipf_s"), fmt="%.2f"),
    Control("max_loras", "Max adapters on GPU (max_loras)", "GPU adapter slots, in adapters; 0 = limited by the "
            "VRAM budget only (vLLM's max_loras).", "Adapters", "slider", int, bounds=_const(0, 256, 1),
            default=_base("max_loras")),
    Control("kv_reservation", "KV cache allocation", "How requests take KV-cache memory. **full**: prompt + "
            "output reserved at admission (static allocation; no preemption). **on_demand**: blocks added as "
            "tokens are generated; when memory is full the most recently admitted request is preempted and "
            "recomputed later, as vLLM's paged KV cache (and S-LoRA's unified pool) do. on_demand needs the "
            "paged allocator (the kv-* presets use contiguous).", "Strategies", "select", str,
            options=lambda ctx: list(ENUMS["kv_reservation"]), default=_base("kv_reservation")),
    Control("hot_set_k", "Hot-set size (adapters)", "Adapters the hot_set strategy pins in GPU memory before "
            "serving (most popular first); -1 = as many as fit while keeping one swap slot. Other controls never "
            "change it: when the budget pins fewer, the run pins what fits and the note below says so.",
            "Strategies", "number", int, bounds=_const(-1, MAX_ADAPTERS, 1), default=_base("hot_set_k"),
            note=_hot_note),
    Control("arrival_process", "Arrival process", "Open-loop Poisson or gamma arrivals at the arrival rate, or a "
            "closed loop of clients that each send the next request when the previous one finishes.",
            "Traffic", "select", str, options=lambda ctx: list(ENUMS["arrival_process"]),
            default=_base("arrival_process"), applies=lambda ctx: not ctx.get("trace")),
    Control("arrival_rate_rps", "Arrival rate (req/s)", "Mean request arrival rate, in requests per second "
            "(open loop).", "Traffic", "slider", float, bounds=_const(0.5, 200.0, 0.5),
            default=_base("arrival_rate_rps"), fmt="%.1f",
            applies=lambda ctx: not ctx.get("trace") and ctx.get("arrival_process") != "closed",
            note=_rate_note),
    Control("arrival_cv", "Inter-arrival CV", "Coefficient of variation of gamma inter-arrival gaps "
            "(1 = Poisson, > 1 = burstier), dimensionless.", "Traffic", "slider", float,
            bounds=_const(0.25, 4.0, 0.05), default=_base("arrival_cv"), fmt="%.2f",
            applies=lambda ctx: not ctx.get("trace") and ctx.get("arrival_process") == "gamma"),
    Control("concurrency", "Clients (closed loop)", "Number of closed-loop clients, each with one request in "
            "flight.", "Traffic", "slider", int, bounds=_const(1, 512, 1), default=_base("concurrency"),
            applies=lambda ctx: not ctx.get("trace") and ctx.get("arrival_process") == "closed"),
    Control("batch_window_ms", "Batch window (ms)", "How long the batch strategy holds arrivals to group them "
            "by adapter, in milliseconds.", "Strategies", "slider", float, bounds=_const(1.0, 200.0, 1.0),
            default=_base("batch_window_ms"), fmt="%.0f"),
    Control("num_replicas", "Replicas (GPUs)", "Identical GPUs behind a router, each a full server of this "
            "scenario (docs/model.md, Fleet). The arrival rate is the fleet's total. 1 = one GPU.", "Fleet",
            "slider", int, bounds=_const(1, MAX_UI_REPLICAS, 1), default=_base("num_replicas")),
    Control("router", "Router", "Which replica an arriving request goes to (routed once, at arrival): "
            + "; ".join(f"**{r}**: {v.description}" for r, v in ROUTERS.items()) + ".", "Fleet", "select", str,
            options=lambda ctx: list(ROUTERS), default=_base("router"),
            applies=lambda ctx: ctx.get("num_replicas", 1) > 1),
    Control("affinity_load_slack", "Affinity load slack (requests)", "lora_affinity: how many more outstanding "
            "requests than the least-loaded replica a replica holding the adapter may have and still get the "
            "request.", "Fleet", "number", int, bounds=_const(0, 1000, 1), default=_base("affinity_load_slack"),
            applies=lambda ctx: ctx.get("num_replicas", 1) > 1 and ctx.get("router") == "lora_affinity"),
    Control("duration_s", "Duration (s)", "Simulated traffic time in seconds (the first warm-up seconds are "
            f"excluded from the metrics). Capped so that one run has at most {MAX_REQUESTS_PER_RUN:,} requests "
            f"per strategy; closed-loop runs at most {MAX_CLOSED_DURATION_S:g} s.", "Run", "slider", float,
            bounds=_const(60.0, 3600.0, 30.0), default=_base("duration_s"), fmt="%.0f"),
    Control("slo_ttft_ms", "TTFT SLO (ms)", "Time-to-first-token objective in milliseconds; SLO attainment is "
            "the share of requests at or under it.", "Run", "slider", float, bounds=_const(10.0, 5000.0, 10.0),
            default=_base("slo_ttft_ms"), fmt="%.0f"),
    Control("seed", "Random seed", "Seed of the request stream (integer); every strategy sees the same stream.",
            "Run", "number", int, bounds=_const(0, 2**31 - 1, 1), default=_base("seed")),
]
BY_KEY = {c.key: c for c in CONTROLS}
URL_KEYS = set(BY_KEY) | {BASELINE_KEY}
#: URL parameters of a page's own controls: key prefix -> the page's pure sanitizer, ``{key: [values]} ->
#: (clean parameters, issues)``, registered by the page module (``page_plan`` registers ``plan_``).
#: ``sanitize_query`` hands those parameters to it instead of dropping them as unknown.
PAGE_PARAMS: dict[str, Callable[[dict[str, list[str]]], tuple[dict, list]]] = {}
#: Numeric scenario controls a sweep or crossover can vary.
SWEEPABLE = ["arrival_rate_rps", "zipf_s", "batch_window_ms", "vram_budget_gb", "num_adapters", "pcie_gbps",
             "output_tokens", "prompt_tokens", "adapter_rank", "max_loras"]


@dataclass
class Issue:
    key: str
    message: str
    kind: str = "adjusted"   # "unknown" key, "malformed" value (dropped), "adjusted" (clamped/filtered), "ignored"


# ------------------------------------------------------------------ parsing
def _parse(c: Control, raw: Any) -> Any:
    """Typed value from a URL string or a Python value; ValueError if malformed."""
    if c.kind == "multiselect":
        items = raw if isinstance(raw, (list, tuple)) else [raw]
        return [str(x) for x in items]
    if isinstance(raw, (list, tuple)):
        raise ValueError("given more than once")
    if c.dtype is str:
        if not isinstance(raw, str):
            raise ValueError("not a string")
        return raw.strip()
    if isinstance(raw, bool):
        raise ValueError("not a number")
    try:
        f = float(raw.strip()) if isinstance(raw, str) else float(raw)
    except (TypeError, ValueError):
        raise ValueError("not a number") from None
    if not math.isfinite(f):
        raise ValueError("not a finite number")
    if c.dtype is int:
        if f != int(f):
            raise ValueError("not an integer")
        return int(f)
    return f


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        s = f"{v:g}"
        return s if float(s) == v else repr(v)
    return str(v)


def resolve(raw: Mapping[str, Any], *, source: str = "URL parameter",
            fields: Mapping[str, Any] | None = None) -> tuple[dict, list[Issue]]:
    """Resolve every control from ``raw`` (URL strings or Python values) in dependency order.

    Missing keys take the control's default; malformed values are dropped (default);
    out-of-range numbers are clamped; unknown options are dropped.  Returns the values
    (``"_base"`` holds the preset's scenario dict) and one Issue per correction.
    ``fields``: scenario fields that no control sets (an uploaded scenario.json), used
    for the ranges; defaults always come from the preset.
    """
    issues: list[Issue] = []
    ctx: Ctx = {"_fields": dict(fields) if fields else None}
    for c in CONTROLS:
        if c.key == PRESET_KEY:
            ctx["_base"] = preset_dict(DEFAULT_PRESET)
        if not c.applies(ctx):
            if c.key in raw:
                issues.append(Issue(c.key, f"{source} `{c.key}` ignored: it only applies with another "
                                           f"arrival_process (now {ctx.get('arrival_process')!r})", "ignored"))
            continue
        default = c.default(ctx)
        value = default
        if c.key in raw:
            try:
                v = _parse(c, raw[c.key])
            except ValueError as e:
                issues.append(Issue(c.key, f"{source} `{c.key}`={raw[c.key]!r} dropped ({e}); "
                                           f"using {_fmt(default) if not isinstance(default, list) else default}",
                                    "malformed"))
                v = None
            if v is not None:
                value, msg = _check(c, v, ctx, default)
                if msg:
                    issues.append(Issue(c.key, f"{source} `{c.key}`: {msg}"))
        ctx[c.key] = value
        if c.key == PRESET_KEY:
            ctx["_base"] = preset_dict(value)
    return ctx, issues


def _check(c: Control, v: Any, ctx: Ctx, default: Any) -> tuple[Any, str | None]:
    """Value inside the control's domain, and a message if it had to change."""
    if c.kind == "select":
        opts = c.options(ctx)
        if v not in opts:
            return default, f"{v!r} is not one of {', '.join(opts)}; using {default!r}"
        return v, None
    if c.kind == "multiselect":
        opts = c.options(ctx)
        good, bad = [], []
        for x in v:
            (good if x in opts else bad).append(x)
        good = list(dict.fromkeys(good))
        if not good:
            return default, f"{', '.join(map(repr, v))} not among {', '.join(opts)}; using {', '.join(default)}"
        if bad:
            return good, f"unknown value(s) {', '.join(map(repr, bad))} dropped (allowed: {', '.join(opts)})"
        return good, None
    lo, hi, _ = c.bounds(ctx)
    if v < lo:
        return c.dtype(lo), f"{_fmt(v)} is below the minimum {_fmt(lo)}; clamped to {_fmt(c.dtype(lo))}"
    if v > hi:
        return c.dtype(hi), f"{_fmt(v)} is above the maximum {_fmt(hi)}; clamped to {_fmt(c.dtype(hi))}"
    return v, None


def clamp(c: Control, v: Any, ctx: Ctx) -> Any:
    """``v`` forced into the control's current domain (silently)."""
    try:
        v = _parse(c, v)
    except ValueError:
        return c.default(ctx)
    return _check(c, v, ctx, c.default(ctx))[0]


def sanitize_query(query: Mapping[str, Sequence[str]]) -> tuple[dict[str, str | list[str]], list[Issue]]:
    """Clean URL query parameters (``key -> list of values``) before any widget exists.

    Unknown keys and malformed values are dropped, out-of-range numbers clamped, one
    Issue each.  Returns the cleaned parameters in ``st.query_params.from_dict`` form.
    """
    issues: list[Issue] = []
    raw: dict[str, Any] = {}
    page_raw: dict[str, dict[str, list[str]]] = {}
    for key, vals in query.items():
        vals = list(vals) if isinstance(vals, (list, tuple)) else [vals]
        prefix = next((p for p in PAGE_PARAMS if key.startswith(p)), None)
        if prefix is not None:
            page_raw.setdefault(prefix, {})[key] = vals
            continue
        if key in STRATEGY_ALIASES:
            raw.setdefault(STRATEGY_KEY, [])
            raw[STRATEGY_KEY] = list(raw[STRATEGY_KEY]) + vals
            continue
        if key not in URL_KEYS:
            issues.append(Issue(key, f"Unknown URL parameter `{key}` ignored: it is not a scenario control "
                                     "(the 'Share this scenario' link lists the accepted ones)", "unknown"))
            continue
        if key == STRATEGY_KEY:
            raw[key] = list(raw.get(key, [])) + vals
        elif len(vals) != 1:
            issues.append(Issue(key, f"URL parameter `{key}` given {len(vals)} times; using the last value"))
            raw[key] = vals[-1]
        else:
            raw[key] = vals[0]
    values, more = resolve({k: v for k, v in raw.items() if k != BASELINE_KEY})
    issues += more
    clean: dict[str, str | list[str]] = {}
    for key in raw:
        if key == BASELINE_KEY:
            b = raw[key]
            if b in values[STRATEGY_KEY]:
                clean[key] = b
            else:
                issues.append(Issue(key, f"URL parameter `{BASELINE_KEY}`={b!r} is not one of the compared "
                                         f"strategies ({', '.join(values[STRATEGY_KEY])}); dropped", "malformed"))
            continue
        if key not in values:          # not applicable
            continue
        if any(i.key == key and i.kind == "malformed" for i in more):
            continue
        v = values[key]
        clean[key] = [str(x) for x in v] if isinstance(v, list) else _fmt(v)
    for prefix, params in page_raw.items():
        page_clean, page_issues = PAGE_PARAMS[prefix](params)
        clean.update(page_clean)
        issues += page_issues
    return clean, issues


def normalize_query(query: Mapping[str, Sequence[str]]) -> dict[str, str | list[str]]:
    out: dict[str, str | list[str]] = {}
    for k, vals in query.items():
        vals = list(vals) if isinstance(vals, (list, tuple)) else [vals]
        out[k] = vals if (k == STRATEGY_KEY or len(vals) != 1) else vals[0]
    return out


# -------------------------------------------------------------- scenario build
def cap_scenario(sc: Scenario) -> tuple[Scenario, str | None]:
    """Apply the hosted app's work cap; returns the scenario and a note if it changed."""
    if sc.trace:  # a shipped trace: at most its ~19,400 requests
        return sc, None
    if sc.arrival_process == "closed":
        if sc.duration_s > MAX_CLOSED_DURATION_S:
            return (sc.replace(duration_s=MAX_CLOSED_DURATION_S),
                    f"Closed-loop runs are capped at {MAX_CLOSED_DURATION_S:g} s; duration shortened from "
                    f"{sc.duration_s:g} s.")
        return sc, None
    n = sc.arrival_rate_rps * sc.duration_s
    if n > MAX_REQUESTS_PER_RUN:
        dur = math.floor(MAX_REQUESTS_PER_RUN / sc.arrival_rate_rps)
        kw = {"duration_s": float(dur)}
        if sc.warmup_s >= dur:
            kw["warmup_s"] = round(0.1 * dur, 3)
        return (sc.replace(**kw),
                f"Work cap: {sc.arrival_rate_rps:g} req/s x {sc.duration_s:g} s = {n:,.0f} requests exceeds "
                f"{MAX_REQUESTS_PER_RUN:,} per strategy; simulated duration shortened to {dur:g} s.")
    return sc, None


def build_scenario(values: Mapping[str, Any], base: Mapping[str, Any] | None = None
                   ) -> tuple[Scenario, list[str]]:
    """Scenario from control values over ``base`` (the preset, or an uploaded scenario.json).

    Raises ValueError (naming the field) if the engine rejects it.  ``strategy`` is the
    first compared strategy; the caller varies it.
    """
    base = dict(base if base is not None else values["_base"])
    d = dict(base)
    for c in CONTROLS:
        if c.is_field and c.key in values:
            d[c.key] = values[c.key]
    strategies = values.get(STRATEGY_KEY) or DEFAULT_STRATEGIES
    d["strategy"] = strategies[0]
    d = presets.follow_profile(d, base, keep=_control_keys({c.key: 1 for c in CONTROLS
                                                            if c.is_field and c.key in values}))
    sc = Scenario.from_dict(d)
    sc, note = cap_scenario(sc)
    notes = [note] if note else []
    sc, note = fit_hot_set(sc, strategies)
    if note:
        notes.append(note)
    sc.validate()
    return sc, notes


def fit_hot_set(sc: Scenario, strategies: Sequence[str] = ()) -> tuple[Scenario, str | None]:
    """The scenario the run uses when ``hot_set_k`` asks for more pins than the budget allows: the most that fit
    (the control keeps the user's value, so raising the budget again brings it back); a note if a compared
    strategy pins a hot set.  Never a silent change of the control itself."""
    hi = hot_set_limit(sc)
    if sc.hot_set_k <= hi:
        return sc, None
    pins = [s for s in strategies if s in STRATEGIES and STRATEGIES[s].pins_hot_set]
    note = None
    if pins:
        note = (f"Hot-set size {sc.hot_set_k} is more than the {sc.vram_budget_gb:g} GiB adapter budget can pin "
                f"while keeping a swap slot: {', '.join(pins)} pins {hi} in this run. The control and the link keep "
                f"{sc.hot_set_k}; it applies again when the budget allows.")
    return sc.replace(hot_set_k=hi), note


def default_baseline(strategies: Sequence[str]) -> str | None:
    """The What-if page's baseline when none is chosen: naive if compared, else the first strategy."""
    return "naive" if "naive" in strategies else (strategies[0] if strategies else None)


def _decimals(x: float) -> int:
    s = f"{x:.10f}".rstrip("0")
    return len(s.split(".")[1]) if "." in s else 0


def step_values(values: Mapping[str, Any], key: str, steps: Sequence[int]) -> list[dict]:
    """``values`` with the slider ``key`` moved by each of ``steps`` (in slider steps), as the browser's slider
    moves it with its arrow keys: onto the grid min + k x step, rounded to the step's decimals (Chromium sends
    1.15, not 1.1 + 0.05 = 1.1500000000000001: the cache key must be the same float); in order, those outside the
    slider's range left out; [] if ``key`` is not a slider shown with these values."""
    c = BY_KEY.get(key)
    if c is None or c.kind != "slider" or key not in values or c.bounds is None:
        return []
    lo, hi, step = c.bounds(values)
    digits = max(_decimals(step), _decimals(lo))
    out = []
    for n in steps:
        v = round(lo + round((values[key] + n * step - lo) / step) * step, digits)
        if lo <= v <= hi and v != values[key]:
            out.append({**values, key: c.dtype(v)})
    return out


def share_query(values: Mapping[str, Any], fields: Mapping[str, Any] | None = None,
                page_params: Mapping[str, str | Sequence[str]] | None = None) -> str:
    """Short query string (``?`` not included) that reproduces ``values``: only the controls that differ from
    their default (the preset's value; ``url_params``), the baseline if it is not the default one, and the
    page's own parameters (``page_params``, e.g. the What-if page's replications).  ``resolve`` fills in
    the rest, so opening it restores every control."""
    pairs: list[tuple[str, str]] = []
    for k, v in url_params(values, fields).items():
        pairs += [(k, x) for x in v] if isinstance(v, list) else [(k, v)]
    strategies = list(values.get(STRATEGY_KEY) or DEFAULT_STRATEGIES)
    b = values.get(BASELINE_KEY)
    if b and b in strategies and b != default_baseline(strategies):
        pairs.append((BASELINE_KEY, str(b)))
    for k, v in (page_params or {}).items():
        pairs += [(k, str(x)) for x in v] if isinstance(v, (list, tuple)) else [(k, str(v))]
    return urlencode(pairs)


def preset_unchanged(state: AppState) -> bool:
    """Whether the scenario is the preset's, as loaded (the strategy field aside)."""
    if state.scenario is None:
        return False
    cur, ref = state.scenario.to_dict(), preset_dict(state.preset)
    cur.pop("strategy", None)
    ref.pop("strategy", None)
    return cur == ref


def conditions(sc: Scenario) -> str:
    """One line stating the scenario's conditions, for titles."""
    g, m = sc.gpu_spec, sc.model_spec
    if sc.trace:
        load = f"trace {sc.trace}" + (f" x{sc.trace_time_scale:g}" if sc.trace_time_scale != 1.0 else "")
    elif sc.arrival_process == "closed":
        load = f"closed loop, {sc.concurrency} clients"
    else:
        load = f"{sc.arrival_rate_rps:g} req/s {sc.arrival_process}"
    pop = f"Zipf s={sc.zipf_s:g}" if sc.popularity == "zipf" else f"power law alpha={sc.power_alpha:g}"
    tp = sc.tensor_parallel_size
    gpu = f"{tp} x {g.label} (tensor parallel)" if tp > 1 else g.label
    budget = f"{sc.vram_budget_gb:g} GiB adapter budget" + (" per GPU" if tp > 1 else "")
    prefix = (f" · a {sc.prefix_tokens}-token shared prefix on {sc.prefix_share:.0%} of requests"
              if sc.prefix_tokens > 0 and sc.prefix_share > 0 else "")
    return (f"{gpu} · {m.label} · {load} · {sc.num_adapters} adapters (rank {sc.adapter_rank}, "
            f"{pop}){prefix} · {budget} · PCIe {sc.pcie_gbps:g} GB/s · {sc.duration_s:g} s simulated")


def url_params(values: Mapping[str, Any], fields: Mapping[str, Any] | None = None) -> dict[str, str | list[str]]:
    """The query parameters the controls put in the URL for ``values``: those that differ from the
    control's default (a bound widget drops a parameter equal to its default), in URL form."""
    resolved, _ = resolve({k: v for k, v in values.items() if k in BY_KEY}, fields=fields)
    ctx: Ctx = {"_fields": dict(fields) if fields else None}
    out: dict[str, str | list[str]] = {}
    for c in CONTROLS:
        if c.key == PRESET_KEY:
            ctx["_base"] = preset_dict(DEFAULT_PRESET)
        if c.key not in resolved:  # does not apply
            continue
        v = ctx[c.key] = resolved[c.key]
        if v != clamp(c, c.default(ctx), ctx):
            out[c.key] = [str(x) for x in v] if isinstance(v, list) else _fmt(v)
        if c.key == PRESET_KEY:
            ctx["_base"] = preset_dict(v)
    return out


def non_url_fields(base: Mapping[str, Any], preset: str) -> list[str]:
    """Fields of ``base`` that differ from the preset and that no control (so no URL) carries."""
    ref = preset_dict(preset)
    return sorted(k for k, v in base.items()
                  if k not in BY_KEY and k != "strategy" and ref.get(k) != v)


# =========================================================== Streamlit widgets
import streamlit as st  # noqa: E402  (the pure part above does not need it)
from streamlit.errors import StreamlitAPIException  # noqa: E402
from streamlit.runtime.scriptrunner import get_script_run_ctx  # noqa: E402

_BOUNDS = "_control_bounds"
_URL_CHECKED = "_url_checked"
_URL_ISSUES = "_url_issues"
_OVERRIDE = "_base_override"
_URL_RESTORE = "_url_restore_retry"
_INTENT = "_control_intent"   # key -> the value the user set, while another control's range forces a smaller one
_SHOWN = "_control_shown"     # key -> the value the last run gave the widget (to tell the user's changes apart)
#: The What-if page's replications control (``page_whatif.K_REPS``): set from an uploaded scenario.json.
REPLICATIONS_PARAM = "wi_reps"
STATE_KEY = "_app_state"
SAVED_KEY = "_scenario_saved"
#: Session-state keys of the shared scenario: every control, and the What-if page's baseline.
SCENARIO_KEYS = [*BY_KEY, BASELINE_KEY]

# Persistence.  Streamlit drops the state of a widget that a run does not draw, so a visit to a
# page without the scenario controls (Findings, Validation, ...) would bring the What-if page back
# with the preset's values.  Hence every run that draws the controls copies their values to
# ``SAVED_KEY``, a plain session-state key (no widget, never dropped), and a run that draws them
# puts back any value Streamlit dropped before creating its widget (``_restore``).  Streamlit 1.67
# itself keeps the value of a bound widget that is not drawn, so this serves a deep link to such a
# page (below) and Streamlit versions without that.  Pages without the controls get the
# remembered scenario as ``current()`` too (``render_stored``), e.g. the Validation page's
# "shared scenario" fit base.
#
# URL (decided): a page that ignores the scenario does not carry it in its URL, whose own address
# is its share link.  Streamlit removes the parameter of a bound widget that is not drawn; the
# first run of a deep link to such a page moves the scenario's parameters into ``SAVED_KEY``
# (``sanitize_url_once``).  Back on a scenario page, ``restore_url`` writes them into the URL in
# one change before the widgets exist.  Streamlit alone would restore them one widget at a time,
# each change a browser history entry holding part of the scenario, and Back to such an entry
# resets the other controls to their defaults.  What remains: the browser records a page without
# the controls twice (its URL as the navigation opened it, with the scenario, then without), so
# going Back through it takes one press more; no history entry loses the scenario.


@dataclass
class AppState:
    """What the pages need: control values, the scenario (or why there is none), notes."""

    values: dict
    strategies: list[str]
    scenario: Scenario | None
    error: str | None
    notes: list[str]
    base: dict
    preset: str
    override_fields: list[str]


def current() -> AppState:
    """The state ``main.py`` built for this run (pages call this)."""
    return st.session_state[STATE_KEY]


def url_int(key: str, raw: str, lo: int, hi: int, default: int) -> tuple[str | None, Issue | None]:
    """A page's integer URL parameter: (clean value or None, the issue to show or None); clamped to [lo, hi]."""
    try:
        v = float(raw)
        if not math.isfinite(v) or v != int(v):
            raise ValueError
    except ValueError:
        return None, Issue(key, f"URL parameter `{key}`={raw!r} dropped (not an integer); using {default}",
                           "malformed")
    c = min(max(int(v), lo), hi)
    issue = Issue(key, f"URL parameter `{key}`={raw!r} is outside [{lo}, {hi}]; clamped to {c}") if c != v else None
    return str(c), issue


def url_page_params(params: Mapping[str, Any], ints: Mapping[str, tuple[int, int, int]],
                    choices: Mapping[str, Sequence[str]] | None = None) -> tuple[dict, list]:
    """A page's URL parameters cleaned (``PAGE_PARAMS`` sanitizers): ``ints`` key -> (min, max, default), clamped
    by ``url_int``; ``choices`` key -> allowed strings (others dropped); any other key ignored.  Each correction is
    an Issue naming the parameter.  The last value of a repeated key counts."""
    clean, issues = {}, []
    for key, vals in params.items():
        vals = [str(v) for v in (vals if isinstance(vals, (list, tuple)) else [vals])]
        raw = vals[-1].strip()
        if choices and key in choices:
            if raw in choices[key]:
                clean[key] = raw
            else:
                issues.append(Issue(key, f"URL parameter `{key}`={raw!r} dropped (allowed: "
                                         f"{', '.join(choices[key])})", "malformed"))
            continue
        if key not in ints:
            issues.append(Issue(key, f"Unknown URL parameter `{key}` ignored", "unknown"))
            continue
        value, issue = url_int(key, raw, *ints[key])
        if issue:
            issues.append(issue)
        if value is not None:
            clean[key] = value
    return clean, issues


def sanitize_url_once(uses_scenario: bool = True) -> None:
    """Clean ``st.query_params`` on a session's first run, before any widget binds to it.

    Streamlit seeds bound widgets from the URL of the run, so a corrected URL needs
    one rerun to take effect; the warnings are kept in session state for display.
    ``uses_scenario=False`` (a page without the scenario controls): the scenario's
    parameters are remembered for the scenario pages and removed from the URL.
    """
    ss = st.session_state
    if ss.get(_URL_CHECKED):
        return
    ss[_URL_CHECKED] = True
    query = {k: st.query_params.get_all(k) for k in st.query_params}
    clean, issues = sanitize_query(query)
    if issues:
        ss[_URL_ISSUES] = [i.message for i in issues]
    if not uses_scenario and any(k in URL_KEYS for k in clean):
        given = {k: v for k, v in clean.items() if k in URL_KEYS}
        values, _ = resolve({k: v for k, v in given.items() if k != BASELINE_KEY})
        saved = {k: values[k] for k in given if k in values}
        if BASELINE_KEY in given:
            saved[BASELINE_KEY] = given[BASELINE_KEY]
        ss[SAVED_KEY] = saved
        clean = {k: v for k, v in clean.items() if k not in URL_KEYS}
    if clean != normalize_query(query):
        st.query_params.from_dict(clean)
        st.rerun()


def show_url_issues() -> None:
    msgs = st.session_state.get(_URL_ISSUES)
    if not msgs:
        return
    for m in msgs:  # plain text quoting the link's values: shown literally (only `name` code spans stay code)
        st.warning(md_message(m), icon=":material/link_off:")
    if st.button("Dismiss link warnings", key="dismiss_url_issues", type="tertiary"):
        st.session_state.pop(_URL_ISSUES, None)
        st.rerun()


def _preset_ctx(preset: str, gpu: str | None = None) -> Ctx:
    ctx = {"_base": preset_dict(preset)}
    if gpu is not None:
        ctx["gpu"] = gpu
    return ctx


def _on_preset_change() -> None:
    ss = st.session_state
    values, _ = resolve({PRESET_KEY: ss[PRESET_KEY]})
    for c in CONTROLS:
        if c.key not in (PRESET_KEY, STRATEGY_KEY) and c.key in values:
            ss[c.key] = values[c.key]
    ss.pop(_OVERRIDE, None)
    ss.pop(_INTENT, None)  # the preset's values are what the user chose now


def _on_gpu_change() -> None:
    ss = st.session_state
    ss["pcie_gbps"] = _pcie_default(_preset_ctx(ss.get(PRESET_KEY, DEFAULT_PRESET), ss["gpu"]))


_CALLBACKS = {PRESET_KEY: _on_preset_change, "gpu": _on_gpu_change}


def apply_scenario(sc: Scenario, strategies: Sequence[str] | None = None,
                   replications: int | None = None) -> list[Issue]:
    """Set every control from a scenario (e.g. an uploaded scenario.json); keep its other fields.

    ``strategies``: the compared set (a scenario.json written by this app; its ``strategy`` field is the
    baseline).  Without it (an older file, a plan), the current set plus the scenario's strategy.
    ``replications``: the What-if page's replications control.
    """
    ss = st.session_state
    d = sc.to_dict()
    preset = ss.get(PRESET_KEY, DEFAULT_PRESET)
    raw = {c.key: d[c.key] for c in CONTROLS if c.is_field}
    raw[PRESET_KEY] = preset
    if strategies:
        chosen = list(strategies)
    else:
        chosen = list(ss.get(STRATEGY_KEY) or DEFAULT_STRATEGIES)
        if sc.strategy not in chosen:
            chosen.append(sc.strategy)
    raw[STRATEGY_KEY] = chosen
    values, issues = resolve(raw, source="scenario.json field", fields=d)
    for c in CONTROLS:
        if c.key != PRESET_KEY and c.key in values:
            ss[c.key] = values[c.key]
    ss[_OVERRIDE] = d
    ss.pop(_INTENT, None)
    if strategies and sc.strategy in values[STRATEGY_KEY]:
        ss[BASELINE_KEY] = sc.strategy
    if replications is not None:
        issues += _set_page_param(REPLICATIONS_PARAM, replications, "scenario.json field `replications`")
    # fields of controls that do not apply (e.g. arrival_cv with Poisson arrivals) stay in the base
    return [i for i in issues if i.kind != "ignored"]


def _set_page_param(key: str, value: Any, source: str) -> list[Issue]:
    """Set a page's own control (registered in ``PAGE_PARAMS``) through that page's sanitizer."""
    prefix = next((p for p in PAGE_PARAMS if key.startswith(p)), None)
    if prefix is None:
        return []
    clean, issues = PAGE_PARAMS[prefix]({key: [str(value)]})
    for i in issues:
        i.message = i.message.replace(f"URL parameter `{key}`", source)
    if key in clean:
        try:
            st.session_state[key] = int(clean[key])
        except ValueError:
            st.session_state[key] = clean[key]
    return issues


def on_upload(key: str, error_key: str, parse: Callable[[str, bytes], Any],
              apply: Callable[[str, Any], str | None], msg_key: str | None = None) -> None:
    """The shape of every file_uploader callback: the file the widget ``key`` holds; the last upload's error
    (``error_key``) and message (``msg_key``) cleared; ``parse(name, data)``, whose ValueError (its text names
    the file and the field, and says what is allowed, e.g. the size limit) is kept under ``error_key`` for the
    page to show; else ``apply(name, parsed)``, whose message is kept under ``msg_key``.  No file (the upload
    was removed): nothing else."""
    ss = st.session_state
    f = ss.get(key)
    ss.pop(error_key, None)
    if msg_key is not None:
        ss.pop(msg_key, None)
    if f is None:
        return
    try:
        parsed = parse(f.name, f.getvalue())
    except ValueError as e:
        ss[error_key] = str(e)
        return
    msg = apply(f.name, parsed)
    if msg_key is not None:
        ss[msg_key] = msg


def read_scenario_upload(name: str, data: bytes) -> tuple[Scenario, list[str] | None, int | None]:
    """An uploaded scenario.json: (scenario, strategies, replications); ValueError naming the file."""
    try:
        text = data.decode("utf-8")
        defined = _check_upload_model(text)  # first: the engine's own message lists every session's models
        sc, strategies, replications = exports.read_scenario_json(text)
        sc.validate()
        _claim_model(sc.model, defined)  # a model_definition registered it: this session's model too
    except UnicodeDecodeError:
        raise ValueError(f"{name}: not UTF-8 text; expected a scenario.json file") from None
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    return sc, strategies, replications


def restored_message(msg: str, issues: Sequence[Issue]) -> str:
    """``msg``, then the controls ``apply_scenario`` had to adjust (if any)."""
    if issues:
        msg += " Adjusted to the controls' ranges: " + "; ".join(i.message for i in issues)
    return msg


def _restore_upload(name: str, parsed: tuple) -> str:
    return restored_message(f"Restored {name}.", apply_scenario(*parsed))


def on_scenario_upload() -> None:
    """file_uploader callback: restore the uploaded scenario.json (errors kept for display).

    Accepts this app's scenario.json (a scenario plus ``strategies`` and ``replications``) and a plain
    scenario (older exports, the engine CLI's)."""
    on_upload("scenario_upload", "_upload_error", read_scenario_upload, _restore_upload, "_upload_msg")


#: An uploaded config.json: at most this many bytes (a real one is 1-5 KB).
MAX_CONFIG_BYTES = 256 * 1024
#: Models one session may upload (config.json, or a scenario.json's model_definition); the session's model menu
#: offers the presets and these only (``model_options``), kept in its session state (``UPLOADED_MODELS_KEY``).
MAX_UPLOADED_MODELS = 20
#: Models the engine's registry (``presets.MODELS``, one per server process, so that ``Scenario.validate``
#: accepts them) may hold from uploads of every session together: a bound on its memory.
MAX_REGISTERED_MODELS = 2000
#: Session-state key: the names of the models this session uploaded, in upload order.
UPLOADED_MODELS_KEY = "_uploaded_models"


def session_models() -> list[str]:
    """The models this session uploaded (none outside a Streamlit session)."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return []
    return list(st.session_state.get(UPLOADED_MODELS_KEY) or [])


def _claim_model(name: str, defined: bool = True) -> None:
    """Record the non-preset model ``name`` of an upload as this session's (``UPLOADED_MODELS_KEY``; nothing
    outside a session).  ``defined``: the upload carries its definition; one that only names a model this
    session did not upload (another session's, registered in this process) is refused as unknown."""
    if presets.is_preset_model(name) or get_script_run_ctx(suppress_warning=True) is None:
        return
    mine = session_models()
    if name in mine:
        return
    if not defined:
        raise _unknown_model(name)
    _check_session_room(name)
    st.session_state[UPLOADED_MODELS_KEY] = [*mine, name]


def _unknown_model(name: Any) -> ValueError:
    """A model this session cannot use, named without listing other sessions' models."""
    return ValueError(f"model: invalid value {short_repr(name)}; allowed: one of {', '.join(model_options())} "
                      f"(the presets and the models uploaded in this session), or a scenario.json carrying the "
                      f"model's definition ({MODEL_DEFINITION_KEY})")


def _check_session_room(name: str) -> None:
    """ValueError if ``name`` would be a model beyond this session's ``MAX_UPLOADED_MODELS``."""
    mine = session_models()
    if name not in mine and len(mine) >= MAX_UPLOADED_MODELS:
        raise ValueError(f"{len(mine)} models uploaded in this session; allowed: at most {MAX_UPLOADED_MODELS} "
                         "(a new browser session starts with none)")


def _check_upload_model(text: str) -> bool:
    """Before the engine reads a scenario.json (whose error for an unknown model lists every registered model,
    other sessions' uploads too): ValueError if its model is neither a preset, nor this session's, nor defined
    in the file.  Returns whether the file carries a model definition (``MODEL_DEFINITION_KEY``)."""
    d = loads_json(text, "scenario.json")
    if not isinstance(d, dict):
        return False  # the engine says what is wrong
    defined = MODEL_DEFINITION_KEY in d
    model = d.get("model")
    if (get_script_run_ctx(suppress_warning=True) is not None and isinstance(model, str) and not defined
            and not presets.is_preset_model(model) and model not in session_models()):
        raise _unknown_model(model)
    return defined


def register_config(data: bytes, filename: str = "config.json") -> tuple[str, str]:
    """Register the model a Hugging Face config.json defines (engine.model_from_hf_config); returns (model name,
    message).  ValueError naming the file and the bad field for anything the engine refuses.  A name taken by
    a different model gets the definition's hash appended, so an upload never replaces a preset.  The engine's
    registry is per process; in a Streamlit session the model also joins that session's list
    (``session_models``), which alone the session's model menu and URL accept."""
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(f"{filename}: {len(data) / 1024:.0f} KB; allowed: at most {MAX_CONFIG_BYTES // 1024} KB "
                         "(a config.json is a few KB)")
    try:
        config = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{filename}: not UTF-8 text; expected a Hugging Face config.json") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{filename}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise ValueError(f"{filename}: JSON nested too deeply; expected a Hugging Face config.json") from None
    if not isinstance(config, dict):
        raise ValueError(f"{filename}: invalid value: a JSON {type(config).__name__}; allowed: a JSON object "
                         "(a Hugging Face config.json)")
    try:
        model = model_from_hf_config(config)
        known = presets.MODELS.get(model.name)
        if known is not None and known != model:
            digest = hashlib.sha256(json.dumps(presets.model_to_dict(model), sort_keys=True).encode()).hexdigest()
            model = model_from_hf_config(config, name=f"{model.name}-{digest[:8]}")
        _check_session_room(model.name)
        if model.name not in presets.MODELS:
            uploaded = sum(1 for n in presets.MODELS if not presets.is_preset_model(n))
            if uploaded >= MAX_REGISTERED_MODELS:
                raise ValueError(f"{uploaded} uploaded models in this server; allowed: at most "
                                 f"{MAX_REGISTERED_MODELS} (restart the server to clear them)")
        presets.register_model(model)
        _claim_model(model.name)  # this session's menu offers it; no other session's does
    except ValueError as e:
        raise ValueError(f"{filename}: {e}") from None
    gib = presets.weight_bytes(model) / presets.GIB
    return model.name, (f"Added **{model.name}** from {filename}: {model.n_params / 1e9:.2f} B parameters, "
                        f"{gib:.1f} GiB of fp16 weights, {model.n_layers} layers; selected as the base model.")


def _select_model(_name: str, registered: tuple[str, str]) -> str:
    model, msg = registered
    st.session_state["model"] = model
    return msg


def on_config_upload() -> None:
    """file_uploader callback: register the uploaded config.json's model and select it."""
    on_upload("config_upload", "_config_error", lambda name, data: register_config(data, name), _select_model,
              "_config_msg")


def _keep_valid(c: Control, ctx: Ctx, bounds, options) -> None:
    """Before the widget exists: force its stored value into the current domain.

    A slider whose range changed is a new widget to Streamlit; writing the (clamped)
    value back to session state carries it over instead of resetting to the default.
    A value another control's range forced down is remembered as the user's (``_INTENT``)
    and comes back when the range allows it again, so the controls do not depend on the
    path taken; ``render_sidebar`` shows a note while it differs.
    """
    ss = st.session_state
    known = ss.setdefault(_BOUNDS, {})
    intent = ss.setdefault(_INTENT, {})
    shown = ss.setdefault(_SHOWN, {})
    dom = bounds if bounds is not None else tuple(options or ())
    if c.key in ss:
        cur = ss[c.key]
        if c.key in shown and cur != shown[c.key]:
            intent.pop(c.key, None)  # the user (or the URL, a preset, an upload) set it since: that is the value
        want = intent.get(c.key, cur)
        fixed = clamp(c, want, ctx)
        if fixed != want:
            intent[c.key] = want
        else:
            intent.pop(c.key, None)
        if fixed != cur or (c.kind == "slider" and known.get(c.key) not in (None, dom)):
            ss[c.key] = fixed
        shown[c.key] = fixed
    known[c.key] = dom


def _intent_note(c: Control, ctx: Ctx) -> str:
    """Note under a control whose value another control's range forced down (empty if none)."""
    intent = st.session_state.get(_INTENT) or {}
    if c.key not in intent:
        return ""
    want, got = intent[c.key], ctx.get(c.key)
    unit = " GiB" if c.key == "vram_budget_gb" else ""
    why = "this GPU, model and request lengths leave" if c.key == "vram_budget_gb" else "the controls above allow"
    return (f":orange[Set to {_fmt(got)}{unit}: your {_fmt(want)}{unit} is more than {why}. It comes back when "
            "they allow it again.]")


def _restore(key: str) -> None:
    """Before the widget exists: put back its remembered value if Streamlit dropped it."""
    ss = st.session_state
    saved = ss.get(SAVED_KEY) or {}
    if key not in ss and key in saved:
        ss[key] = saved[key]


def remembered() -> dict:
    """The shared scenario's values as last set: remembered, updated by what session state holds."""
    ss = st.session_state
    saved = dict(ss.get(SAVED_KEY) or {})
    saved.update({k: ss[k] for k in SCENARIO_KEYS if k in ss})
    return saved


def restore_url() -> None:
    """On a scenario page, before its widgets exist (right after ``st.navigation``): give the URL
    back the remembered scenario it lost, in one change.

    * Coming from a page without the controls, their parameters are unbound: set them all at
      once (one browser history entry holding the whole scenario).
    * Still bound (the previous run drew the controls) yet absent: a browser Back/Forward to an
      entry without them (the one the navigation pushed on the way back from such a page).
      Streamlit would reset bound widgets to their defaults in this run, so rerun first, then
      set the values in session state, which writes their parameters back (in place of that
      history entry: Streamlit replaces, not pushes, during a history navigation).
    """
    ss = st.session_state
    retry = ss.pop(_URL_RESTORE, False)
    if any(k in st.query_params for k in URL_KEYS):
        return  # it carries the scenario (a deep link, or from another scenario page)
    values = remembered()
    params = url_params(values, ss.get(_OVERRIDE))
    if not params:
        return
    try:
        st.query_params.update(params)
    except StreamlitAPIException:  # bound
        if not retry:
            ss[_URL_RESTORE] = True
            st.rerun()
        for k in params:  # the rerun: set in session state, each widget writes its parameter
            ss[k] = values[k]


def _widget(c: Control, ctx: Ctx, bounds, options, default, live: str | None = None) -> Any:
    _restore(c.key)
    _keep_valid(c, ctx, bounds, options)
    common = dict(key=c.key, help=c.help, bind="query-params")
    if c.key in _CALLBACKS:
        common["on_change"] = _CALLBACKS[c.key]
    elif live is not None and c.kind in ("slider", "number"):
        common["on_change"], common["args"] = _live_step, (c.key, live)
    if c.kind == "select":
        if c.labels is not None:
            common["format_func"] = c.labels
        return st.selectbox(c.label, options, index=options.index(default), **common)
    if c.kind == "multiselect":
        return st.multiselect(c.label, options, default=default, placeholder="Choose strategies", **common)
    lo, hi, step = (c.dtype(b) for b in bounds)
    if c.kind == "number":
        return st.number_input(c.label, min_value=lo, max_value=hi, value=c.dtype(default), step=step, **common)
    return st.slider(c.label, min_value=lo, max_value=hi, value=c.dtype(default), step=step, format=c.fmt,
                     **common)


def _walk(override: dict | None, pick: Callable, show: Callable | None = None) -> tuple[Ctx, tuple]:
    """The sidebar's controls in display order: each one that applies gets its range, options and default
    from the controls before it, its value from ``pick(c, ctx, bounds, options, default)`` and then its notes
    (``show(c, notes)`` draws them).  Returns the context and the layout: per control (key, range, options,
    default, notes), everything the sidebar draws but the values."""
    ctx: Ctx = {"_fields": override}
    layout = []
    for c in CONTROLS:
        if c.key == PRESET_KEY:
            ctx["_base"] = preset_dict(DEFAULT_PRESET)
        if not c.applies(ctx):
            continue
        bounds = c.bounds(ctx) if c.bounds else None
        options = c.options(ctx) if c.options else None
        default = clamp(c, c.default(ctx), ctx)
        ctx[c.key] = pick(c, ctx, bounds, options, default)
        notes = (c.note(ctx, ctx[c.key]) if c.note is not None else "", _intent_note(c, ctx))
        if show is not None:
            show(c, notes)
        layout.append((c.key, bounds, None if options is None else tuple(options), default, notes))
        if c.key == PRESET_KEY:
            ctx["_base"] = preset_dict(ctx[c.key])
    return ctx, tuple(layout)


def render_sidebar(live: str | None = None) -> AppState:
    """Draw every control in the sidebar (sections in display order, widgets in
    dependency order) and store the resulting AppState (and remember its values).

    ``live``: the key of the page's live fragment (``_live_step``), if it has one."""
    ss = st.session_state
    ss.pop(_LIVE_CTX, None)  # (a live step escalated to this full run by a sibling callback: not used)
    ss.pop(_READY, None)  # (until this run has drawn the whole page: ``live_ready``)
    _restore(BASELINE_KEY)  # the What-if page's widget; checked against the strategies there
    override = ss.get(_OVERRIDE)
    with st.sidebar:
        st.markdown("### Scenario")
        boxes = {}
        for name in SECTIONS:
            boxes[name] = st.container()
            if name != "Preset":
                boxes[name].markdown(f"**{name}**")

    def pick(c, ctx, bounds, options, default):
        with boxes[c.section]:
            return _widget(c, ctx, bounds, options, default, live)

    note_boxes: dict = {}

    def show(c, notes):
        if live is not None and c.key in LIVE_NOTES:  # (the live fragment draws it: ``draw_notes``)
            note_boxes[c.key] = boxes[c.section].container()
            notes = ("", notes[1])
        for note in notes:
            if note:
                boxes[c.section].caption(note)

    ctx, layout = _walk(override, pick, show)
    ss[_LAYOUT] = (_without_notes(layout) if live is not None else layout, {k: ctx[k] for k in BY_KEY if k in ctx})
    ss[_NOTES] = (note_boxes, {k: notes[0] for k, _, _, _, notes in layout if k in note_boxes})
    _remember(ctx)
    return _store_state(ctx, override)


#: Controls whose own note a live fragment draws (``draw_notes``): the VRAM budget's memory split changes with every
#: step of it.  (Not every note: an empty one would leave an empty container, a gap in the sidebar.)
LIVE_NOTES = ("vram_budget_gb",)


def _without_notes(layout: tuple) -> tuple:
    """The layout without the notes a live fragment draws (``LIVE_NOTES``)."""
    return tuple((k, b, o, d, ("" if k in LIVE_NOTES else n[0], n[1])) for k, b, o, d, n in layout)


def draw_notes() -> None:
    """On a page with a live fragment, from it: the notes of ``LIVE_NOTES`` into the containers ``render_sidebar``
    left under those controls, so that a live step redraws them (always a write, an empty one for no note: a
    fragment may only fill a container it filled in the full run)."""
    boxes, notes = st.session_state.get(_NOTES) or ({}, {})
    for key, box in boxes.items():
        if notes.get(key):
            box.caption(notes[key])
        else:
            box.empty()


def _remember(ctx: Ctx) -> None:
    ss = st.session_state
    saved = {k: ctx[k] for k in BY_KEY if k in ctx}
    if BASELINE_KEY in ss:
        saved[BASELINE_KEY] = ss[BASELINE_KEY]
    ss[SAVED_KEY] = saved


# Live steps.  On a page with a live fragment (What-if: the comparison, its charts and the share link), a slider
# or number step reruns that fragment alone, not the sidebar's ~50 elements and the page's static parts (a
# browser redraws every element a run sends).  The widget's callback (``_live_step``) asks for it only when the
# sidebar would draw exactly what it shows: no other control changed since it was drawn, the moved one's value
# is not held down by another's range (``_INTENT``), and every control's range, options, default and notes are
# the same with the new value (``_walk``; the controls' own notes, such as the VRAM budget's memory split, are
# drawn by the fragment: ``draw_notes``).  Else it returns and Streamlit reruns the whole app, as it does when
# another callback of the same interaction returns.  The fragment builds its state from the step's context
# (``live_state``).
_LAYOUT = "_sidebar_layout"   # (layout, values) of the sidebar as last drawn (or stepped live)
_LIVE_CTX = "_live_ctx"       # the context of the live step the fragment is about to run
_NOTES = "_sidebar_notes"     # (key -> container, key -> note): the notes the live fragment draws (``draw_notes``)
_READY = "_live_ready"        # the live fragment's key, once a full run has drawn the whole page (``live_ready``)


def _live_step(key: str, fragment: str) -> None:
    """on_change of a slider or number control on a page with a live fragment: rerun ``fragment`` alone if the
    step changes nothing the sidebar draws but the value (the comment above); else a full rerun."""
    ss = st.session_state
    drawn = ss.get(_LAYOUT)
    if drawn is None or ss.get(_READY) != fragment or key in (ss.get(_INTENT) or {}):
        return  # (not ready: the last full run stopped before the end of the page, e.g. a step during the compile)
    layout, values = drawn
    if any(k not in ss or (ss[k] != v and k != key) for k, v in values.items()):
        return
    now = {k: ss[k] for k in values}
    ctx, new_layout = _walk(ss.get(_OVERRIDE), lambda c, ctx, b, o, d: now.get(c.key, d))
    if _without_notes(new_layout) != layout:
        return
    boxes, _ = ss.get(_NOTES) or ({}, {})
    ss[_NOTES] = (boxes, {k: notes[0] for k, _, _, _, notes in new_layout if k in boxes})
    ss[_LAYOUT] = (layout, now)
    ss[_LIVE_CTX] = ctx
    try:
        st.rerun(fragment)
    except StreamlitAPIException:  # (the fragment is unknown to this session after all: a full run then)
        ss.pop(_LIVE_CTX, None)


def live_ready(fragment: str) -> None:
    """From a page with a live fragment, at the end of a full run: the whole page is drawn, so a slider step may
    rerun ``fragment`` alone (``_live_step``)."""
    st.session_state[_READY] = fragment


def live_state() -> AppState:
    """The state for a run of a live fragment: after a live step, built from the step's context (the sidebar is
    not drawn again; its values are remembered for the other pages); else ``current()``."""
    ss = st.session_state
    ctx = ss.pop(_LIVE_CTX, None)
    if ctx is None:
        return current()
    _remember(ctx)
    return _store_state(ctx, ss.get(_OVERRIDE))


def share_box(box=None, page_path: str = ""):
    """(container, page path): the sidebar container ``main.py`` reserved for the share link and the page's path
    (set with ``box``); a live fragment fills it, so that a live step updates the link too."""
    if box is not None:
        st.session_state["_share_box"] = (box, page_path)
    return st.session_state.get("_share_box", (None, page_path))


def render_stored() -> AppState:
    """For a page that does not draw the controls: the AppState of the remembered scenario."""
    ss = st.session_state
    saved = remembered()
    ss[SAVED_KEY] = saved
    override = ss.get(_OVERRIDE)
    values, _ = resolve({k: v for k, v in saved.items() if k in BY_KEY}, fields=override)
    return _store_state(values, override)


def _store_state(ctx: Ctx, override: dict | None) -> AppState:
    preset = ctx[PRESET_KEY]
    base = dict(override) if override else dict(ctx["_base"])
    strategies = list(ctx.get(STRATEGY_KEY) or [])
    scenario, error, notes = None, None, []
    try:
        scenario, notes = build_scenario(ctx, base)
    except ValueError as e:
        error = str(e)
    state = AppState(values=ctx, strategies=strategies, scenario=scenario, error=error, notes=notes,
                     base=base, preset=preset,
                     override_fields=non_url_fields(base, preset) if override else [])
    st.session_state[STATE_KEY] = state
    return state


def share_url(state: AppState, page_path: str = "") -> str:
    """The link that reproduces the current scenario and the page's own settings (short: only what differs
    from the preset and the defaults)."""
    values = dict(state.values)
    if st.session_state.get(BASELINE_KEY) in state.strategies:
        values[BASELINE_KEY] = st.session_state[BASELINE_KEY]
    page = {k: st.query_params.get_all(k) for k in st.query_params
            if any(k.startswith(p) for p in PAGE_PARAMS)}
    base = urlsplit(st.context.url or f"http://localhost:8501/{page_path}")
    query = share_query(values, st.session_state.get(_OVERRIDE), page)
    return urlunsplit((base.scheme, base.netloc, base.path or "/", query, ""))


#: Session-state key of the share expander's open state (``render_share``).
SHARE_OPEN_KEY = "share_open"


def render_share(state: AppState, page_path: str = "", where=None) -> None:
    """Expander with the link that reproduces the current scenario, at the top of the sidebar: ``where`` is the
    container ``main.py`` reserved there (filled after the page ran, so the page's own settings are in it).  The
    link is built only while the expander is open (opening it reruns the page, or the live fragment that drew it)."""
    with (where if where is not None else st.sidebar):
        box = st.expander("Share this scenario", icon=":material/share:", key=SHARE_OPEN_KEY, on_change="rerun")
        if not box.open:
            return  # (a code block costs a browser a module load on a first page and a redraw on every step)
        url = share_url(state, page_path)
        with box:
            n = len(parse_qs(urlsplit(url).query))
            st.code(url, language=None, wrap_lines=True)
            # small grey text, not st.caption: the page's first caption stays its own (the scenario's conditions)
            _small("Only what differs from the preset and the defaults "
                   f"({n} parameter{'s' if n != 1 else ''}); opening it restores every control and this "
                   "page's settings." if n else "Every control is at the preset's value: the page's address "
                   "alone restores it.")
            if state.scenario is not None and not presets.is_preset_model(state.scenario.model):
                _small(f"The base model {state.scenario.model} was uploaded in this session (config.json): "
                       "the link names it, but another session (another visitor, a new tab) does not have it and "
                       "gets the preset's model with a warning; share the scenario.json (What-if page, Export), "
                       "which carries the model's definition.")
            if state.override_fields:
                _small("Not carried by the link: fields of the uploaded scenario.json that differ from the "
                       f"'{state.preset}' preset ({', '.join(state.override_fields)}). Share the scenario.json "
                       "(What-if page, Export) instead.")


def _small(text: str) -> None:
    st.markdown(f":small[:gray[{text}]]")


_BADGE = {"calibrated": ("green", "verified"), "modified": ("orange", "tune"),
          "transferred": ("orange", "swap_horiz"), "uncalibrated": ("gray", "help")}


def show_calibration(sc: Scenario) -> None:
    """The calibration badge next to the GPU/model line: calibrated (against what, its errors) or not."""
    status = calibration_status(sc)
    color, icon = _BADGE[status.kind]
    band = error_band(sc, status=status)
    label, extra = status.label, ""
    if math.isfinite(band["band"]):
        label += f" · error band ±{band['band']:.0%}"
        extra = f" Error band ±{band['band']:.0%}: {band['note']}"
    st.badge(label, icon=f":material/{icon}:", color=color,
             help=status.detail + extra + " The Validation page has the per-run errors.")


def show_header(state: AppState, title: str, subtitle: str | None = None, help: str | None = None,
                badge: bool = True, titled: bool = True) -> None:
    """Page title, the scenario's conditions, link warnings and run notes; ``badge``: the sidebar scenario's
    calibration badge (a page that plans another scenario, the Plan page's form, shows that one's instead);
    ``titled=False``: the page drew its title itself (What-if: above its live fragment)."""
    if titled:
        st.title(title, anchor=False, help=help)
    if subtitle:
        st.markdown(subtitle)
    show_url_issues()
    if state.scenario is not None:
        st.caption(conditions(state.scenario))
        if badge:
            show_calibration(state.scenario)
    for n in state.notes:
        st.info(n, icon=":material/speed:")
    if state.override_fields:
        st.caption(f"Base: uploaded scenario.json (differs from the '{state.preset}' preset in "
                   f"{', '.join(state.override_fields)}).")
    trace = st.session_state.get("_trace")
    if trace is not None and title != "What-if":
        st.caption(f"The uploaded trace {md_escape(trace['name'])} is replayed on the What-if page only; this page uses "
                   "the generated workload.")


def runnable(state: AppState) -> bool:
    """Say why the sidebar's scenario cannot run (invalid, or no strategy chosen); True if it can."""
    if state.error:
        st.error(f"This scenario cannot be simulated. {state.error}", icon=":material/error:")
        return False
    if not state.strategies:
        st.warning("Select at least one strategy in the sidebar.", icon=":material/checklist:")
        return False
    return True
