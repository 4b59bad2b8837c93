"""The What-if verdict says whether the winner would change inside the cost model's measured error band (issue 24
item 3): on request, each strategy again with the cost model slower and faster by the band (engine.calibration
.winner_band), in a fragment, in the Why section (built only while picked: a slider step does not redraw it)."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import opened
from streamlit.testing.v1 import AppTest

from app import page_whatif, runner
from engine import Scenario, simulate
from engine.calibration import error_band, winner_band

MAIN = str(Path(__file__).resolve().parent.parent / "app" / "main.py")


@pytest.fixture(scope="module", autouse=True)
def warm():
    runner.compile_kernels()


def _open(**q) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=180)
    for k, v in {"duration_s": "60", **q}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    with pytest.raises(KeyError):  # (the Charts section is shown: the band check is not built)
        at.button(key="wi_band_check")
    opened(at, page_whatif.K_DETAIL, "why")
    assert not at.exception and not at.error, [e.value for e in at.exception]
    return at


def test_the_band_check_runs_on_request_and_states_the_engines_answer():
    at = _open(strategy=["vllm", "slora"], wi_reps="2")
    button = at.button(key="wi_band_check")
    band = error_band(Scenario.from_preset("default"))["band"]
    assert f"±{band:.0%}" in button.label
    assert not [c for c in at.caption if "inside the cost model's error" in c.value]  # nothing before the click
    button.click()
    at.run()
    assert not at.exception
    shown = [c.value for c in at.caption if "cost model's error" in c.value]
    sc = Scenario.from_preset("default", duration_s=60.0)
    want = winner_band(sc, ["vllm", "slora"], "ttft_p99_ms", False, run=lambda x: simulate(x).summary)
    assert len(shown) == 1 and want["text"] in shown[0], (shown, want["text"])


def test_without_a_measured_band_it_says_so_and_offers_nothing(monkeypatch):
    monkeypatch.setattr(page_whatif, "error_band", lambda sc: {"band": float("nan"), "note": "no table here"})
    at = _open(strategy=["vllm", "slora"], wi_reps="2")
    with pytest.raises(KeyError):
        at.button(key="wi_band_check")
    assert any("No measured error band for this cost model (no table here)" in c.value for c in at.caption)
