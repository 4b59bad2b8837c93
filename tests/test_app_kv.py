"""The KV interference and Findings pages under AppTest: they render, the allocator drives the
fragmentation column, the table follows the selected policies, its CSV matches, the work cap
refuses oversized runs, and Findings copes with a missing report."""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from conftest import goto
from streamlit.testing.v1 import AppTest

from app import page_findings, page_kv

ROOT = Path(__file__).resolve().parent.parent
MAIN = str(ROOT / "app" / "main.py")
# Generous: the first run in a fresh process may compile the Numba kernels.
TIMEOUT = 180
#: Keeps the What-if page (run first, as the home page) short.
FAST = {"duration_s": "60"}
#: url paths (the pages are functions: AppTest.switch_page cannot address them, see tests/test_app_pages.py).
KV_PAGE = "kv_interference"
FINDINGS_PAGE = "findings"


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def on_page(page: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in FAST.items():
        at.query_params[k] = v
    ok(at.run())
    return ok(goto(at, page).run())


def table(at: AppTest) -> pd.DataFrame:
    assert len(at.dataframe) == 1
    return at.dataframe[0].value


# ------------------------------------------------------------ KV interference
def test_kv_page_renders_table_charts_and_frontier():
    at = on_page(KV_PAGE)
    assert at.title[0].value == "KV interference"
    # the page's own controls, in the page; no shared scenario controls in the sidebar (only its footer)
    assert not at.sidebar.get("slider") and not at.sidebar.get("multiselect") and len(at.sidebar.children) > 0
    assert at.main.multiselect(key="kv_policies").value == page_kv.KV_POLICIES
    assert at.slider(key="kv_rate").value == 78.0  # the qwen2-0.5b preset's rate
    df = table(at)
    assert list(df["policy"]) == page_kv.KV_POLICIES
    assert {"avg_frag", "avg_frag_ci95", "frag_overhead_pp", "throughput_req_s", "throughput_delta_pct",
            "swap_events", "compact_events", "rejections"} <= set(df.columns)
    ref = df.set_index("policy").loc["single_adapter"]
    assert ref["frag_overhead_pp"] == 0 and ref["throughput_delta_pct"] == 0
    assert (df["avg_frag"] > 0).any()  # contiguous allocator in a unified pool fragments
    assert len(list(at.get("vega_lite_chart"))) == 3  # fragmentation, throughput, frontier
    captions = " ".join(c.value for c in at.caption)
    assert f"cap {page_kv.MAX_KV_REQUESTS:,}" in captions
    assert "no external fragmentation by definition" in captions
    assert "A10G" in captions and "unified memory, contiguous KV" in captions
    assert any("Pareto frontier" in m.value for m in at.markdown)
    assert not at.error
    # the model sets the rate default
    at.selectbox(key="kv_model").set_value("qwen2-1.5b")
    ok(at.run())
    assert at.slider(key="kv_rate").value == 27.0


def test_kv_paged_allocator_zeroes_fragmentation_and_rows_follow_the_policies():
    at = on_page(KV_PAGE)
    at.selectbox(key="kv_allocator").set_value("paged")
    ok(at.run())
    df = table(at)
    assert len(df) == len(page_kv.KV_POLICIES)
    assert (df["avg_frag"] == 0).all() and (df["compact_events"] == 0).all()
    assert any("zero fragmentation" in m.value for m in at.markdown)
    chosen = ["slora", "hotset_32mb", "round_robin_k1"]  # no single_adapter: it still runs as the reference
    at.multiselect(key="kv_policies").set_value(chosen)
    at.slider(key="kv_reps").set_value(1)
    ok(at.run())
    df = table(at)
    assert list(df["policy"]) == chosen
    assert not any(c.endswith("_ci95") for c in df.columns)  # one replication: no CIs
    assert df["throughput_delta_pct"].notna().all()
    assert any("including single_adapter" in c.value for c in at.caption)


def test_kv_csv_download_has_the_tables_columns(media):
    at = on_page(KV_PAGE)
    df = table(at)
    url = at.download_button(key="dl_kv_table").proto.url
    csv = pd.read_csv(io.BytesIO(media[url]))
    assert list(csv.columns) == list(df.columns)
    assert list(csv["policy"]) == list(df["policy"])
    assert csv["avg_frag"].tolist() == pytest.approx(df["avg_frag"].tolist())


def test_kv_work_cap_refuses_and_states_it():
    at = on_page(KV_PAGE)
    at.slider(key="kv_duration").set_value(120.0)
    at.slider(key="kv_reps").set_value(5)
    at.slider(key="kv_rate").set_value(200.0)
    ok(at.run())
    assert any("above the cap" in e.value and f"{page_kv.MAX_KV_REQUESTS:,}" in e.value for e in at.error)
    assert len(at.dataframe) == 0


# -------------------------------------------------------------------- findings
def test_findings_renders_the_report_with_verdict_tiles():
    if not page_findings.FINDINGS_MD.is_file():
        pytest.skip("docs/findings.md not generated")
    at = on_page(FINDINGS_PAGE)
    assert at.markdown, "the report is rendered"
    assert not at.info
    parsed = page_findings.verdict_counts(page_findings.FINDINGS_MD.read_text(encoding="utf-8"))
    if parsed is not None:
        counts, _ = parsed
        tiles = {m.label: m.value for m in at.metric}
        assert tiles["Claims checked"] == str(sum(counts.values()))
        assert tiles["Holds"] == str(counts["holds"])
        assert tiles["Partly"] == str(counts["partly"])
        assert tiles["Does not hold"] == str(counts["does not hold"])


def test_findings_without_the_report_says_how_to_generate_it(monkeypatch, tmp_path):
    monkeypatch.setattr(page_findings, "FINDINGS_MD", tmp_path / "findings.md")
    at = on_page(FINDINGS_PAGE)
    assert at.title[0].value == "Findings"
    assert any("python -m engine findings" in i.value for i in at.info)
    assert not at.metric


def test_findings_without_a_verdict_table_just_renders(monkeypatch, tmp_path):
    report = tmp_path / "findings.md"
    report.write_text("# Findings\n\nGenerated with engine 0.0.1.\n\n## Verdicts\n\nNone yet.\n", encoding="utf-8")
    monkeypatch.setattr(page_findings, "FINDINGS_MD", report)
    at = on_page(FINDINGS_PAGE)
    assert not at.metric
    assert any("None yet." in m.value for m in at.markdown)
    assert any("engine 0.0.1" in w.value for w in at.warning)  # stale report flagged


def test_verdict_counts_parse_a_verdict_table():
    text = ("# F\n\n## Verdict rule\n\n| a | b |\n|---|---|\n| x | y |\n\n## Verdicts\n\n"
            "| claim | text | preset view | other view |\n|---|---|---|---|\n"
            "| C1 | a \\| b | **holds** | partly |\n| C2 | c | **does not hold** | n/a |\n"
            "| C3 | d | **partly** | holds |\n| C4 | e | *holds* | holds |\n\n"
            "## Detail\n\n| view | verdict |\n|---|---|\n| p | **partly** |\n")
    counts, column = page_findings.verdict_counts(text)
    assert counts == {"holds": 2, "partly": 1, "does not hold": 1} and column == "preset view"
    assert page_findings.verdict_counts("# F\n\n| a |\n|---|\n| holds |\n") is None  # not under a verdict heading
