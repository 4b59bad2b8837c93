"""Every page's defaults work (issue 23, item 5): each page registered in app/main.py, opened with its own defaults
and the sidebar's default scenario, shows no error and no exception, and draws its main result.

The real defaults: no URL parameter shortens the scenario (660 s at 6 req/s, five strategies) or shrinks a page's
grid.  One fresh AppTest per page, opened at the page's address (a deep link: the share link of the default scenario
is the bare address, tests/test_app_pages.py).  The scenario pages are also opened with the default scenario spelled
out in the URL, every control at its default.  The Plan page and the Fleet page's "How many GPUs?" sweep run on a
button: their defaults are checked by pressing it, as a user would.

The first run in a fresh process compiles (or loads) the Numba kernels, hence the generous timeout.  Time per page
on a 2-core machine with the Numba cache warm: ``pytest --durations=0 tests/test_app_defaults.py``.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import chart_views, goto, kpi_tables, share_link
from streamlit.testing.v1 import AppTest

from app import controls, page_crossover, page_fleet, page_plan, runner

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
MAIN = str(APP / "main.py")
TIMEOUT = 300  # the first run in a fresh process compiles the Numba kernels; then a page takes seconds


def registered_pages() -> dict[str, bool]:
    """url path -> uses the shared scenario, for every PageSpec(...) in app/main.py, in navigation order."""
    tree = ast.parse((APP / "main.py").read_text(encoding="utf-8"))
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "PageSpec":
            out[ast.literal_eval(node.args[3])] = ast.literal_eval(node.args[4])
    return out


PAGES = registered_pages()
HOME = next(iter(PAGES))
SCENARIO_PAGES = [p for p, uses in PAGES.items() if uses]


def clean(at: AppTest, what: str) -> AppTest:
    """No exception and no ``st.error`` anywhere on the page (main area and sidebar)."""
    assert not at.exception, (what, [e.value for e in at.exception])
    assert not at.error, (what, [e.value for e in at.error])
    return at


def charts(at: AppTest) -> list:
    return at.main.get("vega_lite_chart")


def values(at: AppTest, kind: str) -> list[str]:
    return [e.value for e in at.main.get(kind)]


# ------------------------------------------------------------------ each page's main result
def _whatif(at: AppTest) -> None:
    (table,) = kpi_tables(at)
    assert len(table) == len(controls.DEFAULT_STRATEGIES), "one row of KPIs per compared strategy"
    (view,) = chart_views(at)
    assert "Time to first token" in view and "<svg" in view
    assert at.info, "the verdict"


def _sweeps(at: AppTest) -> None:
    assert charts(at) and at.main.get("dataframe")
    assert "Latency vs arrival rate" in values(at, "subheader"), "the first figure"


def _crossover(at: AppTest) -> None:
    n = page_crossover.DEFAULT_GRID
    assert at.slider(key=page_crossover.K_GRID).value == n
    assert at.slider(key=page_crossover.K_REPS).value == page_crossover.DEFAULT_REPLICATIONS
    work = next(c for c in values(at, "caption") if "simulated requests (cap" in c)
    requests = float(re.search(r"about ([\d,]+) simulated requests", work).group(1).replace(",", ""))
    assert 0 < requests <= runner.MAX_GRID_REQUESTS, work
    assert len(charts(at)) == 1, "the winner map"
    table = at.main.get("dataframe")[0].value
    assert len(table) == n * n and table["status"].notna().all(), "one verdict per cell"
    assert any(m.startswith("Cells won") or m.startswith("No cell has a winner") for m in values(at, "markdown"))


def _plan(at: AppTest) -> AppTest:
    assert not at.main.get("dataframe"), "the plan runs on its button"
    run = at.button(key=page_plan.K_RUN)
    assert not run.disabled, "the default plan is within MAX_PLAN_SEARCHES"
    clean(run.click().run(), "plan: Run the plan")
    assert at.main.get("dataframe") and charts(at), "the candidates' table and the frontier"
    return at


def _fleet(at: AppTest) -> AppTest:
    assert any("One replica" in i.value for i in at.info), "the default scenario has one replica"
    clean(at.button(key=page_fleet.K_RUN).click().run(), "fleet: Run the sweep")
    assert len(charts(at)) == 1, "p99 TTFT against the number of replicas"
    assert any(m.startswith("**GPUs needed**") for m in values(at, "markdown"))
    return at


def _findings(at: AppTest) -> None:
    heading = values(at, "markdown")[0]
    assert heading.startswith("# ") and "findings" in heading.lower(), heading[:80]
    assert [m.label for m in at.metric][:1] == ["Claims checked"]
    assert sum(bool(re.match(r"[A-Z][A-Z0-9]*-\d+ \(seed \d\)", s)) for s in values(at, "subheader")) >= 10


def _validation(at: AppTest) -> None:
    assert at.title[0].value == "Validation"
    assert any(m.label.endswith("targets met") for m in at.metric), "the targets, from docs/validation/*.csv"
    assert at.main.get("dataframe") and charts(at), "the targets table and the measured-vs-simulated charts"


def _observed(at: AppTest) -> None:
    assert at.title[0].value == "Observed vs twin"
    assert at.main.get("dataframe") and len(charts(at)) >= 3, "measured vs twin: the table, the TTFT CDF, the time series"


def _kv(at: AppTest) -> None:
    assert at.main.get("dataframe") and charts(at)
    assert "Per policy" in values(at, "subheader")


def _model(at: AppTest) -> None:
    heading = values(at, "markdown")[0]
    assert heading.startswith("# ") and "model" in heading.lower(), heading[:80]
    assert len(at.main.get("subheader")) >= 8, "the model's sections"


#: url path -> check of the page's main result (may press the page's run button and return the AppTest).
RESULT: dict[str, Callable[[AppTest], AppTest | None]] = {
    "whatif": _whatif, "sweeps": _sweeps, "crossover": _crossover, "plan": _plan, "fleet": _fleet,
    "findings": _findings, "validation": _validation, "observed": _observed, "kv_interference": _kv,
    "model": _model,
}


def test_every_registered_page_has_a_result_check():
    assert list(RESULT) == list(PAGES), "a new page in app/main.py needs its main result checked here"


def open_page(page: str, **query) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    if page != HOME:  # the home page is the bare address
        goto(at, page)
    return at.run()


@pytest.mark.parametrize("page", list(PAGES))
def test_page_opens_on_its_defaults_without_error_and_shows_its_result(page):
    at = clean(open_page(page), f"{page}: defaults")
    if PAGES[page]:
        state = at.session_state[controls.STATE_KEY]
        assert controls.preset_unchanged(state) and state.strategies == controls.DEFAULT_STRATEGIES, \
            "the sidebar's default scenario"
    RESULT[page](at)
    clean(at, f"{page}: defaults, main result")


def default_scenario_query() -> dict[str, str | list[str]]:
    """Every scenario control at its default, in URL form: the default scenario spelled out in a link."""
    resolved, issues = controls.resolve({})
    assert not issues
    out: dict[str, str | list[str]] = {}
    for key in controls.BY_KEY:
        if key not in resolved:  # does not apply to the default scenario
            continue
        v = resolved[key]
        if isinstance(v, list):
            out[key] = [str(x) for x in v]
        elif isinstance(v, float):
            out[key] = f"{v:g}" if float(f"{v:g}") == v else repr(v)
        else:
            out[key] = str(v)
    return out


@pytest.mark.parametrize("page", SCENARIO_PAGES)
def test_deep_link_with_the_default_scenario_spelled_out(page):
    query = default_scenario_query()
    assert {controls.PRESET_KEY, controls.STRATEGY_KEY, "arrival_rate_rps", "duration_s"} <= set(query)
    at = clean(open_page(page, **query), f"{page}: deep link")
    assert not [w.value for w in at.warning if "URL parameter" in w.value], "a clean link"
    state = at.session_state[controls.STATE_KEY]
    assert controls.preset_unchanged(state) and state.strategies == controls.DEFAULT_STRATEGIES
    link = share_link(at)
    assert "?" not in link, f"the default scenario's share link is the bare address: {link}"
    RESULT[page](at)
    clean(at, f"{page}: deep link, main result")


def grid_requests(n: int, reps: int) -> float:
    """Requests of the Crossover page's default axes (arrival rate x Zipf s) on the default scenario, with the
    default strategies: the rate axis spans 0.2-1.5 x the sidebar's rate (rounded to 0.5 req/s), n values evenly
    spaced; every cell runs each strategy ``reps`` times for ``duration_s`` at its rate (the Zipf axis does not
    change the count)."""
    sc = controls.build_scenario(controls.resolve({})[0])[0]
    lo, hi = round(sc.arrival_rate_rps * 0.2 * 2) / 2, round(sc.arrival_rate_rps * 1.5 * 2) / 2
    rates = [lo + (hi - lo) * i / (n - 1) for i in range(n)]
    return sum(rates) * n * sc.duration_s * len(controls.DEFAULT_STRATEGIES) * reps


def test_crossover_over_the_cap_says_what_fits():
    """A grid over the cap is refused before any run, and the error names the grid size and the replications that
    fit.  On the default scenario up to engine 0.5 (16 req/s) the former default 5 x 5 grid was over the cap; at
    the default's 6 req/s since issue 24 it fits (about 1.2 million requests), so this takes the largest grid,
    8 x 8: about 3.2 million requests at 3 replications, while 7 x 7 cells or 2 replications fit."""
    reps = page_crossover.DEFAULT_REPLICATIONS
    assert grid_requests(5, reps) <= runner.MAX_GRID_REQUESTS  # why the former 5 x 5 no longer serves
    n = page_crossover.MAX_GRID
    over = grid_requests(n, reps)
    assert over > runner.MAX_GRID_REQUESTS
    assert grid_requests(n - 1, reps) <= runner.MAX_GRID_REQUESTS and grid_requests(n, reps - 1) <= runner.MAX_GRID_REQUESTS
    at = clean(open_page("crossover"), "crossover")  # the defaults first, then one change, as a user would
    at.slider(key=page_crossover.K_GRID).set_value(n).run()
    assert not at.exception and not charts(at)
    err, = [e.value for e in at.error]
    assert f"{over:,.0f} requests, above the cap of {runner.MAX_GRID_REQUESTS:,}" in err, err
    assert "3,168,000 requests" in err, err  # 40 req/s summed over the rate axis x 8 x 660 s x 5 strategies x 3
    assert f"a grid size of {n - 1} ({n - 1} x {n - 1} cells) or {reps - 1} replications would fit" in err, err
