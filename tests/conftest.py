"""Fixtures shared by the dashboard tests."""
import pytest
from streamlit.runtime.media_file_manager import MediaFileManager


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
