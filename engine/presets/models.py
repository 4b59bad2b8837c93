"""Model presets (from each model's Hugging Face config.json) and closed-form sizes:
LoRA adapter bytes, KV-cache bytes per token, base-weight bytes.
"""

from dataclasses import dataclass

from .units import unknown


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

    def __post_init__(self) -> None:
        if self.hidden_size % self.n_heads != 0:
            raise ValueError(
                f"model {self.name!r}: hidden_size {self.hidden_size} is not a "
                f"multiple of n_heads {self.n_heads}"
            )
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
    return model.hidden_size // model.n_heads


def module_shape(model: Model, module: str) -> tuple[int, int]:
    """(in_features, out_features) of one linear layer, respecting GQA.

    k_proj / v_proj project to n_kv_heads * head_dim, not hidden_size.
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
    try:
        return shapes[module]
    except KeyError:
        raise unknown("module", module, shapes) from None


def adapter_bytes(
    model: Model, rank: int, target_modules: str = "qkvo", dtype_bytes: int = 2
) -> int:
    """Bytes of one LoRA adapter.

    Per targeted module per layer: A (rank x in) + B (out x rank), i.e.
    rank * (in + out) * dtype_bytes, summed over modules and layers.
    """
    if rank <= 0:
        raise ValueError(f"rank: must be a positive integer, got {rank!r}")
    if dtype_bytes <= 0:
        raise ValueError(f"dtype_bytes: must be positive, got {dtype_bytes!r}")
    try:
        modules = TARGET_MODULES[target_modules]
    except KeyError:
        raise unknown("target_modules", target_modules, TARGET_MODULES) from None
    per_layer = sum(sum(module_shape(model, m)) for m in modules)
    return int(rank) * per_layer * model.n_layers * int(dtype_bytes)


def kv_bytes_per_token(model: Model, dtype_bytes: int = 2) -> int:
    """KV-cache bytes per token: 2 (K and V) * n_layers * n_kv_heads * head_dim * dtype_bytes."""
    return 2 * model.n_layers * model.n_kv_heads * _head_dim(model) * int(dtype_bytes)


def weight_bytes(model: Model, dtype_bytes: int = 2) -> int:
    """Base-model weight bytes: n_params * dtype_bytes."""
    return int(model.n_params) * int(dtype_bytes)


def get_model(name: str) -> Model:
    try:
        return MODELS[name]
    except KeyError:
        raise unknown("model", name, MODELS) from None
