"""Models from a Hugging Face ``config.json``: architecture fields and an exact parameter count.

``model_from_hf_config(config)`` reads the dictionary of a decoder-only model's config.json
(model_type llama, mistral, qwen2, phi3, gemma, gemma2, gpt_neox; other types when the config
carries the keys that decide the layout) and returns a ``Model``.  ``register_model`` (models.py)
then makes its name usable wherever a preset name is (``Scenario(model=...)``).

Parameter count (every weight and bias the config implies; per decoder layer, then the rest):

    head_dim   = config head_dim, else hidden_size // num_attention_heads
    q, kv      = num_attention_heads * head_dim, num_key_value_heads * head_dim
    attention  = h*q (q_proj) + 2*h*kv (k_proj, v_proj) + q*h (o_proj)
                 + q + 2*kv (q/k/v biases: Qwen2, GPT-NeoX, attention_bias) + h (o bias: GPT-NeoX,
                 attention_bias)
    MLP        = 3*h*i (gated: gate_proj, up_proj, down_proj) or 2*h*i (plain: GPT-NeoX)
                 + i + h per up/down bias (GPT-NeoX; mlp_bias adds one per gated projection too)
    norms      = 2 per layer (4 for Gemma-2's sandwich norms); RMSNorm has h weights, LayerNorm
                 (GPT-NeoX) h weights + h biases
    total      = vocab*h (embed_tokens) + layers*(attention + MLP + norms) + final norm
                 + vocab*h (lm_head) unless tie_word_embeddings

The count is checked against every preset in models.py and against published totals
(tests/test_presets_hf.py).  Weights are served in 16 bits whatever ``torch_dtype`` says
(float32 checkpoints such as google/gemma-2-9b are served in bf16/fp16, as vLLM's
``--dtype auto`` does), which is the simulator's 2-byte convention (docs/model.md 2).

The presets at the bottom of this module are built the same way from the config.json values of
the named repos (sources and cross-checks in docs/presets.md).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..limits import short_repr
from . import gpus as _gpus
from .models import Model, add_preset_model
from .models import is_preset_model as _is_preset_model
from .models import model_from_dict as _model_from_dict
from .models import register_model as _register_model

REQUIRED_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size")
SERVED_DTYPES = ("float16", "bfloat16", "float32")
#: hidden_act values that mean a gated (SwiGLU) MLP when the model_type is not in FAMILIES.
GATED_ACTS = ("silu", "swish")
#: A model's name and the config's ``_name_or_path`` (text from a user's file, shown in the dashboard and
#: written to CSV files): at most this many characters, each a letter, a digit or one of ``._-/:`` and the
#: space: no Markdown link, image or HTML, and no spreadsheet formula but a leading '-' (which every CSV
#: writer quotes: engine.limits.csv_safe).  Hub repo ids and local paths without other characters fit.
MAX_NAME_CHARS = 100
NAME_CHARS = "ASCII letters, digits, '.', '_', '-', '/', ':' and spaces"
_NAME_RE = re.compile(r"[A-Za-z0-9._\-/: ]+")


def check_name_text(field: str, value: str) -> str:
    """``value`` if it is a conservative name (``MAX_NAME_CHARS``, ``NAME_CHARS``), else ValueError naming
    ``field``, the characters that are not allowed (not the value: it may be Markdown or a formula) and the
    rule."""
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"{field}: invalid value of {len(value):,} characters; allowed: at most "
                         f"{MAX_NAME_CHARS} characters among {NAME_CHARS}")
    if not _NAME_RE.fullmatch(value):
        bad = list(dict.fromkeys(c for c in value if not _NAME_RE.fullmatch(c)))
        shown = ", ".join(repr(c) for c in bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise ValueError(f"{field}: invalid value: characters {shown} not allowed; allowed: at most "
                         f"{MAX_NAME_CHARS} characters among {NAME_CHARS}")
    return value


@dataclass(frozen=True)
class Family:
    """The parts of a model_type's layout that its config.json does not spell out."""

    mlp: str                  # "gated" or "plain"
    layernorm: bool           # LayerNorm (weight + bias) instead of RMSNorm (weight)
    norms_per_layer: int
    qkv_bias: bool            # fixed q/k/v biases (Qwen2, GPT-NeoX)
    o_bias: bool
    mlp_bias: bool
    tie_default: bool         # tie_word_embeddings when the config omits it (transformers' default)
    head_dim_required: bool   # the config must state head_dim (Gemma: 256, not hidden // heads)
    bias_keys: bool           # attention_bias / mlp_bias keys are honoured


FAMILIES: dict[str, Family] = {
    # transformers' LlamaConfig / MistralConfig / Qwen2Config / Phi3Config / GemmaConfig /
    # Gemma2Config / GPTNeoXConfig defaults and modeling code
    "llama": Family("gated", False, 2, False, False, False, False, False, True),
    "mistral": Family("gated", False, 2, False, False, False, False, False, False),
    "qwen2": Family("gated", False, 2, True, False, False, False, False, False),
    "phi3": Family("gated", False, 2, False, False, False, False, False, False),
    "gemma": Family("gated", False, 2, False, False, False, True, True, True),
    "gemma2": Family("gated", False, 4, False, False, False, True, True, True),
    "gpt_neox": Family("plain", True, 2, True, True, True, False, False, False),
}


def _int(config: dict, key: str, default: int | None = None) -> int:
    v = config.get(key)
    if v is None:
        if default is None:
            raise ValueError(f"{key}: missing from config.json; allowed: a positive integer "
                             f"(needed keys: {', '.join(REQUIRED_KEYS)})")
        return default
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"{key}: invalid value {v!r}; allowed: a positive integer")
    return v


def _bool(config: dict, key: str, default: bool | None) -> bool:
    v = config.get(key)
    if v is None:
        if default is None:
            raise ValueError(f"{key}: missing from config.json; allowed: true or false "
                             f"(needed for a model_type outside {', '.join(FAMILIES)})")
        return default
    if not isinstance(v, bool):
        raise ValueError(f"{key}: invalid value {v!r}; allowed: true or false")
    return v


def count_params(config: dict, mlp: str | None = None) -> tuple[int, dict]:
    """(exact parameter count, layout) of a config.json dictionary; ValueError naming a bad key.

    ``layout`` holds the derived fields: model_type, n_layers, hidden_size, n_heads, n_kv_heads,
    head_dim, intermediate_size, vocab_size, mlp, tied.
    """
    if not isinstance(config, dict):
        raise ValueError(f"config: invalid value of type {type(config).__name__}; allowed: the "
                         f"config.json dictionary (a JSON object)")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ValueError(f"model_type: invalid value {model_type!r}; allowed: a string such as "
                         f"{', '.join(FAMILIES)}")
    for key in ("num_local_experts", "num_experts", "n_routed_experts"):
        if config.get(key):
            raise ValueError(f"{key}: invalid value {config[key]!r}; allowed: absent or 0 (mixture-of-"
                             f"experts models are not modelled: one dense base model only)")
    if config.get("quantization_config"):
        raise ValueError("quantization_config: present; allowed: absent (the simulator serves 16-bit "
                         "weights; a quantized checkpoint's weight bytes would be wrong)")
    dtype = config.get("torch_dtype", config.get("dtype"))
    if dtype is not None and dtype not in SERVED_DTYPES:
        raise ValueError(f"torch_dtype: invalid value {dtype!r}; allowed: {', '.join(SERVED_DTYPES)} "
                         f"(served in 16 bits)")
    act = config.get("hidden_act")
    if act is not None and not isinstance(act, str):
        raise ValueError(f"hidden_act: invalid value {act!r}; allowed: a string such as 'silu'")

    fam = FAMILIES.get(model_type)
    if fam is None:
        # an unknown type: Llama's layout (RMSNorm, biases as attention_bias / mlp_bias say),
        # with the MLP kind from hidden_act and tie_word_embeddings stated
        if mlp is None:
            if act is None:
                raise ValueError(f"hidden_act: missing from config.json; allowed: a string (needed for "
                                 f"model_type {model_type!r}, which is not one of {', '.join(FAMILIES)})")
            if act not in GATED_ACTS:
                raise ValueError(f"hidden_act: {act!r} does not tell a gated from a plain MLP for model_type "
                                 f"{model_type!r}; allowed: {', '.join(GATED_ACTS)} (gated), or pass "
                                 f"mlp='gated' or mlp='plain'")
            mlp = "gated"
        fam = Family(mlp, False, 2, False, False, False, None, False, True)  # type: ignore[arg-type]
    if mlp is not None and mlp not in ("gated", "plain"):
        raise ValueError(f"mlp: invalid value {mlp!r}; allowed: gated, plain")
    kind = mlp or fam.mlp

    h = _int(config, "hidden_size")
    i = _int(config, "intermediate_size")
    n_heads = _int(config, "num_attention_heads")
    n_layers = _int(config, "num_hidden_layers")
    vocab = _int(config, "vocab_size")
    n_kv = _int(config, "num_key_value_heads", n_heads)
    if config.get("head_dim") is None:
        if fam.head_dim_required:
            raise ValueError(f"head_dim: missing from config.json; allowed: a positive integer (model_type "
                             f"{model_type!r} does not derive it from hidden_size)")
        if h % n_heads != 0:
            raise ValueError(f"num_attention_heads: invalid value {n_heads}; allowed: a divisor of "
                             f"hidden_size ({h}), or a config that states head_dim")
        head_dim = h // n_heads
    else:
        head_dim = _int(config, "head_dim")
    if n_heads % n_kv != 0:
        raise ValueError(f"num_key_value_heads: invalid value {n_kv}; allowed: a divisor of "
                         f"num_attention_heads ({n_heads})")
    tied = _bool(config, "tie_word_embeddings", fam.tie_default)
    attn_bias = fam.bias_keys and _bool(config, "attention_bias", False)
    mlp_bias = fam.mlp_bias or (fam.bias_keys and _bool(config, "mlp_bias", False))

    q, kv = n_heads * head_dim, n_kv * head_dim
    attention = h * q + 2 * h * kv + q * h
    if fam.qkv_bias or attn_bias:
        attention += q + 2 * kv
    if fam.o_bias or attn_bias:
        attention += h
    if kind == "gated":
        mlp_params = 3 * h * i + ((2 * i + h) if mlp_bias else 0)
    else:
        mlp_params = 2 * h * i + ((i + h) if mlp_bias else 0)
    norm = 2 * h if fam.layernorm else h
    per_layer = attention + mlp_params + fam.norms_per_layer * norm
    total = vocab * h + n_layers * per_layer + norm + (0 if tied else vocab * h)
    layout = {"model_type": model_type, "n_layers": n_layers, "hidden_size": h, "n_heads": n_heads,
              "n_kv_heads": n_kv, "head_dim": head_dim, "intermediate_size": i, "vocab_size": vocab,
              "mlp": kind, "tied": tied}
    return total, layout


def model_from_hf_config(config: dict, name: str | None = None, *, label: str | None = None,
                         source: str | None = None, mlp: str | None = None) -> Model:
    """A ``Model`` from a config.json dictionary, with its exact parameter count.

    ``name`` is the key it goes by (default: the last part of the config's ``_name_or_path``,
    lower-cased); ``label`` the display name (default ``name``); ``source`` the repo it comes from
    (default ``_name_or_path``, else ``name``).  ``mlp`` ("gated" / "plain") overrides the MLP kind
    for a model_type this module does not know.  Bad or missing keys raise ValueError naming the
    key, its value and what is allowed.  The model is not registered: pass it to
    ``presets.register_model`` to use it by name.

    The config's ``_name_or_path`` (when used) and the ``name`` are checked by ``check_name_text`` (at
    most ``MAX_NAME_CHARS`` characters among ``NAME_CHARS``): they come from a user's file and are shown
    and exported.  ``label`` and ``source``, when given, are the caller's own text (the presets').
    """
    n_params, lay = count_params(config, mlp)
    path = config.get("_name_or_path")
    path = path.strip().rstrip("/") if isinstance(path, str) and path.strip() else None
    if path is not None and (name is None or source is None):
        check_name_text("_name_or_path", path)
    if name is None:
        if path is None:
            raise ValueError("name: missing; allowed: a non-empty string (the config has no _name_or_path "
                             "to take it from)")
        name = path.split("/")[-1].lower()
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ValueError(f"name: invalid value {name!r}; allowed: a non-empty string without surrounding spaces")
    check_name_text("name", name)
    repo = source or path or name
    return Model(
        name=name,
        label=label or name,
        n_layers=lay["n_layers"],
        hidden_size=lay["hidden_size"],
        n_heads=lay["n_heads"],
        n_kv_heads=lay["n_kv_heads"],
        intermediate_size=lay["intermediate_size"],
        vocab_size=lay["vocab_size"],
        n_params=float(n_params),
        source=repo if repo.endswith("(config.json)") else f"{repo} (config.json)",
        head_dim=lay["head_dim"],
        mlp=lay["mlp"],
    )


# ---------------------------------------------------------------------------
# Presets built from config.json values.  Each dict holds the architecture keys of the named
# repo's config.json (as published on the Hugging Face Hub; read through stored copies of the
# file and of its fine-tunes' copies, see docs/presets.md).  Keys that do not change the count
# (rope_theta, max_position_embeddings, ...) are kept where they identify the file.
# ---------------------------------------------------------------------------

HF_PRESET_CONFIGS: dict[str, tuple[str, str, dict]] = {
    "llama-3.1-70b": ("Llama-3.1-70B", "meta-llama/Llama-3.1-70B", {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
        "mlp_bias": False, "hidden_act": "silu", "hidden_size": 8192, "intermediate_size": 28672,
        "max_position_embeddings": 131072, "num_attention_heads": 64, "num_hidden_layers": 80,
        "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256,
    }),
    "mistral-7b-v0.3": ("Mistral-7B-v0.3", "mistralai/Mistral-7B-v0.3", {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_act": "silu",
        "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": None,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 32768,
    }),
    "qwen2.5-14b": ("Qwen2.5-14B", "Qwen/Qwen2.5-14B", {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_act": "silu",
        "hidden_size": 5120, "intermediate_size": 13824, "max_position_embeddings": 131072,
        "max_window_layers": 48, "num_attention_heads": 40, "num_hidden_layers": 48,
        "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 152064,
    }),
    "phi-3-mini-4k": ("Phi-3-mini-4k-instruct", "microsoft/Phi-3-mini-4k-instruct", {
        "_name_or_path": "Phi-3-mini-4k-instruct", "architectures": ["Phi3ForCausalLM"],
        "model_type": "phi3", "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 8192,
        "max_position_embeddings": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 32, "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": 32064,
    }),
    "gemma-2-9b": ("Gemma-2-9B", "google/gemma-2-9b", {
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "attention_bias": False,
        "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "head_dim": 256,
        "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 3584, "intermediate_size": 14336, "max_position_embeddings": 8192,
        "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
        "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
        "sliding_window": 4096, "torch_dtype": "float32", "vocab_size": 256000,
        # no tie_word_embeddings key: Gemma2Config's default (True) applies
    }),
}

for _name, (_label, _repo, _cfg) in HF_PRESET_CONFIGS.items():
    add_preset_model(model_from_hf_config(_cfg, _name, label=_label, source=_repo))


def register_model_definition(definition: object, model: object, where: str = "model_definition") -> Model:
    """Register the model a scenario.json defines for its ``model``; ValueError naming ``where``."""
    m = _model_from_dict(definition, where)
    check_name_text(f"{where}.name", m.name)  # as an uploaded config.json's name (no markup)
    if m.name != model:
        raise ValueError(f"{where}: invalid value: it defines model {m.name!r} but the scenario's "
                         f"model is {short_repr(model)}; allowed: the definition of the scenario's model")
    if _is_preset_model(m.name):
        raise ValueError(f"{where}: invalid value: {m.name!r} is a preset model; allowed: "
                         f"no definition for a preset (its name identifies it)")
    try:
        return _register_model(m)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def register_device_definition(definition: object, gpu: object, where: str = "device_definition") -> _gpus.GPU:
    """Register the device a scenario.json defines for its ``gpu``; ValueError naming ``where``."""
    g = _gpus.gpu_from_dict(definition, where)
    check_name_text(f"{where}.name", g.name)
    if g.name != gpu:
        raise ValueError(f"{where}: invalid value: it defines device {g.name!r} but the scenario's gpu is "
                         f"{str(gpu)[:60]!r}; allowed: the definition of the scenario's gpu")
    if _gpus.is_preset_gpu(g.name):
        raise ValueError(f"{where}: invalid value: {g.name!r} is a preset GPU; allowed: no definition for a preset")
    try:
        return _gpus.register_gpu(g)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
