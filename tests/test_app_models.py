"""A Hugging Face config.json uploaded in the dashboard becomes a base model (issue 12, item 2): registered
through engine.model_from_hf_config, selected, exported in scenario.json; every bad upload named."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import kpi_tables, opened, uploader
from streamlit.testing.v1 import AppTest

from app import controls, exports, page_whatif
from engine import presets

MAIN = str(Path(__file__).resolve().parent.parent / "app" / "main.py")
MISTRAL = presets.HF_PRESET_CONFIGS["mistral-7b-v0.3"][2]


def _config(**kw) -> bytes:
    cfg = {**MISTRAL, "_name_or_path": "acme/Tiny-Mistral-2B", "num_hidden_layers": 12, **kw}
    return json.dumps(cfg).encode()


def test_register_config_adds_a_model_once():
    name, msg = controls.register_config(_config())
    assert name == "tiny-mistral-2b" and name in presets.MODELS and not presets.is_preset_model(name)
    m = presets.MODELS[name]
    assert m.n_layers == 12 and m.hidden_size == 4096 and m.n_kv_heads == 8
    assert f"{m.n_params / 1e9:.2f} B parameters" in msg
    assert controls.register_config(_config())[0] == name  # the same definition again: the same model


def test_a_taken_name_gets_the_definitions_hash():
    # a config that calls itself llama-2-7b but is not the preset: never replaces the preset
    name, _ = controls.register_config(_config(_name_or_path="meta/Llama-2-7b"))
    assert name.startswith("llama-2-7b-") and len(name) == len("llama-2-7b-") + 8
    assert presets.MODELS["llama-2-7b"].n_layers == 32


@pytest.mark.parametrize("data, expect", [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "a JSON list"),
    (b"\xff\xfe", "not UTF-8"),
    (json.dumps({**MISTRAL, "hidden_size": -4}).encode(), "hidden_size"),
    (json.dumps({k: v for k, v in MISTRAL.items() if k != "num_hidden_layers"}).encode(), "num_hidden_layers"),
    (b" " * (controls.MAX_CONFIG_BYTES + 1), "at most 256 KB"),
])
def test_bad_configs_are_named(data, expect):
    with pytest.raises(ValueError, match=r"^config\.json: ") as e:
        controls.register_config(data)
    assert expect in str(e.value)


def test_upload_selects_the_model_and_scenario_json_carries_it():
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.query_params["duration_s"] = "60"
    at.query_params["strategy"] = "naive"
    at.run()
    uploader(at, "config_upload").set_value(("config.json", _config(_name_or_path="acme/Upload-3B"),
                                                     "application/json"))
    at.run()
    assert not at.exception and not at.error
    assert any("Added **upload-3b**" in s.value for s in at.success)
    assert at.selectbox(key="model").value == "upload-3b"
    sc = at.session_state[controls.STATE_KEY].scenario
    assert sc.model == "upload-3b" and len(kpi_tables(at)) == 1  # it runs: the comparison table
    assert "upload-3b" in at.caption[0].value.lower()
    proto = opened(at, page_whatif.K_DETAIL, "export").download_button(key="dl_scenario").proto
    text = json.loads(exports.scenario_json(sc, ["naive"], 3))
    assert text["model_definition"]["n_layers"] == 12 and proto is not None


def test_bad_upload_keeps_the_model():
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.query_params["duration_s"] = "60"
    at.query_params["strategy"] = "naive"
    at.run()
    uploader(at, "config_upload").set_value(("config.json", b'{"model_type": "llama"}', "application/json"))
    at.run()
    assert not at.exception
    assert any("config.json:" in e.value and "hidden_size" in e.value for e in at.error)
    assert at.selectbox(key="model").value == "llama-3.1-8b" == presets.SCENARIOS["default"]["model"]  # unchanged
