"""Models from a Hugging Face config.json (engine.model_from_hf_config), registered models in
scenarios, and the GPU / price presets."""
import json
import math
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine import Scenario, model_from_hf_config, presets, simulate
from engine.planner import GPU_PRICES_USD_PER_HOUR
from engine.presets.hf import count_params

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------------------- config.json values
# The architecture keys of each repo's config.json, as published on the Hub.
LLAMA_7B = {"model_type": "llama", "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 11008,
            "num_attention_heads": 32, "num_hidden_layers": 32, "rms_norm_eps": 1e-06, "torch_dtype": "float16",
            "vocab_size": 32000}  # huggyllama/llama-7b: no num_key_value_heads, no tie_word_embeddings key
LLAMA_2_7B = {"_name_or_path": "meta-llama/Llama-2-7b-hf", "model_type": "llama", "hidden_act": "silu",
              "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
              "num_key_value_heads": 32, "tie_word_embeddings": False, "torch_dtype": "float16", "vocab_size": 32000}
LLAMA_2_13B = {"model_type": "llama", "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 13824,
               "num_attention_heads": 40, "num_hidden_layers": 40, "num_key_value_heads": 40,
               "tie_word_embeddings": False, "torch_dtype": "float16", "vocab_size": 32000}
LLAMA_31_8B = {"model_type": "llama", "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
               "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
               "num_key_value_heads": 8, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256}
MISTRAL_7B = {"model_type": "mistral", "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
              "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "sliding_window": 4096,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32000}
QWEN2_05B = {"model_type": "qwen2", "hidden_act": "silu", "hidden_size": 896, "intermediate_size": 4864,
             "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2,
             "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 151936}
QWEN2_15B = {"model_type": "qwen2", "hidden_act": "silu", "hidden_size": 1536, "intermediate_size": 8960,
             "num_attention_heads": 12, "num_hidden_layers": 28, "num_key_value_heads": 2,
             "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 151936}
QWEN25_7B = {"model_type": "qwen2", "hidden_act": "silu", "hidden_size": 3584, "intermediate_size": 18944,
             "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
             "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 152064}

EXISTING = {"llama-7b": LLAMA_7B, "llama-2-7b": LLAMA_2_7B, "llama-2-13b": LLAMA_2_13B,
            "llama-3.1-8b": LLAMA_31_8B, "mistral-7b": MISTRAL_7B, "qwen2-0.5b": QWEN2_05B,
            "qwen2-1.5b": QWEN2_15B, "qwen2.5-7b": QWEN25_7B}


# ---------------------------------------------------------------------------- the count
@pytest.mark.parametrize("name", list(EXISTING))
def test_config_rebuilds_every_existing_preset_exactly(name):
    m = presets.MODELS[name]
    built = model_from_hf_config(EXISTING[name], name, label=m.label, source=m.source)
    assert built == m  # every field: n_params, head_dim, mlp, shapes
    assert built.n_params == m.n_params


def test_existing_counts_are_the_hub_figures():
    assert model_from_hf_config(LLAMA_2_7B).n_params == 6_738_415_616  # name from _name_or_path
    assert model_from_hf_config(LLAMA_2_7B).name == "llama-2-7b-hf"
    assert count_params(QWEN25_7B)[0] == 7_615_616_512


# (HF page parameter figure, decimals it is given to) for the presets built in hf.py
HUB_FIGURES = {"llama-3.1-70b": (70.6, 1), "mistral-7b-v0.3": (7.25, 2), "qwen2.5-14b": (14.8, 1),
               "phi-3-mini-4k": (3.82, 2), "gemma-2-9b": (9.24, 2)}
EXACT = {"llama-3.1-70b": 70_553_706_496, "mistral-7b-v0.3": 7_248_023_552, "qwen2.5-14b": 14_770_033_664,
         "phi-3-mini-4k": 3_821_079_552, "gemma-2-9b": 9_241_705_984}


@pytest.mark.parametrize("name", list(HUB_FIGURES))
def test_new_presets_match_their_stated_parameter_counts(name):
    m = presets.MODELS[name]
    assert presets.is_preset_model(name)
    assert m.n_params == EXACT[name]
    figure, dec = HUB_FIGURES[name]
    assert round(m.n_params / 1e9, dec) == figure
    label, repo, cfg = presets.HF_PRESET_CONFIGS[name]
    assert m == model_from_hf_config(cfg, name, label=label, source=repo)
    assert m.source == f"{repo} (config.json)"


def _non_embedding(cfg):
    n, lay = count_params(cfg)
    return n - lay["vocab_size"] * lay["hidden_size"] * (1 if lay["tied"] else 2)


def _gemma(model_type, h, layers, heads, kv, hd, i):
    return {"model_type": model_type, "hidden_act": "gelu_pytorch_tanh", "hidden_size": h, "intermediate_size": i,
            "num_attention_heads": heads, "num_hidden_layers": layers, "num_key_value_heads": kv, "head_dim": hd,
            "vocab_size": 256000, "torch_dtype": "bfloat16"}


def _neox(h, layers, heads, i, vocab):
    return {"model_type": "gpt_neox", "hidden_act": "gelu", "hidden_size": h, "intermediate_size": i,
            "num_attention_heads": heads, "num_hidden_layers": layers, "vocab_size": vocab,
            "tie_word_embeddings": False, "torch_dtype": "float16"}


@pytest.mark.parametrize("cfg,published", [
    # Gemma Team 2024 (Gemma report), Table: non-embedding parameters (GeGLU, head_dim 256, 2 norms)
    (_gemma("gemma", 2048, 18, 8, 1, 256, 16384), 1_981_884_416),
    (_gemma("gemma", 3072, 28, 16, 16, 256, 24576), 7_751_248_896),
    # Gemma Team 2024 (Gemma 2 report), Table 1: non-embedding parameters (4 norms per layer)
    (_gemma("gemma2", 2304, 26, 8, 4, 256, 9216), 2_024_517_888),
    (_gemma("gemma2", 3584, 42, 16, 8, 256, 14336), 8_324_201_984),
    (_gemma("gemma2", 4608, 46, 32, 16, 128, 36864), 26_047_480_320),
    # Biderman et al. 2023 (Pythia), Table 1: non-embedding parameters (GPT-NeoX: plain MLP, LayerNorm, biases)
    (_neox(768, 12, 12, 3072, 50304), 85_056_000),
    (_neox(2048, 16, 8, 8192, 50304), 805_736_448),
    (_neox(4096, 32, 32, 16384, 50432), 6_444_163_072),
])
def test_other_families_match_published_counts(cfg, published):
    assert _non_embedding(cfg) == published


def test_head_dim_and_plain_mlp_shape_the_sizes():
    g = presets.get_model("gemma-2-9b")
    assert g.head_dim == 256 and g.hidden_size // g.n_heads == 224
    assert presets.module_shape(g, "q_proj") == (3584, 4096)
    assert presets.module_shape(g, "k_proj") == (3584, 2048)
    assert presets.module_shape(g, "o_proj") == (4096, 3584)
    assert presets.kv_bytes_per_token(g) == 2 * 42 * 8 * 256 * 2
    assert presets.adapter_bytes(g, 16, "qkvo") == 16 * 42 * 2 * ((3584 + 4096) * 2 + (3584 + 2048) * 2)
    neox = model_from_hf_config(_neox(2048, 16, 8, 8192, 50304), "pythia-1b")
    assert neox.mlp == "plain" and neox.n_params == 1_011_781_632  # Pythia-1b total (HF: 1.01B)
    assert presets.model_modules(neox) == ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj")
    with pytest.raises(ValueError, match=r"^module \(of pythia-1b, plain MLP\): unknown value 'gate_proj'"):
        presets.module_shape(neox, "gate_proj")
    per_layer = 4 * (2048 + 2048) + 2 * (2048 + 8192)
    assert presets.adapter_bytes(neox, 8, "all") == 8 * 16 * 2 * per_layer
    llama = presets.get_model("llama-2-7b")
    assert presets.adapter_bytes(llama, 8, "all") == 8 * 32 * 2 * (4 * 8192 + 3 * (4096 + 11008))


def test_unknown_model_type_with_the_needed_keys_uses_llamas_layout():
    cfg = dict(LLAMA_31_8B, model_type="my_llama_fork")
    assert count_params(cfg)[0] == 8_030_261_248
    plain = model_from_hf_config(dict(cfg, hidden_act="gelu"), "x", mlp="plain")
    assert plain.mlp == "plain" and plain.n_params == 8_030_261_248 - 32 * 4096 * 14336


def test_biases_are_counted():
    base = count_params(LLAMA_31_8B)[0]
    q, kv, h, i = 4096, 1024, 4096, 14336
    assert count_params(dict(LLAMA_31_8B, attention_bias=True))[0] == base + 32 * (q + 2 * kv + h)
    assert count_params(dict(LLAMA_31_8B, mlp_bias=True))[0] == base + 32 * (2 * i + h)
    # Qwen2 has q/k/v biases whatever the config says; Mistral has none
    assert count_params(dict(LLAMA_31_8B, model_type="qwen2"))[0] == base + 32 * (q + 2 * kv)
    assert count_params(dict(LLAMA_31_8B, model_type="mistral", attention_bias=True))[0] == base


BAD = [
    ({k: v for k, v in LLAMA_2_13B.items() if k != "hidden_size"}, "hidden_size"),
    (dict(LLAMA_2_13B, num_hidden_layers="40"), "num_hidden_layers"),
    (dict(LLAMA_2_13B, intermediate_size=13824.0), "intermediate_size"),
    (dict(LLAMA_2_13B, vocab_size=True), "vocab_size"),
    (dict(LLAMA_2_13B, num_attention_heads=0), "num_attention_heads"),
    (dict(LLAMA_2_13B, num_attention_heads=48, num_key_value_heads=8), "num_attention_heads"),  # 5120 % 48
    (dict(LLAMA_2_13B, num_key_value_heads=3), "num_key_value_heads"),  # 40 % 3
    (dict(LLAMA_2_13B, head_dim=-2), "head_dim"),
    (dict(LLAMA_2_13B, tie_word_embeddings="no"), "tie_word_embeddings"),
    (dict(LLAMA_2_13B, model_type="rwkv_like", hidden_act=None), "hidden_act"),
    (dict(LLAMA_2_13B, model_type="rwkv_like", hidden_act="gelu"), "hidden_act"),
    ({k: v for k, v in dict(LLAMA_2_13B, model_type="rwkv_like").items() if k != "tie_word_embeddings"},
     "tie_word_embeddings"),
    ({k: v for k, v in _gemma("gemma", 2048, 18, 8, 1, 256, 16384).items() if k != "head_dim"}, "head_dim"),
    ({k: v for k, v in LLAMA_2_13B.items() if k != "model_type"}, "model_type"),
    (dict(LLAMA_2_13B, torch_dtype="int8"), "torch_dtype"),
    (dict(LLAMA_2_13B, num_local_experts=8), "num_local_experts"),
    (dict(LLAMA_2_13B, quantization_config={"bits": 4}), "quantization_config"),
    ("not a dict", "config"),
]


@pytest.mark.parametrize("cfg,key", BAD)
def test_bad_configs_raise_value_error_naming_the_key(cfg, key):
    with pytest.raises(ValueError) as e:
        model_from_hf_config(cfg, "bad")
    assert str(e.value).startswith(key + ":"), str(e.value)
    assert "allowed" in str(e.value) or key == "quantization_config"


def test_name_is_required_without_name_or_path():
    with pytest.raises(ValueError, match=r"^name: missing"):
        model_from_hf_config(LLAMA_2_13B)
    with pytest.raises(ValueError, match=r"^name: invalid value ' x'"):
        model_from_hf_config(LLAMA_2_13B, " x")


def test_model_dataclass_validates_its_fields():
    m = presets.get_model("llama-2-7b")
    with pytest.raises(ValueError, match=r"n_layers: invalid value 0"):
        presets.Model(**dict(presets.model_to_dict(m), n_layers=0))
    with pytest.raises(ValueError, match=r"mlp: invalid value 'moe'"):
        presets.Model(**dict(presets.model_to_dict(m), mlp="moe"))
    with pytest.raises(ValueError, match=r"hidden_size 4096 is not a multiple of n_heads 48"):
        presets.Model(**dict(presets.model_to_dict(m), n_heads=48, n_kv_heads=48, head_dim=0))
    # an explicit head_dim lifts the divisibility rule (Gemma)
    assert presets.Model(**dict(presets.model_to_dict(m), n_heads=48, n_kv_heads=48, head_dim=64)).head_dim == 64


# ---------------------------------------------------------------------------- registration
def _custom(name="my-llama-1b"):
    cfg = {"model_type": "llama", "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 8192,
           "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "head_dim": 64,
           "tie_word_embeddings": True, "torch_dtype": "bfloat16", "vocab_size": 128256}
    return model_from_hf_config(cfg, name, label="My Llama 1B", source="me/my-llama-1b")


def test_register_model_makes_the_name_usable_everywhere(registry):
    m = _custom()
    assert m.n_params == 1_235_814_400  # Llama-3.2-1B's architecture (HF page: 1.24B)
    with pytest.raises(ValueError, match=r"^model: invalid value 'my-llama-1b'; allowed: .*register_model"):
        Scenario(model=m.name).validate()
    assert presets.register_model(m) is m and presets.register_model(m) is m  # idempotent
    assert presets.get_model(m.name) is m and not presets.is_preset_model(m.name)
    sc = Scenario.from_preset("default", model=m.name, duration_s=3.0, warmup_s=0.5).validate()
    assert sc.memory_plan()["weights"] == 2 * 1_235_814_400
    assert sc.adapter_sizes()[0] == presets.adapter_bytes(m, sc.adapter_rank, sc.target_modules)
    r = simulate(sc)
    assert r.summary["requests"] > 0 and r.summary["completed"] == r.summary["requests"]


def test_register_model_refuses_clashes(registry):
    presets.register_model(_custom())
    other = presets.Model(**dict(presets.model_to_dict(_custom()), n_layers=17))
    with pytest.raises(ValueError, match=r"^model: name 'my-llama-1b' is already a registered model"):
        presets.register_model(other)
    fake = presets.Model(**dict(presets.model_to_dict(presets.get_model("llama-2-7b")), vocab_size=1))
    with pytest.raises(ValueError, match=r"^model: name 'llama-2-7b' is already a preset model"):
        presets.register_model(fake)
    presets.register_model(presets.get_model("llama-2-7b"))  # the preset itself: a no-op
    with pytest.raises(ValueError, match=r"^model: invalid value"):
        presets.register_model({"name": "x"})


def test_preset_scenario_json_is_unchanged():
    for name in presets.SCENARIOS:
        sc = Scenario.from_preset(name)
        d = sc.to_dict()
        assert list(d) == Scenario.field_names()  # no extra key for preset models
        assert json.loads(sc.to_json()) == d


def test_registered_model_round_trips_through_json_and_replace(registry):
    m = presets.register_model(_custom())
    sc = Scenario.from_preset("default", model=m.name, seed=3)
    d = sc.to_dict()
    assert d["model_definition"] == presets.model_to_dict(m)
    assert list(d)[:-1] == Scenario.field_names()
    text = sc.to_json()
    del presets.MODELS[m.name]  # a fresh process: the model is unknown ...
    sc2 = Scenario.from_json(text)  # ... until the scenario's definition registers it
    assert sc2 == sc and presets.MODELS[m.name] == m
    assert sc.replace(seed=4).model == m.name
    assert sc.replace(model="llama-2-7b").to_dict().get("model_definition") is None
    assert sc.replace(model="llama-2-7b").replace(model=m.name) == sc


@pytest.mark.parametrize("edit,match", [
    (lambda d: d.update(model="llama-2-7b"), r"^model_definition: invalid value: it defines model 'my-llama-1b'"),
    (lambda d: d["model_definition"].update(n_layers=0), r"^model_definition: model 'my-llama-1b': n_layers"),
    (lambda d: d["model_definition"].update(warp=1), r"^model_definition\.warp: unknown field"),
    (lambda d: d["model_definition"].pop("vocab_size"), r"^model_definition\.vocab_size: missing"),
    (lambda d: d.update(model_definition=[1]), r"^model_definition: invalid value \[1\]"),
    (lambda d: d["model_definition"].update(n_layers=17), r"^model_definition: model: name 'my-llama-1b' is already"),
])
def test_bad_model_definitions_name_the_key(registry, edit, match):
    m = presets.register_model(_custom())
    d = json.loads(Scenario(model=m.name).to_json())
    edit(d)
    with pytest.raises(ValueError, match=match):
        Scenario.from_dict(d)


def test_a_preset_needs_no_definition():
    d = Scenario().to_dict()
    d["model_definition"] = presets.model_to_dict(presets.get_model(d["model"]))
    with pytest.raises(ValueError, match=r"^model_definition: invalid value: 'llama-7b' is a preset model"):
        Scenario.from_dict(d)


def test_registered_model_survives_pickling_into_a_fresh_process(registry):
    """engine.sweep runs scenarios in spawned processes: the pickle must carry the definition."""
    sc = Scenario.from_preset("default", model=presets.register_model(_custom()).name)
    assert pickle.loads(pickle.dumps(sc)) == sc
    code = ("import pickle, sys; from engine import presets; sc = pickle.loads(sys.stdin.buffer.read()); "
            "sc.validate(); print(presets.get_model(sc.model).n_params)")
    p = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(sc), cwd=ROOT, capture_output=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    assert float(p.stdout.decode()) == 1_235_814_400
    plain = Scenario.from_preset("default")
    assert pickle.loads(pickle.dumps(plain)) == plain


# ---------------------------------------------------------------------------- GPUs and prices
# Every preset that existed before the A40 ... B200 additions, unchanged (no result may move).
OLD_GPUS = {
    "rtx3090": (24.0, 936.0, 71.0, 25.0), "rtx4090": (24.0, 1008.0, 165.2, 25.0), "l4": (24.0, 300.0, 121.0, 25.0),
    "l40s": (48.0, 864.0, 362.05, 25.0), "a10g": (24.0, 600.0, 70.0, 25.0), "a100-40gb": (40.0, 1555.0, 312.0, 25.0),
    "a100-80gb": (80.0, 2039.0, 312.0, 25.0), "h100-80gb": (80.0, 3350.0, 989.4, 50.0),
    "h100-64gb": (64.0, 1638.4, 989.4, 50.0), "h200": (141.0, 4800.0, 989.4, 50.0),
}
NEW_GPUS = {
    "a40": (48.0, 696.0, 149.7, 25.0), "a10": (24.0, 600.0, 125.0, 25.0), "t4": (16.0, 320.0, 65.0, 12.5),
    "a100-40gb-pcie": (40.0, 1555.0, 312.0, 25.0), "a100-80gb-pcie": (80.0, 1935.0, 312.0, 25.0),
    "h100-pcie": (80.0, 2000.0, 756.0, 50.0), "b200": (180.0, 8000.0, 2250.0, 50.0),
}
OLD_PRICES = {"rtx3090": 0.30, "rtx4090": 0.60, "l4": 0.70, "l40s": 0.90, "a10g": 1.01, "a100-40gb": 1.00,
              "a100-80gb": 1.30, "h100-80gb": 3.00, "h100-64gb": 2.50, "h200": 4.00}


def test_gpu_presets_old_unchanged_new_as_datasheets_give():
    assert list(presets.GPUS)[:len(OLD_GPUS)] == list(OLD_GPUS)  # order kept: new ones appended
    for name, figs in {**OLD_GPUS, **NEW_GPUS}.items():
        g = presets.GPUS[name]
        assert (g.memory_gib, g.hbm_gbps, g.fp16_tflops, g.pcie_gbps) == figs, name
        assert g.name == name and re.search(r"https?://", g.source), name
    # the PCIe parts are not their SXM siblings
    assert presets.GPUS["a100-80gb-pcie"].hbm_gbps < presets.GPUS["a100-80gb"].hbm_gbps
    assert presets.GPUS["h100-pcie"].fp16_tflops < presets.GPUS["h100-80gb"].fp16_tflops


def test_every_gpu_has_a_price_and_old_prices_are_unchanged():
    assert set(GPU_PRICES_USD_PER_HOUR) == set(presets.GPUS)
    for g, p in GPU_PRICES_USD_PER_HOUR.items():
        assert isinstance(p, float) and math.isfinite(p) and p > 0, g
    assert {g: GPU_PRICES_USD_PER_HOUR[g] for g in OLD_PRICES} == OLD_PRICES


def test_new_model_and_gpu_work_together():
    sc = Scenario.from_preset("default", gpu="b200", model="llama-3.1-70b", duration_s=3.0, warmup_s=0.5,
                              vram_budget_gb=2.0).validate()
    assert sc.memory_plan()["weights"] == 2 * 70_553_706_496
    with pytest.raises(ValueError, match=r"^model: .*do not fit"):
        sc.replace(gpu="h100-80gb").validate()
    r = simulate(Scenario.from_preset("default", gpu="t4", model="phi-3-mini-4k", duration_s=3.0, warmup_s=0.5))
    assert r.summary["completed"] > 0


def test_docs_tables_list_every_preset_with_its_figures():
    doc = (ROOT / "docs" / "presets.md").read_text()
    for n, g in presets.GPUS.items():
        row = f"| `{n}` | {g.label} | {g.memory_gib:g} | {g.hbm_gbps:g} | {g.fp16_tflops:g} | {g.pcie_gbps:g} | {g.source} |"
        assert row in doc, n
    for n, m in presets.MODELS.items():
        if not presets.is_preset_model(n):
            continue  # registered at run time (another test's upload), not a preset
        row = (f"| `{n}` | {m.label} | {m.n_layers} | {m.hidden_size} | {m.n_heads} | {m.n_kv_heads} | {m.head_dim} "
               f"| {m.intermediate_size} | {m.vocab_size} | {int(m.n_params):,} | `{m.source}` |")
        assert row in doc, n
        kv = presets.kv_bytes_per_token(m)
        assert f"| `{n}` | {kv:,} | {kv / 1024:g} | {presets.weight_bytes(m) / 2**30:.2f} |" in doc, n
