"""The Validation page under AppTest: it renders the reference datasets (scatters, curves, error
tables; the targets from docs/validation/targets.json, with median, p90 and worst |error| and the run behind a
large worst, never parsed from docs/validation.md) or says how to generate them; a malformed
benchmark upload shows the engine's error naming the column; a small engine-generated upload fits,
offers the fitted scenario.json, and "Use on the What-if page" loads it into the sidebar controls.
Benchmark tools' result files (tests/fixtures/tools): an upload shows each run's traffic and prefills the
server form; an unknown or malformed file is an error naming it; a small fit shows the errors per split,
the TTFT distributions, the bound and 25 % flags, the provenance and the same command line (which fits the
same values); "Open on What-if" / "Open on Plan" land there with the fitted scenario."""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import goto, kpi_tables
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from app import controls
from app import page_validation as P
from engine import Scenario, simulate
from engine import calibration as C

ROOT = Path(__file__).resolve().parent.parent
MAIN = str(ROOT / "app" / "main.py")
TIMEOUT = 180  # the first run in a fresh process may compile the Numba kernels
#: Shared scenario of every test: short What-if runs, and a rate that differs from the preset's.
QUERY = {"duration_s": "60", "arrival_rate_rps": "12"}
#: url path (the pages are functions: AppTest.switch_page cannot address them, see tests/test_app_pages.py).
PAGE = "validation"
HAVE_CSVS = all((P.VALIDATION_DIR / ds.csv).is_file() for ds in P.DATASETS)
needs_csvs = pytest.mark.skipif(not HAVE_CSVS, reason="docs/validation/*_errors.csv not generated")
HAVE_TARGETS = (P.VALIDATION_DIR / P.TARGETS_NAME).is_file()
needs_targets = pytest.mark.skipif(not (HAVE_CSVS and HAVE_TARGETS), reason="docs/validation/targets.json not generated")

#: benchmark_serving column -> SimResult.summary key.
BENCH_COLUMNS = {"request_throughput": "throughput_req_s", "output_throughput": "throughput_tok_s",
                 "mean_ttft_ms": "ttft_mean_ms", "median_ttft_ms": "ttft_p50_ms", "p99_ttft_ms": "ttft_p99_ms",
                 "mean_tpot_ms": "tpot_mean_ms"}
#: The compute efficiency the synthetic benchmark runs at; the fit starts from the base's (the default's vLLM
#: profile: 0.3046 since issue 24).  Up to engine 0.5 the truth was 0.45 (the start then 0.6, the roofline
#: default); from 0.3046 the fit does not reach 0.45 on the default's workload (lognormal lengths, decode-bound:
#: prefill is a few ms of a 40 ms TTFT there, and the simulated objective has a bump within the first
#: finite-difference step, so it stops at the start; measured with rates 1-18 req/s).  At 0.15 prefill weighs
#: twice as much and the fit recovers it within 1 % (3, 6, 9 req/s): the premise, a truth the data identify.
TRUE_COMPUTE_EFF = 0.15


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
    """Three short runs of the default preset at compute_eff ``TRUE_COMPUTE_EFF``, as benchmark_serving columns plus
    the Scenario fields that describe each run: half, once and 1.5 times the default's rate (6 req/s since issue
    24; up to engine 0.5 the runs were at 6, 12 and 18 req/s around its 16 req/s)."""
    rows = []
    rate0 = Scenario.from_preset("default").arrival_rate_rps
    for rate in (0.5 * rate0, rate0, 1.5 * rate0):
        sc = Scenario.from_preset("default", arrival_rate_rps=rate, duration_s=20.0, warmup_s=5.0,
                                  compute_eff=TRUE_COMPUTE_EFF)
        s = simulate(sc).summary
        rows.append({"date": "20250101-000000", "arrival_rate_rps": rate, "duration_s": 20.0, "warmup_s": 5.0,
                     **{col: s[key] for col, key in BENCH_COLUMNS.items()}})
    return pd.DataFrame(rows).to_csv(index=False).encode()


# ------------------------------------------------------------ reference datasets
@needs_targets
def test_page_renders_targets_tables_and_charts():
    at = on_page()
    assert at.title[0].value == "Validation"
    # the page ignores the shared scenario: no controls in the sidebar, only its footer
    assert not at.sidebar.get("slider") and len(at.sidebar.children) > 0
    assert not at.error and not at.info
    tiles = {m.label: m.value for m in at.metric}
    doc = P.load_targets(P.VALIDATION_DIR / P.TARGETS_NAME)
    (targets,) = frames(at, "dataset", "met")
    # MAPE, median, p90 and worst |error| side by side, with the run behind the worst
    assert {"mape", "median_ape", "p90_ape", "worst_ape", "worst_case", "no_finite_sim", "target"} <= set(targets.columns)
    assert len(targets) == len(doc["targets"]) == 8
    for row, rec in zip(targets.itertuples(), doc["targets"]):
        assert (row.dataset, row.split, row.worst_case) == (rec["label"], rec["split"], rec["worst_case"])
        for col, key in (("mape", "mape_pct"), ("median_ape", "median_pct"), ("p90_ape", "p90_pct"),
                         ("worst_ape", "worst_pct")):
            v = getattr(row, col)
            assert (math.isnan(v) and rec[key] is None) or v == pytest.approx(rec[key] / 100)
        assert row.met == ("met" if rec["met"] else "NOT met")
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
    assert tiles["vLLM start-up feasibility"] == f"{doc['feasibility']['accuracy_pct'] / 100:.1%}"
    assert tiles["vLLM runs: keeps up"] == f"{doc['keeps_up']['accuracy_pct'] / 100:.1%}"
    # a met target with a large worst error names the run behind it, and why the target is met anyway
    big = [r for r in doc["targets"] if r["met"] and r["worst_pct"] and r["worst_pct"] > 2 * r["target_mape_pct"]]
    assert big  # the vLLM held-out mean TTFT: MAPE 23 %, worst about 1060 %
    captions = [c.value for c in at.caption]
    for r in big:
        (line,) = [c for c in captions if f"`{r['worst_case']}`" in c and "the target is on MAPE" in c
                   and r["split"] in c and r["label"] in c]
        assert f"{r['worst_pct']:.1f} % off" in line and f"p90 {r['p90_pct']:.1f} %" in line
    # one scatter per metric and dataset, S-LoRA suite curves, the vLLM curve
    n_metrics = sum(P.load_errors(P.VALIDATION_DIR / ds.csv)["metric"].nunique() for ds in P.DATASETS)
    assert len(list(at.get("vega_lite_chart"))) >= n_metrics + 2
    (exp,) = [e for e in at.expander if e.label.startswith("Full report")]
    assert any(f"on engine commit {doc['header']['commit']}" in c.value for c in exp.caption)
    assert not at.warning, [w.value for w in at.warning]  # full mode, targets.json and the CSVs agree


def _garble(text: str) -> str:
    """docs/validation.md without anything a parser of its targets could use."""
    out = []
    for line in text.splitlines():
        if re.search(r"MAPE|MET|Generated by|feasibility|accuracy", line):
            continue
        out.append(line)
    return "\n".join(out)


@needs_targets
def test_targets_come_from_the_json_not_the_report(monkeypatch, tmp_path):
    """The report with its target lines, header and feasibility lines removed changes nothing on the page but the
    report itself; a changed targets.json changes the page (and the page says it disagrees with the CSVs)."""
    before = on_page()
    md = tmp_path / "validation.md"
    md.write_text(_garble(P.VALIDATION_MD.read_text(encoding="utf-8")), encoding="utf-8")
    assert "MAPE" not in md.read_text()
    monkeypatch.setattr(P, "VALIDATION_MD", md)
    at = on_page()
    assert not at.error and not at.warning and not at.info
    assert [(m.label, m.value) for m in at.metric] == [(m.label, m.value) for m in before.metric]
    (t0,) = frames(before, "dataset", "met")
    (t1,) = frames(at, "dataset", "met")
    pd.testing.assert_frame_equal(t0, t1)
    assert [c.value for c in at.caption if "the target is on MAPE" in c.value] == \
        [c.value for c in before.caption if "the target is on MAPE" in c.value]
    assert any(e.label.startswith("Full report") for e in at.expander)

    # now the JSON, in a copy of the folder: one target flipped to NOT met with a MAPE of 99 %
    d = tmp_path / "validation"
    shutil.copytree(P.VALIDATION_DIR, d)
    doc = json.loads((d / P.TARGETS_NAME).read_text())
    doc["targets"][0].update(met=False, mape_pct=99.0)
    doc["header"]["mode"] = "quick"
    (d / P.TARGETS_NAME).write_text(json.dumps(doc))
    monkeypatch.setattr(P, "VALIDATION_DIR", d)
    at = on_page()
    (t2,) = frames(at, "dataset", "met")
    assert t2["met"][0] == "NOT met" and t2["mape"][0] == pytest.approx(0.99)
    label = doc["targets"][0]["label"]
    assert {m.label: m.value for m in at.metric}[f"{label}: targets met"] == "3 of 4"
    warnings = [w.value for w in at.warning]
    assert any("generated in quick mode" in w for w in warnings), warnings
    (sync,) = [w for w in warnings if "disagree" in w]
    assert f"{label}, {doc['targets'][0]['split']}, {doc['targets'][0]['metric']}" in sync


@needs_targets
def test_a_report_overwritten_by_a_quick_run_is_flagged(monkeypatch, tmp_path):
    """validate --quick writes targets_quick.json but its report to --out: if that is the dashboard's report and
    the quick run is the latest, the page says so (from the quick run's own header, not the markdown)."""
    d = tmp_path / "validation"
    shutil.copytree(P.VALIDATION_DIR, d)
    md = tmp_path / "validation.md"
    md.write_text("# a report\n", encoding="utf-8")
    monkeypatch.setattr(P, "VALIDATION_DIR", d)
    monkeypatch.setattr(P, "VALIDATION_MD", md)
    quick = json.loads((d / P.TARGETS_NAME).read_text())
    quick["header"].update(mode="quick", command=f"python -m engine validate --out {md} --quick")
    (d / P.QUICK_TARGETS_NAME).write_text(json.dumps(quick))
    os.utime(d / P.TARGETS_NAME, (1e9, 1e9))  # the full run before the quick one
    assert P.written_by_quick_run(quick, md) and not P.written_by_quick_run(quick, tmp_path / "other.md")
    assert P.written_by_quick_run({"header": {"command": "python -m engine validate --out validation.md --quick"}},
                                  md, root=tmp_path)
    assert not P.written_by_quick_run({"header": {"command": "python -m engine validate --out"}}, md)
    at = on_page()
    (w,) = [w.value for w in at.warning]
    assert "last written by a quick run" in w and str(md) in w
    (t,) = frames(at, "dataset", "met")
    assert len(t) == 8  # the targets shown stay the full run's
    # a full run after it: no warning
    os.utime(d / P.TARGETS_NAME, None)
    os.utime(d / P.QUICK_TARGETS_NAME, (1e9, 1e9))
    assert not on_page().warning


def test_malformed_targets_json_is_an_error_naming_it(monkeypatch, tmp_path):
    d = tmp_path / "validation"
    d.mkdir()
    (d / P.TARGETS_NAME).write_text('{"targets": [{"dataset": "vllm"}]}')
    monkeypatch.setattr(P, "VALIDATION_DIR", d)
    at = on_page()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "targets.json" in errors[0] and "label: missing" in errors[0], errors
    (d / P.TARGETS_NAME).write_text('{"targets": [NaN')
    with pytest.raises(ValueError, match="not valid JSON"):
        P.load_targets(d / P.TARGETS_NAME)
    assert P.load_targets(d / "absent.json") is None


@needs_targets
def test_targets_json_agrees_with_the_csvs():
    doc = P.load_targets(P.VALIDATION_DIR / P.TARGETS_NAME)
    tables = {ds.label: P.load_errors(P.VALIDATION_DIR / ds.csv) for ds in P.DATASETS}
    assert P.targets_disagreements(doc, tables) == []
    flipped = {**doc, "targets": [{**r, "met": not r["met"]} for r in doc["targets"]]}
    assert len(P.targets_disagreements(flipped, tables)) == 8
    # the page's own summary of the CSVs (error_summary) gives the same MAPE and status
    tt = P.targets_table(tables)
    assert len(tt) == 8
    for r, q in zip(doc["targets"], tt.itertuples()):
        assert (r["label"], r["metric"], r["split"], r["met"]) == (q.dataset, q.metric, q.split, q.met)
        assert r["mape_pct"] == pytest.approx(100 * q.mape)


def _record(**kw) -> dict:
    r = {"dataset": "vllm", "label": "vLLM runs", "split": "held-out", "metric": "mean_ttft_ms", "n": 101,
         "n_finite": 101, "mape_pct": 23.3, "median_pct": 6.0, "p90_pct": 28.7, "worst_pct": 1061.5,
         "worst_case": "loras=32 cpu=32 rank<=32 rate=30.4", "worst_rel_error_pct": 1061.5, "worst_measured": 555.35,
         "worst_simulated": 6450.6, "target_mape_pct": 25.0, "met": True,
         "worst_run": {"src_row": 148, "offered_rps": 30.4, "measured_rps": 30.11, "simulated_rps": 30.04,
                       "measured_stable": True, "sim_overloaded": False}}
    return {**r, **kw}


def test_outlier_note_says_what_the_tables_say():
    note = P.outlier_note(_record())
    assert note.startswith("met: the target is on MAPE (23.3 % <= 25 %); the worst run, `loras=32 cpu=32 rank<=32 "
                           "rate=30.4`, is 1061.5 % off (simulated 6,451 ms, measured 555.4 ms)"), note
    assert "in the measurement it kept up (throughput 99.0 % of the offered 30.4 req/s)" in note
    assert "simulated: 98.8 %, not flagged overloaded" in note and "p90 28.7 % over 101 runs" in note
    # not large (at most twice the target): no note; large but unmet: named, without the 'met' explanation
    assert P.outlier_note(_record(worst_pct=50.0)) is None
    unmet = P.outlier_note(_record(met=False, mape_pct=30.0))
    assert unmet.startswith("NOT met: MAPE 30.0 % > 25 %; the worst run, `loras=32") and "target is on" not in unmet
    # an overloaded run, and a table without measured_stable (S-LoRA): only what the columns say
    run = {"offered_rps": 10.0, "measured_rps": 8.05, "simulated_rps": 8.66, "measured_stable": None,
           "sim_overloaded": False, "src_row": 14}
    assert P.run_facts_text(run) == "measured throughput 80.5 % of the offered 10 req/s; simulated: 86.6 %, not " \
                                    "flagged overloaded"
    assert P.run_facts_text({**run, "measured_stable": False, "sim_overloaded": True}) == (
        "in the measurement it did not keep up (throughput 80.5 % of the offered 10 req/s); simulated: 86.6 %, "
        "flagged overloaded")
    assert P.run_facts_text({}) == ""
    # a run without a finite simulated value: unmet, named
    inf = P.outlier_note(_record(n_finite=100, worst_pct=None, met=False))
    assert inf.startswith("NOT met: 1 of 101 runs have no finite simulated value") and "`loras=32" in inf
    frame = P.targets_frame({"targets": [_record(), _record(split="train", worst_pct=30.0, p90_pct=None)]})
    assert list(frame["note"] != "") == [True, False] and math.isnan(frame["p90_ape"][1])
    assert frame["worst_ape"][0] == pytest.approx(10.615) and frame["met"].tolist() == ["met", "met"]


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
    tile = next(m for m in at.metric if m.label == C.param_label("compute_eff"))  # name, unit, field
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
    assert at.slider(key="arrival_rate_rps").value == Scenario.from_preset("default").arrival_rate_rps  # the fitted scenario's (the preset's) values
    assert at.slider(key="duration_s").value == sc.duration_s
    assert at.selectbox(key="preset").value == "default"
    assert any("compute_eff" in c.value for c in at.caption)  # the base differs from the preset in it
    assert any("Loaded the scenario fitted to bench.csv" in s.value for s in at.success)
    assert len(kpi_tables(at)) == 1 and len(kpi_tables(at)[0]) == len(controls.DEFAULT_STRATEGIES) and not at.error


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


# ------------------------------------------------------- benchmark tools' result files
TOOLS = ROOT / "tests" / "fixtures" / "tools"
BASIC = "vllm_bench_serve_basic.json"       # 4 req/s Gamma (burstiness 0.5), 16 requests, Llama-3.1-8B-Instruct
DETAILED = "vllm_bench_serve_detailed.json"  # 2 req/s Poisson, per-request arrays (TTFTs)
CLOSED = "vllm_bench_serve_concurrency.json"  # rate inf, max_concurrency 8: a closed loop, Qwen2.5-7B-Instruct


def tool_file(name: str) -> tuple[str, bytes, str]:
    return name, (TOOLS / name).read_bytes(), "application/json"


def tools_page(*files) -> AppTest:
    """The Validation page (``goto``) with ``files`` (names under tests/fixtures/tools, or (name, bytes, mime)
    tuples) uploaded to the tool-file section."""
    at = AppTest.from_file(MAIN, default_timeout=60)
    ok(at.run())
    goto(at, PAGE)
    ok(at.run())
    if files:
        at.file_uploader(key="tool_upload").set_value([f if isinstance(f, tuple) else tool_file(f) for f in files])
        ok(at.run())
    return at


def tool_fit(at: AppTest, **form) -> AppTest:
    """Set the server form's fields (widget key tool_<field>) and run the fit."""
    for k, v in form.items():
        w = at.multiselect(key=f"tool_{k}") if k in ("params", "metrics") else (
            at.selectbox(key=f"tool_{k}") if k in ("gpu", "model", "popularity", "hold_out", "base") else
            at.text_input(key=f"tool_{k}") if k == "fields" else at.number_input(key=f"tool_{k}"))
        w.set_value(v)
    at.button(key="tool_submit").click()
    return ok(at.run())


def test_tool_file_shows_its_traffic_and_prefills_the_form():
    at = tools_page(BASIC)
    assert not at.error
    (runs,) = frames(at, "run", "traffic", "rate_rps")
    r = runs.iloc[0]
    assert len(runs) == 1 and r["run"] == BASIC and r["tool"] == "vllm-bench-serve"
    assert r["rate_rps"] == 4.0 and r["burstiness"] == 0.5 and r["requests"] == 16 and r["failed"] == 0
    assert r["mean_in"] == 512.0 and r["mean_out"] == 128.0 and r["lengths"] == "means only"
    assert r["traffic"] == "4 req/s Gamma, burstiness 0.5 (CV 1.41), 16 requests"
    assert {"request_throughput", "mean_ttft_ms", "p99_tpot_ms"} <= set(r["metrics"].split(", "))
    # the line python -m engine calibrate prints for it
    (line,) = [c.value for c in at.code if c.value.startswith(BASIC)]
    assert "vllm-bench-serve (vllm bench serve): 4 req/s Gamma, burstiness 0.5" in line and "512.0 / 128.0" in line
    # the form's base is the sidebar's preset
    assert at.selectbox(key="tool_base").value == "default"
    # the form: model from model_id (meta-llama/Llama-3.1-8B-Instruct), uniform popularity, the rest the base's.
    # The default's model is that model since issue 24, so the base is stated: a preset with another model
    # (a100-light: Llama-2-7B on an A100 80 GB, rank-16 adapters), to see the model come from the file.
    at.selectbox(key="tool_base").set_value("a100-light")
    ok(at.run())
    base = Scenario.from_preset("a100-light")
    assert at.selectbox(key="tool_model").value == "llama-3.1-8b" != base.model
    assert at.selectbox(key="tool_popularity").value == "uniform"
    assert at.selectbox(key="tool_gpu").value == base.gpu
    assert at.number_input(key="tool_max_loras").value == base.max_loras
    assert at.number_input(key="tool_max_lora_rank").value == base.adapter_rank
    assert at.multiselect(key="tool_params").value == ["compute_eff", "bw_eff", "step_overhead_ms"]
    assert any("meta-llama/Llama-3.1-8B-Instruct" in c.value for c in at.caption)
    with pytest.raises(KeyError):  # one run: nothing to hold out
        at.selectbox(key="tool_hold_out")


def test_several_files_offer_a_hold_out_and_a_closed_loop_reads_as_one():
    at = tools_page(BASIC, CLOSED)
    (runs,) = frames(at, "run", "traffic", "rate_rps")
    closed = runs[runs["run"] == CLOSED].iloc[0]
    assert closed["traffic"] == "closed loop of 8" and closed["concurrency"] == 8 and closed["requests"] == 24
    hold = at.selectbox(key="tool_hold_out")
    assert hold.value == "none"
    assert hold.options == [P.HOLD_OUT_LABELS[h] for h in ("none", "highest-rate", "highest-concurrency", "last")] \
        + [f"The file {BASIC}", f"The file {CLOSED}"]
    # two model_ids naming two presets: the model stays the base's, and the page says so
    assert at.selectbox(key="tool_model").value == Scenario.from_preset("default").model
    assert any("names no single preset model" in c.value for c in at.caption)


@pytest.mark.parametrize("content, expect", [
    (b'{"results": [1, 2, 3]}', "unknown format"),
    (b'{"request_rate": 4', "not valid JSON"),
    (json.dumps({**json.loads((TOOLS / BASIC).read_text()), "completed": "many"}).encode(), "completed: invalid value"),
    (b"\xff\xfe\x00bad", "not UTF-8"),
])
def test_unknown_or_malformed_tool_file_shows_an_error(content, expect):
    at = tools_page(("mine.json", content, "application/json"))
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("mine.json") and expect in errors[0], errors
    if expect != "completed: invalid value":  # the readers' list of the formats understood
        assert all(k in errors[0] for k in ("vllm bench serve", "GuideLLM", "AIPerf")), errors[0]
    with pytest.raises(KeyError):  # nothing read: no form
        at.button(key="tool_submit")


def test_a_bad_file_next_to_a_good_one_is_left_out():
    at = tools_page(BASIC, ("notes.json", b'{"hello": "world"}', "application/json"))
    assert len(at.error) == 1 and "notes.json" in at.error[0].value
    (runs,) = frames(at, "run", "traffic")
    assert list(runs["run"]) == [BASIC]
    assert any("Left out (not read): notes.json" in c.value for c in at.caption)
    assert at.button(key="tool_submit")


def test_small_fit_shows_errors_per_split_and_the_ttft_distribution(media):
    at = tool_fit(tools_page(BASIC, DETAILED), params=["compute_eff"], hold_out=DETAILED)
    assert not at.error
    (done,) = [s.value for s in at.success]
    assert "Fitted compute_eff on 1 run(s), 1 held out (vllm_bench_serve_detailed.json)" in done
    fit = at.session_state[P.TOOL_FIT_KEY]
    assert fit["simulations"] <= P.MAX_FIT_SIMULATIONS and fit["held_out"] == [DETAILED]
    (summary,) = frames(at, "split", "metric", "mape", "above_flag")
    assert set(summary["split"]) == {"train", "held-out"} and list(summary["split"]).index("held-out") > 0
    # the default objective: throughput, mean TPOT and the TTFT distribution's mean, median and p99
    assert set(summary.loc[summary["fitted"], "metric"]) == {"Request throughput (req/s)", "Mean TTFT (ms)",
                                                            "Median TTFT (ms)", "P99 TTFT (ms)", "Mean TPOT (ms)"}
    assert (summary["above_flag"] == (summary["worst_ape"] > 0.25)).all()
    # errors above 25 % are flagged next to the fitted values, as the engine lists them
    assert fit["large_errors"] and any(w.value.startswith("Error above 25% on") for w in at.warning)
    tile = next(m for m in at.metric if m.label == C.param_label("compute_eff"))  # name, unit, field
    assert float(tile.value) == pytest.approx(fit["values"]["compute_eff"], rel=1e-3)
    (ttft,) = frames(at, "case", "ks", "p50_measured_ms")
    assert list(ttft["case"]) == [DETAILED] and list(ttft["split"]) == ["held-out"] and 0 <= ttft["ks"][0] <= 1
    # one training run and one fitted parameter on three metrics: over-determined, no note
    assert not any("not over-determined" in i.value for i in at.info)
    # downloads: fitted.json (the server with the fitted value and the training run's traffic) and provenance
    sc = Scenario.from_json(media[at.download_button(key="tool_dl_fitted").proto.url].decode()).validate()
    assert sc.compute_eff == pytest.approx(fit["values"]["compute_eff"])
    assert (sc.model, sc.arrival_process, sc.arrival_rate_rps, sc.prompt_tokens) == ("llama-3.1-8b", "gamma", 4.0, 512)
    prov = json.loads(media[at.download_button(key="tool_dl_provenance").proto.url])
    assert prov["files"] == sorted([BASIC, DETAILED]) and prov["created"] and prov["params"] == ["compute_eff"]
    assert {e["split"] for e in prov["errors"]} == {"train", "held-out"}
    assert [r["split"] for r in prov["runs"]] == ["train", "held-out"]
    assert fit["command"].startswith(f"python -m engine calibrate --data {BASIC} {DETAILED} --preset default")


def test_few_measured_values_note_under_determination():
    at = tool_fit(tools_page(BASIC), metrics=["request_throughput"], params=["compute_eff", "step_overhead_ms"])
    assert any("not over-determined" in i.value for i in at.info), [i.value for i in at.info]


def test_fit_forced_to_a_bound_is_flagged():
    # the file is fitted as vLLM (its overheads from the vLLM fit: 4.3 ms a step, 9.6 ms a request) with vLLM's
    # one adapter slot: a 0.5B model on a B200 is then slower than this run even at full memory bandwidth
    at = tool_fit(tools_page(BASIC), gpu="b200", model="qwen2-0.5b", params=["bw_eff"])
    assert not at.error
    warn = [w.value for w in at.warning if w.value.startswith("The model cannot explain these runs")]
    assert len(warn) == 1 and "bw_eff = 1 (at its upper bound 1)" in warn[0], [w.value for w in at.warning]
    tile = next(m for m in at.metric if m.label == C.param_label("bw_eff"))
    assert tile.delta == "at its upper bound"
    assert at.session_state[P.TOOL_FIT_KEY]["provenance"]["at_bounds"] == ["bw_eff = 1 (at its upper bound 1)"]


def test_fit_is_bounded_by_the_work_cap(monkeypatch):
    monkeypatch.setattr(P, "MAX_FIT_ROWS", 1)
    at = tool_fit(tools_page(BASIC, DETAILED))
    assert any("2 runs; allowed: at most 1 per fit (work cap)" in e.value for e in at.error), [e.value for e in at.error]
    monkeypatch.setattr(P, "MAX_FIT_ROWS", 50)
    monkeypatch.setattr(P, "MAX_FIT_SIMULATIONS", 7)
    at = tool_fit(at)
    assert any("work cap" in e.value and "within 7 simulations" in e.value for e in at.error)
    assert P.TOOL_FIT_KEY not in at.session_state


def test_bad_server_settings_name_the_field():
    # (the file is fitted as vLLM, which chunks long prompts: without chunking, 400 tokens cannot hold its 512)
    at = tool_fit(tools_page(BASIC), fields="chunked_prefill=off,max_batched_tokens=400")
    (err,) = [e.value for e in at.error]
    assert "max_batched_tokens" in err and err.startswith("The fit refused these inputs")
    assert "Other scenario fields" in err  # the form's words, not the command line's --set


def test_open_on_whatif_lands_there_with_the_fitted_values():
    at = tool_fit(tools_page(BASIC), gpu="h100-80gb", params=["compute_eff"])
    fit = at.session_state[P.TOOL_FIT_KEY]
    at.button(key="tool_open_whatif").click()
    ok(at.run())
    assert at.title[0].value == "What-if"
    assert at.selectbox(key="gpu").value == "h100-80gb" and at.selectbox(key="model").value == "llama-3.1-8b"
    assert at.slider(key="arrival_rate_rps").value == 4.0  # the file's rate
    assert at.selectbox(key="arrival_process").value == "gamma"
    assert at.slider(key="prompt_tokens").value == 512 and at.slider(key="output_tokens").value == 128
    msgs = [s.value for s in at.success if s.value.startswith("Loaded the scenario fitted to")]
    assert len(msgs) == 1 and BASIC in msgs[0] and f"compute_eff={fit['values']['compute_eff']:.4g}" in msgs[0]
    # the fitted value rides along in the scenario's base (it has no control): the header says so
    assert any("compute_eff" in c.value for c in at.caption)
    sc = at.session_state[controls.STATE_KEY].scenario
    assert sc.compute_eff == pytest.approx(fit["values"]["compute_eff"])
    assert (sc.popularity, sc.power_alpha) == ("power", 1.0)  # uniform, as vllm bench serve picks adapters
    assert not at.error


def test_open_on_plan_lands_there_with_the_fitted_scenario():
    at = tool_fit(tools_page(BASIC), params=["compute_eff"])
    at.button(key="tool_open_plan").click()
    ok(at.run())
    assert at.title[0].value == "Plan"
    assert at.slider(key="arrival_rate_rps").value == 4.0 and at.selectbox(key="model").value == "llama-3.1-8b"
    assert any("compute_eff" in c.value for c in at.caption)


def test_page_helpers_for_tool_files():
    runs, errors = P.read_uploads([tool_file(BASIC)[:2], tool_file(BASIC)[:2]])
    assert [r.source for r in runs] == [BASIC] and list(errors.values()) == [f"{BASIC}: given twice; give each file once"]
    assert P.popularity_spec(*P.popularity_of(Scenario.from_preset("vllm-llama31-8b"))) == "uniform"
    assert P.popularity_spec(*P.popularity_of(Scenario.from_preset("default"))) == "zipf:1"
    # a base whose model is not the file's (the default's is, since issue 24): the settings state the file's model
    base = Scenario.from_preset("a100-light")
    assert base.model != "llama-3.1-8b"
    form, _ = P.prefill(runs, base)
    s = P.server_settings(form, base)
    assert s["model"] == "llama-3.1-8b" and s["gpu"] is None and s["max_lora_rank"] is None
    assert s["popularity"] == "uniform" and s["overrides"] == {}
    with pytest.raises(ValueError, match="expected FIELD=VALUE"):
        P.parse_fields("max_batched_tokens")
    assert P.hold_out_options(runs) == ["none"]


def test_the_page_fit_is_the_command_line_fit(tmp_path):
    """The command the page shows, run on the same files, fits the same values."""
    runs, _ = P.read_uploads([tool_file(BASIC)[:2], tool_file(DETAILED)[:2]])
    base = Scenario.from_preset("default")
    form, _ = P.prefill(runs, base)
    form.update(params=["compute_eff", "step_overhead_ms"], hold_out="last")
    fit = P.fit_tool_upload(runs, base, P.server_settings(form, base), form["params"], hold_out="last",
                            preset="default")
    for name in (BASIC, DETAILED):
        (tmp_path / name).write_bytes((TOOLS / name).read_bytes())
    cmd = fit["command"].replace("python -m engine", f"{sys.executable} -m engine", 1)
    r = subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stdout + r.stderr
    cli = Scenario.from_json((tmp_path / "fitted.json").read_text())
    page = Scenario.from_json(fit["scenario_json"])
    assert cli.to_dict() == page.to_dict()
    prov = json.loads((tmp_path / "fitted_provenance.json").read_text())
    assert prov["values"] == pytest.approx(fit["values"]) and prov["at_bounds"] == fit["at_bounds"]


def test_guidellm_and_aiperf_files_are_read_too():
    at = tools_page("guidellm_sweep.json", "aiperf_concurrency.json")
    assert not at.error
    (runs,) = frames(at, "run", "traffic", "tool")
    assert list(runs["run"]) == ["guidellm_sweep.json#0", "guidellm_sweep.json#1", "aiperf_concurrency.json"]
    assert list(runs["tool"]) == ["guidellm", "guidellm", "aiperf"]
    assert list(runs["traffic"]) == ["closed loop of 1", "2 req/s Poisson, 6 requests", "closed loop of 8"]
    assert list(runs["version"]) == ["0.8.1", "0.8.1", "0.13.0 (export schema 1.4)"]
    assert at.selectbox(key="tool_popularity").value == "zipf"  # not vllm bench serve: the base's popularity
