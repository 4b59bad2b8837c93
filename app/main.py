"""LoRA What-If dashboard: ``streamlit run app/main.py``.

The entry point is a frame around the pages: it registers them with ``st.navigation``,
cleans the URL, warms the engine, draws the shared scenario controls in the sidebar (on
the pages that use them) and runs the selected page.

Pages are functions: one module per page, ``app/page_<name>.py``, with a ``render()``
function.  A new page is a new such module plus one ``PageSpec`` in ``PAGES`` below
(``scenario=True`` if it reads the sidebar's scenario through ``controls.current()``).
Nothing is read from a folder of page files, so there is no ``pages/`` (or ``views/``)
directory to keep in step.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent.futures import wait
from dataclasses import dataclass
from pathlib import Path

APP_DIR = Path(__file__).resolve().parent
ROOT = APP_DIR.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import (  # noqa: E402
    controls,
    page_crossover,
    page_findings,
    page_fleet,
    page_kv,
    page_model,
    page_observed,
    page_plan,
    page_sweeps,
    page_validation,
    page_whatif,
    runner,
)
from engine import ENGINE_VERSION  # noqa: E402


@dataclass(frozen=True)
class PageSpec:
    render: Callable[[], None]
    title: str
    icon: str
    url_path: str
    #: Uses the shared scenario: the sidebar shows its controls and the share link.
    scenario: bool
    #: Runs the simulator (so waits for its first compile); the pages that only read documents do not.
    simulates: bool = True
    #: The key of the page's live fragment, which a slider step reruns alone and which draws the share link
    #: (``controls._live_step``); None: a step reruns the app.
    live: str | None = None


#: Navigation order; the first one is the home page.
PAGES: list[PageSpec] = [
    PageSpec(page_whatif.render, "What-if", ":material/tune:", "whatif", True, live=page_whatif.LIVE_KEY),
    PageSpec(page_sweeps.render, "Sweeps", ":material/show_chart:", "sweeps", True),
    PageSpec(page_crossover.render, "Crossover", ":material/grid_view:", "crossover", True),
    PageSpec(page_plan.render, "Plan", ":material/target:", "plan", True),
    PageSpec(page_fleet.render, "Fleet", ":material/dns:", "fleet", True),
    PageSpec(page_findings.render, "Findings", ":material/lightbulb:", "findings", False, simulates=False),
    PageSpec(page_validation.render, "Validation", ":material/fact_check:", "validation", False),
    PageSpec(page_observed.render, "Observed vs twin", ":material/sensors:", "observed", False),
    PageSpec(page_kv.render, "KV interference", ":material/memory_alt:", "kv_interference", False),
    PageSpec(page_model.render, "Model", ":material/menu_book:", "model", False, simulates=False),
]
BY_PATH = {p.url_path: p for p in PAGES}


def pages() -> list:
    """One st.Page per entry of ``PAGES`` (the first is the default page)."""
    return [st.Page(p.render, title=p.title, icon=p.icon, url_path=p.url_path, default=i == 0)
            for i, p in enumerate(PAGES)]


st.set_page_config(page_title="LoRA What-If", page_icon=":material/memory:", layout="wide",
                   initial_sidebar_state="expanded")
# Less empty space above the page title (the top navigation already provides a margin);
# KPI values small enough for six tiles in a row with their units.
st.html("<style>[data-testid='stMainBlockContainer']{padding-top:2.5rem}"
        "[data-testid='stMetricValue']{font-size:1.85rem}</style>")
# The whole run is a rerun in progress for the simulation workers: their speculative runs (runner.anticipate)
# wait until no session is rendering.
with runner.SCHEDULER.rendering():
    page = st.navigation(pages(), position="top")
    spec = BY_PATH[page.url_path or PAGES[0].url_path]  # the default page's url_path is ""
    if spec.scenario:
        # Right after st.navigation: the browser then records the page's URL with the scenario restored
        # (one history entry) rather than without it (see controls.restore_url).
        controls.restore_url()
    controls.sanitize_url_once(spec.scenario)
    warm = runner.warmup_future()  # started by the first session; the sidebar is drawn while it compiles
    # Pages that ignore the shared scenario get no controls (they would do nothing there) and no
    # scenario share link (their URL is enough); controls.py ("Persistence") keeps the scenario
    # for the next page that uses it.
    if spec.scenario:
        # the share link, at the top of the sidebar (filled once the page ran)
        share, _ = controls.share_box(st.sidebar.container(), page.url_path)
        state = controls.render_sidebar(spec.live)
    else:
        controls.render_stored()
        *others, last = [p.title for p in PAGES if p.scenario]
        st.sidebar.caption(f"This page does not use the scenario controls: they are on the {', '.join(others)} and "
                           f"{last} pages, which keep what you set there.")
    st.sidebar.caption(f"LoRA What-If · engine {ENGINE_VERSION}")
    if spec.simulates:
        wait([warm], timeout=2.0)  # a filled cache loads the kernels in well under that: no message then
    if not warm.done() and spec.simulates:
        # A fresh install compiles the simulator's kernels once (Numba; then they load from its cache in a second):
        # say so, with the time it has taken, while the controls above stay usable.
        with st.status("Compiling the simulator's kernels for this machine (once per install; later starts load "
                       "them in about a second)...", expanded=True) as box:
            note = st.empty()
            while not warm.done():
                note.caption(f"{time.time() - warm.started_at:.0f} s so far; on a 2-core machine this takes 15-30 s. "
                             "The results appear here when it is done.")
                time.sleep(0.5)
            box.update(label="The simulator is ready.", state="complete", expanded=False)
    if warm.done() and warm.exception() is not None:  # the engine itself is broken: say so, not a bare traceback
        e = warm.exception()
        st.error(f"The simulation engine failed to start ({type(e).__name__}: {e}).", icon=":material/error:")
        st.stop()
    page.run()
    if spec.scenario and spec.live is None:
        # After the page: its own URL-bound settings (e.g. What-if's replications) are in the link too.
        # (A page with a live fragment draws it from there: a live step updates it.)
        controls.render_share(state, page.url_path, share)
