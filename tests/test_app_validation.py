"""The Validation page under AppTest: it renders the reference datasets (scatters, curves, error
tables, targets consistent with docs/validation.md) or says how to generate them; a malformed
benchmark upload shows the engine's error naming the column; a small engine-generated upload fits,
offers the fitted scenario.json, and "Use on the What-if page" loads it into the sidebar controls."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from app import controls
from app import page_validation as P
from engine import Scenario, simulate

ROOT = Path(__file__).resolve().parent.parent
MAIN = str(ROOT / "app" / "main.py")
TIMEOUT = 180  # the first run in a fresh process may compile the Numba kernels
#: Shared scenario of every test: short What-if runs, and a rate that differs from the preset's.
QUERY = {"duration_s": "60", "arrival_rate_rps": "12"}
#: url path (the pages are functions: AppTest.switch_page cannot address them, see tests/test_app_pages.py).
PAGE = "validation"
HAVE_CSVS = all((P.VALIDATION_DIR / ds.csv).is_file() for ds in P.DATASETS)
needs_csvs = pytest.mark.skipif(not HAVE_CSVS, reason="docs/validation/*_errors.csv not generated")

#: benchmark_serving column -> SimResult.summary key.
BENCH_COLUMNS = {"request_throughput": "throughput_req_s", "output_throughput": "throughput_tok_s",
                 "mean_ttft_ms": "ttft_mean_ms", "median_ttft_ms": "ttft_p50_ms", "p99_ttft_ms": "ttft_p99_ms",
                 "mean_tpot_ms": "tpot_mean_ms"}
TRUE_COMPUTE_EFF = 0.45


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def on_page() -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in QUERY.items():
        at.query_params[k] = v
    ok(at.run())
    at._page_hash = calc_hash(PAGE)
    return ok(at.run())


def frames(at: AppTest, *columns: str) -> list[pd.DataFrame]:
    """The page's tables (in page order) that have all ``columns``."""
    return [d.value for d in at.dataframe if set(columns) <= set(d.value.columns)]


def fit(at: AppTest, name: str, data: bytes, base: str = "default", params=("compute_eff",)) -> AppTest:
    at.file_uploader(key="fit_upload").set_value((name, data, "text/csv"))
    at.selectbox(key="fit_base").set_value(base)
    at.multiselect(key="fit_params").set_value(list(params))
    at.button(key="fit_submit").click()
    return ok(at.run())


def benchmark_csv() -> bytes:
    """Three short runs of the default preset at compute_eff 0.45, as benchmark_serving columns plus the
    Scenario fields that describe each run."""
    rows = []
    for rate in (6.0, 12.0, 18.0):
        sc = Scenario.from_preset("default", arrival_rate_rps=rate, duration_s=20.0, warmup_s=5.0,
                                  compute_eff=TRUE_COMPUTE_EFF)
        s = simulate(sc).summary
        rows.append({"date": "20250101-000000", "arrival_rate_rps": rate, "duration_s": 20.0, "warmup_s": 5.0,
                     **{col: s[key] for col, key in BENCH_COLUMNS.items()}})
    return pd.DataFrame(rows).to_csv(index=False).encode()


# ------------------------------------------------------------ reference datasets
@needs_csvs
def test_page_renders_targets_tables_and_charts():
    at = on_page()
    assert at.title[0].value == "Validation"
    # the page ignores the shared scenario: no controls in the sidebar, only its footer
    assert not at.sidebar.get("slider") and len(at.sidebar.children) > 0
    assert not at.error and not at.info
    tiles = {m.label: m.value for m in at.metric}
    (targets,) = frames(at, "dataset", "met")
    summaries = [f for f in frames(at, "mape", "target_status")]
    assert len(summaries) == len(P.DATASETS)
    for ds, summary in zip(P.DATASETS, summaries):
        t = targets[targets["dataset"] == ds.label]
        assert len(t) == 4  # throughput and mean TTFT, train and held-out
        assert set(t["met"]) <= {"met", "NOT met"}
        assert tiles[f"{ds.label}: targets met"] == f"{int((t['met'] == 'met').sum())} of 4"
        table = P.load_errors(P.VALIDATION_DIR / ds.csv)
        assert len(summary) == table.groupby(["metric", "split"]).ngroups
        assert {"mape", "median_ape", "worst_ape", "n"} <= set(summary.columns)
    # one scatter per metric and dataset, S-LoRA suite curves, the vLLM curve
    n_metrics = sum(P.load_errors(P.VALIDATION_DIR / ds.csv)["metric"].nunique() for ds in P.DATASETS)
    assert len(list(at.get("vega_lite_chart"))) >= n_metrics + 2
    assert any(e.label.startswith("Full report") for e in at.expander)
    assert not at.warning, [w.value for w in at.warning]  # CSVs and report agree


@needs_csvs
def test_targets_agree_with_the_report():
    if not P.VALIDATION_MD.is_file():
        pytest.skip("docs/validation.md not generated")
    text = P.VALIDATION_MD.read_text(encoding="utf-8")
    rep, feas = P.report_targets(text)
    tables = {ds.label: P.load_errors(P.VALIDATION_DIR / ds.csv) for ds in P.DATASETS}
    tt = P.targets_table(tables)
    assert len(rep) == len(tt) == 8
    merged = tt.merge(rep, on=["dataset", "split", "metric"], suffixes=("", "_report"))
    assert len(merged) == 8
    assert (merged["met"] == merged["met_report"]).all()
    assert (merged["mape"] - merged["mape_report"]).abs().max() < 6e-4  # the report rounds to 0.1 %
    assert P.report_disagreements(tt, rep) == []
    assert feas is not None and feas["n"] > 0
    flipped = rep.assign(met=~rep["met"])
    assert len(P.report_disagreements(tt, flipped)) == 8


@needs_csvs
def test_error_table_can_be_split_further():
    at = on_page()
    at.selectbox(key="val_slora_s1_by").set_value("gpu")
    ok(at.run())
    s = [f for f in frames(at, "mape", "target_status")][0]
    assert "gpu" in s.columns and set(s["gpu"]) == {"a10g", "a100-80gb"}


def test_missing_files_say_how_to_generate_them(monkeypatch, tmp_path):
    monkeypatch.setattr(P, "VALIDATION_DIR", tmp_path / "validation")
    monkeypatch.setattr(P, "VALIDATION_MD", tmp_path / "validation.md")
    at = on_page()
    infos = [i.value for i in at.info]
    assert len(infos) == 1 + len(P.DATASETS)  # the report and each dataset
    assert all("python -m engine validate" in i for i in infos)
    assert not at.dataframe and not at.error


# ------------------------------------------------------------------ upload and fit
@pytest.mark.parametrize("content, expect", [
    (b"arrival_rate_rps,num_adapters\n4.0,4\n", "request_throughput: missing, and no other metric column"),
    (b"request_throughput,mean_ttft_ms\n4.0,30\nfast,40\n", "request_throughput: row 2: invalid value 'fast'"),
    (b"request_throughput,mean_ttft_ms,gpu\n4.0,30,tpu-v9\n", "row 1: gpu: invalid value 'tpu-v9'"),
    (b"\xff\xfe\x00bad", "not UTF-8"),
])
def test_malformed_upload_names_the_problem(content, expect):
    at = fit(on_page(), "bad.csv", content)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and expect in errors[0] and errors[0].startswith("bad.csv: "), errors
    assert not at.success
    with pytest.raises(KeyError):
        at.button(key="use_fitted")


def test_too_many_rows_is_refused_by_the_work_cap():
    n = P.MAX_FIT_ROWS + 1
    data = pd.DataFrame({"request_throughput": [5.0] * n, "mean_ttft_ms": [40.0] * n}).to_csv(index=False).encode()
    at = fit(on_page(), "big.csv", data)
    assert any(f"at most {P.MAX_FIT_ROWS}" in e.value for e in at.error)


def test_fit_offers_the_fitted_scenario_and_loads_it_into_the_sidebar(media):
    at = fit(on_page(), "bench.csv", benchmark_csv())
    assert not at.error
    assert any("Fitted compute_eff to the 3 rows of bench.csv" in s.value for s in at.success)
    tile = next(m for m in at.metric if m.label == "compute_eff")
    assert abs(float(tile.value) / TRUE_COMPUTE_EFF - 1) < 0.10
    fitted = at.session_state[P.FIT_KEY]
    assert fitted["simulations"] <= P.MAX_FIT_SIMULATIONS
    assert fitted["ignored"] == ["date"]
    (rows,) = frames(at, "row", "rel_error")
    assert len(rows) == 3 * len(BENCH_COLUMNS) and {"row", "arrival_rate_rps", "rel_error"} <= set(rows.columns)
    (summary,) = frames(at, "fitted", "mape")
    assert len(summary) == len(BENCH_COLUMNS) and summary["fitted"].all()
    # the download carries the fitted scenario: the base preset with the fitted value
    sc = Scenario.from_json(media[at.download_button(key="dl_fitted_scenario").proto.url].decode())
    assert sc.compute_eff == pytest.approx(fitted["values"]["compute_eff"])
    assert sc.to_dict() == Scenario.from_preset("default", compute_eff=sc.compute_eff).to_dict()

    # the shared scenario before (not drawn on this page, remembered): the test's URL scenario
    before = at.session_state[controls.STATE_KEY].values
    assert before["arrival_rate_rps"] == 12.0 and before["duration_s"] == 60.0
    at.button(key="use_fitted").click()
    ok(at.run())
    assert at.title[0].value == "What-if"
    assert at.slider(key="arrival_rate_rps").value == 20.0  # the fitted scenario's (the preset's) values
    assert at.slider(key="duration_s").value == sc.duration_s
    assert at.selectbox(key="preset").value == "default"
    assert any("compute_eff" in c.value for c in at.caption)  # the base differs from the preset in it
    assert any("Loaded the scenario fitted to bench.csv" in s.value for s in at.success)
    assert len(at.metric) == 18 and not at.error


def test_fit_on_another_preset_switches_the_sidebar_preset():
    data = json.dumps([{"request_throughput": 7.0, "mean_ttft_ms": 60.0, "mean_tpot_ms": 25.0,
                        "duration_s": 30.0, "warmup_s": 5.0}]).encode()
    at = fit(on_page(), "run.json", data, base="vllm-llama31-8b", params=("step_overhead_ms",))
    assert not at.error and at.success
    at.button(key="use_fitted").click()
    ok(at.run())
    assert at.title[0].value == "What-if"
    assert at.selectbox(key="preset").value == "vllm-llama31-8b"
    assert at.selectbox(key="gpu").value == "h100-64gb"
    assert "vllm" in at.multiselect(key="strategy").value


def test_work_cap_shortens_long_rows():
    sc = Scenario.from_preset("default")  # 600 s at 20 req/s
    short, changed = P.shorten(sc)
    assert changed and short.duration_s == P.FIT_MAX_DURATION_S and short.warmup_s <= 0.25 * short.duration_s
    fast, changed = P.shorten(sc.replace(arrival_rate_rps=200.0, duration_s=60.0, warmup_s=5.0))
    assert changed and fast.arrival_rate_rps * fast.duration_s == pytest.approx(P.FIT_MAX_REQUESTS_PER_ROW)
    same, changed = P.shorten(sc.replace(duration_s=20.0, warmup_s=5.0, drain_s=10.0))
    assert not changed and same == sc.replace(duration_s=20.0, warmup_s=5.0, drain_s=10.0)
    assert P.max_evaluations(3, 3) == P.FIT_MAX_NFEV
    assert P.max_evaluations(50, 3) * 50 * 4 <= P.MAX_FIT_SIMULATIONS


def test_load_levels_group_per_adapter_rates():
    levels = P.load_levels([0.0625, 0.0586, 0.061, 1.0, 0.975, 0.9333])
    assert len(set(levels.values())) == 2
    assert levels[0.0625] == levels[0.0586] == "0.059-0.062 req/s per adapter"
    assert levels[1.0] == levels[0.9333] == "0.93-1 req/s per adapter"
    assert P.load_levels([2.0]) == {2.0: "2 req/s per adapter"} and P.load_levels([]) == {}
