"""app/charts.py: every chart builds and validates without Streamlit; encodings, fields, row limits."""
from __future__ import annotations

from xml.etree import ElementTree

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from legacy import legacy_preset

from app import charts, svgchart
from engine import STRATEGIES

RNG = np.random.default_rng(0)


def _requests(n: int, scale: float, warmup: float = 5.0, duration: float = 60.0) -> pd.DataFrame:
    arrival = np.sort(RNG.uniform(0, duration + 5, n))
    ttft = RNG.lognormal(np.log(scale), 0.5, n)
    return pd.DataFrame({"arrival_s": arrival, "ttft_ms": ttft, "completed": RNG.random(n) > 0.02})


def _timeseries(n: int) -> pd.DataFrame:
    t = np.arange(n) * 0.3
    return pd.DataFrame({"t_s": t, "queue_len": RNG.poisson(2, n).astype(float),
                         "resident_adapters": np.full(n, 64.0), "loads_in_flight": RNG.random(n),
                         "kv_used_frac": RNG.random(n) * 0.2, "gpu_busy_frac": RNG.random(n),
                         "pcie_busy_frac": RNG.random(n) * 0.5})


def _layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def _data_rows(chart) -> int:
    return len(chart.data) if isinstance(chart.data, pd.DataFrame) else 0


# ------------------------------------------------------------------ helpers
def test_strategy_colors_are_stable_across_subsets():
    full = charts.strategy_scale(list(STRATEGIES)).to_dict()
    sub = charts.strategy_scale(["batch", "naive"]).to_dict()
    assert sub["domain"] == ["naive", "batch"]  # engine order, not input order
    colors = dict(zip(full["domain"], full["range"]))
    assert dict(zip(sub["domain"], sub["range"])) == {s: colors[s] for s in sub["domain"]}
    assert len(set(full["range"])) == len(full["range"]) or len(full["range"]) > len(charts._PALETTE)
    assert charts.strategy_color("batch") == colors["batch"]


def test_strategies_of_a_column_in_engine_order_each_once():
    col = pd.Series(["slora", "naive", "custom_b", "slora", "custom_a", "naive"] * 1000)
    assert charts._sorted_strategies(col) == ["naive", "slora", "custom_b", "custom_a"]  # unknown: first seen
    assert charts._sorted_strategies(list(col)) == charts._sorted_strategies(col)
    assert charts.strategy_scale(col).to_dict()["domain"] == ["naive", "slora", "custom_b", "custom_a"]


def test_downsample_keeps_ends_and_limit():
    df = pd.DataFrame({"a": np.arange(10_000)})
    d = charts.downsample(df, 500)
    assert len(d) <= 500 and d["a"].iloc[0] == 0 and d["a"].iloc[-1] == 9_999
    assert charts.downsample(df.head(10), 500).equals(df.head(10))


def test_legend_html_lists_strategies_with_their_colours():
    html = charts.legend_html(["naive", "batch"], "note")
    assert "naive" in html and "batch" in html and charts.strategy_color("batch") in html and "note" in html


# ----------------------------------------------------------------- TTFT CDF
def test_cdf_frame_quantiles_per_strategy_and_window():
    reqs = {"naive": _requests(20_000, 40.0), "batch": _requests(5_000, 25.0)}
    df = charts.cdf_frame(reqs, window=(5.0, 60.0), n_points=200)
    assert list(df.columns) == ["strategy", "ttft_ms", "cdf"]
    assert df.groupby("strategy").size().to_dict() == {"naive": 200, "batch": 200}
    for _, g in df.groupby("strategy"):
        assert g["ttft_ms"].is_monotonic_increasing and g["cdf"].is_monotonic_increasing
        assert g["cdf"].iloc[0] == 0.0 and 0.999 < g["cdf"].iloc[-1] < 1.0
    # the median matches the window's completed requests
    r = reqs["naive"]
    r = r[r["completed"] & (r["arrival_s"] >= 5) & (r["arrival_s"] < 60)]
    g = df[df["strategy"] == "naive"]
    med = np.interp(0.5, g["cdf"], g["ttft_ms"])
    assert med == pytest.approx(r["ttft_ms"].median(), rel=0.02)


def test_cdf_frame_empty_and_nan():
    empty = pd.DataFrame({"arrival_s": [1.0], "ttft_ms": [np.nan], "completed": [True]})
    df = charts.cdf_frame({"naive": empty})
    assert len(df) == 0 and list(df.columns) == ["strategy", "ttft_ms", "cdf"]


def test_charts_refuse_oversized_data():
    big = pd.concat([_agg()] * (2 * charts.MAX_CHART_ROWS // len(_agg()) + 2), ignore_index=True)  # (2 metrics)
    with pytest.raises(ValueError, match="rows"):
        charts.sweep_chart(big, "ttft_p50_ms", "x", "y")


def test_specs_are_deterministic():
    chart = lambda: charts.sweep_chart(_agg(), "ttft_p50_ms", "Arrival rate", "TTFT p50")  # noqa: E731
    assert chart().to_json() == chart().to_json()


def test_unvalidated_gives_the_same_spec():
    chart = lambda: charts.sweep_chart(_agg(), "ttft_p50_ms", "Arrival rate", "TTFT p50")  # noqa: E731
    assert charts.unvalidated(chart()).to_dict() == chart().to_dict()


# ---------------------------------------------------------------- breakdown
def test_breakdown_frame():
    summ = {"naive": {"frontend_mean_ms": 0.0, "queue_mean_ms": 5.0, "load_wait_mean_ms": 2.0,
                      "prefill_mean_ms": 20.0},
            "batch": {"frontend_mean_ms": 1.0, "queue_mean_ms": 15.0, "load_wait_mean_ms": 0.5,
                      "prefill_mean_ms": 20.0}}
    df = charts.breakdown_frame(summ)
    assert len(df) == 8 and set(df["component"]) == set(charts.BREAKDOWN.values())
    assert df.groupby("strategy")["ms"].sum().to_dict() == {"naive": 27.0, "batch": 36.5}
    # the API-server part is left out when no strategy has one (uncalibrated presets)
    no_fe = charts.breakdown_frame({k: {**v, "frontend_mean_ms": 0.0} for k, v in summ.items()})
    assert len(no_fe) == 6 and "API server" not in set(no_fe["component"])
    assert list(df.loc[df["strategy"] == "naive", "order"]) == [0, 1, 2, 3]  # (the stacking order)


# --------------------------------------------------------------- time series
def test_timeseries_frame_downsamples():
    ts = {"naive": _timeseries(3000), "slora": _timeseries(50)}
    df = charts.timeseries_frame(ts, max_points=400)
    assert list(df.columns) == ["strategy", "t_s", "metric", "value"]
    counts = df.groupby(["strategy", "metric"]).size()
    assert counts.max() <= 400 and counts[("slora", "queue_len")] == 50
    assert set(df["metric"]) == set(charts.TS_METRICS)


# -------------------------------------------------------------------- sweeps
def _agg() -> pd.DataFrame:
    rows = []
    for s, k in (("naive", 1.0), ("batch", 0.7)):
        for x in (4.0, 8.0, 16.0):
            for m, v in (("ttft_p50_ms", 10 * k * x), ("swap_rate", 0.3 * k)):
                rows.append({"x": x, "strategy": s, "metric": m, "mean": v, "ci_low": 0.9 * v,
                             "ci_high": 1.1 * v, "n": 3})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("log_y", [False, True])
def test_sweep_chart_line_and_ci_band(log_y):
    chart = charts.sweep_chart(_agg(), "ttft_p50_ms", "Arrival rate (req/s)", "TTFT p50 (ms)", log_y=log_y)
    spec = chart.to_dict()
    band, line = _layers(spec)
    assert band["mark"]["type"] == "area"
    assert band["encoding"]["y"]["field"] == "ci_low" and band["encoding"]["y2"]["field"] == "ci_high"
    assert line["mark"]["type"] == "line"
    assert line["encoding"]["y"]["field"] == "mean" and line["encoding"]["x"]["field"] == "x"
    assert (line["encoding"]["y"]["scale"].get("type") == "log") is log_y
    assert len(chart.data) == 6  # one metric: 2 strategies x 3 points


# ----------------------------------------------------------------- crossover
def _crossover_frame() -> pd.DataFrame:
    """Four cells: two wins (naive, batch), one tie (naive = hot_set, the CI includes zero), one failed cell."""
    nan = np.nan
    return pd.DataFrame({
        "x": [4.0, 4.0, 8.0, 8.0], "y": [0.5, 1.0, 0.5, 1.0],
        "status": ["win", "tie", "win", "none"], "verdict": ["naive", "tie", "batch", None],
        "winner": ["naive", None, "batch", None], "best": ["naive", "naive", "batch", None],
        "best_ms": [10.0, 11, 12, nan], "runner_up": ["batch", "hot_set", "naive", None],
        "runner_up_ms": [11.0, 11.1, 18, nan], "margin_ms": [1.0, 0.1, 6, nan],
        "margin_ci_low_ms": [0.5, -0.4, 5, nan], "margin_ci_high_ms": [1.5, 0.6, 7, nan],
        "margin_pct": [0.1, 0.1 / 11, 0.5, nan], "tied": ["", "naive, hot_set", "", ""], "n": [3, 3, 3, 0],
        "not_ranked": ["oracle (reference)"] * 3 + [""]})


def test_crossover_chart_colours_wins_and_ties_apart_with_the_margin_ci_in_the_tooltip():
    chart = charts.crossover_chart(_crossover_frame(), "Arrival rate (req/s)", "Zipf s")
    spec = chart.to_dict()
    rect, text = _layers(spec)
    assert rect["mark"]["type"] == "rect" and text["mark"]["type"] == "text"
    color = rect["encoding"]["color"]
    assert color["field"] == "verdict"
    # winners in their strategy colours, then the neutral tie colour (and blank where nothing ran)
    assert color["scale"]["domain"] == ["naive", "batch", "tie", "no result"]
    assert color["scale"]["range"] == [charts.strategy_color("naive"), charts.strategy_color("batch"),
                                       charts.TIE_COLOR, "#FFFFFF"]
    assert charts.TIE_COLOR not in [charts.strategy_color(s) for s in STRATEGIES]
    data = chart.data.set_index(["x", "y"])
    assert data.loc[(4.0, 0.5), "verdict"] == "naive" and data.loc[(8.0, 0.5), "verdict"] == "batch"
    assert data.loc[(4.0, 1.0), "verdict"] == "tie"  # its lowest mean (naive) does not colour it
    fields = {t["field"] for t in rect["encoding"]["tooltip"]}
    assert {"verdict", "tied", "best", "best_ms", "runner_up", "margin_ms", "margin_ci_low_ms", "margin_ci_high_ms",
            "margin_pct", "n", "not_ranked"} <= fields
    assert {t["field"] for t in text["encoding"]["tooltip"]} == fields
    assert rect["encoding"]["x"]["field"] == "x_label" and rect["encoding"]["y"]["field"] == "y_label"
    assert list(chart.data["margin_label"]) == ["+10%", "tie", "+50%", ""]
    # a win's opacity follows its margin; a tie is drawn opaque in its neutral colour
    assert rect["encoding"]["opacity"]["field"] == "shade"
    assert list(chart.data["shade"]) == pytest.approx([0.55 + 0.45 * 0.4, 1.0, 1.0, 1.0])
    assert list(chart.data["text_color"]) == ["#1F2330", "#6B7280", "#1F2330", "#6B7280"]
    assert len(chart.data) == 4


def test_crossover_chart_all_ties_and_one_replication_leads():
    df = _crossover_frame()
    ties = df.assign(status="tie", verdict="tie", winner=None)
    rect = _layers(charts.crossover_chart(ties, "x", "y").to_dict())[0]
    assert rect["encoding"]["color"]["scale"]["domain"] == ["tie"]
    leads = df.assign(status="lead", verdict="no CI", winner=None)
    chart = charts.crossover_chart(leads, "x", "y")
    assert _layers(chart.to_dict())[0]["encoding"]["color"]["scale"]["range"] == [charts.NO_CI_COLOR]
    assert set(chart.data["margin_label"]) == {"?"}


def test_charts_from_a_real_simulation():
    """End to end on engine output: the frames the app builds chart without error."""
    from engine import simulate

    sc = legacy_preset("default", duration_s=60.0, warmup_s=5.0, arrival_rate_rps=10.0)
    r = simulate(sc)
    cdf = charts.cdf_frame({"naive": r.requests}, (sc.warmup_s, sc.duration_s))
    svgs = [svgchart.ttft_cdf_svg(cdf), svgchart.ttft_breakdown_svg(charts.breakdown_frame({"naive": r.summary}))]
    ts = charts.timeseries_frame({"naive": r.timeseries})
    svgs += [svgchart.timeseries_svg(ts, m) for m in charts.TS_METRICS]  # (the What-if page's charts)
    for svg in svgs:
        assert ElementTree.fromstring(svg).tag == "{http://www.w3.org/2000/svg}svg" and "No data" not in svg


# ----------------------------------------------------------- KV interference
def _kv_timeseries(n: int, dt: float = 0.1) -> pd.DataFrame:
    t = np.arange(n) * dt
    return pd.DataFrame({"t_s": t, "kv_frag": RNG.random(n) * 0.4, "queue_len": 1.0})


def test_kv_frag_frame_smooths_cuts_and_downsamples():
    ts = {"single_adapter": _kv_timeseries(3000), "slora": _kv_timeseries(200)}
    raw = charts.kv_frag_frame(ts, max_points=400)
    assert list(raw.columns) == ["strategy", "t_s", "metric", "value"] and set(raw["metric"]) == {charts.KV_FRAG}
    assert raw.groupby("strategy").size().to_dict() == {"single_adapter": 400, "slora": 200}
    assert list(dict.fromkeys(raw["strategy"])) == ["single_adapter", "slora"]  # the caller's order
    s = raw[raw["strategy"] == "slora"]["value"].to_numpy()
    assert s == pytest.approx(ts["slora"]["kv_frag"].to_numpy())  # no smoothing: the raw series
    smooth = charts.kv_frag_frame(ts, t_max=10.0, smooth_s=1.0)
    g = smooth[smooth["strategy"] == "slora"]
    assert g["t_s"].max() <= 10.0
    # trailing mean over 1 s = 10 buckets of 0.1 s
    assert g["value"].iloc[50] == pytest.approx(ts["slora"]["kv_frag"].iloc[41:51].mean())
    assert g["value"].iloc[0] == pytest.approx(ts["slora"]["kv_frag"].iloc[0])
    assert g["value"].std() < s.std()
    assert len(charts.kv_frag_frame({})) == 0


def test_kv_frag_chart_lines_and_warmup_rule():
    ts = {"single_adapter": _kv_timeseries(3000), "slora": _kv_timeseries(200)}
    df = charts.kv_frag_frame(ts, max_points=400, smooth_s=1.0)
    chart = charts.kv_frag_chart(df, warmup_s=5.0)
    spec = chart.to_dict()
    line, rule, text = _layers(spec)
    assert line["mark"]["type"] == "line"
    assert line["encoding"]["x"]["field"] == "t_s" and line["encoding"]["y"]["field"] == "value"
    assert line["encoding"]["y"]["axis"]["format"] == ".0%"
    scale = line["encoding"]["color"]["scale"]
    assert scale["domain"] == ["single_adapter", "slora"]  # the frame's order, fixed colours
    assert scale["range"] == [charts.strategy_color("single_adapter"), charts.strategy_color("slora")]
    assert line["encoding"]["color"]["legend"] is not None
    assert rule["mark"]["type"] == "rule" and text["mark"]["type"] == "text"
    assert spec["height"] == 380
    no_rule = charts.kv_frag_chart(df).to_dict()
    assert no_rule["mark"]["type"] == "line"  # a single layer without a warm-up
    # only the kv_frag metric is drawn, whatever else the frame holds (timeseries_frame output works too)
    other = charts.timeseries_frame(ts, metrics=["kv_frag", "queue_len"], max_points=400)
    assert len(charts.kv_frag_chart(other).data) == (other["metric"] == "kv_frag").sum()


def test_kv_throughput_chart_bars_whiskers_and_missing_ci():
    df = pd.DataFrame({"strategy": ["single_adapter", "slora", "round_robin_k1"], "mean": [80.0, 70.0, 3.3],
                       "half_width": [1.0, 2.0, np.nan]})
    chart = charts.kv_throughput_chart(df)
    bars, whiskers, labels = _layers(chart.to_dict())
    assert bars["mark"]["type"] == "bar" and bars["encoding"]["x"]["field"] == "mean"
    assert bars["encoding"]["y"]["sort"] == ["single_adapter", "slora", "round_robin_k1"]  # the table's order
    assert whiskers["mark"]["type"] == "rule"
    assert whiskers["encoding"]["x"]["field"] == "ci_low" and whiskers["encoding"]["x2"]["field"] == "ci_high"
    assert labels["mark"]["type"] == "text" and labels["encoding"]["text"]["field"] == "mean"
    assert chart.layer[1].data["strategy"].tolist() == ["single_adapter", "slora"]  # no whisker without a CI
    assert chart.layer[2].data["label_x"].tolist() == [81.0, 72.0, 3.3]  # labels past the whisker
    assert {t["field"] for t in bars["encoding"]["tooltip"]} == {"strategy", "mean", "ci_low", "ci_high"}


def test_pareto_front_and_frontier_frame():
    df = pd.DataFrame({"strategy": ["a", "b", "c", "d", "e", "f"],
                       "avg_frag": [0.30, 0.10, 0.00, 0.20, 0.00, np.nan],
                       "throughput_req_s": [80.0, 60.0, 3.0, 50.0, 3.0, 99.0]})
    # a: best throughput; b: less frag, less throughput; c and e tie at zero frag (neither dominates)
    # d: dominated by b; f: no value, never on the front
    assert charts.pareto_front(df).tolist() == [True, True, True, False, True, False]
    fr = charts.kv_frontier_frame(df)
    assert list(fr.columns) == ["strategy", "avg_frag", "throughput_req_s", "on_frontier", "status", "label", "note"]
    assert fr["on_frontier"].tolist() == [True, True, True, False, True, False]
    assert fr["status"].tolist() == ["on the frontier"] * 3 + ["dominated", "on the frontier", "dominated"]
    # all zero fragmentation (paged KV): only the highest throughput is on the front
    zero = pd.DataFrame({"strategy": ["a", "b"], "avg_frag": [0.0, 0.0], "throughput_req_s": [50.0, 60.0]})
    assert charts.pareto_front(zero).tolist() == [False, True]


def test_kv_frontier_chart_points_labels_and_front_line():
    df = charts.kv_frontier_frame(pd.DataFrame({
        "strategy": ["single_adapter", "slora", "hotset_32mb", "hotset_64mb", "hotset_batch_t4"],
        "avg_frag": [0.27, 0.014, 0.087, 0.084, 0.064], "throughput_req_s": [79.5, 68.5, 56.4, 56.6, 59.6]}))
    chart = charts.kv_frontier_chart(df)
    line, points, *texts = _layers(chart.to_dict())
    assert points["mark"]["type"] == "point"
    assert points["encoding"]["x"]["field"] == "avg_frag" and points["encoding"]["y"]["field"] == "throughput_req_s"
    assert points["encoding"]["color"]["field"] == "strategy"
    assert points["encoding"]["opacity"]["field"] == "status"
    assert texts and all(t["mark"]["type"] == "text" and t["encoding"]["text"]["field"] == "label" for t in texts)
    assert line["mark"]["type"] == "line"
    assert chart.layer[0].data["strategy"].tolist() == ["slora", "single_adapter"]  # the front, by fragmentation
    assert len(chart.layer[1].data) == 5
    # every point labelled once; the rightmost label sits left of its point; near points get distinct offsets
    labels = {s: (t["mark"]["align"], t["mark"].get("dy", 0))
              for t, layer in zip(texts, chart.layer[2:]) for s in layer.data["strategy"]}
    assert sorted(labels) == sorted(df["strategy"])
    assert labels["single_adapter"][0] == "right" and labels["slora"][0] == "left"
    assert labels["hotset_32mb"][1] != labels["hotset_64mb"][1]


def test_kv_frontier_frame_keeps_references_off_the_front_and_takes_the_noise_aware_status():
    table = pd.DataFrame({"strategy": ["single_adapter", "slora", "hotset_32mb", "hotset_64mb", "round_robin_k1"],
                          "avg_frag": [0.27, 0.014, 0.087, 0.084, 0.0],
                          "throughput_req_s": [79.5, 68.5, 56.4, 56.6, 3.3]})
    status = {"hotset_32mb": ("dominated", "dominated by slora"),
              "hotset_64mb": ("not distinguishable", "not distinguishable from slora with 2 replications")}
    fr = charts.kv_frontier_frame(table, exclude=["single_adapter"], status=status)
    by = fr.set_index("strategy")
    # the baseline would top the throughput axis, yet it is a reference: labelled, never on the front
    assert not by.at["single_adapter", "on_frontier"] and by.at["single_adapter", "status"] == "reference"
    assert by.at["single_adapter", "label"] == "single_adapter (baseline)"
    assert by.loc[["slora", "round_robin_k1"], "on_frontier"].all()
    assert by.at["hotset_32mb", "status"] == "dominated" and by.at["hotset_64mb", "status"] == "not distinguishable"
    assert by.at["hotset_64mb", "note"].startswith("not distinguishable from slora")
    chart = charts.kv_frontier_chart(fr)
    line, points, *texts = _layers(chart.to_dict())
    assert chart.layer[0].data["strategy"].tolist() == ["round_robin_k1", "slora"]
    assert points["encoding"]["opacity"]["scale"]["domain"] == list(charts.FRONTIER_STATUS)
    assert points["encoding"]["shape"]["field"] == "status"
    assert {"status", "note"} <= {t["field"] for t in points["encoding"]["tooltip"]}
    labels = [v for layer in chart.layer[2:] for v in layer.data["label"]]
    assert "single_adapter (baseline)" in labels


def test_kv_charts_from_real_simulations():
    """End to end on engine output: the KV page's frames chart without error."""
    from engine import simulate

    rows, ts = [], {}
    for s in ("single_adapter", "slora"):
        r = simulate(legacy_preset("kv-qwen2-0.5b-heavy", strategy=s, duration_s=10.0, warmup_s=2.0))
        rows.append({"strategy": s, "avg_frag": r.summary["avg_frag"],
                     "throughput_req_s": r.summary["throughput_req_s"]})
        ts[s] = r.timeseries
    table = pd.DataFrame(rows)
    charts.kv_frag_chart(charts.kv_frag_frame(ts, t_max=10.0, smooth_s=1.0), warmup_s=2.0).to_dict()
    charts.kv_throughput_chart(table.rename(columns={"throughput_req_s": "mean"}).assign(half_width=np.nan)).to_dict()
    charts.kv_frontier_chart(charts.kv_frontier_frame(table)).to_dict()


def test_kv_frontier_chart_with_zero_fragmentation_keeps_an_x_range():
    df = charts.kv_frontier_frame(pd.DataFrame({"strategy": ["single_adapter", "slora"], "avg_frag": [0.0, 0.0],
                                                "throughput_req_s": [80.0, 70.0]}))
    points = _layers(charts.kv_frontier_chart(df).to_dict())[1]
    assert points["encoding"]["x"]["scale"]["domain"] == [0, 0.1]  # paged KV: not a collapsed axis
    empty = charts.kv_frontier_frame(df.iloc[:0])
    charts.kv_frontier_chart(empty).to_dict()


# ----------------------------------------------------------------- validation
def _errors(n: int = 12) -> pd.DataFrame:
    """A long per-run error table like docs/validation/*_errors.csv (two metrics, both splits)."""
    rows = []
    for i in range(n):
        split = "train" if i % 2 == 0 else "held-out"
        for metric, scale in (("request_throughput", 1.0), ("mean_ttft_ms", 100.0)):
            meas = scale * (i + 1) ** 1.5
            sim = meas * (1.0 + 0.3 * np.sin(i))
            rows.append({"case": f"run {i}", "metric": metric, "measured": meas, "simulated": sim,
                         "rel_error": sim / meas - 1, "split": split, "sim_overloaded": i == 3,
                         "num_adapters": 2 ** i, "max_loras": [8, 16, 128][i % 3]})
    return pd.DataFrame(rows)


def test_use_log_scale():
    assert charts.use_log_scale([1.0, 50.0])
    assert not charts.use_log_scale([1.0, 20.0])  # spans less than LOG_SPAN
    assert not charts.use_log_scale([0.0, 100.0])  # not all positive
    assert charts.use_log_scale([1.0, 100.0, np.nan, np.inf])  # non-finite ignored
    assert not charts.use_log_scale([])


def test_validation_scatter_frame_keeps_finite_runs_of_one_metric():
    t = _errors()
    t.loc[(t["metric"] == "mean_ttft_ms") & (t["case"] == "run 5"), "simulated"] = np.inf
    t.loc[(t["metric"] == "mean_ttft_ms") & (t["case"] == "run 6"), "simulated"] = np.nan
    d = charts.validation_scatter_frame(t, "mean_ttft_ms")
    assert list(d.columns) == ["case", "split", "measured", "simulated", "rel_error", "sim_overloaded"]
    assert len(d) == 10 and not {"run 5", "run 6"} & set(d["case"])
    assert set(d["split"]) == {"train", "held-out"} and d["sim_overloaded"].sum() == 1
    bare = charts.validation_scatter_frame(t.drop(columns=["split", "sim_overloaded"]), "request_throughput")
    assert set(bare["split"]) == {"all"} and not bare["sim_overloaded"].any()


def test_validation_scatter_chart_diagonal_bands_and_splits():
    d = charts.validation_scatter_frame(_errors(), "mean_ttft_ms")  # spans 100..4157: log-log
    chart = charts.validation_scatter_chart(d, "Mean TTFT (ms)")
    spec = chart.to_dict()
    band, diag, points = _layers(spec)
    assert spec["title"] == "Mean TTFT (ms)"
    scale = points["encoding"]["x"]["scale"]
    assert scale["type"] == "log" and points["encoding"]["y"]["scale"] == scale  # one shared domain
    lo, hi = scale["domain"]
    assert lo < d[["measured", "simulated"]].min().min() and hi > d[["measured", "simulated"]].max().max()
    # y = x over the whole domain; +-10 % and +-25 % wedges
    assert chart.layer[1].data["x"].tolist() == chart.layer[1].data["y"].tolist() == [lo, hi]
    bands = chart.layer[0].data
    assert sorted(bands["band"].unique()) == ["±10%", "±25%"]
    b10 = bands[bands["band"] == "±10%"]
    assert np.allclose(b10["y_hi"] / b10["x"], 1.1) and np.allclose(b10["y_lo"] / b10["x"], 0.9)
    assert band["encoding"]["y2"]["field"] == "y_hi"
    # points: colour and shape by split, fixed colours; the overload flag in the tooltip when present
    enc = points["encoding"]
    assert enc["color"]["field"] == enc["shape"]["field"] == "split"
    assert enc["color"]["scale"]["domain"] == ["train", "held-out"]
    assert enc["color"]["scale"]["range"] == [charts.SPLIT_STYLE["train"][0], charts.SPLIT_STYLE["held-out"][0]]
    assert "sim_overloaded" in [t["field"] for t in enc["tooltip"]]
    assert len(chart.layer[2].data) == len(d)


def test_validation_scatter_chart_linear_and_forced_log():
    d = charts.validation_scatter_frame(_errors(3), "request_throughput")  # 1..5.2: linear
    spec = charts.validation_scatter_chart(d, "t").to_dict()
    assert _layers(spec)[2]["encoding"]["x"]["scale"]["type"] == "linear"
    assert _layers(spec)[2]["encoding"]["x"]["scale"]["domain"][0] >= 0  # not below zero for positive data
    with_zero = pd.concat([d, d.iloc[:1].assign(measured=0.0, case="zero")], ignore_index=True)
    chart = charts.validation_scatter_chart(with_zero, "t", log=True)
    chart.to_dict()
    assert "zero" not in set(chart.layer[2].data["case"])  # not drawable on log axes
    empty = charts.validation_scatter_chart(d.iloc[:0], "t")
    empty.to_dict()
    other = charts.validation_scatter_chart(d.assign(split=["fitted", "not fitted", "extra"]), "t").to_dict()
    assert _layers(other)[2]["encoding"]["color"]["scale"]["domain"] == ["fitted", "not fitted", "extra"]


def test_validation_curve_frame_long_and_ordered():
    t = _errors(6)
    d = charts.validation_curve_frame(t, "request_throughput", "num_adapters", "max_loras")
    assert list(d.columns) == ["x", "value", "source", "series", "case", "split"]
    assert len(d) == 2 * 6 and set(d["source"]) == {"measured", "simulated"}
    assert list(dict.fromkeys(d["series"])) == ["8", "16", "128"]  # numeric order, not text order
    for _, g in d.groupby(["series", "source"]):
        assert g["x"].is_monotonic_increasing
    t.loc[t["case"] == "run 0", "simulated"] = np.nan
    d2 = charts.validation_curve_frame(t, "request_throughput", "num_adapters")
    assert len(d2) == 2 * 6 - 1 and set(d2["series"]) == {"all"}
    assert charts.validation_curve_frame(t, "nope", "num_adapters").empty


def test_validation_curve_chart_encodings():
    d = charts.validation_curve_frame(_errors(6), "mean_ttft_ms", "num_adapters", "max_loras")
    spec = charts.validation_curve_chart(d, "Adapters", "Mean TTFT (ms)", "max_loras", log_x=True,
                                         title="curves").to_dict()
    line, points = _layers(spec)
    assert line["encoding"]["strokeDash"]["scale"]["domain"] == ["measured", "simulated"]
    assert line["encoding"]["color"]["field"] == "series"
    assert line["encoding"]["color"]["legend"]["title"] == "max_loras"
    assert line["encoding"]["x"]["scale"]["type"] == "log"
    assert "(log scale)" in line["encoding"]["x"]["title"]
    assert points["encoding"]["fill"]["condition"]["test"] == "(datum.source === 'measured')"
    one = charts.validation_curve_chart(charts.validation_curve_frame(_errors(6), "mean_ttft_ms", "num_adapters"),
                                        "Adapters", "TTFT").to_dict()
    assert "field" not in _layers(one)[0]["encoding"]["color"]  # one series: a fixed colour, no legend


def test_validation_charts_from_the_committed_error_csvs():
    """End to end on `python -m engine validate` output: every metric's scatter and curves build."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "docs" / "validation"
    files = {"slora_s1_errors.csv": "num_adapters", "vllm_errors.csv": "max_cpu_loras"}
    if not all((root / f).is_file() for f in files):
        pytest.skip("docs/validation/*_errors.csv not generated")
    for f, x in files.items():
        t = pd.read_csv(root / f)
        for m in t["metric"].unique():
            d = charts.validation_scatter_frame(t, m)
            assert 0 < len(d) <= (t["metric"] == m).sum()
            charts.validation_scatter_chart(d, m).to_dict()
            c = charts.validation_curve_frame(t, m, x)
            charts.validation_curve_chart(c, x, m, log_x=charts.use_log_scale(c["x"])).to_dict()
        d = charts.validation_scatter_frame(t, t["metric"].iloc[0])
        assert charts.validation_scatter_chart(d, "x").to_json() == charts.validation_scatter_chart(d, "x").to_json()


def test_log_ticks_and_split_legend():
    assert charts.log_ticks(100, 4157) == [100, 200, 500, 1000, 2000]
    assert charts.log_ticks(30, 2e6) == [100, 1e3, 1e4, 1e5, 1e6]  # decades only over a wide span
    assert charts.log_ticks(0.5, 40) == [0.5, 1, 2, 5, 10, 20]
    assert charts.log_ticks(0, 10) == [] and charts.log_ticks(5, 5) == []
    # one rule with the SVG charts' axis (svgchart._log_ticks): inside one decade with no 1, 2 or 5 in it, linear
    # ticks (never a single tick); over more than ten decades, every k-th power only
    narrow = charts.log_ticks(0.61, 0.93)
    assert len(narrow) >= 2 and all(0.61 <= v <= 0.93 for v in narrow)
    wide = charts.log_ticks(1e-3, 1e12)
    assert 2 <= len(wide) <= 8 and wide == [v for v in [10.0**k for k in range(-3, 13)] if v in wide]
    html = charts.split_legend_html(["held-out", "train"], "note")
    assert html.index("train") < html.index("held-out")  # fixed order
    assert charts.SPLIT_STYLE["held-out"][0] in html and "note" in html


def test_validation_scatter_chart_log_ticks_and_no_legend():
    d = charts.validation_scatter_frame(_errors(), "mean_ttft_ms")
    spec = charts.validation_scatter_chart(d, "t", legend=False).to_dict()
    points = _layers(spec)[2]
    lo, hi = points["encoding"]["x"]["scale"]["domain"]
    assert points["encoding"]["x"]["axis"]["values"] == charts.log_ticks(lo, hi)
    assert points["encoding"]["color"]["legend"] is None and points["encoding"]["shape"]["legend"] is None
    assert _layers(spec)[0]["encoding"]["fill"]["legend"] is None  # bands: explained next to the chart
    fills = _layers(spec)[0]["encoding"]["fill"]["scale"]
    assert fills["domain"] == ["±25%", "±10%"] and fills["range"][0] > fills["range"][1]  # wide band lighter


# -------------------------------------------------------------------- planner
def _plan_table() -> pd.DataFrame:
    """A hand-made ``engine.planner.plan(...).table`` (ranked best first, as the planner returns it)."""
    rows = [  # gpu, max_loras, strategy, feasible, price, max rate, CI, meets, recommended, tie, $/Mtok, reason
        ("h100-80gb", 32, "slora", True, 3.0, 40.0, (38.0, 42.0), True, True, False, 0.40, ""),
        ("h100-80gb", 8, "vllm", True, 3.0, 39.0, (37.0, 41.0), True, False, True, 0.41, ""),
        ("a100-80gb", 32, "slora", True, 1.3, 20.0, (19.0, 21.0), True, False, False, 0.35, ""),
        ("a100-80gb", 8, "vllm", True, 1.3, 18.0, (17.0, 19.0), True, False, False, 0.38, ""),
        ("h200", 8, "vllm", True, 4.0, 30.0, (29.0, 31.0), True, False, False, 0.70, ""),
        ("l4", 8, "vllm", True, 0.7, 0.0, (np.nan, np.nan), False, False, False, np.nan, "SLO not met at any probed "
                                                                                         "value: ttft_p99_ms = 900"),
        ("rtx3090", 8, "vllm", False, 0.3, np.nan, (np.nan, np.nan), False, False, False, np.nan,
         "weights do not fit"),
    ]
    t = pd.DataFrame([{"config": i, "gpu": g, "max_loras": m, "strategy": s, "feasible": f, "price_usd_per_hour": p,
                       "max_rate_rps": r, "max_rate_rps_ci_low": ci[0], "max_rate_rps_ci_high": ci[1],
                       "meets_slo": ok, "recommended": rec, "tie_with_best": tie, "cost_per_mtok_usd": c,
                       "throughput_tok_s": r * 64.0, "reason": why}
                      for i, (g, m, s, f, p, r, ci, ok, rec, tie, c, why) in enumerate(rows)])
    return t.set_index("config", drop=False)


def test_plan_frontier_frame_marks_the_pareto_front_and_keeps_the_planners_flags():
    t = _plan_table()
    d = charts.plan_frontier_frame(t, "max_rate")
    # every feasible candidate with a cost and a goodput (l4 fails the SLO but is plotted at 0; rtx3090 is not)
    assert d["label"].tolist() == ["h100-80gb · 32 · slora", "h100-80gb · 8 · vllm", "a100-80gb · 32 · slora",
                                   "a100-80gb · 8 · vllm", "h200 · 8 · vllm", "l4 · 8 · vllm"]
    # price axis: a100 32 (cheapest of the SLO-meeting) and h100 32 (best); h100 8 is dominated by h100 32 at the
    # same price, a100 8 by a100 32, h200 by h100 32; l4 fails the SLO, so it is no frontier point
    assert d["on_frontier"].tolist() == [True, False, True, False, False, False]
    assert d["status"].tolist() == ["recommended", "tie with the best", "on the frontier", "dominated", "dominated",
                                    "fails the SLO"]
    assert d.loc[0, "ci_low"] == 38.0 and d.loc[0, "ci_high"] == 42.0
    # US$/Mtok axis: a100 32 is cheapest per token and h100 32 the fastest; l4 has no cost per token
    m = charts.plan_frontier_frame(t, "max_rate", "cost_per_mtok_usd")
    assert m["on_frontier"].tolist() == [True, False, True, False, False]
    assert "l4 · 8 · vllm" not in m["label"].tolist()
    assert charts.pareto_front(m, "cost", "goodput").tolist() == m["on_frontier"].tolist()


def test_plan_frontier_chart_layers_front_line_and_recommendation():
    t = _plan_table()
    chart = charts.plan_frontier(t, "max_rate")
    spec = chart.to_dict()  # validates against the Vega-Lite schema
    bars, line, points, ring, labels = _layers(spec)
    assert bars["mark"]["type"] == "rule" and line["mark"]["type"] == "line"
    assert points["encoding"]["x"]["field"] == "cost" and points["encoding"]["y"]["field"] == "goodput"
    assert points["encoding"]["color"]["field"] == "status" and points["encoding"]["shape"]["field"] == "status"
    assert points["encoding"]["x"]["title"].startswith("GPU price (US$/h")
    assert chart.layer[1].data["label"].tolist() == ["a100-80gb · 32 · slora", "h100-80gb · 32 · slora"]  # by cost
    assert chart.layer[3].data["label"].tolist() == ["h100-80gb · 32 · slora"]  # the ring: the recommendation
    assert len(chart.layer[2].data) == 6 and len(chart.layer[0].data) == 5  # the CI bars: finite CIs only
    assert set(chart.layer[4].data["label"]) == {"a100-80gb · 32 · slora", "h100-80gb · 32 · slora"}
    cost = charts.plan_frontier(t, "max_rate", "cost_per_mtok_usd").to_dict()
    assert _layers(cost)[2]["encoding"]["x"]["title"] == "US$ per million output tokens"


def test_plan_frontier_other_objectives():
    t = _plan_table()
    t["max_adapters"], t["max_adapters_ci_low"], t["max_adapters_ci_high"] = t["max_rate_rps"] * 10, np.nan, np.nan
    d = charts.plan_frontier_frame(t, "max_adapters")
    assert d["goodput"].iloc[0] == 400.0 and d["ci_low"].isna().all()
    charts.plan_frontier(t, "max_adapters").to_dict()
    t["meets_slo_frac"] = t["meets_slo"].astype(float)
    d = charts.plan_frontier_frame(t, "min_cost", "cost_per_mtok_usd")
    assert d["goodput"].iloc[0] == 40.0 * 64 and d["ci_low"].isna().all()  # throughput at the base rate
    charts.plan_frontier(t, "min_cost", "cost_per_mtok_usd").to_dict()


def test_plan_frontier_empty_or_infeasible_gives_a_note():
    t = _plan_table()
    for table, axis, words in ((t.iloc[:0], "price_usd_per_hour", "No candidate to plot"),
                               (t.assign(feasible=False), "price_usd_per_hour", "No feasible candidate"),
                               (t.assign(cost_per_mtok_usd=np.nan), "cost_per_mtok_usd",
                                "No candidate has a us$ per million")):
        assert len(charts.plan_frontier_frame(table, "max_rate", axis)) == 0
        chart = charts.plan_frontier(table, "max_rate", axis)
        spec = chart.to_dict()
        assert spec["mark"]["type"] == "text" and words.lower() in chart.data["note"].iloc[0].lower(), words


def test_plan_frontier_from_a_real_plan():
    """End to end on the planner's own table: the chart builds and validates."""
    from engine import planner

    res = planner.plan(legacy_preset("default", duration_s=40.0), {"ttft_p99_ms": 500},
                       {"gpu": ["a100-80gb", "h100-80gb"], "max_loras": [8], "strategy": ["vllm"]}, replications=1)
    d = charts.plan_frontier_frame(res.table, res.objective)
    assert len(d) == 2 and d["recommended"].sum() == 1 and d["on_frontier"].any()
    charts.plan_frontier(res.table, res.objective).to_dict()
    charts.plan_frontier(res.table, res.objective, "cost_per_mtok_usd").to_dict()


def _replicas_plan() -> tuple[pd.DataFrame, pd.DataFrame]:
    """A hand-made min_replicas ``plan(...)`` (table ranked best first, runs per replication), 3 replications."""
    rows = [  # gpu, router, per replication (0: none up to the cap), price/GPU, meets, recommended, tie, reason
        ("h100-80gb", "least_loaded", (2, 2, 3), 3.0, True, True, False, ""),
        ("h100-80gb", "lora_affinity", (2, 3, 2), 3.0, True, False, True, ""),
        ("a100-80gb", "least_loaded", (4, 4, 5), 1.3, True, False, False, ""),
        ("a10g", "least_loaded", (12, 0, 14), 1.0, False, False, False, "SLO not met with up to 16 replicas in 1 "
                                                                        "of 3 replication(s): ..."),
        ("rtx3090", "least_loaded", (), 0.3, False, False, False, "weights do not fit"),
    ]
    table, runs = [], []
    for i, (g, r, vals, p, ok, rec, tie, why) in enumerate(rows):
        v = np.array(vals, float)
        good = len(v) and (v > 0).all()
        need = float(v.mean()) if good else np.nan
        top = float(v.max()) if good else np.nan
        table.append({"config": i, "gpu": g, "router": r, "strategy": "vllm", "feasible": g != "rtx3090",
                      "price_usd_per_hour": p, "replicas_needed": need, "replicas_needed_ci_low": need - 0.5,
                      "replicas_needed_ci_high": need + 0.5, "replicas_needed_max": top,
                      "replicas_by_replication": ",".join(str(int(x)) if x > 0 else ">16" for x in v),
                      "fleet_price_usd_per_hour": p * top, "cost_per_mtok_usd": p * top / 10.0,
                      "throughput_tok_s": 3800.0 if good else np.nan, "meets_slo": ok, "recommended": rec,
                      "tie_with_best": tie, "reason": why})
        runs += [{"config": i, "replication": k, "value": x} for k, x in enumerate(v)]
    return pd.DataFrame(table).set_index("config", drop=False), pd.DataFrame(runs)


def test_plan_replicas_frame_per_replication_in_the_planners_order():
    t, runs = _replicas_plan()
    d = charts.plan_replicas_frame(t, runs)
    assert list(d.columns) == ["config", "label", "order", "status", "replication", "replicas", "deploy", "mean",
                               "low", "high", "cost", "per_replication", "n"]
    assert list(d["config"]) == [0, 0, 0, 1, 1, 1, 2, 2, 2]  # SLO-meeting candidates only, best first
    assert list(d["label"].iloc[::3]) == ["h100-80gb · vllm · least_loaded", "h100-80gb · vllm · lora_affinity",
                                          "a100-80gb · vllm · least_loaded"]  # the planner's fields, router last
    assert list(d["status"].iloc[::3]) == ["recommended", "tie with the best", "ranked lower"]
    assert list(d["replicas"]) == [2, 2, 3, 2, 3, 2, 4, 4, 5] and (d["n"] == 3).all()
    first = d.iloc[0]
    assert (first["deploy"], first["low"], first["high"]) == (3.0, 2.0, 3.0)
    assert first["mean"] == pytest.approx(7 / 3) and first["per_replication"] == "2,2,3"
    assert list(d["cost"].iloc[::3]) == [9.0, 9.0, 6.5]  # the fleet's price: replicas to deploy x GPU price
    m = charts.plan_replicas_frame(t, runs, "cost_per_mtok_usd")
    assert list(m["cost"].iloc[::3]) == pytest.approx([0.9, 0.9, 0.65])
    pd.testing.assert_frame_equal(charts.plan_replicas_frame(t), d)  # without runs: read from the table's text
    fields = charts.plan_replicas_frame(t, runs, fields=["gpu", "router"])
    assert fields["label"].iloc[0] == "h100-80gb · least_loaded"


def test_plan_replicas_chart_bars_spread_dots_and_the_fleet_cost_beside():
    t, runs = _replicas_plan()
    chart = charts.plan_replicas_chart(t, runs, fields=["gpu", "router"])
    spec = chart.to_dict()  # validates against the Vega-Lite schema
    assert spec["title"] == "Replicas needed, and what the fleet costs" and spec["resolve"]["scale"]["y"] == "shared"
    left, right = spec["hconcat"]
    bars, spread, dots, counts = left["layer"]
    assert [bars["mark"]["type"], spread["mark"]["type"], dots["mark"]["type"], counts["mark"]["type"]] == \
        ["bar", "rule", "circle", "text"]
    assert bars["encoding"]["x"]["field"] == "deploy" and spread["encoding"]["x2"]["field"] == "high"
    assert dots["encoding"]["x"]["field"] == "replicas"
    order = ["h100-80gb · least_loaded", "h100-80gb · lora_affinity", "a100-80gb · least_loaded"]
    assert bars["encoding"]["y"]["sort"] == order  # the planner's order, best on top
    assert bars["encoding"]["color"]["scale"]["domain"] == ["recommended", "tie with the best", "ranked lower"]
    assert bars["encoding"]["color"]["scale"]["range"] == [charts.PLAN_STATUS[s][0] for s in
                                                           ("recommended", "tie with the best", "dominated")]
    assert len(chart.hconcat[0].layer[0].data) == 3 and len(chart.hconcat[0].layer[2].data) == 9
    cbars, ctext = right["layer"]
    assert right["title"] == "The fleet's price per hour" and cbars["encoding"]["x"]["field"] == "cost"
    assert cbars["encoding"]["x"]["title"].startswith("Fleet price (US$/h")
    assert cbars["encoding"]["y"]["axis"] is None  # the labels are the left panel's
    assert list(chart.hconcat[1].data["cost"]) == [9.0, 9.0, 6.5]  # (both layers' data, hoisted)
    mtok = charts.plan_replicas_chart(t, runs, "cost_per_mtok_usd").to_dict()
    assert mtok["hconcat"][1]["title"] == "The fleet's cost per million tokens"
    assert mtok["hconcat"][1]["layer"][0]["encoding"]["x"]["title"] == "US$ per million output tokens"
    assert charts.plan_replicas_chart(t, runs).to_dict() == charts.plan_replicas_chart(t, runs).to_dict()
    assert charts.unvalidated(charts.plan_replicas_chart(t, runs)).to_dict() == \
        charts.plan_replicas_chart(t, runs).to_dict()


def test_plan_replicas_chart_with_nothing_to_plot_says_so():
    t, runs = _replicas_plan()
    for table, words in ((t.iloc[:0], "No candidate to plot"),
                         (t.assign(meets_slo=False, replicas_needed_max=np.nan), "No candidate meets the SLO")):
        assert len(charts.plan_replicas_frame(table, runs)) == 0
        chart = charts.plan_replicas_chart(table, runs)
        assert chart.to_dict()["mark"]["type"] == "text" and words in chart.data["note"].iloc[0]
    assert len(charts.plan_replicas_frame(_plan_table())) == 0  # not a min_replicas table


def test_plan_replicas_chart_from_a_real_plan():
    """End to end on the planner's own min_replicas result: the chart builds, validates, and has one dot per
    replication of every candidate that meets the SLO."""
    from engine import planner

    sc = legacy_preset("default", duration_s=40.0, num_adapters=50, arrival_rate_rps=40.0)
    res = planner.plan(sc, {"ttft_p99_ms": 400.0}, {"gpu": ["a100-80gb", "h100-80gb"]}, replications=2,
                       objective="min_replicas", workers=1)
    d = charts.plan_replicas_frame(res.table, res.runs, fields=list(res.grid))
    ok = res.table[res.table["meets_slo"]]
    assert len(d) == 2 * len(ok) > 0 and d["status"].iloc[0] == "recommended"
    assert list(d.drop_duplicates("config")["deploy"]) == list(ok["replicas_needed_max"])
    pd.testing.assert_frame_equal(charts.plan_replicas_frame(res.table, fields=list(res.grid)), d)
    for axis in charts.REPLICAS_COST:
        charts.plan_replicas_chart(res.table, res.runs, axis, list(res.grid)).to_dict()


# ------------------------------------- the chart frames against the pandas code they replaced (the slow reference)
def _cdf_frame_ref(requests, window=None, n_points=charts.CDF_POINTS):
    p = charts.cdf_probabilities(n_points)
    parts = []
    for s, req in requests.items():
        r = req[req["completed"]]
        if window is not None:
            r = r[(r["arrival_s"] >= window[0]) & (r["arrival_s"] < window[1])]
        x = r["ttft_ms"].to_numpy(dtype=float)
        x = x[np.isfinite(x)]
        if len(x) == 0:
            continue
        parts.append(pd.DataFrame({"strategy": s, "ttft_ms": np.quantile(x, p), "cdf": p}))
    if not parts:
        return pd.DataFrame({"strategy": pd.Series(dtype=str), "ttft_ms": pd.Series(dtype=float),
                             "cdf": pd.Series(dtype=float)})
    return pd.concat(parts, ignore_index=True)


def _timeseries_frame_ref(timeseries, metrics=tuple(charts.TS_METRICS), max_points=charts.TS_MAX_POINTS, t_max=None):
    parts = []
    for s, ts in timeseries.items():
        t = ts if t_max is None else ts[ts["t_s"] <= t_max]
        t = charts.downsample(t, max_points)
        for m in metrics:
            parts.append(pd.DataFrame({"strategy": s, "t_s": t["t_s"].to_numpy(dtype=float),
                                       "metric": m, "value": t[m].to_numpy(dtype=float)}))
    if not parts:
        return pd.DataFrame(columns=["strategy", "t_s", "metric", "value"])
    return pd.concat(parts, ignore_index=True)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 400), min_size=0, max_size=4), seed=st.integers(0, 2**31 - 1),
       window=st.one_of(st.none(), st.tuples(st.integers(0, 50).map(float), st.integers(0, 100).map(float))),
       n_points=st.integers(2, 300), nan_share=st.sampled_from([0.0, 0.3, 1.0]))
def test_cdf_frame_equals_the_pandas_reference(sizes, seed, window, n_points, nan_share):
    rng = np.random.default_rng(seed)
    reqs = {}
    for i, n in enumerate(sizes):
        ttft = rng.lognormal(3, 1, n)
        ttft[rng.random(n) < nan_share] = np.nan
        reqs[f"s{i}"] = pd.DataFrame({"arrival_s": rng.integers(0, 100, n).astype(float), "ttft_ms": ttft,  # (ties)
                                      "completed": rng.random(n) < 0.9, "other": np.arange(n)})
    pd.testing.assert_frame_equal(charts.cdf_frame(reqs, window, n_points), _cdf_frame_ref(reqs, window, n_points))


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 900), min_size=0, max_size=4), max_points=st.integers(2, 500),
       t_max=st.one_of(st.none(), st.integers(-1, 1000).map(lambda k: k * 0.3)),  # (on _timeseries' grid: ties)
       n_metrics=st.integers(1, len(charts.TS_METRICS)))
def test_timeseries_frame_equals_the_pandas_reference(sizes, max_points, t_max, n_metrics):
    ts = {f"s{i}": _timeseries(n) for i, n in enumerate(sizes)}
    metrics = list(charts.TS_METRICS)[:n_metrics]
    got = charts.timeseries_frame(ts, metrics, max_points, t_max)
    want = _timeseries_frame_ref(ts, metrics, max_points, t_max)
    if len(want) == 0:
        assert len(got) == 0 and list(got.columns) == list(want.columns)
    else:
        pd.testing.assert_frame_equal(got, want)
