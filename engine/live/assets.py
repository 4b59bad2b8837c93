"""Build a reference server's files: a small Llama with random weights, a word-level tokenizer, and N peft
LoRA adapters, all on local disk (nothing downloaded).

Run by the live environment's interpreter (it needs torch, transformers and peft, which the engine does not):
``python engine/live/assets.py SPEC.json OUT_DIR`` (by path: importing the ``engine`` package would need the engine's own dependencies), where SPEC is ``ReferenceSpec.to_dict()``.  It writes
``model/`` (``config.json``, weights, tokenizer), ``adapters/<name>/`` (``adapter_config.json``,
``adapter_model.safetensors``) and ``assets.json`` (what was built, with the parameter counts).

The tokenizer maps the words ``w0`` ... ``w{V-1}`` one to one to token ids 1 ... V-1 (id 0 is ``[UNK]``, which
must be in the vocabulary): a prompt of N such words separated by spaces is exactly N tokens, which is how the
observer (``engine.live.observe``) states prompt lengths exactly.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def word(i: int, vocab_size: int) -> str:
    """The word of token id ``1 + i % (vocab_size - 1)`` (never the unknown token)."""
    return f"w{1 + i % (vocab_size - 1)}"


def build(spec: dict, out: Path) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(int(spec["seed"]))
    v = int(spec["vocab_size"])
    cfg = LlamaConfig(vocab_size=v, hidden_size=int(spec["hidden_size"]),
                      intermediate_size=int(spec["intermediate_size"]), num_hidden_layers=int(spec["num_layers"]),
                      num_attention_heads=int(spec["num_heads"]), num_key_value_heads=int(spec["num_kv_heads"]),
                      max_position_embeddings=int(spec["max_model_len"]), bos_token_id=None, eos_token_id=None,
                      pad_token_id=0, tie_word_embeddings=False, torch_dtype="bfloat16")
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    mdir = out / "model"
    model.save_pretrained(mdir)
    vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, v)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[UNK]",
                                   model_max_length=int(spec["max_model_len"]))
    fast.save_pretrained(mdir)
    n_params = sum(p.numel() for p in model.parameters())
    adapters = []
    ranks = list(spec["adapter_ranks"])
    for i in range(int(spec["num_adapters"])):
        base = LlamaForCausalLM(cfg).to(torch.bfloat16)
        torch.manual_seed(int(spec["seed"]) * 100_003 + i + 1)
        r = int(ranks[i % len(ranks)])
        lcfg = LoraConfig(r=r, lora_alpha=2 * r, target_modules=list(spec["target_modules"]),
                          init_lora_weights=False, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")
        pm = get_peft_model(base, lcfg)
        name = f"{spec['adapter_prefix']}{i}"
        adir = out / "adapters" / name
        pm.save_pretrained(adir)
        size = sum(f.stat().st_size for f in adir.iterdir() if f.suffix == ".safetensors")
        adapters.append({"name": name, "rank": r, "path": str(adir), "bytes": size,
                         "params": sum(p.numel() for n, p in pm.named_parameters() if "lora_" in n)})
    info = {"spec": spec, "model_dir": str(mdir), "model_params": int(n_params), "adapters": adapters,
            "torch": torch.__version__}
    (out / "assets.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python engine/live/assets.py SPEC.json OUT_DIR", file=sys.stderr)
        sys.exit(2)
    spec = json.loads(Path(sys.argv[1]).read_text())
    info = build(spec, Path(sys.argv[2]))
    print(json.dumps({"model_params": info["model_params"], "adapters": len(info["adapters"])}))
