"""The calibration badge (issue 15, item 8): engine.calibration.calibration_status says whether a scenario's
cost model is a calibrated preset's, and its error figures are those of docs/validation/*_errors.csv."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import goto
from streamlit.testing.v1 import AppTest

from engine import Scenario, simulate
from engine.calibration import CALIBRATED, FITTED_FIELDS, calibration_status, error_band
from engine.limits import FLOAT_RANGES
from engine.presets import SCENARIOS
from engine.scenario import ENUMS

ROOT = Path(__file__).resolve().parent.parent
VALIDATION = ROOT / "docs" / "validation"
LABELS = {"request throughput": "request_throughput", "mean TTFT": "mean_ttft_ms", "median TTFT": "median_ttft_ms",
          "mean TPOT": "mean_tpot_ms"}


def _csv_errors(preset: str) -> pd.DataFrame:
    if preset.startswith("slora"):
        d = pd.read_csv(VALIDATION / "slora_s1_errors.csv")
        d = d[d.gpu == Scenario.from_preset(preset).gpu]
    else:
        d = pd.read_csv(VALIDATION / "vllm_errors.csv")
    d = d.assign(ae=d.rel_error.abs() * 100)
    return d.groupby(["metric", "split"]).ae.agg(["mean", "max", "count"])


@pytest.mark.parametrize("preset", ["slora-a10g-s1", "slora-a100-80-s1", "vllm-llama31-8b"])
def test_error_figures_are_those_of_the_validation_tables(preset):
    table = _csv_errors(preset)
    for metric, split, mape, worst, n in CALIBRATED[preset].errors:
        row = table.loc[(LABELS[metric], split)]
        assert mape == pytest.approx(row["mean"], abs=0.051), (metric, split)
        assert worst == pytest.approx(row["max"], abs=0.051), (metric, split)
        assert n == row["count"], (metric, split)


def test_seed3_points_error_figures():
    errs = []
    for n, published in [(1, 1935.0), (10, 1489.0), (1000, 884.0)]:
        r = simulate(Scenario.from_preset("seed3-llama31-8b-80gb-calibrated", num_adapters=n))
        errs.append(abs(r.summary["throughput_tok_s"] / published - 1) * 100)
    (_, _, mape, worst, n), = CALIBRATED["seed3-llama31-8b-80gb-calibrated"].errors
    assert n == 3 and mape == pytest.approx(sum(errs) / 3, abs=0.051) and worst == pytest.approx(max(errs), abs=0.051)


def test_every_calibrated_preset_exists_and_is_calibrated():
    assert set(CALIBRATED) <= set(SCENARIOS)
    for name in CALIBRATED:
        st = calibration_status(Scenario.from_preset(name))
        assert st.kind == "calibrated" and st.preset == name and name in st.label
        assert "MAPE" in st.label and "MAPE" in st.detail


@pytest.mark.parametrize("preset", ["seed1-rtx3090", "kv-qwen2-0.5b-heavy", "kv-qwen2-1.5b-heavy_mixed"])
def test_uncalibrated_presets_say_so(preset):
    st = calibration_status(Scenario.from_preset(preset))
    assert st.kind == "uncalibrated" and st.preset is None and "MAPE" not in st.detail


@pytest.mark.parametrize("preset", ["default", "a100-light", "azure-conv-2023"])
def test_server_profile_presets_say_they_are_transferred(preset):
    """The workload presets run on the vLLM profile, fitted on an H100 64 GB: transferred to their GPU."""
    st = calibration_status(Scenario.from_preset(preset))
    assert st.kind == "transferred" and st.preset == "vllm-llama31-8b" and "Transferred" in st.label
    assert "vllm server profile" in st.detail and "h100-64gb" in st.detail


@pytest.mark.parametrize("field", [f for f in FITTED_FIELDS if f not in ("service_mode", "max_in_system")])
def test_changing_a_fitted_parameter_drops_the_calibration(field):
    sc = Scenario.from_preset("slora-a10g-s1")
    value = getattr(sc, field)
    if isinstance(value, str):  # the cost model or the scheduling it was fitted under
        value = next(v for v in ENUMS[field] if v != value)
    else:  # a small change inside the field's range (an efficiency of 1 cannot grow)
        value = value - 0.01 if value + 0.01 > FLOAT_RANGES.get(field, (0, False, math.inf, ""))[2] else value + 0.01
    st = calibration_status(sc.replace(**{field: value}))
    assert st.kind == "modified" and field in st.detail and "do not apply" in st.detail


def test_other_controls_keep_the_calibration_but_another_gpu_does_not():
    sc = Scenario.from_preset("vllm-llama31-8b")
    assert calibration_status(sc.replace(arrival_rate_rps=3.0, num_adapters=64, strategy="naive")).kind == "calibrated"
    moved = calibration_status(sc.replace(gpu="a100-80gb"))
    assert moved.kind == "transferred" and "a100-80gb" in moved.detail


# --------------------------------------------------------------- the badge on every scenario page
def _badges(at: AppTest) -> list:
    return [m for m in at.markdown if "-badge[" in m.value and ("alibrated" in m.value or "Transferred" in m.value)]


@pytest.mark.parametrize("page", ["", "sweeps", "crossover", "plan"])
def test_badge_on_every_scenario_page(page):
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=180)
    at.query_params["duration_s"] = "60"
    at.query_params["preset"] = "slora-a10g-s1"
    if page == "plan":  # its advanced path plans the sidebar's scenario (the form's badge: test_app_plan_badge.py)
        at.query_params["plan_mode"] = "sidebar"
    at.run()
    if page:
        goto(at, page)
        at.run()
    assert not at.exception
    badge, = _badges(at)
    assert ":green-badge[" in badge.value and "Calibrated (slora-a10g-s1)" in badge.value
    assert "MAPE 2.3 %" in badge.value and "held-out" in badge.value
    assert "S-LoRA setting S1" in badge.help


def test_badge_on_the_default_is_transferred_with_its_band():
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=180)
    at.query_params["duration_s"] = "60"
    at.run()
    badge, = _badges(at)
    band = error_band(Scenario.from_preset("default"))["band"]
    assert ":orange-badge[" in badge.value and "Transferred" in badge.value, badge.value
    assert f"error band ±{band:.0%}" in badge.value and "h100-80gb" in badge.help


def test_max_in_system_does_not_count_for_closed_loop_clients_or_a_server_without_the_cap():
    """max_in_system refuses open-loop arrivals only: a closed-loop scenario keeps the calibration without it;
    so does an open loop without the cap (0: a server as deployed; the cap is a hypothesis about the benchmark's
    overloaded runs). Another cap than the fitted one is a modification."""
    sc = Scenario.from_preset("vllm-llama31-8b")
    assert calibration_status(sc.replace(arrival_process="closed", max_in_system=0)).kind == "calibrated"
    assert calibration_status(sc.replace(max_in_system=0)).kind == "calibrated"
    assert calibration_status(sc.replace(max_in_system=1000)).kind == "modified"


def test_transferred_fit_wins_over_another_fit_of_the_same_pair():
    """The seed-3 preset carries vllm-llama31-8b's fitted values on h100-80gb, the pair seed3-...-calibrated was
    fitted on with other values: its status names the fit it carries."""
    st = calibration_status(Scenario.from_preset("seed3-llama31-8b-80gb"))
    assert st.kind == "transferred" and st.preset == "vllm-llama31-8b"
    roof = calibration_status(Scenario.from_preset("seed3-llama31-8b-80gb-roofline"))
    assert roof.kind == "modified" and roof.preset == "seed3-llama31-8b-80gb-calibrated"
