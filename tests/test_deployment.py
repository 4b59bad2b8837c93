"""A deployment as its user states it (issue 24 items 1, 2, 4; engine/planner/deployment.py): the scenario is a
function of the inputs and the server's profile alone, so the same question gets the same simulation and the
same plan whatever preset or page it was entered from; the profile resolves calibrated or transferred, and says
which; the server runs with its own defaults."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Scenario, simulate_summary
from engine.calibration import calibration_status
from engine.planner.commands import vllm_batch_defaults
from engine.planner.deployment import ASSUMED, PROFILES, Deployment
from engine.presets import SCENARIOS

ROOT = Path(__file__).resolve().parents[1]
#: the issue's user: Llama-3.1-8B, 300 rank-16 adapters, 20 req/s, H100 80 GB, vLLM
INPUTS = dict(model="llama-3.1-8b", gpu="h100-80gb", num_adapters=300, adapter_rank=16, adapter_ranks=(),
              target_modules="qv", arrival_rate_rps=20.0, prompt_tokens=222, output_tokens=194,
              length_dist="lognormal", length_spread=1.0, popularity="zipf", zipf_s=1.0, max_loras=32,
              max_cpu_loras=0, slo_ttft_ms=500.0)


@pytest.mark.parametrize("preset", sorted(SCENARIOS))
def test_the_same_inputs_give_the_same_scenario_from_every_preset(preset):
    try:
        entered = Deployment.from_scenario(Scenario.from_preset(preset))
    except ValueError:  # a preset whose own values are not a deployment's (e.g. max_loras 0 under vllm)
        entered = Deployment()
    assert entered.replace(**INPUTS).scenario().to_dict() == Deployment(**INPUTS).scenario().to_dict()


def test_the_same_inputs_simulate_identically_from_two_presets():
    a = Deployment.from_scenario(Scenario.from_preset("default")).replace(**INPUTS).scenario()
    b = Deployment.from_scenario(Scenario.from_preset("vllm-llama31-8b")).replace(**INPUTS).scenario()
    sa, sb = (simulate_summary(s.replace(duration_s=120.0, warmup_s=10.0)) for s in (a, b))
    assert sa == sb


def test_cli_plans_the_same_whatever_preset_is_given(tmp_path):
    sets = [f"--set={k}={v}" for k, v in INPUTS.items() if k != "adapter_ranks"]
    docs = []
    for preset in ("default", "vllm-llama31-8b"):
        out = tmp_path / preset
        r = subprocess.run([sys.executable, "-m", "engine", "plan", "--preset", preset, "--server", "vllm", *sets,
                            "--slo", "ttft_p99_ms=500", "--grid", "max_loras=16,32", "--replications", "1",
                            "--band", "none", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        docs.append(json.loads((out / "plan.json").read_text()))
    assert docs[0]["best"] == docs[1]["best"] and docs[0]["commands"] == docs[1]["commands"]


def test_the_profile_resolves_and_says_which():
    d = Deployment(**INPUTS)
    assert calibration_status(d.replace(gpu="h100-64gb").scenario()).kind == "calibrated"
    assert "calibrated on this GPU and model" in d.replace(gpu="h100-64gb").resolution()
    st = calibration_status(d.scenario())
    assert st.kind == "transferred" and st.preset == "vllm-llama31-8b"
    assert "transferred to NVIDIA H100 80 GB" in d.resolution()
    slora = Deployment(server="slora", model="llama-7b", gpu="a10g", num_adapters=100, adapter_rank=8,
                       target_modules="qkvo", prompt_tokens=260, output_tokens=260)
    assert calibration_status(slora.scenario()).kind == "calibrated"


@pytest.mark.parametrize("gpu", ["a100-80gb", "h100-80gb", "l40s", "h100-64gb"])
def test_the_server_runs_with_its_own_defaults(gpu):
    sc = Deployment(**{**INPUTS, "gpu": gpu}).scenario()
    assert (sc.max_batch_size, sc.max_batched_tokens) == vllm_batch_defaults(gpu)[:2]
    assert sc.strategy == "vllm" and sc.kv_reservation == "on_demand" and sc.max_in_system == 0
    assert sc.pcie_gbps == pytest.approx(__import__("engine").presets.GPUS[gpu].pcie_gbps)
    for f in ("compute_eff", "bw_eff", "step_overhead_ms", "frontend_ms", "lora_ms_per_adapter"):
        assert getattr(sc, f) == SCENARIOS["vllm-llama31-8b"][f], f


def test_every_assumption_names_its_source_and_the_inputs_win():
    assert all(isinstance(src, str) and len(src) > 20 for _, src in ASSUMED.values())
    sc = Deployment(**INPUTS).scenario()
    for k, v in INPUTS.items():
        assert getattr(sc, k) == v, k
    assert set(PROFILES) == {"vllm", "slora"}


@pytest.mark.parametrize("kw,match", [({"server": "tgi"}, "^server: invalid value 'tgi'"),
                                      ({"gpu": "tpu"}, "^gpu: invalid value 'tpu'"),
                                      ({"max_loras": 0}, "^max_loras: invalid value 0; allowed: at least 1")])
def test_bad_inputs_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        Deployment(**{**INPUTS, **kw}).scenario()


def test_the_cli_refuses_a_non_input_with_server(capsys):
    from engine.cli import main
    assert main(["plan", "--server", "vllm", "--set", "compute_eff=0.5", "--slo", "ttft_p99_ms=500"]) == 2
    assert "'compute_eff' is not a deployment input" in capsys.readouterr().err
