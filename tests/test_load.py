"""Reliability under concurrent use (issue "Performance" 4): three browser sessions move sliders on one
dashboard server for 15 s (bench/load_test.py's run_load).  Asserts no exception on any page, the server
alive, every session served, and memory bounded; no timing is asserted (that is bench/load_test.py's)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_three_sessions_for_15_s_no_errors_bounded_memory():
    if not Path("/usr/bin/chromium").exists():
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail("browser test required (REQUIRE_BROWSER=1) but /usr/bin/chromium is missing")
        pytest.skip("/usr/bin/chromium is missing")
    pytest.importorskip("playwright")
    from bench.load_test import run_load

    r = run_load(sessions=3, seconds=15.0)
    assert r["server_alive"] and not r["errors"], r["errors"]
    assert r["rounds"] >= 1 and len(r["rerun_ms"]) == 3 * r["rounds"]
    assert all(t > 0 for t in r["rerun_ms"])
    # bounded: the caches have max_entries; 15 s of three sessions must not grow the server by 1 GiB
    assert r["rss_end_mb"] - r["rss_loaded_mb"] < 1024, (r["rss_loaded_mb"], r["rss_end_mb"])
