"""A first visit does not wait for the compiler before drawing the page (issue 26 item 3): the kernels compile on
a background thread started by the first session (``runner.warmup_future``); the sidebar and its controls are
drawn first, the page says what is happening while it waits, and a broken engine is reported, not raised."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import runner
from engine import Scenario

MAIN = str(Path(__file__).resolve().parent.parent / "app" / "main.py")


@pytest.fixture(scope="module", autouse=True)
def warm():
    runner.compile_kernels()


def _statuses(at: AppTest) -> list:
    return [c for c in at.main.children.values() if type(c).__name__ == "Status"]


@pytest.fixture
def slow_compile(monkeypatch):
    """A warm-up that takes 3 s (a compile: longer than the page's silent 2 s), on a fresh per-process Future."""
    real = runner._warm
    monkeypatch.setattr(runner, "_warm", lambda: (time.sleep(3.0), real())[1])
    runner.warmup_future.clear()
    yield
    runner.warmup_future.clear()


def test_the_page_is_drawn_while_the_kernels_compile(slow_compile):
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.query_params["duration_s"] = "60"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    labels = [s.label for s in _statuses(at) if "simulator" in s.label]
    assert labels == ["The simulator is ready."], labels  # it waited, saying so, then finished
    assert at.sidebar.slider(key="arrival_rate_rps").value == Scenario.from_preset("default").arrival_rate_rps
    assert runner.warmup_future().done() and runner.warmup_future().exception() is None


def test_a_page_that_only_reads_documents_does_not_wait(slow_compile):
    from conftest import goto
    at = AppTest.from_file(MAIN, default_timeout=120)
    goto(at, "findings").run()
    assert not at.exception
    assert not [s for s in _statuses(at) if "simulator" in s.label]


def test_a_broken_engine_is_reported_not_raised(monkeypatch):
    def boom():
        raise RuntimeError("no LLVM")
    monkeypatch.setattr(runner, "_warm", boom)
    runner.warmup_future.clear()
    try:
        at = AppTest.from_file(MAIN, default_timeout=120)
        at.query_params["duration_s"] = "60"
        at.run()
        assert not at.exception
        assert any("failed to start (RuntimeError: no LLVM)" in e.value for e in at.error), [e.value for e in at.error]
    finally:
        runner.warmup_future.clear()
