"""The error bases of the planner's band (issue 24 items 1 and 3): docs/validation/profile_errors.csv, written by
``python -m engine validate`` (engine/calibration/bands.py), and ``engine.calibration.error_band``.

Nothing is simulated here: the calibrated rows are recomputed from the per-run validation tables (so they cannot
drift from them), the simulated ones (transfer, uncalibrated) are checked for their structure and run counts."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine import Scenario
from engine.calibration import BASES, calibration_status, error_band, error_bases
from engine.calibration import bands as B

ROOT = Path(__file__).resolve().parent.parent
VALIDATION = ROOT / "docs" / "validation"
STATS = ["n_runs", "n_dropped", "mape", "p50_abs", "p90_abs", "worst_abs"]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return error_bases()


def _stats(ae: pd.Series) -> dict:
    """The statistics, computed here independently of bands.basis_stats."""
    fin = ae[np.isfinite(ae)]
    return {"n_runs": len(fin), "n_dropped": len(ae) - len(fin), "mape": fin.mean(), "p50_abs": fin.median(),
            "p90_abs": float(np.quantile(fin, 0.9)), "worst_abs": fin.max()}


def _expected_calibrated() -> dict[tuple[str, str], dict]:
    out = {}
    v = pd.read_csv(VALIDATION / "vllm_errors.csv")
    v = v[v.split == "held-out"]
    for m in ("request_throughput", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms"):
        out[("calibrated:vllm", m)] = _stats(v[v.metric == m].rel_error.abs())
    s = pd.read_csv(VALIDATION / "slora_s1_errors.csv")
    s = s[(s.gpu == "a10g") & (s.split == "held-out")]
    for m in ("request_throughput", "mean_ttft_ms"):
        out[("calibrated:slora", m)] = _stats(s[s.metric == m].rel_error.abs())
    w = s.pivot(index="case", columns="metric", values=["measured", "simulated"])
    meas = w["measured"]["mean_latency_ms"] - w["measured"]["mean_ttft_ms"]
    sim = w["simulated"]["mean_latency_ms"] - w["simulated"]["mean_ttft_ms"]
    out[("calibrated:slora", "mean_decode_ms")] = _stats((sim / meas - 1).abs())
    return out


def test_calibrated_rows_are_the_validation_tables_statistics(table):
    expected = _expected_calibrated()
    got = table[table.basis.str.startswith("calibrated:")].set_index(["basis", "metric"])
    assert set(got.index) == set(expected)
    for key, exp in expected.items():
        for col, val in exp.items():
            assert got.loc[key, col] == pytest.approx(val, rel=1e-9, abs=1e-12), (key, col)


def test_the_table_has_every_basis_with_runs_and_finite_statistics(table):
    assert list(table.columns) == B.COLUMNS
    assert list(dict.fromkeys(table.basis)) == list(BASES)
    assert not table.duplicated(["basis", "metric"]).any()
    for b in BASES:
        rows = table[table.basis == b]
        assert "request_throughput" in set(rows.metric) and set(rows.metric) & set(B.LATENCY_METRICS), b
    assert (table.n_runs > 0).all() and (table.n_dropped >= 0).all()
    for col in ("mape", "p50_abs", "p90_abs", "worst_abs"):
        assert np.isfinite(table[col]).all(), col
        assert (table[col] >= 0).all(), col
    assert (table.p50_abs <= table.p90_abs + 1e-12).all() and (table.p90_abs <= table.worst_abs + 1e-12).all()
    assert (table.mape <= table.worst_abs + 1e-12).all()
    assert ((table.sim_overloaded_share.isna()) | table.sim_overloaded_share.between(0, 1)).all()


def test_the_simulated_bases_cover_the_runs_they_name(table):
    v = pd.read_csv(VALIDATION / "vllm_errors.csv")
    n_vllm = v[v.metric == "request_throughput"].case.nunique()
    s = pd.read_csv(VALIDATION / "slora_s1_errors.csv")
    n_a100 = s[(s.gpu == "a100-80gb") & (s.metric == "request_throughput")].case.nunique()
    uncal = table[table.basis == B.UNCAL].set_index("metric")
    tr = table[table.basis == B.TRANSFER].set_index("metric")
    for m in ("request_throughput", "mean_ttft_ms", "mean_tpot_ms"):
        assert uncal.loc[m, "n_runs"] + uncal.loc[m, "n_dropped"] == n_vllm, m   # all splits: nothing fitted
    for m in ("request_throughput", "mean_ttft_ms", "mean_decode_ms"):
        assert tr.loc[m, "n_runs"] + tr.loc[m, "n_dropped"] == n_a100 == 4, m


PRESETS = {"vllm-llama31-8b": "calibrated", "seed3-llama31-8b-80gb": "transferred", "default": "transferred",
           "seed1-rtx3090": "uncalibrated"}


@pytest.fixture(scope="module")
def bands(table) -> dict[str, dict]:
    return {p: error_band(Scenario.from_preset(p)) for p in PRESETS}


def test_bands_widen_from_calibrated_to_transferred_to_uncalibrated(bands):
    cal, tr, unc = (bands[p] for p in ("vllm-llama31-8b", "seed3-llama31-8b-80gb", "seed1-rtx3090"))
    assert bands["default"]["band"] == tr["band"]  # the default rests on the transferred vLLM profile
    for key in ("throughput_p90", "latency_p90", "band"):
        assert 0 < cal[key] <= tr[key] <= unc[key], key
    for b in bands.values():
        assert b["band"] == max(b["throughput_p90"], b["latency_p90"])


def test_each_band_rests_on_the_basis_its_status_names(bands, table):
    for preset, kind in PRESETS.items():
        b = bands[preset]
        assert b["status"] == kind == calibration_status(Scenario.from_preset(preset)).kind
        assert b["basis"] in BASES and b["basis"] in b["note"], (preset, b)
        assert f"±{100 * b['band']:.0f} %" in b["note"]
    assert bands["vllm-llama31-8b"]["basis"] == "calibrated:vllm"
    assert bands["seed3-llama31-8b-80gb"]["basis"] == B.TRANSFER
    assert bands["default"]["basis"] == B.TRANSFER  # the vLLM profile on another GPU (issue 24: the default)
    assert bands["seed1-rtx3090"]["basis"] == B.UNCAL
    # the calibrated band is the vLLM held-out p90s themselves
    v = table[table.basis == "calibrated:vllm"].set_index("metric").p90_abs
    cal = bands["vllm-llama31-8b"]
    assert cal["throughput_p90"] == v["request_throughput"] and cal["latency_p90"] == v["mean_tpot_ms"]
    assert "vllm-llama31-8b" in cal["note"] and "held-out" in cal["note"]
    # the S-LoRA profile: its own basis (decode time where TPOT is not measured)
    sl = error_band(Scenario.from_preset("slora-a10g-s1"))
    s = table[table.basis == "calibrated:slora"].set_index("metric").p90_abs
    assert sl["basis"] == "calibrated:slora" and sl["latency_p90"] == s["mean_decode_ms"]


def test_a_status_passed_in_is_used_as_given(bands):
    """``error_band(sc, status=...)`` (a caller that has the status already: the dashboard's badge) gives what
    ``error_band(sc)`` gives with the scenario's own status, and follows the status it is given."""
    for preset in PRESETS:
        sc = Scenario.from_preset(preset)
        assert error_band(sc, status=calibration_status(sc)) == bands[preset], preset
    sc = Scenario.from_preset("seed1-rtx3090")  # uncalibrated; told it is calibrated as vllm-llama31-8b:
    told = calibration_status(Scenario.from_preset("vllm-llama31-8b"))
    assert error_band(sc, status=told)["basis"] == "calibrated:vllm" != bands["seed1-rtx3090"]["basis"]


def test_in_sample_calibrations_and_modified_scenarios_are_not_narrower(bands):
    a100 = error_band(Scenario.from_preset("slora-a100-80-s1"))
    assert a100["status"] == "calibrated" and a100["basis"] == B.TRANSFER
    assert a100["band"] >= error_band(Scenario.from_preset("slora-a10g-s1"))["band"]
    mod = error_band(Scenario.from_preset("vllm-llama31-8b", compute_eff=0.5))
    assert mod["status"] == "modified" and mod["basis"] == B.UNCAL and mod["band"] == bands["seed1-rtx3090"]["band"]


def test_a_missing_table_gives_no_band_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(B, "PROFILE_ERRORS_CSV", tmp_path / "profile_errors.csv")
    b = error_band(Scenario.from_preset("default"))
    assert math.isnan(b["band"]) and "python -m engine validate" in b["note"]


def test_decode_time_is_latency_minus_ttft():
    t = pd.DataFrame([{"case": "a", "metric": "mean_latency_ms", "measured": 100.0, "simulated": 90.0},
                      {"case": "a", "metric": "mean_ttft_ms", "measured": 20.0, "simulated": 30.0},
                      {"case": "b", "metric": "mean_ttft_ms", "measured": 1.0, "simulated": 1.0}])
    t["rel_error"] = t.simulated / t.measured - 1
    d = B.with_decode(t)
    row = d[d.metric == "mean_decode_ms"]
    assert len(row) == 1 and row.measured.iloc[0] == 80.0 and row.simulated.iloc[0] == 60.0
    assert row.rel_error.iloc[0] == pytest.approx(-0.25)


def test_the_report_section_shows_the_table():
    md = (ROOT / "docs" / "validation.md").read_text()
    assert B.SECTION_TITLE in md
    sec = md[md.index(B.SECTION_TITLE):]
    sec = sec[:sec.find("\n## ", 1)] if "\n## " in sec[1:] else sec
    t = error_bases()
    for _, r in t.iterrows():
        m = re.search(rf"\| {re.escape(r.basis)} \| {r.metric} \| {int(r.n_runs)} \| (\d+) \|([^|]*)\|([^|]*)\|"
                      rf"([^|]*)\|", sec)
        assert m, (r.basis, r.metric)
        assert m.group(4).strip() == f"{100 * r.p90_abs:.1f} %", (r.basis, r.metric)
    for b in BASES:
        assert f"- `{b}`:" in sec
