"""The vLLM server profile at vLLM's LoRA rank padding (issue 27 item 4; docs/model.md 5.5).

vLLM's LoRA kernels run every token at --max-lora-rank ("max_rank"); the vLLM profile carries that padding and its
fit (docs/validation.md, docs/validation/fitted_params.json) was made under it on the same 30 training runs as the
earlier fit at "none".  Checked: the profile, the calibrated preset, the reference runs and the seed-3 preset that
copies the fit all run at "max_rank" (the slora profile keeps its strategy's default); the fitted values the profile
and the preset use are those of fitted_params.json; the committed per-run errors were simulated at "max_rank" (a
training run reproduces them bit for bit, and at "none" it does not); the held-out errors stay within what was
measured, and within 1 pp (median and p90 of |error|, per metric) of the fit at "none" they replaced, the rule the
switch was decided by; the one held-out run that makes the mean-TTFT MAPE miss its target is the near-saturation
run named in docs/model.md 5.5."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine import STRATEGIES, Scenario
from engine import calibration as C
from engine.calibration import calibration_status
from engine.presets import SCENARIOS
from engine.presets.servers import (
    PROFILES,
    VLLM_COST_FIELDS,
    follow_profile,
    preset_fields,
    profile_fields,
    register_profile,
)

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = ROOT / "docs" / "validation"

#: The fit at "none" (engine 0.6, docs/validation.md as generated on commit 03e2108) on the 101 held-out runs:
#: (median, 90th percentile) of |simulated / measured - 1| in %, per metric (docs/model.md 5.5's table).
NONE_FIT_HELD_OUT = {"request_throughput": (2.5, 18.1), "mean_tpot_ms": (10.9, 50.6), "mean_ttft_ms": (6.0, 28.7),
                     "median_ttft_ms": (9.4, 45.0), "p99_ttft_ms": (19.7, 42.7)}
#: How much worse (pp) than the fit at "none" the held-out median and p90 may be: measured at most 0.8 pp (median
#: TTFT's p90, 45.0 -> 45.8 %).
DECISION_MARGIN_PP = 1.0
#: The refit's held-out (median, p90) |error| in %, measured (docs/validation/vllm_errors.csv), rounded up to 0.5 pp.
HELD_OUT_BOUNDS = {"request_throughput": (3.0, 19.0), "mean_tpot_ms": (10.0, 50.0), "mean_ttft_ms": (7.0, 29.5),
                   "median_ttft_ms": (9.0, 46.0), "p99_ttft_ms": (17.5, 40.5)}
#: Held-out MAPE bounds in % (measured 6.1 and 17.9), and the mean-TTFT MAPE without its worst run (measured 12.2).
HELD_OUT_MAPE_BOUNDS = {"request_throughput": 6.5, "mean_tpot_ms": 18.0}
TTFT_MAPE_WITHOUT_OUTLIER = 12.5
OUTLIER = "loras=32 cpu=32 rank<=32 rate=30.4"  # 32 slots, 32 adapters, 30.4 req/s: simulated just under capacity


def _held_out() -> pd.DataFrame:
    t = pd.read_csv(VALIDATION / "vllm_errors.csv")
    return t[t["split"] == "held-out"].assign(ape=lambda d: 100 * d["rel_error"].abs())


def _median_p90(t: pd.DataFrame, metric: str) -> tuple[float, float]:
    a = t.loc[t["metric"] == metric, "ape"].to_numpy(float)
    assert len(a) == 101 and np.isfinite(a).all(), metric
    return float(np.median(a)), float(np.percentile(a, 90))


# ------------------------------------------------------------------------------------------ where the padding is
def test_the_vllm_profile_preset_and_reference_runs_pad_to_max_lora_rank():
    assert C.VLLM_LORA_RANK_PADDING == "max_rank"
    assert PROFILES["vllm"].config["lora_rank_padding"] == "max_rank"
    for gpu in ("h100-64gb", "h100-80gb", "a100-80gb", "a10g"):
        assert profile_fields("vllm", gpu)["lora_rank_padding"] == "max_rank", gpu
    assert SCENARIOS["vllm-llama31-8b"]["lora_rank_padding"] == "max_rank"
    assert SCENARIOS["seed3-llama31-8b-80gb"]["lora_rank_padding"] == "max_rank"  # copies the fit
    # every strategy compared on the vLLM server runs its kernels: the profile's padding, not the strategy's
    for name in STRATEGIES:
        sc = Scenario.from_preset("default", strategy=name)
        assert sc.server == "vllm" and sc.lora_rank_padding_mode() == "max_rank", name
    # the Policy defaults stay "none" (tests/test_lora_rank_cost.py); the slora profile keeps them
    assert PROFILES["slora"].config["lora_rank_padding"] == "auto"
    assert Scenario(**{**profile_fields("slora", "a10g"), "strategy": "slora"}).lora_rank_padding_mode() == "none"


def test_changing_the_server_changes_the_padding_with_it():
    base = preset_fields("default")
    slora = follow_profile({**base, "server": "slora"}, base)
    assert (base["lora_rank_padding"], slora["lora_rank_padding"]) == ("max_rank", "auto")
    assert follow_profile({**slora, "server": "vllm"}, slora)["lora_rank_padding"] == "max_rank"
    kept = follow_profile({**base, "lora_rank_padding": "none", "server": "slora"}, base, keep=("lora_rank_padding",))
    assert kept["lora_rank_padding"] == "none"  # set by the user: stays


def test_reference_runs_take_the_padding_they_are_given():
    df = pd.read_csv(C.REF_DIR / "vllm_llama31_8b_multilora_runs.csv")
    row = int(np.flatnonzero(df["status"] == "ok")[0])
    (case,) = C.vllm_cases(rows=[row])
    assert case.scenario.lora_rank_padding == "max_rank"
    (case,) = C.vllm_cases(rows=[row], lora_rank_padding="none")
    assert case.scenario.lora_rank_padding_mode() == "none"


def test_calibration_status_counts_the_padding_as_fitted():
    assert calibration_status(Scenario.from_preset("vllm-llama31-8b")).kind == "calibrated"
    assert calibration_status(Scenario.from_preset("vllm-llama31-8b", lora_rank_padding="none")).kind == "modified"
    assert calibration_status(Scenario.from_preset("default")).kind == "transferred"
    assert calibration_status(Scenario.from_preset("default", lora_rank_padding="auto")).kind != "transferred"
    assert calibration_status(Scenario.from_preset("seed3-llama31-8b-80gb")).kind == "transferred"


def test_a_user_profile_on_the_vllm_server_is_modified_by_another_padding():
    cost = PROFILES["vllm"].cost()
    p = register_profile("padding-check", "", "vllm", cost, "h100-80gb", "llama-3.1-8b",
                         {"request_throughput": {"p90_abs": 0.02, "n_runs": 3, "split": "held-out"}})
    sc = Scenario(**{**profile_fields(p.name, "h100-80gb"), "gpu": "h100-80gb", "model": "llama-3.1-8b",
                     "strategy": "vllm"})
    assert sc.lora_rank_padding == "max_rank" and calibration_status(sc).kind == "calibrated"
    assert calibration_status(sc.replace(lora_rank_padding="none")).kind == "modified"


# ------------------------------------------------------------------------------- the fitted values in use
def test_profile_and_preset_use_the_refit_of_the_report():
    fitted = json.loads((VALIDATION / "fitted_params.json").read_text())["vllm"]
    assert set(fitted) == set(C.VLLM_PARAMS)
    preset = SCENARIOS["vllm-llama31-8b"]
    assert {k: preset[k] for k in fitted} == pytest.approx(fitted, rel=1e-12)
    cost = PROFILES["vllm"].cost()
    assert {k: cost[k] for k in VLLM_COST_FIELDS} == pytest.approx({k: fitted[k] for k in VLLM_COST_FIELDS},
                                                                   rel=1e-12)
    # validate's fit starts from VLLM_START, the longer fit at "max_rank"; it ended there (no better point in 3 steps)
    assert C.VLLM_START == pytest.approx(fitted, rel=1e-12)


def test_the_committed_errors_were_simulated_at_max_rank():
    """A training run (ranks 8 and 16, so the padding acts) reproduces docs/validation/vllm_errors.csv bit for bit
    at "max_rank" with the preset's values; at "none" its mean TPOT is about 1 % lower."""
    rows = pd.read_csv(VALIDATION / "vllm_errors.csv")
    name = "loras=64 cpu=64 rank<=16 rate=3.775"
    rep = rows[rows["case"] == name].set_index("metric")
    (case,) = C.vllm_cases(rows=[int(rep["src_row"].iloc[0]) - 2])
    assert case.name == name and C._vllm_train(case)
    vals = {p: Scenario.from_preset("vllm-llama31-8b").to_dict()[p] for p in C.VLLM_PARAMS}
    m = C.simulate_case(case, vals)
    for metric in ("request_throughput", "mean_ttft_ms", "mean_tpot_ms"):
        assert m[metric] == rep.loc[metric, "simulated"], metric
    n = C.simulate_case(dataclasses.replace(case, scenario=case.scenario.replace(lora_rank_padding="none")), vals)
    assert n["mean_tpot_ms"] < m["mean_tpot_ms"] * (1 - 0.005)


# ------------------------------------------------------------------------------------- the held-out errors
@pytest.mark.parametrize("metric", list(HELD_OUT_BOUNDS))
def test_held_out_errors_within_what_was_measured(metric):
    med, p90 = _median_p90(_held_out(), metric)
    assert med <= HELD_OUT_BOUNDS[metric][0] and p90 <= HELD_OUT_BOUNDS[metric][1], (med, p90)


@pytest.mark.parametrize("metric", list(NONE_FIT_HELD_OUT))
def test_the_switch_costs_at_most_a_point_of_median_or_p90_error(metric):
    """The decision rule (docs/model.md 5.5): "max_rank" is what vLLM does, kept unless the held-out errors get
    materially worse than the fit at "none": median and p90 |error| within DECISION_MARGIN_PP of it."""
    med, p90 = _median_p90(_held_out(), metric)
    none_med, none_p90 = NONE_FIT_HELD_OUT[metric]
    assert med <= none_med + DECISION_MARGIN_PP and p90 <= none_p90 + DECISION_MARGIN_PP, (med, p90)


def test_held_out_mapes_and_the_one_run_that_breaks_the_ttft_target():
    t = _held_out()
    for metric, bound in HELD_OUT_MAPE_BOUNDS.items():
        assert t.loc[t["metric"] == metric, "ape"].mean() <= bound, metric
    ttft = t[t["metric"] == "mean_ttft_ms"]
    worst = ttft.loc[ttft["ape"].idxmax()]
    assert worst["case"] == OUTLIER and bool(worst["measured_stable"])  # measured: kept up, TTFT 555 ms
    assert ttft["ape"].mean() > 25.0  # the target (25 %) is missed, by this run: see docs/validation.md
    assert ttft.loc[ttft["case"] != OUTLIER, "ape"].mean() <= TTFT_MAPE_WITHOUT_OUTLIER
    assert math.isclose(ttft["ape"].mean(), 41.0, abs_tol=0.05)  # the figure docs/model.md 5.5 states
