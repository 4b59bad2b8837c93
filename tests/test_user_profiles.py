"""Issue 24 item 8, "Fit your own benchmark, as that server": a benchmark tool's file is fitted as the server it
measured (a vllm bench serve file as vLLM) with median and p99 TTFT in the objective and in the reports; the fitted
parameters have plain names with units (``PARAM_LABELS``); the fit becomes the user's own server profile
(``engine.presets.register_profile``): a name that never replaces another profile, ``Scenario.validate`` accepting
it, a calibration status and an error band of its own (calibrated on its pair with its held-out errors, transferred
elsewhere, never narrower than a transferred band when fitted in-sample only); on the dashboard, "Use as my server
profile" selects it in this session's Server control, and no other session is offered it."""
from __future__ import annotations

import json
import math

import pytest
from streamlit.testing.v1 import AppTest
from test_app_validation import BASIC, DETAILED, MAIN, TOOLS, ok, tool_fit, tools_page

from app import controls
from app import page_validation as P
from engine import Scenario, presets
from engine import calibration as C
from engine.presets import servers as S

HAVE_BASES = C.PROFILE_ERRORS_CSV.is_file()
needs_bases = pytest.mark.skipif(not HAVE_BASES, reason="docs/validation/profile_errors.csv not generated")


@pytest.fixture(autouse=True)
def _registry():
    """Every test leaves the process' profile registry as it found it (the built-in profiles only)."""
    before = dict(presets.PROFILES)
    yield
    presets.PROFILES.clear()
    presets.PROFILES.update(before)


def _errors(split: str, thr: float = 0.03, tpot: float = 0.05, p99: float = 0.4, n: int = 2) -> dict:
    return {"request_throughput": {"p90_abs": thr, "n_runs": n, "split": split},
            "mean_tpot_ms": {"p90_abs": tpot, "n_runs": n, "split": split},
            "p99_ttft_ms": {"p90_abs": p99, "n_runs": n, "split": split}}


def _cost(**kw) -> dict:
    return {**presets.PROFILES["vllm"].cost(), **kw}


def _on(profile: str, gpu: str, model: str = "llama-3.1-8b", **kw) -> Scenario:
    """The default preset's workload on ``profile``'s server at ``gpu`` / ``model``."""
    d = {**Scenario.from_preset("default").to_dict(), **presets.profile_fields(profile, gpu), "gpu": gpu,
         "model": model, **kw}
    return Scenario.from_dict(d).validate()


# ----------------------------------------------------------------------------- the fit
def test_a_vllm_bench_file_is_fitted_as_vllm_and_reports_median_and_p99():
    runs = C.read_tool_files([TOOLS / BASIC, TOOLS / DETAILED])
    base = Scenario.from_preset("default")
    assert base.strategy != "vllm"
    server, notes = C.server_scenario(base, runs, max_loras=8)
    seqs, tokens, _ = S.vllm_batch_defaults(server.gpu)
    assert (server.strategy, server.max_batch_size, server.max_batched_tokens) == ("vllm", seqs, tokens)
    assert any(n.startswith("fitted as vLLM") for n in notes)
    tf = C.fit_tool_runs(runs, server, params=("compute_eff",), hold_out="last", max_nfev=6)
    assert all({"median_ttft_ms", "p99_ttft_ms"} <= set(c.fit_metrics) for c in tf.cases)
    head = C.headline_errors(tf.table)
    for split in ("train", "held-out"):
        assert {"request_throughput", "mean_tpot_ms", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms"} == set(
            head.loc[head["split"] == split, "metric"]), split
    lines = C.headline_text(tf.table)
    assert [x.split(" ")[0] for x in lines] == ["train", "held-out"]
    assert all("TTFT mean" in x and "median" in x and "p99" in x for x in lines)
    prov = C.provenance(tf, [BASIC, DETAILED], ("compute_eff",))
    assert {r["metric"] for r in prov["headline_errors"]} >= {"median_ttft_ms", "p99_ttft_ms"}
    args = C.profile_args(tf, [BASIC, DETAILED])
    assert args["base"] == "vllm" and args["name"] == "my-vllm" and (args["gpu"], args["model"]) == (
        server.gpu, "llama-3.1-8b")
    assert {e["split"] for e in args["errors"].values()} == {"held-out"}
    assert args["cost"]["compute_eff"] == pytest.approx(tf.result.values["compute_eff"])
    assert set(args["cost"]) == set(S.COST_FIELDS)


def test_param_labels_cover_every_fitted_parameter():
    assert set(C.PARAM_LABELS) == set(C.FIT_BOUNDS)
    for p, label in C.PARAM_LABELS.items():
        assert label.endswith(")") and "(" in label and p not in label, (p, label)  # a unit, in words
        assert C.param_label(p) == f"{label} ({p})"  # the field name beside, for the scenario JSON
    assert C.param_label("compute_eff") == "GEMM efficiency (share of FP16 peak) (compute_eff)"
    assert C.PARAM_LABELS["frontend_ms"] == "front-end latency per request (ms)"
    assert all(label in P._param_help() for label in C.PARAM_LABELS.values())


# ----------------------------------------------------------------------------- the registry
def test_register_profile_round_trip_and_names():
    p = presets.register_profile("my-vllm", "", "vllm", _cost(compute_eff=0.5), "h100-80gb", "llama-3.1-8b",
                                 _errors("held-out"), "fitted to a.json")
    assert presets.PROFILES["my-vllm"] is p and p.user and p.base == "vllm" and p.strategy == "vllm"
    assert p.fitted_on == ("h100-80gb", "llama-3.1-8b") and p.cost()["compute_eff"] == 0.5
    # its server is vLLM's: the API server's batch limits per GPU, vLLM's configuration
    f = presets.profile_fields("my-vllm", "a10g")
    assert (f["max_batch_size"], f["max_batched_tokens"]) == S.vllm_batch_defaults("a10g")[:2]
    assert f["kv_reservation"] == "on_demand" and f["compute_eff"] == 0.5 and f["server"] == "my-vllm"
    # JSON round trip: what calibrate --profile-out writes is read back to the same profile
    d = json.loads(json.dumps(presets.profile_to_dict(p)))
    assert presets.profile_from_dict(d) is p  # the same definition: the profile already there
    del presets.PROFILES["my-vllm"]
    q = presets.profile_from_dict(d)
    assert q.name == "my-vllm" and presets.profile_to_dict(q) == d
    # a name held by a built-in profile or another definition gets the definition's hash: nothing is replaced
    builtin = presets.PROFILES["vllm"]
    r = presets.register_profile("vllm", "", "vllm", _cost(compute_eff=0.4), "a10g", "llama-3.1-8b",
                                 _errors("in-sample"))
    assert r.name.startswith("vllm-") and len(r.name) == len("vllm-") + 8 and presets.PROFILES["vllm"] is builtin
    other = presets.register_profile("my-vllm", "", "vllm", _cost(compute_eff=0.7), "h100-80gb", "llama-3.1-8b",
                                     _errors("held-out"))
    assert other.name.startswith("my-vllm-") and presets.PROFILES["my-vllm"] is q
    assert presets.register_profile("my-slora", "", "slora", {}, "a10g", "llama-7b", {}).strategy == "slora"
    with pytest.raises(ValueError, match="profile: 'vllm' is a built-in profile"):
        presets.profile_to_dict(builtin)


@pytest.mark.parametrize("kw,match", [
    ({"base": "tgi"}, r"^base: invalid value 'tgi'; allowed: vllm, slora"),
    ({"name": "My Fit!"}, r"^name: invalid value"),
    ({"cost": {"gemm": 0.5}}, r"^cost: unknown field 'gemm'"),
    ({"cost": {"compute_eff": 1.5}}, r"^cost\.compute_eff: invalid value 1\.5"),
    ({"cost": {"service_mode": "magic"}}, r"^cost\.service_mode: invalid value 'magic'"),
    ({"gpu": "tpu"}, r"^gpu: invalid value 'tpu'"),
    ({"errors": {"mean_ttft_ms": {"p90_abs": 0.1, "n_runs": 2, "split": "train"}}}, r"errors\.mean_ttft_ms\.split"),
    ({"errors": {"mean_ttft_ms": {"p90_abs": -1, "n_runs": 2, "split": "held-out"}}}, r"errors\.mean_ttft_ms\.p90_abs"),
    ({"label": "[click](http://x)"}, r"^label: invalid value"),
])
def test_register_profile_refuses_bad_arguments_naming_them(kw, match):
    args = dict(name="mine", label="", base="vllm", cost={}, gpu="a10g", model="llama-3.1-8b", errors={})
    with pytest.raises(ValueError, match=match):
        presets.register_profile(**{**args, **kw})
    assert "mine" not in presets.PROFILES


def test_validate_accepts_a_registered_profile_and_rejects_an_unknown_server():
    presets.register_profile("my-vllm", "", "vllm", _cost(), "h100-80gb", "llama-3.1-8b", _errors("held-out"))
    assert _on("my-vllm", "h100-80gb").server == "my-vllm"
    with pytest.raises(ValueError) as e:
        Scenario.from_preset("default").replace(server="tgi").validate()
    assert str(e.value).startswith("server: invalid value 'tgi'; allowed: , vllm, slora")
    assert "my-vllm" not in str(e.value)  # other sessions' profiles are not listed
    with pytest.raises(ValueError, match="server: invalid value 'gone'"):
        presets.profile_fields("gone", "a10g")


# ----------------------------------------------------------------------------- status and band
@needs_bases
def test_status_and_band_of_a_user_profile():
    held = presets.register_profile("mine-held", "", "vllm", _cost(compute_eff=0.5), "h100-80gb", "llama-3.1-8b",
                                    _errors("held-out", thr=0.03, tpot=0.05, p99=0.4))
    ins = presets.register_profile("mine-in", "", "vllm", _cost(compute_eff=0.5), "h100-80gb", "llama-3.1-8b",
                                   _errors("in-sample", thr=0.03, tpot=0.05))
    # on the pair it was fitted on: calibrated, as the user's fit; the band is its own held-out p90s
    sc = _on(held.name, "h100-80gb")
    st = C.calibration_status(sc)
    assert (st.kind, st.profile, st.preset) == ("calibrated", "mine-held", None)
    assert st.label.startswith("Calibrated (your fit mine-held)") and "held-out" in st.label
    assert "p99 TTFT p90 40.0 %" in st.detail
    b = C.error_band(sc)
    assert b["band"] == pytest.approx(0.05) and (b["throughput_p90"], b["latency_p90"]) == (0.03, 0.05)
    assert b["basis"] == "user:mine-held" and "held out of its fit" in b["note"]
    # elsewhere: transferred, never narrower than the built-in profile transferred there, nor than its own
    other = _on(held.name, "a100-80gb")
    st = C.calibration_status(other)
    assert (st.kind, st.profile) == ("transferred", "mine-held") and "your fit" in st.label
    transferred = C.error_band(_on("vllm", "a100-80gb"))
    assert C.calibration_status(_on("vllm", "a100-80gb")).kind == "transferred"
    bt = C.error_band(other)
    assert bt["band"] >= transferred["band"] >= b["band"]
    # fitted in-sample only: on its own pair it is calibrated, its band never narrower than a transferred one
    bi = C.error_band(_on(ins.name, "h100-80gb"))
    assert C.calibration_status(_on(ins.name, "h100-80gb")).kind == "calibrated"
    assert bi["band"] >= transferred["band"] and bi["band"] >= 0.05 and "in-sample only" in bi["note"]
    # its cost fields changed on its pair: modified, the uncalibrated band
    mod = _on(held.name, "h100-80gb", compute_eff=0.2)
    st = C.calibration_status(mod)
    assert (st.kind, st.profile) == ("modified", "mine-held") and "compute_eff" in st.detail
    bm = C.error_band(mod)
    assert bm["basis"] == "uncalibrated:roofline-on-vllm" and "your profile mine-held changed" in bm["note"]
    assert "user's own server profile" in C.BAND_RULE or "own server profile" in C.BAND_RULE


def test_a_held_out_band_needs_no_error_table(monkeypatch):
    from engine.calibration import bands

    def missing(*a, **k):
        raise FileNotFoundError("profile_errors.csv not found")

    monkeypatch.setattr(bands, "error_bases", missing)
    p = presets.register_profile("mine", "", "vllm", _cost(), "h100-80gb", "llama-3.1-8b",
                                 _errors("held-out", thr=0.08, tpot=0.02))
    b = C.error_band(_on(p.name, "h100-80gb"))
    assert b["band"] == pytest.approx(0.08) and b["status"] == "calibrated"
    q = presets.register_profile("mine-in", "", "vllm", _cost(), "h100-80gb", "llama-3.1-8b", _errors("in-sample"))
    b = C.error_band(_on(q.name, "h100-80gb"))  # in-sample only: it needs the transfer basis, which is missing
    assert math.isnan(b["band"]) and "no measured error" in b["note"]


# ----------------------------------------------------------------------------- the dashboard
def _badges(at) -> list[str]:
    return [m.value for m in at.markdown if "-badge[" in m.value]


def test_use_as_my_server_profile_selects_it_in_this_session_only():
    at = tool_fit(tools_page(BASIC), params=["compute_eff"])
    assert not at.error
    fit = at.session_state[P.TOOL_FIT_KEY]
    tile = next(m for m in at.metric if m.label == C.param_label("compute_eff"))
    assert float(tile.value) == pytest.approx(fit["values"]["compute_eff"], rel=1e-3)
    (head,) = [d.value for d in at.dataframe if {"split", "metric", "p90_abs"} <= set(d.value.columns)]
    assert {"Mean TTFT (ms)", "Median TTFT (ms)", "P99 TTFT (ms)"} <= set(head["metric"])
    at.button(key="tool_use_profile").click()
    ok(at.run())
    assert at.title[0].value == "What-if" and not at.error
    name = fit["profile_name"]
    assert name == "my-vllm" and at.session_state[controls.FITTED_PROFILES_KEY] == [name]
    server = at.selectbox(key="server")
    assert server.value == name and server.options[-1].startswith(f"{name}: your fit")
    assert at.session_state[controls.STATE_KEY].scenario.server == name
    assert any("your fit my-vllm" in b for b in _badges(at)), _badges(at)
    assert any(s.value.startswith(f"Server profile {name}") for s in at.success)
    # another session (another visitor): not offered, and a link naming it falls back to the preset's server
    other = AppTest.from_file(MAIN, default_timeout=60)
    other.query_params["server"] = name
    ok(other.run())
    assert name in presets.PROFILES  # registered in the process...
    s2 = other.selectbox(key="server")
    assert s2.value != name and not any(o.startswith(name) for o in s2.options)  # ...but not this session's
    (warn,) = [w.value for w in other.warning if "URL parameter `server`" in w.value]
    assert "is not one of , vllm, slora; using 'vllm'" in warn  # (another session's profiles never listed)
    assert all("your fit" not in b for b in _badges(other))


def test_profile_helpers_outside_a_session():
    assert controls.session_profiles() == []
    p = presets.register_profile("mine", "", "vllm", _cost(), "h100-80gb", "llama-3.1-8b", _errors("in-sample"))
    assert controls._server_label(p.name).startswith("mine: your fit (vLLM") and "calibrated on h100-80gb" in \
        controls._server_label(p.name)
    assert controls._server_label("vllm") == "vllm: " + presets.PROFILES["vllm"].label
