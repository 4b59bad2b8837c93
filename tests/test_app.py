"""The Streamlit app under AppTest: every page renders, controls drive the KPI table, the URL
restores a scenario (bad parameters warn instead of failing), downloads carry the engine's
data, scenario.json and trace uploads work."""
from __future__ import annotations

import io
import json
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pandas as pd
import pytest
from conftest import chart_views, download, goto, kpi_rows, kpi_tables, opened, share_link, svg_charts, uploader
from streamlit.testing.v1 import AppTest

from app import controls, exports, page_whatif
from app.page_whatif import STRATEGY_COLUMN, fmt_value
from engine import TRACES, Scenario, presets, simulate

ROOT = Path(__file__).resolve().parent.parent
MAIN = str(ROOT / "app" / "main.py")
# Generous: the first run in a fresh process may compile the Numba kernels.
TIMEOUT = 180
#: Short runs keep the page tests fast (the default preset simulates 600 s).
FAST = {"duration_s": "60"}
DEFAULT = Scenario.from_preset("default")


def app(**query) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    return at


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def kpi_table(at: AppTest) -> pd.DataFrame:
    """The What-if page's comparison table (``page_whatif.kpi_table``): one row per strategy, Markdown cells, read
    back from the HTML the page draws (``conftest.kpi_tables``)."""
    (table,) = kpi_tables(at)
    return table


def row_of(at: AppTest, strategy: str) -> pd.Series:
    t = kpi_table(at)
    return t[t[STRATEGY_COLUMN].str.startswith(f"**{strategy}**")].iloc[0]


def charts(at: AppTest) -> list:
    return list(at.get("vega_lite_chart"))


def scenario_of(at: AppTest, store: dict) -> Scenario:
    # the app's scenario.json: a scenario plus the compared strategies and replications (app.exports reads it)
    return exports.read_scenario_json(download(at, "dl_scenario", store).decode())[0]


# ------------------------------------------------------------------- pages
def test_home_page_renders_kpis_verdict_and_charts():
    at = ok(app().run())
    assert at.title[0].value == "What-if"
    assert not at.metric, "one table, no tiles"
    table = kpi_table(at)  # naive, hot_set, batch, vllm, slora x six KPIs
    assert list(table.columns) == [STRATEGY_COLUMN, "TTFT p50", "TTFT p99", "Tokens / s", "Swap rate", "Swap share",
                                   "SLO met"]
    assert [c.split("  \n")[0] for c in table[STRATEGY_COLUMN]] == ["**naive**", "**hot_set**", "**batch**",
                                                                   "**vllm**", "**slora**"]
    assert all(" ± " in c for c in table["TTFT p50"]), "the mean and the half-width of its CI (3 replications)"
    # the default verdict objective (noise-aware): the default scenario separates the policies
    assert any("p99 TTFT" in i.value and "**slora**" in i.value and "wins" in i.value for i in at.info)
    assert any("Try next:" in c.value for c in at.caption)  # the preset's hint, loaded unchanged
    # one chart at a time: the TTFT CDF first; the selector offers the breakdown and six time series
    (svg,) = svg_charts(at)
    assert not charts(at) and '<h4 class="wi-h">Time to first token</h4>' in chart_views(at)[0]
    root = ElementTree.fromstring(svg)  # the TTFT CDF: one line per compared strategy
    assert len(list(root.iter("{http://www.w3.org/2000/svg}polyline"))) == 5 and "TTFT distribution" in svg
    picker = at.segmented_control(key=page_whatif.K_CHART)
    assert picker.value == "cdf" and picker.options == [page_whatif.CHARTS[k] for k in page_whatif.CHARTS]
    # the details under the table, one tab at a time, only the open one built: the chart first
    details = at.segmented_control(key=page_whatif.K_DETAIL)
    assert details.value == "chart" and details.options == list(page_whatif.DETAILS.values()) and not at.tabs
    assert not [m for m in at.markdown if "**naive**:" in m.value] and not at.get("download_button")
    default = Scenario.from_preset("default")
    assert presets.GPUS[default.gpu].label in at.caption[0].value
    assert f"{default.arrival_rate_rps:g} req/s" in at.caption[0].value
    assert at.multiselect(key="strategy").value == ["naive", "hot_set", "batch", "vllm", "slora"]
    # deltas against the baseline (under the value), none on the baseline itself
    assert at.selectbox(key="baseline").value == "naive"
    assert row_of(at, "naive")[STRATEGY_COLUMN].endswith(":gray[baseline]")
    assert not any("  \n" in c for c in row_of(at, "naive").iloc[1:])
    assert all("  \n:" in c for c in row_of(at, "slora").iloc[1:])
    # the best among the contenders is marked, where it stands out of the noise
    assert page_whatif.BEST in "".join(table.iloc[:, 1:].to_numpy().ravel())


def test_the_why_and_export_sections_are_built_when_picked():
    """Why: each strategy's bottlenecks; Export: the download buttons; each built only while it is the section picked (the
    chart then is not), so a slider step draws one of them."""
    at = ok(app(**FAST).run())
    opened(at, page_whatif.K_DETAIL, "why")
    why = [m.value for m in at.markdown if "**naive**:" in m.value]
    assert why and any(k in why[0] for k in ("busy", "queue", "bottleneck", "loads", "KV", "slots"))
    assert not svg_charts(at) and not at.get("download_button")
    opened(at, page_whatif.K_DETAIL, "export")
    keys = [b.key for b in at.get("download_button")]
    assert keys[:4] == ["dl_requests", "dl_summary", "dl_timeseries", "dl_scenario"] and len(keys) == 4 + len(TRACES)
    # (a click downloads without a rerun: a rerun would drop the file the click asks for; test_download_buttons)
    assert all(b.proto.ignore_rerun for b in at.get("download_button"))
    assert not svg_charts(at) and not [m for m in at.markdown if "**naive**:" in m.value]
    opened(at, page_whatif.K_DETAIL, "chart")
    assert len(svg_charts(at)) == 1 and not at.get("download_button")


def test_the_chart_view_escapes_its_text(monkeypatch):
    """The chart view sets its HTML as is (page_whatif._SVG_VIEW, no sanitiser): the conditions line in it is
    escaped, so a name that reached it could not inject markup."""
    hostile = '<img src=x onerror="alert(1)"> & <b>'
    monkeypatch.setattr(controls, "conditions", lambda sc: hostile)
    at = ok(app(**FAST).run())
    (view,) = chart_views(at)
    assert "<img" not in view and "<b>" not in view
    assert "&lt;img src=x onerror=\"alert(1)\"&gt; &amp; &lt;b&gt;" in view


def test_every_chart_of_the_selector_draws_one_chart():
    at = ok(app(**FAST).run())
    specs = []
    for key in page_whatif.CHARTS:
        at.segmented_control(key=page_whatif.K_CHART).set_value(key)
        ok(at.run())
        (svg,) = svg_charts(at)
        assert not charts(at), key
        specs.append(svg)
        heading = "Time to first token" if key in ("cdf", "breakdown") else "Inside the server over time"
        assert f'<h4 class="wi-h">{heading}</h4>' in chart_views(at)[0], key
    assert len(set(specs)) == len(page_whatif.CHARTS), "each option its own chart"
    assert len(kpi_table(at)) == len(controls.DEFAULT_STRATEGIES), "the rest of the page stays"


@pytest.mark.parametrize("page, expect", [
    ("sweeps", "Sweeps"), ("crossover", "Crossover"), ("model", None),
])
def test_every_page_renders(page, expect):
    at = ok(app(**FAST).run())
    goto(at, page)
    ok(at.run())
    assert len(at.sidebar.children) > 0, "the sidebar keeps its footer on every page"
    if expect:  # a page of the shared scenario: its controls stay in the sidebar
        assert at.sidebar.slider(key="arrival_rate_rps").value == DEFAULT.arrival_rate_rps
        assert at.title[0].value == expect
        assert charts(at), "the page draws its charts"
        assert not at.error
    else:  # model page: docs/model.md or the note that it is missing
        assert at.markdown or at.info
        # it ignores the scenario: no controls in the sidebar, but the scenario is remembered
        assert not at.sidebar.get("slider") and not at.sidebar.get("selectbox")
        values = at.session_state[controls.STATE_KEY].values
        assert values["arrival_rate_rps"] == DEFAULT.arrival_rate_rps and values["duration_s"] == 60.0


def test_sweeps_figure_preset_and_work_cap():
    at = ok(app(**FAST).run())
    goto(at, "sweeps")
    ok(at.run())
    assert at.title[0].value == "Sweeps"
    assert at.selectbox(key="sweep_x").value == "arrival_rate_rps"
    assert len(charts(at)) == 3  # TTFT p50, p99, swap rate vs x
    at.selectbox(key="sweep_figure").set_value("Distribution effect (Zipf skew)")
    ok(at.run())
    assert at.selectbox(key="sweep_x").value == "zipf_s"
    assert any("cap 2,500,000" in c.value for c in at.caption)
    # too much work: refused with the cap stated, nothing simulated
    at.slider(key="duration_s").set_value(3600.0)
    at.slider(key="sweep_points").set_value(12)
    at.slider(key="sweep_reps").set_value(5)
    ok(at.run())
    assert any("above the cap" in e.value for e in at.error)


# ---------------------------------------------------------------- controls
def test_changing_a_slider_changes_the_kpis():
    at = ok(app().run())
    before = kpi_rows(at)
    at.slider(key="zipf_s").set_value(1.6)
    ok(at.run())
    after = kpi_rows(at)
    assert len(after) == len(before) and after != before
    assert "Zipf s=1.6" in at.caption[0].value


def test_preset_switch_resets_every_control():
    at = ok(app(**FAST).run())
    at.selectbox(key="preset").set_value("seed1-rtx3090")
    ok(at.run())
    seed = Scenario.from_preset("seed1-rtx3090")
    assert at.selectbox(key="gpu").value == "rtx3090"
    assert at.slider(key="pcie_gbps").value == seed.pcie_gbps == 16.0
    assert at.slider(key="vram_budget_gb").value == seed.vram_budget_gb
    assert at.slider(key="arrival_rate_rps").value == seed.arrival_rate_rps
    assert at.slider(key="num_adapters").value == seed.num_adapters
    assert "RTX 3090" in at.caption[0].value and len(kpi_table(at)) == len(controls.DEFAULT_STRATEGIES)


def test_strategies_alias_in_the_url():
    at = ok(app(strategies=["slora", "naive"], **FAST).run())
    assert not at.warning
    assert at.multiselect(key="strategy").value == ["slora", "naive"]
    assert len(kpi_table(at)) == 2


def test_changing_the_gpu_resets_pcie_to_its_link():
    at = ok(app(**FAST).run())
    assert at.slider(key="pcie_gbps").value == 50.0  # the default's H100 80 GB
    at.selectbox(key="gpu").set_value("a100-80gb")
    ok(at.run())
    assert at.slider(key="pcie_gbps").value == 25.0
    assert "A100" in at.caption[0].value


def test_vram_slider_range_follows_gpu_and_model():
    at = ok(app(**FAST).run())
    mx = Scenario.from_preset("default").max_vram_budget_gb()
    assert mx - 0.25 < at.slider(key="vram_budget_gb").max <= mx
    at.selectbox(key="gpu").set_value("rtx3090")
    ok(at.run())
    mx = Scenario.from_preset("default", gpu="rtx3090").max_vram_budget_gb()
    assert mx - 0.25 < at.slider(key="vram_budget_gb").max <= mx
    assert at.slider(key="vram_budget_gb").value == DEFAULT.vram_budget_gb  # kept: still in range


def test_query_params_restore_the_scenario(media):
    at = ok(app(arrival_rate_rps="32", zipf_s="1.1", strategy="batch", gpu="a100-80gb", num_adapters="300",
                **FAST).run())
    assert not at.warning
    assert at.slider(key="arrival_rate_rps").value == 32.0
    assert at.slider(key="zipf_s").value == 1.1
    assert at.slider(key="num_adapters").value == 300
    assert at.selectbox(key="gpu").value == "a100-80gb"
    assert at.slider(key="pcie_gbps").value == 25.0  # the GPU's link, not in the URL
    assert at.multiselect(key="strategy").value == ["batch"]
    assert len(kpi_table(at)) == 1
    sc = scenario_of(at, media)
    assert (sc.arrival_rate_rps, sc.zipf_s, sc.gpu, sc.num_adapters, sc.strategy) == (32.0, 1.1, "a100-80gb",
                                                                                       300, "batch")
    # the cell: mean over the default 3 replications (seeds 0, 1, 2) +- the half-width of its 95 % CI
    from engine import mean_ci
    m, lo, hi = mean_ci([simulate(sc.replace(seed=sc.seed + k)).summary["ttft_p50_ms"] for k in range(3)])
    assert row_of(at, "batch")["TTFT p50"] == f"{fmt_value(m, 'ms')} ± {fmt_value((hi - lo) / 2, 'ms')}"
    # the share link carries every control
    link = share_link(at)
    for part in ["arrival_rate_rps=32", "zipf_s=1.1", "strategy=batch", "gpu=a100-80gb", "num_adapters=300"]:
        assert part in link


def test_bad_query_params_warn_and_the_app_still_renders():
    at = ok(app(arrival_rate_rps="-5", zipf_s="abc", foo="1", gpu="tpu-v9", strategy=["batch", "nope"],
                **FAST).run())
    text = " ".join(w.value for w in at.warning)
    for name in ["arrival_rate_rps", "zipf_s", "foo", "gpu", "strategy"]:
        assert f"`{name}`" in text, name
    assert at.slider(key="arrival_rate_rps").value == 0.5  # clamped to the minimum
    assert at.slider(key="zipf_s").value == 1.0  # dropped: default
    assert at.selectbox(key="gpu").value == Scenario.from_preset("default").gpu  # dropped: the preset's
    assert at.multiselect(key="strategy").value == ["batch"]
    assert len(kpi_table(at)) == 1
    assert "foo" not in at.query_params and at.query_params.get("arrival_rate_rps") == "0.5"


def test_work_cap_is_applied_and_stated():
    at = ok(app(arrival_rate_rps="100", duration_s="3600", strategy="naive").run())
    notes = " ".join(i.value for i in at.info)
    assert "200,000" in notes and "2000 s" in notes
    assert len(kpi_table(at)) == 1


def test_invalid_scenario_shows_the_engines_error():
    at = ok(app(gpu="rtx3090", model="llama-2-13b", **FAST).run())
    assert any("model" in e.value and "do not fit" in e.value for e in at.error)


# ----------------------------------------------------------- export / import
def test_downloads_carry_the_engines_data(media):
    at = ok(app(**FAST).run())
    sc = scenario_of(at, media)
    strategies = at.multiselect(key="strategy").value
    res = {s: simulate(sc.replace(strategy=s)) for s in strategies}

    req = pd.read_csv(io.BytesIO(download(at, "dl_requests", media)))
    assert list(req.columns) == ["strategy", *res["naive"].requests.columns]
    assert req.groupby("strategy", sort=False).size().to_dict() == {s: len(r.requests) for s, r in res.items()}
    assert req["ttft_ms"].sum() == pytest.approx(sum(r.requests["ttft_ms"].sum() for r in res.values()))

    summ = pd.read_csv(io.BytesIO(download(at, "dl_summary", media)))
    assert list(summ["strategy"]) == strategies
    assert set(res["naive"].summary) <= set(summ.columns)
    assert summ["ttft_p50_ms"].tolist() == pytest.approx([r.summary["ttft_p50_ms"] for r in res.values()])

    ts = pd.read_csv(io.BytesIO(download(at, "dl_timeseries", media)))
    assert list(ts.columns) == ["strategy", *res["naive"].timeseries.columns]
    assert len(ts) == sum(len(r.timeseries) for r in res.values())


def test_scenario_json_upload_restores_it():
    sc = Scenario.from_preset("default", zipf_s=1.7, arrival_rate_rps=12.0, num_adapters=150, duration_s=60.0,
                              service_mode="fixed", strategy="slora")
    at = ok(app().run())
    uploader(at, "scenario_upload").set_value(("scenario.json", sc.to_json().encode(), "application/json"))
    ok(at.run())
    assert [s.value for s in at.success] == ["Restored scenario.json."]  # nothing had to be adjusted
    assert at.slider(key="zipf_s").value == 1.7
    assert at.slider(key="arrival_rate_rps").value == 12.0
    assert at.slider(key="num_adapters").value == 150
    assert "slora" in at.multiselect(key="strategy").value
    assert len(kpi_table(at)) == len(controls.DEFAULT_STRATEGIES)  # slora is among the defaults
    assert any("service_mode" in c.value for c in at.caption)  # not carried by the URL, said so


@pytest.mark.parametrize("content, expect", [
    (b"{not json", "not valid JSON"),
    (json.dumps({"zipf_s": -1}).encode(), "zipf_s"),
    (json.dumps({"warp_drive": 1}).encode(), "warp_drive"),
])
def test_bad_scenario_json_shows_a_clear_error(content, expect):
    at = ok(app(**FAST).run())
    uploader(at, "scenario_upload").set_value(("bad.json", content, "application/json"))
    ok(at.run())
    assert any(expect in e.value for e in at.error)
    assert len(kpi_table(at)) == len(controls.DEFAULT_STRATEGIES)  # the current scenario is kept


def _trace(n: int = 400, bad_row: int | None = None) -> bytes:
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"arrival_s": np.sort(rng.uniform(0, 55, n)).round(4),
                       "adapter_id": rng.integers(0, 200, n), "prompt_tokens": 256, "output_tokens": 64})
    if bad_row is not None:
        df.loc[bad_row, "adapter_id"] = 999
    return df.to_csv(index=False).encode()


def test_trace_upload_replays_it(media):
    at = ok(app(**FAST).run())
    uploader(at, "trace_upload").set_value(("trace.csv", _trace(), "text/csv"))
    ok(at.run())
    assert any("Replaying the uploaded trace" in i.value for i in at.info)
    req = pd.read_csv(io.BytesIO(download(at, "dl_requests", media)))
    assert req.groupby("strategy").size().unique().tolist() == [400]


def test_bad_trace_names_the_first_bad_row():
    at = ok(app(**FAST).run())
    uploader(at, "trace_upload").set_value(("trace.csv", _trace(bad_row=2), "text/csv"))
    ok(at.run())
    assert any("row 4" in e.value and "adapter_id" in e.value for e in at.error)


# ------------------------------------------------- no hidden state (issue: honest verdicts, item 5)
def _hot_note(at: AppTest) -> list[str]:
    return [c.value for c in at.sidebar.get("caption") if "pins at most" in c.value]


def test_lowering_then_raising_the_budget_keeps_the_hot_set_size():
    """The hot-set size is never clamped by the budget: lowering the budget shows what the run pins (a note), the
    control and the URL keep the user's value, and raising the budget again gives what never moving it gives."""
    q = dict(preset="a100-light", strategy=["naive", "hot_set"], **FAST)  # 64 adapters fit, 48 pinned
    ref = ok(app(**q).run())
    kpis = kpi_rows(ref)
    at = ok(app(**q).run())
    assert at.number_input(key="hot_set_k").value == 48
    at.slider(key="vram_budget_gb").set_value(1.0)
    ok(at.run())
    assert at.number_input(key="hot_set_k").value == 48, "not clamped by the budget"
    assert "hot_set_k" not in at.query_params, "no silent URL change"
    assert at.session_state[controls.STATE_KEY].scenario.hot_set_k == 31  # what fits: 32 slots, one swap slot
    note, = _hot_note(at)
    assert "31" in note and "48" in note
    assert any("Hot-set size 48" in i.value and "pins 31" in i.value for i in at.info), "said on the page too"
    at.slider(key="vram_budget_gb").set_value(2.0)
    ok(at.run())
    assert at.number_input(key="hot_set_k").value == 48 and "hot_set_k" not in at.query_params
    assert not _hot_note(at) and not any("Hot-set size" in i.value for i in at.info)
    assert at.session_state[controls.STATE_KEY].scenario == ref.session_state[controls.STATE_KEY].scenario
    assert kpi_rows(at) == kpis, "the same sidebar, the same results, whatever the path"


def test_a_budget_forced_down_by_the_gpu_says_so_and_comes_back():
    at = ok(app(strategy="naive", gpu="h100-80gb", vram_budget_gb="40", **FAST).run())
    assert at.slider(key="vram_budget_gb").value == 40.0
    at.selectbox(key="gpu").set_value("rtx3090")
    ok(at.run())
    mx = at.slider(key="vram_budget_gb").max
    assert at.slider(key="vram_budget_gb").value == mx < 40
    note, = [c.value for c in at.sidebar.get("caption") if "your 40 GiB" in c.value]
    assert f"{mx:g}" in note and "comes back" in note
    at.selectbox(key="gpu").set_value("h100-80gb")
    ok(at.run())
    assert at.slider(key="vram_budget_gb").value == 40.0, "the user's value, not the clamped one"
    assert not [c.value for c in at.sidebar.get("caption") if "your 40 GiB" in c.value]


def test_vram_caption_states_adapters_kv_and_concurrent_requests():
    from engine.planner import memory_split
    at = ok(app(**FAST).run())
    m = memory_split(at.session_state[controls.STATE_KEY].scenario)
    cap, = [c.value for c in at.sidebar.get("caption") if c.value.startswith("Up to")]
    sc = at.session_state[controls.STATE_KEY].scenario  # 1 GiB over q,k,v,o adapters of rank 32 (52 MiB): 19
    per = presets.adapter_bytes(presets.get_model(sc.model), sc.adapter_rank, sc.target_modules)
    assert f"{m['adapters_fit']} adapters" in cap and m["adapters_fit"] == int(sc.vram_budget_gb * 2**30 // per) == 19
    assert f"{m['kv_gib']:.1f} GiB of KV" in cap
    assert f"about {m['kv_concurrent_requests']:,} requests" in cap and "at once" in cap


# ------------------------------------------------------------- exports (item 6)
def test_summary_csv_carries_the_scenario_fields(media):
    at = ok(app(zipf_s="1.3", strategy=["naive", "batch"], **FAST).run())
    sc = scenario_of(at, media)
    summ = pd.read_csv(io.BytesIO(download(at, "dl_summary", media)))
    assert list(summ["strategy"]) == ["naive", "batch"]
    for k in ["gpu", "model", "zipf_s", "vram_budget_gb", "arrival_rate_rps", "duration_s", "seed", "hot_set_k"]:
        assert summ[k].tolist() == [getattr(sc, k)] * 2, k


def test_scenario_json_round_trips_strategies_and_replications(media):
    at = ok(app(strategy=["naive", "batch", "slora"], wi_reps="2", zipf_s="1.4", **FAST).run())
    at.selectbox(key="baseline").set_value("batch")
    ok(at.run())
    data = download(at, "dl_scenario", media)
    d = json.loads(data)
    assert d["strategies"] == ["naive", "batch", "slora"] and d["replications"] == 2 and d["strategy"] == "batch"
    fresh = ok(app().run())
    assert fresh.number_input(key="wi_reps").value == 3
    uploader(fresh, "scenario_upload").set_value(("scenario.json", data, "application/json"))
    ok(fresh.run())
    assert [s.value for s in fresh.success] == ["Restored scenario.json."]
    assert fresh.multiselect(key="strategy").value == ["naive", "batch", "slora"], "the compared set, not appended"
    assert fresh.number_input(key="wi_reps").value == 2
    assert fresh.selectbox(key="baseline").value == "batch"
    assert fresh.slider(key="zipf_s").value == 1.4 and fresh.slider(key="duration_s").value == 60.0
    assert len(kpi_table(fresh)) == 3
    # a plain (older, or the engine CLI's) scenario.json still loads: its strategy joins the current set
    old = Scenario.from_preset("default", zipf_s=0.7, duration_s=60.0, strategy="oracle").to_json().encode()
    uploader(fresh, "scenario_upload").set_value(("old.json", old, "application/json"))
    ok(fresh.run())
    assert [s.value for s in fresh.success] == ["Restored old.json."]
    assert fresh.multiselect(key="strategy").value == ["naive", "batch", "slora", "oracle"]
    assert fresh.slider(key="zipf_s").value == 0.7 and fresh.number_input(key="wi_reps").value == 2


def test_scenario_json_with_bad_replications_is_refused():
    sc = Scenario.from_preset("default", duration_s=60.0)
    bad = json.dumps({**sc.to_dict(), "strategies": ["naive"], "replications": 2.5}).encode()
    at = ok(app(**FAST).run())
    uploader(at, "scenario_upload").set_value(("bad.json", bad, "application/json"))
    ok(at.run())
    assert any("replications" in e.value for e in at.error)
    clamp = json.dumps({**sc.to_dict(), "strategies": ["naive"], "replications": 50}).encode()
    uploader(at, "scenario_upload").set_value(("many.json", clamp, "application/json"))
    ok(at.run())
    assert at.number_input(key="wi_reps").value == 10
    assert any("replications" in s.value and "clamped to 10" in s.value for s in at.success)
