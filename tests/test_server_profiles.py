"""Server profiles (issue 24 item 1): the cost model and the server's own settings come from the server named,
the GPU and the model, never from the preset a scenario started from."""
from __future__ import annotations

import dataclasses

import pytest

from app import controls
from engine import Scenario, presets, simulate
from engine.calibration import calibration_status, error_band
from engine.presets.servers import (
    ASSUMED,
    COST_DEFAULTS,
    COST_FIELDS,
    PROFILES,
    follow_profile,
    preset_fields,
    profile_fields,
    vllm_batch_defaults,
)

#: Profile fields a server-named preset may state, with why (each a decision the printed command carries).
PRESET_DECISIONS = {"max_batched_tokens": "the Azure trace presets' 16,384-token prompts need it without chunking"}
SERVER_PRESETS = [n for n, p in presets.SCENARIOS.items() if p.get("server")]


def test_cost_defaults_are_the_scenario_defaults():
    base = Scenario()
    assert set(COST_DEFAULTS) == set(COST_FIELDS)
    for f, v in COST_DEFAULTS.items():
        assert getattr(base, f) == v, f


def test_the_default_and_its_family_name_the_vllm_server():
    assert {"default", "a100-light", "azure-conv-2023", "azure-code-2023"} <= set(SERVER_PRESETS)
    for n in SERVER_PRESETS:
        assert Scenario.from_preset(n).server == presets.SCENARIOS[n]["server"]


@pytest.mark.parametrize("name", SERVER_PRESETS)
def test_a_workload_preset_states_no_profile_field(name):
    p = presets.SCENARIOS[name]
    prof = profile_fields(p["server"], p["gpu"])
    stated = sorted(k for k in p if k in prof and k != "server")
    assert set(stated) <= set(PRESET_DECISIONS), stated
    sc = Scenario.from_preset(name)
    for k, v in prof.items():
        if k not in p:
            assert getattr(sc, k) == v, (name, k)


def test_profile_fields_are_the_fit_the_server_defaults_and_the_assumptions():
    f = profile_fields("vllm", "h100-80gb")
    fit = presets.SCENARIOS["vllm-llama31-8b"]
    for k in ("compute_eff", "bw_eff", "step_overhead_ms", "lora_ms_per_adapter", "lora_ms_per_slot",
              "lora_us_per_token_slot", "frontend_ms"):
        assert f[k] == fit[k], k
    assert (f["max_batch_size"], f["max_batched_tokens"]) == vllm_batch_defaults("h100-80gb")[:2] == (1024, 8192)
    assert f["pcie_gbps"] == presets.GPUS["h100-80gb"].pcie_gbps
    assert f["reserve_gb"] == ASSUMED["reserve_gb"][0]
    assert "max_in_system" not in f and "strategy" not in f  # the benchmark client's cap; a decision
    a100 = profile_fields("vllm", "a100-80gb")
    assert (a100["max_batch_size"], a100["max_batched_tokens"]) == (256, 2048)  # vLLM's A100 rule
    s = profile_fields("slora", "a10g")
    assert s["memory_mode"] == "unified" and s["compute_eff"] == presets.SCENARIOS["slora-a10g-s1"]["compute_eff"]


@pytest.mark.parametrize("bad", ["sglang", "VLLM", 3])
def test_unknown_server_is_a_named_error(bad):
    with pytest.raises(ValueError, match="server: invalid value"):
        profile_fields(bad, "h100-80gb")
    with pytest.raises(ValueError, match="server"):
        Scenario(server=bad).validate()  # a string is checked against the enums by validate, a type at once


def test_follow_profile_re_resolves_what_the_base_took_from_the_profile_only():
    base = preset_fields("default")                     # h100-80gb: 1,024 sequences, 8,192 tokens
    moved = follow_profile({**base, "gpu": "a100-80gb"}, base)
    assert (moved["max_batch_size"], moved["max_batched_tokens"]) == (256, 2048)
    assert moved["pcie_gbps"] == presets.GPUS["a100-80gb"].pcie_gbps
    # an override of the base (an uploaded scenario's own cost) stays; so does a field a control set
    over = {**base, "compute_eff": 0.5, "max_batch_size": 64}
    moved = follow_profile({**over, "gpu": "a100-80gb", "pcie_gbps": 12.0}, over, keep={"pcie_gbps"})
    assert (moved["compute_eff"], moved["max_batch_size"], moved["pcie_gbps"]) == (0.5, 64, 12.0)
    assert moved["max_batched_tokens"] == 2048
    # a scenario naming no server is left alone; naming one over a stated base takes the whole profile
    seed1 = preset_fields("seed1-rtx3090")
    assert follow_profile({**seed1, "gpu": "a100-80gb"}, seed1) == {**seed1, "gpu": "a100-80gb"}
    on = follow_profile({**seed1, "server": "vllm"}, seed1, keep={"pcie_gbps"})
    assert on["service_mode"] == "roofline" and on["compute_eff"] == profile_fields("vllm", "rtx3090")["compute_eff"]
    assert on["pcie_gbps"] == seed1["pcie_gbps"]


def _sidebar_values(preset: str, **kw) -> dict:
    values, _ = controls.resolve({controls.PRESET_KEY: preset})
    values.update(kw)
    return values


@pytest.mark.parametrize("start", sorted(presets.SCENARIOS))
def test_the_cost_model_does_not_depend_on_the_preset_started_from(start):
    """The sidebar's controls set to the same deployment from any preset give the same cost and server fields."""
    ref_values = _sidebar_values("default")
    ref, _ = controls.build_scenario(ref_values)
    same = {c.key: ref_values[c.key] for c in controls.CONTROLS if c.is_field and c.key in ref_values}
    values = _sidebar_values(start, **same)
    values[controls.STRATEGY_KEY] = ref_values[controls.STRATEGY_KEY]
    try:
        sc, _ = controls.build_scenario(values)
    except ValueError as e:  # e.g. a trace-replay preset whose trace the controls do not clear
        pytest.fail(f"{start}: {e}")
    prof = profile_fields("vllm", ref.gpu)
    decided = {k for k in PRESET_DECISIONS if k in presets.SCENARIOS[start]}  # stated by the preset: a decision
    for k in set(prof) - decided:
        assert getattr(sc, k) == getattr(ref, k), (start, k)
    assert calibration_status(sc).label == calibration_status(ref).label
    assert error_band(sc)["band"] == error_band(ref)["band"]


def test_the_same_inputs_from_two_workload_presets_simulate_bit_identically():
    ref_values = _sidebar_values("default", duration_s=60.0)
    same = {c.key: ref_values[c.key] for c in controls.CONTROLS if c.key in ref_values and c.key != controls.PRESET_KEY}
    a, _ = controls.build_scenario(ref_values)
    b, _ = controls.build_scenario(_sidebar_values("a100-light", **same))
    assert a == b
    ra, rb = simulate(a.replace(duration_s=60.0)), simulate(b.replace(duration_s=60.0))
    assert ra.summary == rb.summary


def test_the_default_runs_on_a_transferred_vllm_profile_and_says_so():
    sc = Scenario.from_preset("default")
    st = calibration_status(sc)
    assert sc.server == "vllm" and st.kind == "transferred" and "vllm-llama31-8b" in st.label
    assert "vllm server profile" in st.detail
    band = error_band(sc)
    assert band["status"] == "transferred" and 0 < band["band"] < error_band(Scenario.from_preset("seed1-rtx3090"))["band"]
    # its lengths are drawn, not fixed (issue 24 item 9)
    assert sc.length_dist == "lognormal" and sc.length_spread == 1.0


def test_every_compared_policy_runs_on_the_servers_cost_model():
    """naive, hot_set, batch and oracle have no real server: they run on the named server's profile."""
    sc = Scenario.from_preset("default")
    for s in ("naive", "hot_set", "batch", "oracle", "vllm"):
        x = sc.replace(strategy=s)
        assert {f: getattr(x, f) for f in COST_FIELDS} == PROFILES["vllm"].cost()


def test_server_is_a_label_for_the_engine():
    """Naming the server changes no result by itself: the fields it resolved decide."""
    sc = Scenario.from_preset("default", duration_s=60.0)
    a, b = simulate(sc), simulate(dataclasses.replace(sc, server=""))
    assert {k: v for k, v in a.summary.items() if k != "server"} == {k: v for k, v in b.summary.items()
                                                                     if k != "server"}


def _fake_run(table):
    """A summary function whose metric is ``table[strategy](cost_scale)``: a known answer per side."""
    return lambda sc: {"m": table[sc.strategy](sc.cost_scale)}


def test_winner_band_reports_a_change_inside_the_band_and_a_hold_outside():
    from engine.calibration import winner_band
    sc = Scenario.from_preset("default", duration_s=60.0)
    # a is faster when the model is slow, b when it is fast: the winner flips with the cost scale
    flip = {"a": lambda f: 10.0 * f, "b": lambda f: 5.0 + 5.5 * f, "o": lambda f: 0.0}
    r = winner_band(sc, ["a", "b", "o"], "m", higher_is_better=False, band=0.5, exclude=("o",), run=_fake_run(flip))
    assert r["leaders"] == {"nominal": "a", "pessimistic": "b", "optimistic": "a"} and r["changes"] is True
    assert "could change" in r["text"] and "b if the model is 50% slower" in r["text"]
    hold = {"a": lambda f: 10.0 * f, "b": lambda f: 20.0 * f}
    r = winner_band(sc, ["a", "b"], "m", higher_is_better=False, band=0.5, run=_fake_run(hold))
    assert r["changes"] is False and set(r["leaders"].values()) == {"a"} and "holds" in r["text"]
    # the sides are the planner's: 1 + e slower, 1 + e faster
    assert r["values"]["pessimistic"]["a"] == 15.0 and abs(r["values"]["optimistic"]["a"] - 10.0 / 1.5) < 1e-12


def test_winner_band_on_the_simulator_uses_the_scenarios_measured_band():
    from engine.calibration import winner_band
    sc = Scenario.from_preset("default", duration_s=60.0)
    r = winner_band(sc, ["vllm", "slora"], "ttft_p99_ms", higher_is_better=False)
    assert r["band"] == error_band(sc)["band"]
    assert r["values"]["pessimistic"]["vllm"] > r["values"]["nominal"]["vllm"] > r["values"]["optimistic"]["vllm"]


@pytest.mark.parametrize("kw, msg", [(dict(strategies=[]), "strategies: empty"), (dict(seeds=0), "seeds: invalid"),
                                     (dict(seeds=True), "seeds: invalid"), (dict(band=-0.1), "band: invalid")])
def test_winner_band_refuses_bad_input_by_name(kw, msg):
    from engine.calibration import winner_band
    args = dict(sc=Scenario.from_preset("default", duration_s=60.0), strategies=["vllm"], metric="ttft_p99_ms",
                higher_is_better=False, run=lambda sc: {"ttft_p99_ms": 1.0})
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        winner_band(**args)
