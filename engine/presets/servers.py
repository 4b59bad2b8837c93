"""Server profiles (issue 24): what a serving engine does on a GPU with a model, apart from any workload.

A **profile** (``PROFILES``) carries the server's fitted cost parameters (those of the calibrated preset it was
fitted as, ``fitted_as``), its own configuration defaults (vLLM's API-server batch limits per GPU,
``VLLM_BATCH_DEFAULTS``, read from vLLM's argument parser: tests/fixtures/server_flags.json; memory utilisation;
chunked prefill; KV allocation; load path), what the simulation assumes beyond it (``ASSUMED``, each with its
source) and where the numbers come from.  A scenario that names its ``server`` takes every one of these fields
from the profile (``profile_fields``), whatever preset it started from: a workload preset naming a server states
only the workload and the decisions (``preset_fields``; tests/test_server_profiles.py).  On the GPU and model it
was fitted on a profile is *calibrated*; elsewhere its fitted values are carried over through the spec-sheet
roofline (*transferred*), with the measured transfer error (``engine.calibration.error_band``).  A user's own
profile (``register_profile``: the fit of their benchmark file, ``python -m engine calibrate --profile-out``) joins
``PROFILES`` with the fitted cost fields, the GPU and model it was fitted on and its errors, and a built-in
profile's server configuration.  Model layer: the scenario, the calibration (fitting a ``vllm bench serve`` file as
vLLM) and the planner read it."""
from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from dataclasses import dataclass, field

from ..limits import FLOAT_RANGES, short_repr
from .gpus import GPUS, get_gpu
from .models import MODELS
from .scenarios import SCENARIOS, SEED3_DISK_TO_CPU_MS

#: vLLM's API-server (``vllm serve``) batch defaults per GPU: (the GPU, memory at least GiB, A100s excluded,
#: max_num_seqs, max_num_batched_tokens); the first row that matches applies.  Source: the notes on
#: --max-num-seqs ("api server: 256, or 1024 on >= 70 GiB non-A100 GPUs") and --max-num-batched-tokens
#: ("api server: 2048, 8192 on >= 70 GiB non-A100, 16384 on >= 160 GiB") in tests/fixtures/server_flags.json,
#: read from vllm 0.33.0 vllm/engine/arg_utils.py (the per-usage-context defaults; the offline ``LLM`` class
#: has its own, larger ones: not used, ``vllm serve`` is the API server).  The GPU's memory is its preset's
#: ``memory_gib`` (vLLM reads the device's total memory: an "80 GB" GPU reports about 79 GiB, still >= 70);
#: an A100 is a GPU whose preset name or label says "A100" (vLLM tests the device name).
VLLM_BATCH_DEFAULTS: tuple[tuple[str, float, bool, int, int], ...] = (
    ("GPUs of 160 GiB or more, not A100s", 160.0, True, 1024, 16384),
    ("GPUs of 70 GiB or more, not A100s", 70.0, True, 1024, 8192),
    ("GPUs under 70 GiB, and A100s", 0.0, False, 256, 2048),
)


def vllm_batch_defaults(gpu) -> tuple[int, int, str]:
    """vLLM's API-server ``(max_num_seqs, max_num_batched_tokens, the row's GPU rule)`` on ``gpu`` (a preset
    name or an ``engine.presets.GPU``): ``VLLM_BATCH_DEFAULTS``."""
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    a100 = "a100" in g.name.lower() or "a100" in g.label.lower()
    for rule, gib, no_a100, seqs, tokens in VLLM_BATCH_DEFAULTS:
        if g.memory_gib >= gib and not (no_a100 and a100):
            return seqs, tokens, rule
    raise AssertionError("VLLM_BATCH_DEFAULTS has no catch-all row")  # pragma: no cover


#: The ranks vLLM accepts for ``--max-lora-rank`` (vllm/config LoRAConfig.possible_max_ranks; the fixture's choices).
VLLM_MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def vllm_rank_holding(rank: int) -> int | None:
    """The smallest ``--max-lora-rank`` vLLM accepts that holds adapters of ``rank``; None above the largest."""
    return next((v for v in VLLM_MAX_LORA_RANKS if v >= rank), None)


#: The calibrated preset whose fitted cost fields are vLLM's (the fit to the real vLLM runs).
VLLM_FITTED_PRESET = "vllm-llama31-8b"
#: The fitted cost fields the vLLM server carries (``max_in_system`` is the benchmark client's, not the server's).
VLLM_COST_FIELDS = ("compute_eff", "bw_eff", "step_overhead_ms", "lora_ms_per_adapter", "lora_ms_per_slot",
                    "lora_us_per_token_slot", "frontend_ms")
#: vLLM's simulated configuration: its scheduling, a paged KV cache grown on demand with recompute preemption,
#: chunked prefill (V1's default), synchronous adapter loads, gpu_memory_utilization 0.9 (as in the fitted runs), the measured
#: activation latency (6 ms + bytes over the link: engine/data/reference/vllm_lora_load_times.csv), and its LoRA kernels'
#: cost: every token at --max-lora-rank, taken as the largest adapter rank configured (lora_rank_padding "max_rank",
#: docs/model.md 5.5; the fit is made under it: engine.calibration.vllm_runs.VLLM_LORA_RANK_PADDING), whatever the
#: strategy compared on this server.
VLLM_CONFIG = dict(strategy="vllm", kv_reservation="on_demand", kv_allocator="paged", chunked_prefill="auto",
                   lora_rank_padding="max_rank", load_mode="sync", memory_mode="static", gpu_mem_util=0.9,
                   load_latency_ms=6.0)


def vllm_server_fields(gpu: str) -> dict:
    """Scenario fields of a vLLM server on ``gpu``: ``VLLM_CONFIG``, its batch limits there, the GPU's PCIe
    link and the vLLM fit's cost fields."""
    seqs, tokens, _ = vllm_batch_defaults(gpu)
    fit = SCENARIOS[VLLM_FITTED_PRESET]
    return {**VLLM_CONFIG, "max_batch_size": seqs, "max_batched_tokens": tokens, "pcie_gbps": GPUS[gpu].pcie_gbps,
            **{f: fit[f] for f in VLLM_COST_FIELDS}}


#: The cost fields a profile sets: the cost model and the fitted ones (``max_in_system``, a property of the
#: benchmark's client in the overloaded runs, is not part of a server).  ``COST_DEFAULTS``: Scenario's defaults of
#: those a fitted preset may leave unstated (tests/test_server_profiles.py checks them against Scenario).
COST_FIELDS = ("service_mode", "cost_model", *VLLM_COST_FIELDS)
COST_DEFAULTS = dict(service_mode="roofline", cost_model="roofline", compute_eff=0.6, bw_eff=0.8,
                     step_overhead_ms=0.5, lora_ms_per_adapter=0.0, lora_ms_per_slot=0.0, lora_us_per_token_slot=0.0,
                     frontend_ms=0.0)


@dataclass(frozen=True)
class ServerProfile:
    name: str                      # the server ("vllm", "slora"; a user's fit: register_profile)
    label: str
    fitted_as: str                 # the calibrated preset whose fitted cost fields this profile carries
    strategy: str                  # the scheduling the server runs (engine.policies.STRATEGIES)
    config: dict = field(default_factory=dict)   # the server's own defaults the simulation runs with
    source: str = ""
    #: A user's fit (``register_profile``): the built-in profile whose server it is ("vllm", "slora"), its
    #: fitted cost fields (``COST_FIELDS``), the (GPU, model) it was fitted on, and its errors per metric
    #: ({metric: {"p90_abs", "n_runs", "split"}}, split "held-out" or "in-sample"); None on a built-in profile.
    base: str = ""
    cost_values: dict | None = None
    fitted_pair: tuple[str, str] | None = None
    errors: dict | None = None

    @property
    def user(self) -> bool:
        """A profile fitted from a user's benchmark (``register_profile``), not a built-in one."""
        return self.cost_values is not None

    @property
    def fitted_on(self) -> tuple[str, str]:
        if self.fitted_pair is not None:
            return self.fitted_pair
        p = SCENARIOS[self.fitted_as]
        return p["gpu"], p["model"]

    def cost(self) -> dict:
        if self.cost_values is not None:
            return dict(self.cost_values)
        return {f: SCENARIOS[self.fitted_as].get(f, COST_DEFAULTS[f]) for f in COST_FIELDS}

    def server_config(self, gpu: str) -> dict:
        cfg = dict(self.config)
        if (self.base or self.name) == "vllm":
            seqs, tokens, _ = vllm_batch_defaults(gpu)
            cfg.update(max_batch_size=seqs, max_batched_tokens=tokens)
        return cfg


PROFILES: dict[str, ServerProfile] = {
    "vllm": ServerProfile(
        "vllm", "vLLM ~0.8.5 (V1 engine)", VLLM_FITTED_PRESET, VLLM_CONFIG["strategy"],
        config={k: v for k, v in VLLM_CONFIG.items() if k != "strategy"},
        source="fitted to 30 of 163 real vLLM runs (Llama-3.1-8B, an H100 64 GB, unverified; engine/data/reference/"
               "vllm_llama31_8b_multilora_runs.csv), checked on 101 held out (docs/validation.md); batch limits: "
               "vLLM's API-server defaults per GPU (presets.servers.VLLM_BATCH_DEFAULTS); gpu_memory_utilization "
               "0.9 as in those runs"),
    "slora": ServerProfile(
        "slora", "S-LoRA (unified pool, asynchronous prefetch)", "slora-a10g-s1", "slora",
        config=dict(gpu_mem_util=0.9, memory_mode="unified", load_mode="async", kv_reservation="full", kv_allocator="paged",
                    chunked_prefill="auto", lora_rank_padding="auto", vram_budget_gb=0.0,
                    max_batch_size=SCENARIOS["slora-a10g-s1"]["max_batch_size"],
                    max_batched_tokens=SCENARIOS["slora-a10g-s1"]["max_batched_tokens"]),
        source="fitted to S-LoRA's own S1 runs on an A10G 24 GB (llama-7b; engine/data/reference/"
               "slora_s1_results.csv), checked on its held-out runs (docs/validation.md)"),
}
#: Scenario.server's values: "" = the scenario states its own cost model and server settings (a reproduction
#: of a source's or a benchmark's setup), else a profile.  The built-in ones; ``Scenario.validate`` also accepts
#: the profiles ``register_profile`` added to ``PROFILES`` since.
SERVERS = ("", *PROFILES)
BUILTIN_PROFILES = tuple(PROFILES)

#: What a server-named scenario assumes beyond the profile: field -> (value or "gpu", source).
ASSUMED = {
    "pcie_gbps": ("gpu", "the GPU preset's practical host-to-device bandwidth (engine/presets/gpus.py)"),
    "reserve_gb": (5.0, "activations and CUDA graphs, as in the vLLM fit (calibration.vllm_feasibility)"),
    "disk_latency_ms": (46.76, f"vLLM's measured repeat read of a rank-16 adapter, {SEED3_DISK_TO_CPU_MS:.2f} ms "
                               "in all (engine/data/reference/vllm_lora_load_times.csv)"),
    "disk_gbps": (0.3686, "the per-byte rate of the same measurements' rank sweep"),
    "host_warm": (True, "adapters registered at start (--lora-modules): in host memory from the start"),
    "kv_block_tokens": (16, "both servers page the KV cache in 16-token blocks on CUDA"),
}


def profile_fields(server: str, gpu: str) -> dict:
    """The scenario fields a ``server`` profile sets on ``gpu``: ``ASSUMED``, the fitted cost fields and the
    server's configuration there (not its strategy: a decision), and ``server`` itself."""
    if server not in PROFILES:
        raise ValueError(f"server: invalid value {short_repr(server)}; allowed: {', '.join(BUILTIN_PROFILES)}, or a "
                         "profile added with engine.presets.register_profile")
    g = get_gpu(gpu)
    assumed = {k: (g.pcie_gbps if v == "gpu" else v) for k, (v, _) in ASSUMED.items()}
    p = PROFILES[server]
    return {**assumed, **p.cost(), **p.server_config(gpu), "server": server}


def preset_fields(name: str) -> dict:
    """A preset's scenario fields: those it states over, if it names a ``server``, that profile's fields on
    its GPU (a workload preset states no profile field: tests/test_server_profiles.py)."""
    p = SCENARIOS[name]
    if not p.get("server"):
        return dict(p)
    return {**profile_fields(p["server"], p["gpu"]), **p}


def follow_profile(d: dict, base: dict, keep=()) -> dict:
    """``d`` (a scenario dict built over ``base``) with the profile fields that ``base`` took from its server's
    profile re-resolved for ``d``'s server and GPU: a GPU or server changed in the sidebar brings that server's
    limits on that GPU, while a field ``base`` set apart from its profile (an uploaded scenario's override) and
    the fields in ``keep`` (set by the user's controls) stay.  Unchanged if ``d`` names no server."""
    srv = d.get("server") or ""
    if not srv:
        return d
    old_srv, old_gpu = base.get("server") or "", base.get("gpu", d["gpu"])
    was = profile_fields(old_srv, old_gpu) if old_srv in PROFILES else {}
    out = dict(d)
    for k, v in profile_fields(srv, d["gpu"]).items():
        if k not in keep and (not was or k not in base or base[k] == was.get(k)):
            out[k] = v
    return out


# ---------------------------------------------------------------------------------------------------------------
# a user's own profile: the fit of their benchmark file (issue 24 item 8)
# ---------------------------------------------------------------------------------------------------------------
#: A user profile's name: lower-case letters, digits, '.', '_' and '-', starting with a letter or digit (it is a
#: scenario field, a URL parameter and a menu entry).
PROFILE_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
#: The splits a user profile's errors come from: runs held out of the fit, or the fitted runs themselves.
ERROR_SPLITS = ("held-out", "in-sample")
#: User profiles one process may hold (every session's together): a bound on ``PROFILES``' memory.
MAX_USER_PROFILES = 2000
#: ``profile_to_dict``'s format tag.
PROFILE_FORMAT = "lora-what-if server profile"
_COST_CHOICES = {"service_mode": ("roofline", "fixed"), "cost_model": ("roofline", "kernel")}
#: Registrations from concurrent sessions (the dashboard's threads) take a name one at a time.
_REGISTER_LOCK = threading.Lock()


def _check_cost(cost: object, base: str) -> dict:
    """``cost`` (fitted cost fields) checked and completed from the ``base`` profile's (``COST_FIELDS``)."""
    if not isinstance(cost, dict):
        raise ValueError(f"cost: invalid value {short_repr(cost)}; allowed: a dict of {', '.join(COST_FIELDS)}")
    bad = [k for k in cost if k not in COST_FIELDS]
    if bad:
        raise ValueError(f"cost: unknown field {short_repr(bad[0])}; allowed: {', '.join(COST_FIELDS)}")
    out = {**PROFILES[base].cost(), **cost}
    for k, v in out.items():
        if k in _COST_CHOICES:
            if v not in _COST_CHOICES[k]:
                raise ValueError(f"cost.{k}: invalid value {short_repr(v)}; allowed: {', '.join(_COST_CHOICES[k])}")
            continue
        lo, lo_open, hi, _ = FLOAT_RANGES[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < lo \
                or (lo_open and v == lo) or v > hi:
            raise ValueError(f"cost.{k}: invalid value {short_repr(v)}; allowed: a number in [{lo:g}, {hi:g}]")
        out[k] = float(v)
    return out


def _check_errors(errors: object) -> dict:
    """``errors`` checked: {metric: {"p90_abs": number >= 0 or None, "n_runs": int >= 0, "split": ERROR_SPLITS}}."""
    if not isinstance(errors, dict):
        raise ValueError(f"errors: invalid value {short_repr(errors)}; allowed: a dict metric -> {{p90_abs, n_runs, "
                         "split}")
    out = {}
    for m, e in errors.items():
        if not isinstance(m, str) or not re.fullmatch(r"[a-z0-9_.]{1,40}", m) or not isinstance(e, dict):
            raise ValueError(f"errors: invalid entry {short_repr(m)}; allowed: metric name -> {{p90_abs, n_runs, split}}")
        p90, n, split = e.get("p90_abs"), e.get("n_runs"), e.get("split")
        if p90 is not None and (isinstance(p90, bool) or not isinstance(p90, (int, float)) or not p90 >= 0):
            raise ValueError(f"errors.{m}.p90_abs: invalid value {short_repr(p90)}; allowed: a number >= 0, or null")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"errors.{m}.n_runs: invalid value {short_repr(n)}; allowed: an integer >= 0")
        if split not in ERROR_SPLITS:
            raise ValueError(f"errors.{m}.split: invalid value {short_repr(split)}; allowed: {', '.join(ERROR_SPLITS)}")
        out[m] = {"p90_abs": None if p90 is None or not math.isfinite(p90) else float(p90), "n_runs": n, "split": split}
    return out


def register_profile(name: str, label: str, base: str, cost: dict, gpu: str, model: str, errors: dict,
                     source: str = "") -> ServerProfile:
    """Add to ``PROFILES`` the server profile fitted from a user's benchmark, and return it.

    ``base``: the built-in profile whose server it is ("vllm", "slora"): its strategy and configuration (vLLM's
    batch limits per GPU, ...) are the new profile's; ``cost``: the fitted cost fields (``COST_FIELDS``; any left
    out are ``base``'s); ``gpu`` / ``model``: the pair it was fitted on (calibrated there, transferred elsewhere:
    ``engine.calibration.calibration_status``); ``errors``: per metric the 90th percentile of |simulated /
    measured - 1|, the runs and whether they were held out of the fit (``engine.calibration.profile_errors_of``);
    ``source``: what it was fitted to.  A name a built-in profile or a different registration holds gets the
    definition's hash appended (``name-1a2b3c4d``), so a user profile never replaces another; registering the
    same definition again returns the profile already there.  ValueError naming the argument otherwise."""
    if base not in BUILTIN_PROFILES:
        raise ValueError(f"base: invalid value {short_repr(base)}; allowed: {', '.join(BUILTIN_PROFILES)}")
    if not isinstance(name, str) or not PROFILE_NAME_RE.fullmatch(name):
        raise ValueError(f"name: invalid value {short_repr(name)}; allowed: 1-64 of a-z, 0-9, '.', '_', '-', "
                         "starting with a letter or digit")
    if gpu not in GPUS:
        raise ValueError(f"gpu: invalid value {short_repr(gpu)}; allowed: {', '.join(sorted(GPUS))}")
    if model not in MODELS:
        raise ValueError(f"model: invalid value {short_repr(model)}; allowed: a preset or registered model")
    for k, v in (("label", label), ("source", source)):  # shown in menus and tooltips: no Markdown or HTML
        if not isinstance(v, str) or len(v) > 2000 or re.search(r"[\[\]<>`|*\\\n\r]", v):
            raise ValueError(f"{k}: invalid value {short_repr(v)}; allowed: one line of at most 2000 characters, "
                             "without [ ] < > ` | * or backslashes")
    b = PROFILES[base]
    cost, errors = _check_cost(cost, base), _check_errors(errors)
    label = label or f"your fit ({b.label.split(' (')[0]}) on {gpu} / {model}"
    d = {"base": base, "label": label, "cost": cost, "gpu": gpu, "model": model, "errors": errors, "source": source}
    digest = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:8]
    with _REGISTER_LOCK:
        return _add_profile(name, digest, d, b)


def _add_profile(name: str, digest: str, d: dict, b: ServerProfile) -> ServerProfile:
    """``register_profile``'s insertion under its lock: the name, or the name with ``digest``."""
    for n in (name, f"{name[:55]}-{digest}"):
        old = PROFILES.get(n)
        if old is not None and n not in BUILTIN_PROFILES and profile_to_dict(old) == {"name": n, **d,
                                                                                     "format": PROFILE_FORMAT}:
            return old
        if old is None:
            break
    else:
        raise ValueError(f"name: {n!r} is taken by another profile with the same definition hash")  # pragma: no cover
    if sum(1 for p in PROFILES.values() if p.user) >= MAX_USER_PROFILES:
        raise ValueError(f"profiles: {MAX_USER_PROFILES} user profiles in this process; allowed: at most that "
                         "(restart the server to clear them)")
    p = ServerProfile(n, d["label"], b.fitted_as, b.strategy, config=dict(b.config), source=d["source"],
                      base=d["base"], cost_values=d["cost"], fitted_pair=(d["gpu"], d["model"]), errors=d["errors"])
    PROFILES[n] = p
    return p


def profile_to_dict(p: ServerProfile) -> dict:
    """A user profile as JSON-ready data (``profile_from_dict`` reads it back; ``calibrate --profile-out``)."""
    if not p.user:
        raise ValueError(f"profile: {p.name!r} is a built-in profile; allowed: a user profile (register_profile)")
    return {"format": PROFILE_FORMAT, "name": p.name, "label": p.label, "base": p.base, "cost": dict(p.cost_values),
            "gpu": p.fitted_on[0], "model": p.fitted_on[1], "errors": {m: dict(e) for m, e in p.errors.items()},
            "source": p.source}


def profile_from_dict(d: object) -> ServerProfile:
    """Register the profile ``profile_to_dict`` wrote (a name now taken gets the hash suffix) and return it."""
    if not isinstance(d, dict) or d.get("format") != PROFILE_FORMAT:
        raise ValueError(f"profile: invalid value {short_repr(d)}; allowed: a JSON object with \"format\": "
                         f"{PROFILE_FORMAT!r} (python -m engine calibrate --profile-out)")
    missing = [k for k in ("name", "base", "cost", "gpu", "model", "errors") if k not in d]
    if missing:
        raise ValueError(f"profile: {missing[0]}: missing")
    return register_profile(d["name"], d.get("label", ""), d["base"], d["cost"], d["gpu"], d["model"], d["errors"],
                            d.get("source", ""))
