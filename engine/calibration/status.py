"""Whether a scenario's cost model is calibrated: against which measurements, with which errors.

A scenario counts as calibrated when its GPU, base model and every fitted cost parameter equal those
of a calibrated preset (``CALIBRATED``).  The error figures are copied from the per-run error tables
``python -m engine validate`` writes (docs/validation/*_errors.csv; the seed-3 points from
tests/test_calibrate.py); tests/test_calibration_status.py recomputes them from those files, so
they cannot drift from docs/validation.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..presets.servers import PROFILES, ServerProfile
from ..scenario import Scenario
from .allreduce_check import allreduce_caveat

#: The cost-model parameters a calibration fits (engine/calibration/fitting.py FIT_BOUNDS and
#: the vLLM runs' extra ones), with the cost model and the scheduling they were fitted under
#: (service_mode, cost_model, chunked_prefill, lora_rank_padding); a scenario that changes any of them is no
#: longer the calibrated one.
FITTED_FIELDS = ("service_mode", "cost_model", "chunked_prefill", "lora_rank_padding", "compute_eff", "bw_eff",
                 "step_overhead_ms", "lora_ms_per_adapter", "lora_ms_per_slot", "lora_us_per_token_slot", "frontend_ms",
                 "max_in_system", "cost_scale")


@dataclass(frozen=True)
class Calibration:
    """A calibrated preset: what it was fitted to and its errors, (metric, split, MAPE %, worst %, runs)."""

    preset: str
    against: str
    errors: tuple[tuple[str, str, float, float, int], ...]
    caveat: str = ""


CALIBRATED: dict[str, Calibration] = {c.preset: c for c in (
    Calibration("slora-a10g-s1", "S-LoRA setting S1 on an A10G (slora_s1_results.csv, 9 train + 12 held-out runs)",
                (("request throughput", "held-out", 2.3, 4.7, 12), ("mean TTFT", "held-out", 10.2, 27.6, 12),
                 ("request throughput", "train", 1.9, 3.1, 9), ("mean TTFT", "train", 7.8, 27.9, 9))),
    Calibration("slora-a100-80-s1", "S-LoRA setting S1 on an A100 80 GB (slora_s1_results.csv, 4 runs)",
                (("request throughput", "train", 4.9, 7.6, 4), ("mean TTFT", "train", 46.9, 88.3, 4)),
                caveat="in-sample only: 4 parameters fitted on 4 runs, nothing held out"),
    Calibration("vllm-llama31-8b", "vLLM V1 runs of Llama-3.1-8B (vllm_llama31_8b_multilora_runs.csv, 30 train + "
                "101 held-out runs; GPU most likely an H100 64 GB, unverified)",
                (("request throughput", "held-out", 6.1, 28.0, 101), ("mean TTFT", "held-out", 41.0, 2918.8, 101),
                 ("median TTFT", "held-out", 79.6, 6418.8, 101), ("mean TPOT", "held-out", 17.9, 52.9, 101),
                 ("request throughput", "train", 3.3, 16.4, 30), ("mean TTFT", "train", 10.6, 56.4, 30)),
                caveat="fitted with chunked prefill on (vLLM V1's default) and every token's LoRA cost at "
                       "--max-lora-rank (lora_rank_padding max_rank, as vLLM's kernels run); one held-out run near "
                       "saturation is off by 29x on mean TTFT (held-out median error 6.6 %; 12.2 % MAPE without it)"),
    Calibration("seed3-llama31-8b-80gb-calibrated", "the vLLM multi-LoRA benchmark's three published "
                "uniform-traffic points (1 / 10 / 1,000 adapters), on its roofline design",
                (("output tokens/s", "train", 1.2, 1.8, 3),),
                caveat="in-sample only: 2 parameters fitted on 3 points"),
)}


@dataclass(frozen=True)
class CalibrationStatus:
    """``kind``: "calibrated", "modified" (a calibrated GPU/model pair with other cost parameters),
    "transferred" (fitted parameters used on another GPU or model) or "uncalibrated".  ``profile``: the user's
    server profile (``engine.presets.register_profile``) the status refers to, if any."""

    kind: str
    label: str
    detail: str
    preset: str | None = None
    profile: str | None = None


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-12)
    return a == b


def _errors_text(c: Calibration) -> str:
    parts = [f"{m} {split} MAPE {mape:.1f} % (worst {worst:.1f} %, {n} runs)" for m, split, mape, worst, n in c.errors]
    return "; ".join(parts) + (f"; {c.caveat}" if c.caveat else "")


def _fields(sc: Scenario) -> tuple[str, ...]:
    """The fitted fields that act on ``sc``: ``max_in_system`` refuses open-loop arrivals only (closed-loop
    clients never meet it), and a scenario without the cap (0: a server as deployed, planner.Deployment) keeps
    the fit of the cost model: the cap is a hypothesis about the benchmark's overloaded runs (docs/model.md 6.1)
    and binds only in overload, which a plan's stable answers never reach."""
    closed = sc.arrival_process == "closed" and not sc.trace
    skip = closed or sc.max_in_system == 0
    return tuple(f for f in FITTED_FIELDS if not (skip and f == "max_in_system"))


#: A user profile's error metrics in words (``engine.calibration.HEADLINE_METRICS``).
_ERROR_NAMES = {"request_throughput": "request throughput", "mean_tpot_ms": "mean TPOT", "mean_itl_ms": "mean ITL",
                "mean_ttft_ms": "mean TTFT", "median_ttft_ms": "median TTFT", "p99_ttft_ms": "p99 TTFT"}


def user_errors_text(p: ServerProfile, short: bool = False) -> str:
    """A user profile's errors in words: "request throughput p90 2.1 %, ... (held-out, 2 runs)"; ``short``:
    throughput and the per-step cost only."""
    errs = {m: e for m, e in (p.errors or {}).items() if e.get("p90_abs") is not None}
    if short:
        lat = next((m for m in ("mean_tpot_ms", "mean_itl_ms", "mean_ttft_ms") if m in errs), None)
        errs = {m: errs[m] for m in ("request_throughput", lat) if m in errs}
    if not errs:
        return "no error measured"
    first = next(iter(errs.values()))
    n = max(e["n_runs"] for e in errs.values())
    return (", ".join(f"{_ERROR_NAMES.get(m, m)} p90 {100 * e['p90_abs']:.1f} %" for m, e in errs.items())
            + f" ({first['split']}, {n} run{'s' if n != 1 else ''})")


def _user_status(sc: Scenario) -> CalibrationStatus | None:
    """The status of a scenario on a user's server profile with that profile's cost fields: "calibrated" on the
    GPU and model it was fitted on, "transferred" elsewhere; "modified" on that pair with other cost fields.  None
    when ``sc`` is not on a user profile (or has other cost fields on another pair: the presets' rules apply)."""
    p = PROFILES.get(sc.server) if sc.server else None
    if p is None or not p.user:
        return None
    want = {**p.cost(), "cost_scale": 1.0}
    want.update({f: p.config[f] for f in ("chunked_prefill", "lora_rank_padding") if f in p.config})
    changed = [f for f, v in want.items() if not _same(getattr(sc, f), v)]
    gpu, model = p.fitted_on
    pair = (sc.gpu, sc.model) == (gpu, model)
    if changed and not pair:
        return None
    if changed:
        return CalibrationStatus(
            "modified", "Uncalibrated (modified)",
            f"Your server profile {p.name} was fitted on this GPU and model ({p.source}), but this scenario's "
            f"{', '.join(changed)} {'differs' if len(changed) == 1 else 'differ'} from its fitted "
            f"value{'s' if len(changed) > 1 else ''}: its errors do not apply.", None, p.name)
    if pair:
        return CalibrationStatus(
            "calibrated", f"Calibrated (your fit {p.name}): {user_errors_text(p, short=True)}",
            f"Your own server profile {p.name} ({p.label}): the cost model fitted to your benchmark on {gpu} / "
            f"{model}, {p.source}; errors: {user_errors_text(p)}.", None, p.name)
    return CalibrationStatus(
        "transferred", f"Transferred (your fit {p.name})",
        f"The cost parameters of your own server profile {p.name}, fitted on {gpu} / {model} ({p.source}; errors "
        f"there: {user_errors_text(p)}), are carried over to {sc.gpu} / {sc.model} through the spec-sheet "
        "roofline: no measurement of this pair checks them; the error of such a transfer was measured on another "
        "pair (engine.calibration.error_band).", None, p.name)


def _tp_words(sc: Scenario) -> str:
    return f" at tensor_parallel_size {sc.tensor_parallel_size}" if sc.tensor_parallel_size > 1 else ""


def _tp_caveat(sc: Scenario) -> str:
    """What the band leaves out at tensor_parallel_size > 1: the all-reduce model is assumed, not fitted."""
    if sc.tensor_parallel_size == 1:
        return ""
    return f" Not in the band: the tensor-parallel all-reduces, {allreduce_caveat()}."


def calibration_status(sc: Scenario) -> CalibrationStatus:
    """Whether ``sc``'s cost model is one that was checked against measurements (docs/validation.md).

    In order: "calibrated" (a calibrated preset's GPU, model and fitted values), "transferred" (a calibrated
    preset's fitted values on another GPU or model), "modified" (a calibrated GPU/model pair with other
    fitted values), "uncalibrated".  A scenario on a user's server profile (``engine.presets.register_profile``)
    with that profile's cost fields is "calibrated" on the GPU and model it was fitted on and "transferred"
    elsewhere (``profile`` names it)."""
    user = _user_status(sc)
    if user is not None:
        return user
    diffs: dict[str, list[str]] = {}
    refs: dict[str, Scenario] = {}  # (each calibrated preset built once per call)
    for name, c in CALIBRATED.items():
        ref = refs[name] = Scenario.from_preset(name)
        changed = [f for f in _fields(sc) if not _same(getattr(sc, f), getattr(ref, f))]
        pair = sc.gpu == ref.gpu and sc.model == ref.model and sc.tensor_parallel_size == ref.tensor_parallel_size
        if pair and not changed:
            m = c.errors[:2]
            short = ", ".join(f"{metric} MAPE {mape:.1f} %" for metric, _, mape, _, _ in m)
            return CalibrationStatus("calibrated", f"Calibrated ({name}): {short} ({m[0][1]})",
                                     f"Cost model fitted to {c.against}: {_errors_text(c)}.", name)
        diffs[name] = changed
    for name, changed in diffs.items():
        ref = refs[name]
        if not changed:
            via = f"{sc.server} server profile's " if sc.server else ""
            return CalibrationStatus(
                "transferred", f"Transferred ({name})",
                f"The {via}cost parameters fitted on {name} ({ref.gpu}, {ref.model}) are carried over to {sc.gpu} / "
                f"{sc.model}{_tp_words(sc)} through the spec-sheet roofline: no measurement of this pair checks them; "
                "the error of such a transfer was measured on another pair (engine.calibration.error_band)."
                + _tp_caveat(sc), name)
    for name, changed in diffs.items():
        c, ref = CALIBRATED[name], refs[name]
        if sc.gpu == ref.gpu and sc.model == ref.model:
            return CalibrationStatus(
                "modified", "Uncalibrated (modified)",
                f"The preset {name} is calibrated for this GPU and model ({c.against}), but this scenario's "
                f"{', '.join(changed)} {'differs' if len(changed) == 1 else 'differ'} from its fitted "
                f"value{'s' if len(changed) > 1 else ''}: its errors do not apply.", name)
    how = ("stated per-token times (service_mode fixed)" if sc.service_mode == "fixed" else
           f"a roofline from the spec sheet with default efficiencies (compute {sc.compute_eff:g}, memory "
           f"bandwidth {sc.bw_eff:g})")
    return CalibrationStatus("uncalibrated", "Uncalibrated",
                             f"No measurement of {sc.gpu} / {sc.model} was fitted: the cost model is {how}. The "
                             "calibrated presets are " + ", ".join(CALIBRATED) + " (docs/validation.md).")
