"""Fixtures and helpers shared by the dashboard tests (``from conftest import goto``)."""
import contextlib
import fcntl
import html
import json
import os
import re
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

#: One lock file per test run (pytest-xdist's run id), shared by its workers: every test holds it shared, the timed
#: part of a real-server test holds it exclusively, so the server is timed while the other worker is between tests.
_RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID")
_TIMING_LOCK = Path(tempfile.gettempdir()) / f"lora-whatif-timing-{_RUN_ID}.lock" if _RUN_ID else None


@pytest.fixture(autouse=True)
def _timing_lock_shared(request):
    if _TIMING_LOCK is None or request.node.get_closest_marker("real_server"):
        yield
        return
    with open(_TIMING_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_SH)
        yield


@pytest.fixture
def quiet_machine():
    """A context manager: its body runs while no other test of this run runs (a real server timed on the shared
    cores).  A no-op without pytest-xdist (one process runs one test at a time)."""
    @contextlib.contextmanager
    def hold():
        if _TIMING_LOCK is None:
            yield
            return
        with open(_TIMING_LOCK, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield
    return hold


def goto(at: AppTest, url_path: str) -> AppTest:
    """Select the page registered under ``url_path`` for the next run.

    ``AppTest.switch_page`` takes a page *file* and refuses callable pages (Streamlit 1.67;
    https://github.com/streamlit/streamlit/issues/16611), and AppTest has no other public way to
    select a page, so this sets the page hash the next run requests: the hash of the page's
    ``url_path`` (how ``st.Page`` identifies a page), as a browser requesting ``/<url_path>`` would.
    """
    at._page_hash = calc_hash(url_path)
    return at


@pytest.fixture
def media(monkeypatch) -> dict:
    """Capture what download buttons serve: url -> bytes (eager), file id -> callable (deferred)."""
    store: dict = {}
    add, add_deferred = MediaFileManager.add, MediaFileManager.add_deferred

    def _add(self, path_or_data, mimetype, coordinates, file_name=None, is_for_static_download=False):
        url = add(self, path_or_data, mimetype, coordinates, file_name, is_for_static_download)
        store[url] = path_or_data
        return url

    def _add_deferred(self, data_callable, mimetype, coordinates, file_name=None, **kw):
        fid = add_deferred(self, data_callable, mimetype, coordinates, file_name=file_name, **kw)
        store[fid] = data_callable
        return fid

    monkeypatch.setattr(MediaFileManager, "add", _add)
    monkeypatch.setattr(MediaFileManager, "add_deferred", _add_deferred)
    return store


@pytest.fixture
def registry():
    """Undo every model registration a test makes (engine.presets.MODELS as it was before)."""
    from engine import presets
    before = dict(presets.MODELS)
    yield
    for k in [k for k in presets.MODELS if k not in before]:
        del presets.MODELS[k]
    presets.MODELS.update(before)


# The share link (every scenario page) and two What-if sections are built only when they are open (a slider step
# and a first page draw less): the details' tabs (chart, why, export) and the uploads' expander.  A test that reads
# one opens it as a user would (its open state, under ``page_whatif.K_DETAIL``, ``K_IMPORT`` and
# ``controls.SHARE_OPEN_KEY``, is in session state), then reruns.  (The app is imported where it is needed, not here:
# a run of engine tests alone does not load the dashboard.)


def opened(at: AppTest, key: str, value=True) -> AppTest:
    """Open the section ``key`` (True for an expander, the section's key for the What-if details: "why") and rerun
    if it was not open."""
    try:
        now = at.session_state[key]
    except KeyError:
        now = None
    if now != value:
        at.session_state[key] = value
        at.run()
    return at


def uploader(at: AppTest, key: str):
    """The What-if page's file uploader ``key``, the uploads' expander opened first."""
    if not any(getattr(u, "key", None) == key for u in at.get("file_uploader")):
        from app import page_whatif
        opened(at, page_whatif.K_IMPORT)
    return at.file_uploader(key=key)


def table_from_html(body: str) -> pd.DataFrame:
    """``app.page_whatif.kpi_table_html`` inverted: the DataFrame of Markdown cells it was drawn from."""
    def cell(h: str) -> str:
        h = re.sub(r'<span class="(green|red|orange|gray)">(.*?)</span>', r":\1[\2]", h)
        return html.unescape(re.sub(r"<b>(.*?)</b>", r"**\1**", h).replace("<br>", "  \n"))

    head = [cell(c) for c in re.findall(r"<th>(.*?)</th>", body)]
    rows = [[cell(c) for c in re.findall(r"<td>(.*?)</td>", r)] for r in re.findall(r"<tr>(.*?)</tr>", body)[1:]]
    return pd.DataFrame(rows, columns=head)


def kpi_tables(at: AppTest) -> list[pd.DataFrame]:
    """The What-if comparison tables shown (``st.html`` elements of class ``wi-kpi``), as Markdown DataFrames."""
    return [table_from_html(h.proto.body) for h in at.get("html") if 'class="wi-kpi"' in h.proto.body]


def chart_views(at: AppTest) -> list[str]:
    """The What-if page's chart views (``page_whatif._SVG_VIEW``, a component): the HTML each draws (heading,
    conditions, the SVG)."""
    from app import page_whatif
    return [json.loads(e.proto.json) for e in at.get("bidi_component")
            if e.proto.component_name == page_whatif.VIEW_COMPONENT]


def svg_charts(at: AppTest) -> list[str]:
    """The SVG of each chart view (app/svgchart's string)."""
    return [v[v.index("<svg"):v.index("</svg>") + 6] for v in chart_views(at)]


def kpi_rows(at: AppTest) -> list[tuple[str, ...]]:
    """The What-if page's one comparison table, row by row (each strategy's means, CIs and deltas, as Markdown)."""
    (table,) = kpi_tables(at)
    return [tuple(r) for r in table.itertuples(index=False)]


def download(at: AppTest, key: str, store: dict) -> bytes:
    """What the What-if page's download button ``key`` serves (``store``: the ``media`` fixture), its Export section
    picked first."""
    from app import page_whatif
    opened(at, page_whatif.K_DETAIL, "export")
    proto = at.download_button(key=key).proto
    data = store[proto.deferred_file_id]() if proto.deferred_file_id else store[proto.url]
    return data.encode() if isinstance(data, str) else bytes(data)


def share_link(at: AppTest) -> str:
    """The share link in the sidebar (a code block, for its copy button), its expander opened first."""
    from app import controls
    opened(at, controls.SHARE_OPEN_KEY)
    (code,) = at.sidebar.get("code")
    return code.value
