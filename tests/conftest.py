"""Fixtures and helpers shared by the dashboard tests (``from conftest import goto``)."""
import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash


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
