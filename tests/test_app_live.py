"""Live steps (``controls._live_step``): a slider step on the What-if page reruns the page's live fragment alone
when the sidebar would draw exactly what it shows, and a full run otherwise; what the fragment shows after a live
step is what a full run of the same scenario shows, its downloads included."""
from __future__ import annotations

import io

import pandas as pd
import pytest
from conftest import download, goto, kpi_rows, opened
from test_app import FAST, app, ok

from app import controls, page_whatif


@pytest.fixture
def sidebar_runs(monkeypatch) -> dict:
    """How many runs drew the sidebar (full runs of a scenario page); a live step draws none."""
    n = {"runs": 0}
    real = controls.render_sidebar

    def counted(*a, **kw):
        n["runs"] += 1
        return real(*a, **kw)

    monkeypatch.setattr(controls, "render_sidebar", counted)
    return n


def live_app(**query):
    """The What-if page with the share link's expander open (a live step redraws the link in it)."""
    at = app(**query)
    at.session_state[controls.SHARE_OPEN_KEY] = True
    return at


def imports(at) -> list:
    """The uploads' expander (``page_whatif._imports``), drawn with results only."""
    return [e for e in at.expander if e.label.startswith("Import")]


def _shown(at) -> tuple:
    """What the live fragment shows: the comparison table, the verdict banners, the share link."""
    return kpi_rows(at), [i.value for i in at.info], [c.value for c in at.code]


def test_a_rate_step_reruns_the_fragment_alone_and_shows_what_a_full_run_shows(sidebar_runs):
    at = ok(live_app(**FAST).run())
    assert sidebar_runs["runs"] == 1
    rate = at.sidebar.slider(key="arrival_rate_rps")
    new = rate.value + rate.step
    before = _shown(at)
    ok(rate.set_value(new).run())
    assert sidebar_runs["runs"] == 1, "the step redrew the sidebar: not a live step"
    after = _shown(at)
    assert after != before and f"arrival_rate_rps={new:g}" in after[2][0]
    assert at.session_state[controls.SAVED_KEY]["arrival_rate_rps"] == new  # (the other pages' scenario)
    assert at.session_state[controls.STATE_KEY].scenario.arrival_rate_rps == new
    full = ok(live_app(**FAST, arrival_rate_rps=f"{new:g}").run())
    assert _shown(full) == after


def test_a_step_that_changes_what_the_sidebar_draws_reruns_the_app(sidebar_runs):
    """The prompt length bounds the VRAM budget (the KV cache of one request must fit): a step changes that
    slider's range, so the sidebar is drawn."""
    at = ok(live_app(**FAST).run())
    prompt, vram = at.sidebar.slider(key="prompt_tokens"), at.sidebar.slider(key="vram_budget_gb")
    new, vram_max = prompt.value + 50 * prompt.step, vram.max
    ok(prompt.set_value(new).run())
    assert sidebar_runs["runs"] == 2
    assert at.sidebar.slider(key="prompt_tokens").value == new and at.sidebar.slider(key="vram_budget_gb").max < vram_max


def test_a_vram_step_is_live_and_redraws_the_budgets_note(sidebar_runs):
    """The VRAM budget's note (the memory split) changes with every step: the live fragment draws it
    (``controls.draw_notes``), as a full run of the same URL does."""
    at = ok(live_app(**FAST).run())
    vram = at.sidebar.slider(key="vram_budget_gb")
    new = vram.value + 4 * vram.step
    ok(vram.set_value(new).run())
    assert sidebar_runs["runs"] == 1
    note = [c.value for c in at.sidebar.caption if c.value.startswith("Up to ")]
    full = ok(live_app(**FAST, vram_budget_gb=f"{new:g}").run())
    assert note and note == [c.value for c in full.sidebar.caption if c.value.startswith("Up to ")]
    assert _shown(at) == _shown(full)


def test_two_controls_changed_in_one_interaction_rerun_the_app(sidebar_runs):
    at = ok(live_app(**FAST).run())
    rate, zipf = at.sidebar.slider(key="arrival_rate_rps"), at.sidebar.slider(key="zipf_s")
    rate.set_value(rate.value + rate.step)
    zipf.set_value(zipf.value + zipf.step)
    ok(at.run())
    assert sidebar_runs["runs"] == 2
    sc = at.session_state[controls.STATE_KEY].scenario
    assert (sc.arrival_rate_rps, sc.zipf_s) == (rate.value, zipf.value)


def test_a_value_held_down_by_another_controls_range_is_not_stepped_live(sidebar_runs):
    at = ok(live_app(**FAST).run())
    at.session_state[controls._INTENT] = {"arrival_rate_rps": 1e9}  # as if another control's range held it down
    rate = at.sidebar.slider(key="arrival_rate_rps")
    ok(rate.set_value(rate.value + rate.step).run())
    assert sidebar_runs["runs"] == 2


def test_a_step_after_a_full_run_that_stopped_before_the_page_ended_reruns_the_app(sidebar_runs):
    """A full run that did not reach the end of the page (interrupted, e.g. by a step during the first compile)
    leaves parts of the page undrawn: the next step is a full run."""
    at = ok(live_app(**FAST).run())
    del at.session_state[controls._READY]  # (what render_sidebar leaves until the page's end)
    rate = at.sidebar.slider(key="arrival_rate_rps")
    ok(rate.set_value(rate.value + rate.step).run())
    assert sidebar_runs["runs"] == 2 and at.session_state[controls._READY] == page_whatif.LIVE_KEY


def test_a_live_step_whose_results_vanish_reruns_the_app(sidebar_runs, monkeypatch):
    """The uploads under the fragment are drawn with results only: a live step after which every strategy fails
    asks for a full run, which draws the page without them."""
    from app import runner

    at = ok(live_app(**FAST).run())
    assert imports(at)
    rate = at.sidebar.slider(key="arrival_rate_rps")
    new = rate.value + rate.step
    real_cached, real_run = runner.cached_replications, runner.run_replications

    def failing(sc, strategies, *a, **kw):
        if sc.arrival_rate_rps == new:
            return {}, {}, {s: "simulated failure" for s in strategies}
        return real_run(sc, strategies, *a, **kw)

    monkeypatch.setattr(runner, "cached_replications",
                        lambda sc, *a, **kw: None if sc.arrival_rate_rps == new else real_cached(sc, *a, **kw))
    monkeypatch.setattr(runner, "run_replications", failing)
    ok(rate.set_value(new).run())
    assert sidebar_runs["runs"] == 2, "the live step escalated to a full run"
    assert not imports(at) and any("simulated failure" in e.value for e in at.error)


def test_a_live_step_redraws_the_downloads_with_its_results(sidebar_runs, media):
    """The download buttons are in the live fragment (a button's file lives as long as the run that drew it), so a
    live step gives new ones, which export its results, as a full run of the same URL does."""
    at = opened(ok(live_app(**FAST).run()), page_whatif.K_DETAIL, "export")  # (the Export section, open)
    runs = sidebar_runs["runs"]
    rate = at.sidebar.slider(key="arrival_rate_rps")
    new = rate.value + rate.step
    ok(rate.set_value(new).run())
    assert sidebar_runs["runs"] == runs and at.get("download_button"), "a live step, which drew the buttons"
    csv = pd.read_csv(io.BytesIO(download(at, "dl_summary", media)))
    assert set(csv["arrival_rate_rps"]) == {new}
    full = ok(live_app(**FAST, arrival_rate_rps=f"{new:g}").run())
    pd.testing.assert_frame_equal(csv, pd.read_csv(io.BytesIO(download(full, "dl_summary", media))))


@pytest.mark.parametrize("page, title", [("sweeps", "Sweeps"), ("crossover", "Crossover"), ("plan", "Plan"),
                                         ("fleet", "Fleet")])
def test_a_step_on_a_page_without_a_live_fragment_reruns_the_app(sidebar_runs, page, title):
    """Only the What-if page has a live fragment (``PageSpec.live``): a step on the other scenario pages reruns
    the app.  (Not read off ``main.PAGES``: importing main.py runs the app, and its warm-up thread, in the test
    process.)"""
    at = ok(live_app(**FAST).run())
    goto(at, page)
    ok(at.run())
    rate = at.sidebar.slider(key="arrival_rate_rps")
    ok(rate.set_value(rate.value + rate.step).run())
    assert sidebar_runs["runs"] == 3 and at.title[0].value == title
