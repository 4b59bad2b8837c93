"""Model presets (from each model's Hugging Face config.json) and closed-form sizes:
LoRA adapter bytes, KV-cache bytes per token, base-weight bytes.

``MODELS`` holds the presets below, the presets that ``hf.py`` builds from the
config.json dictionaries written there (Llama-3.1-70B, Mistral-7B-v0.3, ...), and
any model a caller adds with ``register_model`` (e.g. one built by
``model_from_hf_config``).  ``is_preset_model`` tells the built-in ones apart.
"""

import math
from dataclasses import asdict, dataclass, fields

from ..limits import short_repr
from .units import unknown

#: MLP layouts: "gated" = gate_proj + up_proj + down_proj (SwiGLU / GeGLU: Llama, Mistral,
#: Qwen2, Phi-3, Gemma); "plain" = up_proj + down_proj (GPT-NeoX's dense_h_to_4h / dense_4h_to_h).
MLP_KINDS = ("gated", "plain")


@dataclass(frozen=True)
class Model:
    name: str  # key, e.g. "llama-2-7b"
    label: str  # e.g. "Llama-2-7B"
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    intermediate_size: int
    vocab_size: int
    n_params: float  # total parameter count, e.g. 6.74e9
    source: str  # the HF config.json it comes from (repo id)
    # Width of one attention head.  0 (the default) means hidden_size // n_heads, which is what
    # every Llama/Mistral/Qwen2/Phi-3 config implies; Gemma states it (head_dim 256, so
    # n_heads * head_dim need not equal hidden_size).  Normalised to the actual width on creation.
    head_dim: int = 0
    mlp: str = "gated"  # one of MLP_KINDS

    def __post_init__(self) -> None:
        for f in ("name", "label", "source"):
            v = getattr(self, f)
            if not isinstance(v, str) or not v.strip():
                raise ValueError(f"model {short_repr(self.name)}: {f}: invalid value {short_repr(v)}; allowed: a non-empty string")
        for f in ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "intermediate_size", "vocab_size"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"model {short_repr(self.name)}: {f}: invalid value {short_repr(v)}; allowed: a positive integer")
        hd = self.head_dim
        if isinstance(hd, bool) or not isinstance(hd, int) or hd < 0:
            raise ValueError(f"model {self.name!r}: head_dim: invalid value {hd!r}; allowed: a positive integer "
                             f"(or 0 for hidden_size // n_heads)")
        n = self.n_params
        if isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) or n <= 0:
            raise ValueError(f"model {self.name!r}: n_params: invalid value {n!r}; allowed: a positive number")
        if self.mlp not in MLP_KINDS:
            raise ValueError(f"model {self.name!r}: mlp: invalid value {self.mlp!r}; allowed: {', '.join(MLP_KINDS)}")
        if hd == 0:
            if self.hidden_size % self.n_heads != 0:
                raise ValueError(
                    f"model {self.name!r}: hidden_size {self.hidden_size} is not a "
                    f"multiple of n_heads {self.n_heads}"
                )
            object.__setattr__(self, "head_dim", self.hidden_size // self.n_heads)
        if self.n_heads % self.n_kv_heads != 0:
            raise ValueError(
                f"model {self.name!r}: n_heads {self.n_heads} is not a "
                f"multiple of n_kv_heads {self.n_kv_heads}"
            )


# ---------------------------------------------------------------------------
# Models (all figures from the Hugging Face config.json of the named repo;
# n_params is the exact count implied by that config -- embeddings, attention
# (+ q/k/v biases for Qwen2), SwiGLU MLP, RMSNorms, untied or tied lm_head --
# and matches the parameter count shown on the HF model page)
# ---------------------------------------------------------------------------

MODELS: dict[str, Model] = {
    "llama-7b": Model(
        name="llama-7b",
        label="LLaMA-7B (original)",
        n_layers=32,
        hidden_size=4096,
        n_heads=32,
        n_kv_heads=32,  # no num_key_value_heads in config -> MHA
        intermediate_size=11008,
        vocab_size=32000,
        n_params=6_738_415_616.0,
        source="huggyllama/llama-7b (config.json)",
    ),
    "llama-2-7b": Model(
        name="llama-2-7b",
        label="Llama-2-7B",
        n_layers=32,
        hidden_size=4096,
        n_heads=32,
        n_kv_heads=32,
        intermediate_size=11008,
        vocab_size=32000,
        n_params=6_738_415_616.0,
        source="meta-llama/Llama-2-7b-hf (config.json)",
    ),
    "llama-2-13b": Model(
        name="llama-2-13b",
        label="Llama-2-13B",
        n_layers=40,
        hidden_size=5120,
        n_heads=40,
        n_kv_heads=40,
        intermediate_size=13824,
        vocab_size=32000,
        n_params=13_015_864_320.0,
        source="meta-llama/Llama-2-13b-hf (config.json)",
    ),
    "llama-3.1-8b": Model(
        name="llama-3.1-8b",
        label="Llama-3.1-8B",
        n_layers=32,
        hidden_size=4096,
        n_heads=32,
        n_kv_heads=8,  # GQA
        intermediate_size=14336,
        vocab_size=128256,
        n_params=8_030_261_248.0,
        source="meta-llama/Llama-3.1-8B (config.json)",
    ),
    "mistral-7b": Model(
        name="mistral-7b",
        label="Mistral-7B-v0.1",
        n_layers=32,
        hidden_size=4096,
        n_heads=32,
        n_kv_heads=8,  # GQA
        intermediate_size=14336,
        vocab_size=32000,
        n_params=7_241_732_096.0,
        source="mistralai/Mistral-7B-v0.1 (config.json)",
    ),
    "qwen2-0.5b": Model(
        name="qwen2-0.5b",
        label="Qwen2-0.5B",
        n_layers=24,
        hidden_size=896,
        n_heads=14,
        n_kv_heads=2,  # GQA, head_dim 64
        intermediate_size=4864,
        vocab_size=151936,
        n_params=494_032_768.0,  # tied embeddings
        source="Qwen/Qwen2-0.5B (config.json)",
    ),
    "qwen2-1.5b": Model(
        name="qwen2-1.5b",
        label="Qwen2-1.5B",
        n_layers=28,
        hidden_size=1536,
        n_heads=12,
        n_kv_heads=2,  # GQA, head_dim 128
        intermediate_size=8960,
        vocab_size=151936,
        n_params=1_543_714_304.0,  # tied embeddings
        source="Qwen/Qwen2-1.5B (config.json)",
    ),
    "qwen2.5-7b": Model(
        name="qwen2.5-7b",
        label="Qwen2.5-7B",
        n_layers=28,
        hidden_size=3584,
        n_heads=28,
        n_kv_heads=4,  # GQA, head_dim 128
        intermediate_size=18944,
        vocab_size=152064,
        n_params=7_615_616_512.0,  # untied lm_head
        source="Qwen/Qwen2.5-7B (config.json)",
    ),
}


# ---------------------------------------------------------------------------
# LoRA target-module sets and size helpers
# ---------------------------------------------------------------------------

TARGET_MODULES: dict[str, tuple[str, ...]] = {
    "qkvo": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "qv": ("q_proj", "v_proj"),
    "all": (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ),
}


def _head_dim(model: Model) -> int:
    return model.head_dim  # hidden_size // n_heads unless the config states it (Gemma)


def model_modules(model: Model) -> tuple[str, ...]:
    """The LoRA-targetable linear layers of one decoder layer (a plain MLP has no gate_proj)."""
    mlp = ("gate_proj", "up_proj", "down_proj") if model.mlp == "gated" else ("up_proj", "down_proj")
    return ("q_proj", "k_proj", "v_proj", "o_proj") + mlp


def module_shape(model: Model, module: str) -> tuple[int, int]:
    """(in_features, out_features) of one linear layer, respecting GQA and an explicit head_dim.

    q_proj projects to n_heads * head_dim and k_proj / v_proj to n_kv_heads * head_dim (not
    hidden_size); o_proj maps n_heads * head_dim back to hidden_size.  Fused layers (Phi-3's
    qkv_proj and gate_up_proj, GPT-NeoX's query_key_value) are given as their logical parts, the
    way vLLM allocates LoRA buffers per slice.
    """
    h = model.hidden_size
    hd = _head_dim(model)
    q_out = model.n_heads * hd
    kv_out = model.n_kv_heads * hd
    i = model.intermediate_size
    shapes = {
        "q_proj": (h, q_out),
        "k_proj": (h, kv_out),
        "v_proj": (h, kv_out),
        "o_proj": (q_out, h),
        "gate_proj": (h, i),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }
    have = model_modules(model)
    if module not in have:
        raise unknown(f"module (of {model.name}, {model.mlp} MLP)", module, have)
    return shapes[module]


def adapter_bytes(
    model: Model, rank: int, target_modules: str = "qkvo", dtype_bytes: int = 2, tp: int = 1
) -> int:
    """Bytes of one LoRA adapter (on each GPU of a tensor-parallel group of ``tp``).

    Per targeted module per layer: A (rank x in) + B (out x rank), i.e.
    rank * (in + out) * dtype_bytes, summed over modules and layers.  Modules of the target set
    that the model does not have (gate_proj of a plain MLP) are skipped.  Under tensor parallelism
    (vLLM's default, ``fully_sharded_loras`` off) each GPU holds a column-parallel layer's A whole and
    its B's shard (q, k, v, gate, up: out / tp; k, v keep one KV head when tp > n_kv_heads), a
    row-parallel layer's A shard (o, down: in / tp) and its B whole (docs/model.md 5.7).
    """
    if rank <= 0:
        raise ValueError(f"rank: must be a positive integer, got {rank!r}")
    if dtype_bytes <= 0:
        raise ValueError(f"dtype_bytes: must be positive, got {dtype_bytes!r}")
    try:
        modules = TARGET_MODULES[target_modules]
    except KeyError:
        raise unknown("target_modules", target_modules, TARGET_MODULES) from None
    have = model_modules(model)
    if tp == 1:
        per_layer = sum(sum(module_shape(model, m)) for m in modules if m in have)
    else:
        per_layer = sum(sum(_shard_shape(model, m, tp)) for m in modules if m in have)
    return int(rank) * per_layer * model.n_layers * int(dtype_bytes)


#: Row-parallel linear layers (input split over a tensor-parallel group); the others are column-parallel.
ROW_PARALLEL = ("o_proj", "down_proj")


def _shard_shape(model: Model, module: str, tp: int) -> tuple[int, int]:
    """(A's in, B's out) of one module's LoRA on one GPU of a tensor-parallel group of ``tp``."""
    i, o = module_shape(model, module)
    if module in ROW_PARALLEL:
        return i // tp, o
    if module in ("k_proj", "v_proj"):
        return i, max(model.n_kv_heads // tp, 1) * _head_dim(model)
    return i, o // tp


def kv_bytes_per_token(model: Model, dtype_bytes: int = 2, tp: int = 1) -> int:
    """KV-cache bytes per token: 2 (K and V) * n_layers * n_kv_heads * head_dim * dtype_bytes; on each GPU of a
    tensor-parallel group of ``tp``, its max(n_kv_heads / tp, 1) heads (vLLM replicates a KV head over the
    workers when tp > n_kv_heads)."""
    heads = model.n_kv_heads if tp == 1 else max(model.n_kv_heads // tp, 1)
    return 2 * model.n_layers * heads * _head_dim(model) * int(dtype_bytes)


def weight_bytes(model: Model, dtype_bytes: int = 2, tp: int = 1) -> int:
    """Base-model weight bytes: n_params * dtype_bytes; on each GPU of a tensor-parallel group of ``tp``, a
    1/tp share of everything but the k/v projections, which keep max(n_kv_heads / tp, 1) heads each (norms,
    a fraction of a per mille, counted as sharded too: docs/model.md 5.7)."""
    if tp == 1:
        return int(model.n_params) * int(dtype_bytes)
    kv = 2 * model.n_layers * model.hidden_size * _head_dim(model)  # k and v projections, per KV head
    per_gpu = (model.n_params - kv * model.n_kv_heads) / tp + kv * max(model.n_kv_heads // tp, 1)
    return int(per_gpu) * int(dtype_bytes)


def get_model(name: str) -> Model:
    try:
        return MODELS[name]
    except KeyError:
        raise unknown("model", name, MODELS) from None


# ---------------------------------------------------------------------------
# Registry: built-in presets vs models added at run time
# ---------------------------------------------------------------------------

_PRESET_NAMES: set[str] = set(MODELS)  # hf.py adds the presets it builds (add_preset_model)


def is_preset_model(name: str) -> bool:
    """True for a built-in preset (its name alone identifies it); False for a registered model."""
    return name in _PRESET_NAMES


def add_preset_model(model: Model) -> Model:
    """Add a built-in preset (used by hf.py for the presets it builds from config.json dicts)."""
    if model.name in MODELS:
        raise ValueError(f"model: preset {model.name!r} is defined twice")
    MODELS[model.name] = model
    _PRESET_NAMES.add(model.name)
    return model


def register_model(model: Model) -> Model:
    """Add ``model`` to MODELS under its name, so that ``Scenario(model=model.name)`` and every
    helper taking a model name accept it.  Registering the same model again is a no-op; a name
    already taken by a different model (a preset or an earlier registration) is a ValueError."""
    if not isinstance(model, Model):
        raise ValueError(f"model: invalid value {short_repr(model)}; allowed: an engine.presets.Model "
                         f"(e.g. from engine.model_from_hf_config)")
    old = MODELS.get(model.name)
    if old is not None and old != model:
        kind = "preset" if is_preset_model(model.name) else "registered"
        raise ValueError(f"model: name {model.name!r} is already a {kind} model with a different "
                         f"definition; allowed: a new name, or exactly the same definition")
    MODELS[model.name] = model
    return model


def model_to_dict(model: Model) -> dict:
    """The model's definition as a JSON-ready dict (every Model field)."""
    return asdict(model)


def model_from_dict(d: object, where: str = "model_definition") -> Model:
    """Rebuild a Model from ``model_to_dict`` output; ValueError naming ``where``.<field> otherwise."""
    if not isinstance(d, dict):
        raise ValueError(f"{where}: invalid value {short_repr(d)}; allowed: a JSON object with the fields "
                         f"of engine.presets.Model")
    names = [f.name for f in fields(Model)]
    required = [n for n in names if n not in ("head_dim", "mlp")]  # those two have defaults
    for k in d:
        if k not in names:
            raise ValueError(f"{where}.{k}: unknown field; allowed: {', '.join(names)}")
    for k in required:
        if k not in d:
            raise ValueError(f"{where}.{k}: missing; allowed: {', '.join(names)}")
    kw = dict(d)
    if isinstance(kw.get("n_params"), int) and not isinstance(kw["n_params"], bool):
        kw["n_params"] = float(kw["n_params"])
    try:
        return Model(**kw)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
