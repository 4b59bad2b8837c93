"""The Plan page's calibration badge describes what the "Your deployment" form plans (its server's profile on its
first candidate GPU and its model), not the sidebar's scenario (issue 24: the badge followed the sidebar)."""
from __future__ import annotations

import pytest
from test_app_plan_deployment import ISSUE, P, fill, open_plan, submit

from app import runner


@pytest.fixture(scope="module", autouse=True)
def warm():
    runner.compile_kernels()


def _badges(at) -> list[str]:
    return [m.value for m in at.markdown if "-badge[" in m.value]


def test_the_badge_follows_the_form_not_the_sidebar():
    at = open_plan("seed1-rtx3090")  # the sidebar: an uncalibrated stated cost model
    assert not _badges(at)  # its deployment does not fit vLLM's slots on that GPU: no plan, no badge (a warning)
    fast = {P.K_D_REPS: 1, P.K_D_BAND: "none", P.K_D_MAX_LORAS: "16"}  # the badge needs the form, not the plan
    submit(fill(at, {**ISSUE, **fast}))
    (badge,) = _badges(at)
    assert "Transferred (vllm-llama31-8b)" in badge and "Uncalibrated" not in badge  # the form: vLLM on an H100 80
    submit(fill(at, {**ISSUE, **fast, P.K_D_GPUS: ["h100-64gb"]}))  # the profile's own pair: calibrated
    (badge,) = _badges(at)
    assert "Calibrated (vllm-llama31-8b)" in badge and "error band ±50%" in badge, badge
    submit(fill(at, {**ISSUE, **fast, P.K_D_SERVER: "slora", P.K_D_GPUS: ["a10g"], P.K_D_MODEL: "llama-7b",
                     P.K_D_MAX_LORAS: "0", P.K_D_RATE: 2.0, P.K_D_ADAPTERS: 200, P.K_D_RANKS: "8",
                     P.K_D_MODULES: "qkvo"}))
    (badge,) = _badges(at)
    assert "Calibrated (slora-a10g-s1)" in badge, badge


def test_the_advanced_path_keeps_the_sidebars_badge():
    at = open_plan("seed1-rtx3090", plan_mode="sidebar")
    (badge,) = _badges(at)
    assert "Uncalibrated" in badge
