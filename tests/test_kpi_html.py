"""The What-if comparison table as one HTML element (``page_whatif.kpi_table_html``): every Markdown form its cells
use becomes its HTML, everything else is text, and the tests' reader (``conftest.table_from_html``) gets the
Markdown back, so the app tests that read the table check what ``kpi_table`` built."""
from __future__ import annotations

import pandas as pd
from conftest import table_from_html
from hypothesis import given
from hypothesis import strategies as st

from app.page_whatif import BEST, KPIS, cell_html, help_html, kpi_help, kpi_table, kpi_table_html

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="*[]:\n\r"), min_size=1,
               max_size=12).filter(lambda t: t.strip() == t and "  " not in t)
PIECE = st.one_of(TEXT, TEXT.map(lambda t: f"**{t}**"),
                  st.tuples(st.sampled_from(["green", "red", "orange", "gray"]), TEXT).map(lambda c: f":{c[0]}[{c[1]}]"))
CELL = st.lists(st.lists(PIECE, min_size=1, max_size=3).map(" ".join), min_size=1, max_size=3).map("  \n".join)


def test_each_markdown_form_becomes_its_html():
    assert cell_html("**slora**") == "<b>slora</b>"
    assert cell_html(":green[-6.3 ms]") == '<span class="green">-6.3 ms</span>'
    assert cell_html(":gray[baseline · reference]") == '<span class="gray">baseline · reference</span>'
    assert cell_html(f"**38.5 ms** {BEST} ± 0.6 ms  \n:red[+1.96 s]") == (
        f'<b>38.5 ms</b> {BEST} ± 0.6 ms<br><span class="red">+1.96 s</span>')
    assert cell_html(":orange[12 of 3,968 requests unfinished]").startswith('<span class="orange">')


def test_anything_else_is_text():
    """A name or value with markup in it (an uploaded model's name reaches the caption, not the table, yet the
    table must not trust its cells) is escaped, and an unknown colour stays as written."""
    assert cell_html('<img src=x onerror="alert(1)">') == '&lt;img src=x onerror="alert(1)"&gt;'
    assert cell_html(":blue[x]") == ":blue[x]"
    assert "<script" not in kpi_table_html(pd.DataFrame({"<script>": ["</td><script>alert(1)</script>"]}))


@given(st.lists(st.lists(CELL, min_size=3, max_size=3), min_size=1, max_size=4))
def test_the_tests_reader_gets_the_markdown_back(rows):
    df = pd.DataFrame(rows, columns=["Strategy", "TTFT p50", "SLO met"])
    pd.testing.assert_frame_equal(table_from_html(kpi_table_html(df)), df)


def test_a_real_table_round_trips():
    reps = {s: [{"ttft_p50_ms": 40.0 + i + k, "ttft_p99_ms": 900.0 + 50 * i + k, "throughput_tok_s": 1125.0 - k,
                 "swap_rate": 0.5 - 0.1 * i, "swap_share_of_ttft": 0.05, "slo_attainment": 0.9 + 0.02 * i,
                 "requests": 3968, "not_completed": 0} for k in range(3)]
            for i, s in enumerate(["naive", "batch", "slora"])}
    df = kpi_table(reps, "naive")
    html = kpi_table_html(df)
    assert html.count("<tr>") == 1 + len(reps) and html.count("<th>") == len(df.columns)
    pd.testing.assert_frame_equal(table_from_html(html), df)


def test_the_definitions_are_a_disclosure_under_the_heading():
    """The table's heading names the baseline; the cells' definitions (``kpi_help``) follow it as a ``<details>``
    a click or the keyboard opens (not a hover-only tooltip), as HTML: paragraphs, items, bold; the rest escaped."""
    assert help_html("a **b** <c>\n\n- **x**: y & z\n- w") == (
        "<p>a <b>b</b> &lt;c&gt;</p><ul><li><b>x</b>: y &amp; z</li><li>w</li></ul>")
    df = pd.DataFrame({"Strategy": ["**naive**"], "TTFT p50": ["1 ms"]})
    out = kpi_table_html(df, "naive", kpi_help(3, "naive", ["naive", "slora"]))
    head, table = out.split('<table class="wi-kpi">')
    assert "<b>Strategies compared</b>" in head and "<b>naive</b>" in head
    assert '<details class="wi-def"><summary>' in head and head.endswith("</details>")
    assert all(f"<li><b>{label}</b>: " in head for _, label, _, _ in KPIS) and "<li><b>slora</b>: " in head
    pd.testing.assert_frame_equal(table_from_html(out), df)  # (the reader skips the heading)
    assert "<details" not in kpi_table_html(df, "naive") and "<p" not in kpi_table_html(df)
