"""The pages under AppTest: they are functions registered in app/main.py (no page files), the
sidebar shows the shared scenario's controls only on the pages that use it, and the scenario
survives a visit to a page without them (and a deep link to such a page).

Switching pages: ``AppTest.switch_page`` takes a page *file* and refuses callable pages
(Streamlit 1.67; https://github.com/streamlit/streamlit/issues/16611), and AppTest has no
other public way to select a page.  ``goto`` therefore sets the page hash the next run
requests: the hash of the page's ``url_path`` (how ``st.Page`` identifies a page), as a
browser requesting ``/<url_path>`` would.  Every test checks the page it lands on.
"""
from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import goto, kpi_rows, opened, share_link
from streamlit.testing.v1 import AppTest

from app import controls

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
MAIN = str(APP / "main.py")
TIMEOUT = 180  # the first run in a fresh process may compile the Numba kernels
FAST = {"duration_s": "60"}

#: url path -> (module, title, uses the shared scenario), in navigation order (the first is the home page).
PAGES = {
    "whatif": ("page_whatif", "What-if", True),
    "sweeps": ("page_sweeps", "Sweeps", True),
    "crossover": ("page_crossover", "Crossover", True),
    "plan": ("page_plan", "Plan", True),
    "fleet": ("page_fleet", "Fleet", True),
    "findings": ("page_findings", "Findings", False),
    "validation": ("page_validation", "Validation", False),
    "observed": ("page_observed", "Observed vs twin", False),
    "kv_interference": ("page_kv", "KV interference", False),
    "model": ("page_model", "Model", False),
}
SCENARIO_PAGES = [p for p, (_, _, uses) in PAGES.items() if uses]
OTHER_PAGES = [p for p, (_, _, uses) in PAGES.items() if not uses]


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def app(**query) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in {**FAST, **query}.items():
        at.query_params[k] = v
    return at


def scenario_widgets(at: AppTest) -> int:
    """Scenario controls in the sidebar (sliders, number inputs, select boxes, multiselects)."""
    sb = at.sidebar
    return sum(len(sb.get(kind)) for kind in ("slider", "number_input", "selectbox", "multiselect"))


def on(at: AppTest, url_path: str) -> None:
    """The run landed on ``url_path``: its title, or (Findings, Model) its report's own heading."""
    title = PAGES[url_path][1]
    if at.title:
        assert at.title[0].value == title, (url_path, at.title[0].value)
    else:
        assert url_path in ("findings", "model"), url_path
        heading = at.main.get("markdown")[0].value
        assert heading.startswith("# ") and title.lower() in heading.lower(), (url_path, heading[:80])


def footer(at: AppTest) -> bool:
    return any(c.value.startswith("LoRA What-If · engine") for c in at.sidebar.get("caption"))


def url_scenario(at: AppTest) -> dict:
    return {k: v for k, v in at.query_params.items() if k in controls.URL_KEYS}


# ------------------------------------------------------------------ registration
def _page_specs() -> list[tuple[str, str, str, bool]]:
    """(module, title, url path, scenario) of every PageSpec(...) in app/main.py, in order."""
    tree = ast.parse((APP / "main.py").read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "PageSpec":
            render, title, _icon, path, scenario = node.args
            assert isinstance(render, ast.Attribute) and render.attr == "render"
            out.append((render.value.id, ast.literal_eval(title), ast.literal_eval(path), ast.literal_eval(scenario)))
    return out


def test_pages_are_functions_registered_in_main():
    assert not (APP / "views").exists(), "app/views/ is gone: pages are functions"
    assert not (APP / "pages").exists(), "a pages/ folder would turn the app into a legacy multipage app"
    specs = _page_specs()
    assert specs == [(m, t, p, s) for p, (m, t, s) in PAGES.items()], "titles, url paths and order are kept"
    modules = sorted(f.stem for f in APP.glob("page_*.py"))
    assert sorted(m for m, *_ in specs) == modules, "every app/page_*.py is a page, once"
    for m in modules:
        assert callable(importlib.import_module(f"app.{m}").render), m


# ------------------------------------------------------------------ sidebar per page
def test_sidebar_controls_only_on_the_pages_that_use_them():
    at = ok(app().run())
    on(at, "whatif")
    n = scenario_widgets(at)
    assert n >= 15, "the What-if page shows every scenario control"
    for page in [*PAGES][1:] + ["whatif"]:
        ok(goto(at, page).run())
        on(at, page)
        assert footer(at), f"{page}: the sidebar keeps its footer"
        if PAGES[page][2]:
            assert scenario_widgets(at) == n, f"{page}: the same scenario controls as on What-if"
            assert [e.label for e in at.sidebar.expander][:1] == ["Share this scenario"], f"{page}: the share link"
            assert at.sidebar.slider(key="duration_s").value == 60.0, f"{page}: the URL's scenario"
        else:
            assert scenario_widgets(at) == 0, f"{page}: no scenario controls in the sidebar"
            assert not at.sidebar.get("code") and not at.sidebar.get("expander"), f"{page}: no share link"
            assert not url_scenario(at), f"{page}: no scenario parameters in the URL"
        if page == "kv_interference":  # it keeps its own controls, in the page
            assert at.main.multiselect(key="kv_policies").value and at.main.slider(key="kv_rate").value


@pytest.mark.parametrize("page", SCENARIO_PAGES)
def test_share_link_on_scenario_pages_encodes_the_scenario(page):
    at = app(zipf_s="1.2", gpu="a100-80gb")
    ok(goto(at, page).run())  # a deep link straight to the page, first load included
    on(at, page)
    assert at.sidebar.slider(key="zipf_s").value == 1.2
    assert at.sidebar.selectbox(key="gpu").value == "a100-80gb"
    assert at.sidebar.slider(key="pcie_gbps").value == 25.0  # follows the GPU
    link = share_link(at)
    assert f"/{'' if page == 'whatif' else page}?" in link
    for part in ["zipf_s=1.2", "gpu=a100-80gb", "duration_s=60"]:
        assert part in link


# ------------------------------------------------------------------ persistence
def _set_scenario(at: AppTest) -> None:
    at.sidebar.slider(key="zipf_s").set_value(1.6)
    at.sidebar.selectbox(key="gpu").set_value("a100-80gb")
    at.sidebar.multiselect(key="strategy").set_value(["naive", "batch"])
    ok(at.run())
    at.selectbox(key="baseline").set_value("batch")
    ok(at.run())


def _check_scenario(at: AppTest, kpis: list) -> None:
    on(at, "whatif")
    assert at.sidebar.slider(key="zipf_s").value == 1.6
    assert at.sidebar.selectbox(key="gpu").value == "a100-80gb"
    assert at.sidebar.slider(key="pcie_gbps").value == 25.0
    assert at.sidebar.multiselect(key="strategy").value == ["naive", "batch"]
    assert at.sidebar.slider(key="duration_s").value == 60.0
    assert at.selectbox(key="baseline").value == "batch"
    assert kpi_rows(at) == kpis, "the same scenario, the same KPIs"
    # the URL carries the scenario again, and so does the share link
    q = url_scenario(at)
    assert q.get("zipf_s") == "1.6" and q.get("gpu") == "a100-80gb" and q.get("duration_s") == "60", q
    link = share_link(at)
    for part in ["zipf_s=1.6", "gpu=a100-80gb", "strategy=naive&strategy=batch", "baseline=batch"]:
        assert part in link


@pytest.mark.parametrize("drop", [False, True], ids=["streamlit-keeps", "streamlit-drops"])
def test_scenario_survives_a_visit_to_findings_and_back(drop):
    """``drop``: the widget state is also deleted while on Findings, as Streamlit does for a widget that is
    not drawn (without ``persist_state`` or a URL binding): the app's own copy must restore it."""
    at = ok(app().run())
    _set_scenario(at)
    kpis = kpi_rows(at)
    assert len(kpis) == 2 and all("  \n:" in c for c in kpis[0][1:]), "naive, with its deltas to the baseline batch"
    ok(goto(at, "findings").run())
    on(at, "findings")
    assert scenario_widgets(at) == 0 and not url_scenario(at)
    if drop:
        for k in controls.SCENARIO_KEYS:
            if k in at.session_state:
                del at.session_state[k]
    ok(at.run())  # a rerun on the page (e.g. a click there) keeps it too
    state = at.session_state[controls.STATE_KEY]  # what a page without the controls sees
    assert state.values["zipf_s"] == 1.6 and state.strategies == ["naive", "batch"]
    assert state.scenario.gpu == "a100-80gb" and state.scenario.pcie_gbps == 25.0
    ok(goto(at, "whatif").run())
    _check_scenario(at, kpis)
    # and via another page without the controls, then a scenario page
    ok(goto(at, "model").run())
    ok(goto(at, "sweeps").run())
    on(at, "sweeps")
    assert at.sidebar.slider(key="zipf_s").value == 1.6
    assert at.sidebar.multiselect(key="strategy").value == ["naive", "batch"]


@pytest.mark.parametrize("page", OTHER_PAGES)
def test_deep_link_to_a_page_without_controls_keeps_its_scenario_for_later(page):
    at = app(zipf_s="1.3", gpu="a100-80gb", strategy=["slora", "naive"], foo="1")
    ok(goto(at, page).run())
    on(at, page)
    assert scenario_widgets(at) == 0
    assert not url_scenario(at) and "foo" not in at.query_params, "the page's URL drops what it ignores"
    state = at.session_state[controls.STATE_KEY]
    assert state.values["zipf_s"] == 1.3 and state.strategies == ["slora", "naive"]
    assert state.scenario.gpu == "a100-80gb" and state.scenario.duration_s == 60.0
    ok(goto(at, "whatif").run())
    on(at, "whatif")
    assert at.sidebar.slider(key="zipf_s").value == 1.3
    assert at.sidebar.selectbox(key="gpu").value == "a100-80gb"
    assert at.sidebar.slider(key="pcie_gbps").value == 25.0
    assert at.sidebar.multiselect(key="strategy").value == ["slora", "naive"]
    assert len(kpi_rows(at)) == 2 and "A100" in at.caption[0].value and "Zipf s=1.3" in at.caption[0].value
    q = url_scenario(at)
    assert q.get("zipf_s") == "1.3" and q.get("gpu") == "a100-80gb" and q.get("strategy") == ["slora", "naive"], q


def test_a_url_that_lost_the_scenario_gets_it_back_in_place():
    """A run that draws the controls while the URL has none of the scenario's parameters, though they are not at
    their defaults.  In a browser: Back/Forward to the history entry the navigation pushed on the way back from a
    page without the controls, where Streamlit would reset the bound widgets to their defaults (tests/test_browser.py
    goes through it; AppTest has no history navigation).  AppTest gets there after any change, having no browser
    URL: the app reruns, sets the values itself, and that writes their parameters back."""
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)  # no query parameters
    ok(at.run())
    at.sidebar.slider(key="duration_s").set_value(60.0)
    at.sidebar.slider(key="zipf_s").set_value(1.6)
    ok(at.run())
    on(at, "whatif")
    assert at.sidebar.slider(key="zipf_s").value == 1.6 and at.sidebar.slider(key="duration_s").value == 60.0
    assert "Zipf s=1.6" in at.caption[0].value
    assert url_scenario(at) == {"zipf_s": "1.6", "duration_s": "60"}
    ok(at.run())  # and then stays put
    assert at.sidebar.slider(key="zipf_s").value == 1.6 and url_scenario(at) == {"zipf_s": "1.6", "duration_s": "60"}


# ------------------------------------------------------------------ links (issue: honest verdicts, item 6)
@pytest.mark.parametrize("page", [*SCENARIO_PAGES, "findings"])
def test_a_deep_link_with_a_corrected_value_stays_on_its_page(page):
    """/crossover?zipf_s=-3: the URL is corrected (one rerun, controls.sanitize_url_once after st.navigation) on the
    page it named, with a warning naming the parameter."""
    at = app(zipf_s="-3")
    ok(goto(at, page).run())
    on(at, page)
    assert any("`zipf_s`" in w.value and "clamped to 0" in w.value for w in at.warning) or page == "findings"
    if PAGES[page][2]:
        assert at.sidebar.slider(key="zipf_s").value == 0.0
        assert at.query_params.get("zipf_s") == "0"
    else:  # remembered for the scenario pages, corrected
        assert at.session_state[controls.STATE_KEY].values["zipf_s"] == 0.0 and not url_scenario(at)
    ok(at.run())  # and stays there
    on(at, page)


def _share(at: AppTest) -> str:
    """The share link: the first thing in the sidebar, an expander with the link in a code block (copy button),
    built when opened."""
    opened(at, controls.SHARE_OPEN_KEY)
    top = at.sidebar.children[0]
    exp, = top.get("expander")
    assert exp.label == "Share this scenario"
    code, = top.get("code")
    return code.value


@pytest.mark.parametrize("page", ["whatif", "sweeps"])
def test_share_link_is_at_the_top_short_and_reproduces_the_scenario(page):
    at = app(zipf_s="1.2", gpu="a100-80gb", strategy=["naive", "batch"], wi_reps="2")
    ok(goto(at, page).run())
    on(at, page)
    link = _share(at)
    query = parse_qs(urlsplit(link).query)
    # only what differs from the preset (pcie_gbps follows the GPU: not in it), and the pages' own parameters
    assert set(query) == {"zipf_s", "gpu", "strategy", "duration_s", "wi_reps"}, query
    again = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in query.items():
        again.query_params[k] = v if k == "strategy" else v[0]
    ok(goto(again, page).run())
    on(again, page)
    state, back = at.session_state[controls.STATE_KEY], again.session_state[controls.STATE_KEY]
    assert back.scenario == state.scenario and back.strategies == state.strategies == ["naive", "batch"]
    assert _share(again) == link
    if page == "whatif":
        assert again.number_input(key="wi_reps").value == 2
        assert kpi_rows(again) == kpi_rows(at)


def test_share_link_of_the_preset_is_the_bare_address():
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    ok(at.run())
    assert "?" not in _share(at)


@pytest.mark.parametrize("page", ["findings", "model"])
def test_findings_and_model_have_a_table_of_contents(page):
    at = ok(goto(app(), page).run())
    on(at, page)
    md = [m.value for m in at.sidebar.get("markdown")]
    assert "**Contents**" in md
    toc = md[md.index("**Contents**") + 1]
    anchors = re.findall(r"\]\(#([^)]+)\)", toc)
    headings = [h.proto.anchor for h in [*at.main.get("header"), *at.main.get("subheader")]]
    assert len(anchors) >= 8 and sorted(anchors) == sorted(headings), "one link per section, to its heading"
    assert len(set(anchors)) == len(anchors)
    if page == "findings":  # each claim opens its scenario on What-if
        claims = [h for h in at.main.get("subheader") if re.match(r"[A-Z][A-Z0-9]*-\d+ \(seed \d\)", h.value)]
        links = [m.value for m in at.main.get("markdown") if m.value.startswith(":material/open_in_new:")]
        assert claims and len(links) >= len(claims)
        for href in re.findall(r"\]\((whatif\?[^)]+)\)", "\n".join(links)):
            clean, issues = controls.sanitize_query(parse_qs(urlsplit(href).query))
            assert not issues and controls.PRESET_KEY in clean, href
