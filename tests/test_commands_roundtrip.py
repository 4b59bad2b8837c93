"""Round trip of the server command lines (issue 24 item 5, engine.planner.commands).

The printed vLLM / SGLang command (its shell text, through shlex) is parsed with the flags and defaults of
tests/fixtures/server_flags.json, the flags it does not print are filled with the server's defaults (the fixture's,
the per-GPU batch table, the model's context), and the configuration is compared with the simulated server's,
written here from the scenario's fields:

* every flag the answer sets equals the simulated server's value (the length flag: at least the longest
  simulated request, and the largest length whose KV fits);
* every setting where the configuration differs from the simulated server is named by an assumption, and
  every assumption names a setting where they differ;
* no printed flag equals the server's default; the answer's values left out are the defaults;
* ``--max-model-len`` / ``--context-length`` only when the model's full context does not fit in the KV cache;
* vLLM's per-GPU defaults match the table and the fixture's notes they come from.
"""
import argparse
import json
import math
import shlex
from pathlib import Path

import pytest
from legacy import legacy_preset

from engine import Scenario, presets
from engine.calibration import VLLM_MAX_MODEL_LEN, vllm_slot_bytes
from engine.cli.plan import command_doc
from engine.planner import commands
from engine.planner.commands import assumption_lines, server_commands, sglang_command, vllm_command
from engine.policies import STRATEGIES
from engine.prefix import caching_on
from tests.test_planner_commands import _parser as _fixture_parser

FLAGS = json.loads((Path(__file__).parent / "fixtures" / "server_flags.json").read_text())
VLLM_RANKS = FLAGS["vllm"]["flags"]["--max-lora-rank"]["choices"]
PAGE = 16  # both servers' KV page on CUDA (tokens)
LENGTH = {"vllm": "max_model_len", "sglang": "context_length"}

CASES = {
    # the model's context fits in the KV cache: Llama-3.1-8B on an H100 80 GB
    "llama31-8b-h100-80gb": Scenario.from_preset("vllm-llama31-8b", gpu="h100-80gb"),
    "seed3": Scenario.from_preset("seed3-llama31-8b-80gb"),
    "default": Scenario.from_preset("default"),
    "legacy-default": legacy_preset("default"),  # a stated server capping the batch below vLLM's default
    "vllm-llama31-8b": Scenario.from_preset("vllm-llama31-8b"),
    "slora-a10g-s1": Scenario.from_preset("slora-a10g-s1"),  # vLLM's 155 memory slots leave 0.5 GiB of KV
    "seed1-rtx3090": Scenario.from_preset("seed1-rtx3090"),
    "mixed-ranks-kv": Scenario.from_preset("default", strategy="vllm", max_loras=8, adapter_ranks=(8, 48, 100),
                                           vram_budget_gb=6.0, kv_cache_gb=20.0, max_cpu_loras=4),
    "preload-all": Scenario.from_preset("default", strategy="preload_lru", target_modules="all"),
    # the model's context does not fit: a tiny KV budget, and a big model on a GPU it barely fits
    "tiny-kv": Scenario.from_preset("vllm-llama31-8b").replace(kv_cache_gb=4.0),
    "70b-on-b200": Scenario.from_preset("default", model="llama-3.1-70b", gpu="b200", strategy="vllm", max_loras=8,
                                        vram_budget_gb=1.0),
    "8b-on-l4": Scenario.from_preset("default", model="llama-3.1-8b", gpu="l4", strategy="vllm", max_loras=4,
                                     vram_budget_gb=0.5, gpu_mem_util=0.92),
    # the prefix cache (docs/model.md 3.7): turned off (the servers' flags that turn theirs off), and simulated for
    # a strategy without one by default (as the servers run it: nothing to print or assume)
    "prefix-cache-off": Scenario.from_preset("default", strategy="vllm", prefix_tokens=500, prefix_share=0.5,
                                             prefix_caching="off"),
    "naive-prefix-cache-on": Scenario.from_preset("default", strategy="naive", prefix_caching="on"),
}
#: (case, the plan's grid fields): a decided batch limit / chunked prefill is a flag
DECIDED = [("default", ()), ("default", ("max_batch_size",)), ("default", ("max_batched_tokens", "chunked_prefill")),
           ("tiny-kv", ("chunked_prefill",)), ("vllm-llama31-8b", ("max_batch_size", "max_batched_tokens")),
           ("slora-a10g-s1", ("max_batch_size", "chunked_prefill")), ("seed3", ("gpu", "max_loras"))]
ALL = [(name, ()) for name in CASES] + [d for d in DECIDED if d[1]]


# ---------------------------------------------------------------- parsing the printed command
def _parser(server) -> argparse.ArgumentParser:
    return _fixture_parser(server, required=False)


def _context(sc):
    return commands.MODEL_CONTEXT[sc.model][0]


def _fill(server, cfg: dict, sc) -> dict:
    """The flags left unset, as the server computes them on the scenario's GPU and model (None: SGLang computes
    it at start, not recorded)."""
    cfg = dict(cfg)
    if server == "vllm":
        seqs, tokens, _ = commands.vllm_batch_defaults(sc.gpu)
        cfg["enable_lora"] = bool(cfg["enable_lora"])
        cfg["max_num_seqs"] = cfg["max_num_seqs"] or seqs
        cfg["max_num_batched_tokens"] = cfg["max_num_batched_tokens"] or tokens
        cfg["enable_chunked_prefill"] = True if cfg["enable_chunked_prefill"] is None else cfg["enable_chunked_prefill"]
        cfg["max_cpu_loras"] = cfg["max_cpu_loras"] or cfg["max_loras"]  # unset (or 0) = --max-loras
        cfg["max_model_len"] = cfg["max_model_len"] or _context(sc)
    else:
        cfg["enable_lora"] = bool(cfg["enable_lora"])
        cfg["context_length"] = cfg["context_length"] or _context(sc)
    return cfg


def configuration(cmd, sc) -> tuple[dict, set[str]]:
    """(the server's configuration, the dests the command prints), from the printed shell text."""
    words = shlex.split(cmd.text.replace("\\\n", ""), comments=True)
    prog = FLAGS[cmd.server]["program"]
    assert words[:len(prog)] == prog
    rest = words[len(prog):]
    model = None
    if FLAGS[cmd.server]["positional"]:
        model, rest = rest[0], rest[1:]
    ns = vars(_parser(cmd.server).parse_args(rest))
    if model is not None:
        ns["model"] = model
    printed = {("model" if t == FLAGS[cmd.server]["positional"] else
                t[5:] if t.startswith("--no-") else t[2:]).replace("-", "_") for t in rest if t.startswith("--")}
    return _fill(cmd.server, ns, sc), printed


def defaults(server, sc, max_loras=None) -> dict:
    """The configuration with no flag at all (vLLM's --max-cpu-loras defaults to the given --max-loras)."""
    cfg = vars(_parser(server).parse_args(["--model-path", "m"] if server == "sglang" else []))
    if server == "vllm" and max_loras is not None:
        cfg["max_loras"] = max_loras
    out = _fill(server, cfg, sc)
    if server == "vllm":
        out["max_loras"] = FLAGS["vllm"]["flags"]["--max-loras"]["default"]
    return out


# ---------------------------------------------------------------- the simulated server, from the scenario
def _slots(sc, slot_bytes):
    if sc.max_loras > 0:
        return sc.max_loras
    plan = sc.memory_plan()
    room = plan["adapters"]
    if (STRATEGIES[sc.strategy].memory_mode or sc.memory_mode) == "unified":
        room += plan["kv"] - sc.max_request_kv_bytes()
    return max(1, min(int(room // slot_bytes), sc.num_adapters, sc.max_batch_size))


def _hf_id(sc):
    return sc.model_spec.source.split(" (")[0]


def simulated(server, sc) -> dict:
    """The server the simulation models, in the server's setting names (length: the longest simulated request)."""
    r = max(sc.ranks())
    if server == "vllm":
        rank = min(v for v in VLLM_RANKS if v >= r)
        slots = _slots(sc, vllm_slot_bytes(rank, sc.model))
        return {"model": _hf_id(sc), "enable_lora": True, "max_loras": slots,
                "max_cpu_loras": max(sc.max_cpu_loras or sc.num_adapters, slots), "max_lora_rank": rank,
                "gpu_memory_utilization": sc.gpu_mem_util,
                "kv_cache_memory_bytes": int(sc.kv_cache_gb * presets.GIB) if sc.kv_cache_gb > 0 else None,
                "max_num_seqs": sc.max_batch_size, "max_num_batched_tokens": sc.max_batched_tokens,
                "enable_chunked_prefill": sc.chunked_prefill_on(), "enable_prefix_caching": caching_on(sc),
                "max_model_len": sc.max_request_tokens()}
    slots = _slots(sc, presets.adapter_bytes(sc.model_spec, r, sc.target_modules))
    return {"model_path": _hf_id(sc), "enable_lora": True, "max_loras_per_batch": slots,
            "max_loaded_loras": max(sc.max_cpu_loras, slots) if sc.max_cpu_loras > 0 else None,
            "lora_eviction_policy": "lru", "max_lora_rank": r,
            "lora_target_modules": list(presets.TARGET_MODULES[sc.target_modules]),
            "mem_fraction_static": math.floor((sc.gpu_mem_util - sc.reserve_gb / sc.gpu_spec.memory_gib) * 1000) / 1000,
            "max_running_requests": sc.max_batch_size,
            "chunked_prefill_size": sc.max_batched_tokens if sc.chunked_prefill_on() else -1,
            "max_total_tokens": (int(sc.kv_cache_gb * presets.GIB // presets.kv_bytes_per_token(sc.model_spec))
                                 if sc.kv_cache_gb > 0 else None),
            "disable_radix_cache": not caching_on(sc), "context_length": sc.max_request_tokens()}


def kv_fit(server, sc, sim) -> int:
    """Largest length (whole pages) whose KV fits next to the server's LoRA slots at the scenario's memory."""
    lora = sim["max_loras"] * vllm_slot_bytes(sim["max_lora_rank"], sc.model) if server == "vllm" else \
        sim["max_loras_per_batch"] * presets.adapter_bytes(sc.model_spec, sim["max_lora_rank"], sc.target_modules)
    g = sc.gpu_spec.memory_gib * presets.GIB
    kv = g * sc.gpu_mem_util - presets.weight_bytes(sc.model_spec) - sc.reserve_gb * presets.GIB - lora
    if sc.kv_cache_gb > 0:
        kv = min(kv, sc.kv_cache_gb * presets.GIB)
    return int(kv // (PAGE * presets.kv_bytes_per_token(sc.model_spec))) * PAGE


def _cmds(name, decided):
    return server_commands(CASES[name], decided=decided)


# ---------------------------------------------------------------- the round trip
@pytest.mark.parametrize("name,decided", ALL)
def test_printed_command_round_trips_to_the_simulated_server(name, decided):
    sc = CASES[name]
    for cmd in _cmds(name, decided):
        assert cmd.supported, cmd.note
        cfg, printed = configuration(cmd, sc)
        sim = simulated(cmd.server, sc)
        assumed = dict(cmd.assumptions)
        length = LENGTH[cmd.server]
        assert len(assumed) == len(cmd.assumptions), "one assumption per setting"
        # every flag the answer sets is the simulated server's value (the length flag: what fits, see below)
        for dest in printed - {length}:
            if dest in assumed:  # a flag the server needs beyond the simulation's value (vLLM without chunking)
                assert (cmd.server, dest) == ("vllm", "max_num_batched_tokens") and cfg[dest] > sim[dest]
                continue
            assert cfg[dest] == sim[dest], (cmd.server, dest, cfg[dest], sim[dest])
        # every difference is an assumption, every assumption a difference
        for dest, value in sim.items():
            assert (cfg[dest] != value) == (dest in assumed), (cmd.server, dest, cfg[dest], value)
        assert set(assumed) <= set(sim)
        # no printed flag is the server's default; the values left out are the defaults
        base = defaults(cmd.server, sc, cfg.get("max_loras"))
        for dest in printed - {"model", "model_path"}:
            assert cfg[dest] != base[dest], (cmd.server, dest, cfg[dest])
        for flag, value, source in cmd.at_default:
            dest = flag[2:].replace("-", "_")
            assert dest not in printed and cfg[dest] == base[dest] == sim[dest] and str(sim[dest]) == value
            assert "default: not printed" in source
        # no flag refuses a simulated request
        assert cfg[length] >= sc.max_request_tokens() + (1 if cmd.server == "sglang" else 0)


@pytest.mark.parametrize("name", list(CASES))
def test_length_flag_only_when_the_context_does_not_fit(name):
    sc = CASES[name]
    for cmd in server_commands(sc):
        cfg, printed = configuration(cmd, sc)
        sim = simulated(cmd.server, sc)
        length, fit, ctx = LENGTH[cmd.server], kv_fit(cmd.server, sc, sim), _context(sc)
        flag = "--" + length.replace("_", "-")
        assert (length in printed) == (ctx > fit), (cmd.server, ctx, fit)
        if ctx > fit:
            assert cfg[length] == fit  # the largest length that fits, with a note saying why
            assert f"{flag} {fit:,}: the model's full context ({ctx:,} tokens" in cmd.note
            assert "is the largest length that fits" in cmd.note
            assert any(t.startswith("rule: kv_fit") for f, _, t in cmd.trace if f == flag)
        else:
            assert cfg[length] == ctx and f"No {flag}: the model's full context ({ctx:,} tokens) fits" in cmd.note


def test_the_cases_cover_fit_and_no_fit():
    fits = {n: _context(sc) <= kv_fit("vllm", sc, simulated("vllm", sc)) for n, sc in CASES.items()}
    assert fits["llama31-8b-h100-80gb"] and fits["seed3"] and fits["vllm-llama31-8b"]
    assert not fits["tiny-kv"] and not fits["70b-on-b200"] and not fits["8b-on-l4"] and not fits["slora-a10g-s1"]
    v = vllm_command(CASES["llama31-8b-h100-80gb"])
    assert "--max-model-len" not in v.argv and "--max-num-seqs" not in v.argv
    assert "--no-enable-prefix-caching" not in v.argv and "--max-num-batched-tokens" not in v.argv
    t = vllm_command(CASES["tiny-kv"]).argv
    assert t[t.index("--max-model-len") + 1] == "32768"  # 4 GiB / 128 KiB per token


def test_unknown_context_prints_no_length_flag(monkeypatch):
    """A model whose context is not known: no flag (it could refuse traffic), a note with the largest that fits."""
    monkeypatch.delitem(commands.MODEL_CONTEXT, "llama-3.1-8b")
    sc = CASES["tiny-kv"]
    for cmd in server_commands(sc):
        flag = "--max-model-len" if cmd.server == "vllm" else "--context-length"
        assert flag not in cmd.argv
        assert "context length is not known here" in cmd.note and f"add {flag} 32768" in cmd.note
        assert "the model's context (from its config.json)" in dict(cmd.assumptions)[LENGTH[cmd.server]]


def test_decided_batch_limits_are_flags_and_undecided_ones_assumptions():
    own = vllm_command(CASES["default"])  # on the vLLM profile: vLLM's own limits, nothing to flag or assume
    assert "--max-num-seqs" not in own.argv and "max_num_seqs" not in dict(own.assumptions)
    sc = CASES["legacy-default"]  # a100-80gb: vLLM's API-server defaults 256 sequences, 2,048 tokens
    v = vllm_command(sc)
    assert "--max-num-seqs" not in v.argv and "--max-num-batched-tokens" not in v.argv
    assumed = dict(v.assumptions)
    assert assumed["max_num_seqs"].startswith("the simulation caps the batch at 64 sequences (256 is vLLM's default")
    assert "enable_chunked_prefill" in assumed and "enable_prefix_caching" in assumed  # (strategy naive: no cache)
    v = vllm_command(sc, decided=["max_batch_size"])
    assert v.argv[v.argv.index("--max-num-seqs") + 1] == "64" and "max_num_seqs" not in dict(v.assumptions)
    s = sglang_command(sc, decided=["max_batch_size"])
    assert s.argv[s.argv.index("--max-running-requests") + 1] == "64"
    # chunked prefill off, decided: vLLM needs a token budget of the longest request it accepts
    v = vllm_command(sc, decided=["chunked_prefill"])
    assert "--no-enable-chunked-prefill" in v.argv
    assert v.argv[v.argv.index("--max-num-batched-tokens") + 1] == "4096"  # Llama-2's context
    assert "this command sets 4,096" in dict(v.assumptions)["max_num_batched_tokens"]
    s = sglang_command(sc, decided=["chunked_prefill"])
    assert s.argv[s.argv.index("--chunked-prefill-size") + 1] == "-1"


@pytest.mark.parametrize("bad,match", [("max_batch_size", "decided: invalid value"), (["nope"], "unknown scenario "
                                                                                              "field 'nope'"),
                                       (3, "decided: invalid value")])
def test_bad_decided_raises(bad, match):
    with pytest.raises(ValueError, match=match):
        server_commands(CASES["default"], decided=bad)


# ---------------------------------------------------------------- the defaults and their sources
def test_vllm_batch_defaults_per_gpu_match_the_fixture_notes():
    notes = {f: FLAGS["vllm"]["flags"][f]["note"] for f in ("--max-num-seqs", "--max-num-batched-tokens")}
    assert notes["--max-num-seqs"] == "api server: 256, or 1024 on >= 70 GiB non-A100 GPUs"
    assert notes["--max-num-batched-tokens"].startswith(
        "api server: 2048, 8192 on >= 70 GiB non-A100, 16384 on >= 160 GiB")
    for name, g in presets.GPUS.items():
        a100 = "a100" in name
        seqs = 1024 if g.memory_gib >= 70 and not a100 else 256
        tokens = 16384 if g.memory_gib >= 160 and not a100 else 8192 if g.memory_gib >= 70 and not a100 else 2048
        assert commands.vllm_batch_defaults(name)[:2] == (seqs, tokens), name
    known = {"h100-80gb": (1024, 8192), "h100-pcie": (1024, 8192), "h200": (1024, 8192), "b200": (1024, 16384),
             "a100-80gb": (256, 2048), "a100-80gb-pcie": (256, 2048), "h100-64gb": (256, 2048), "l40s": (256, 2048)}
    for gpu, want in known.items():
        assert commands.vllm_batch_defaults(gpu)[:2] == want, gpu
    src = commands.__doc__ + " ".join(r[0] for r in commands.VLLM_BATCH_DEFAULTS)
    assert "VLLM_BATCH_DEFAULTS" in src and "vllm/engine/arg_utils.py" in src


def test_server_defaults_are_the_fixtures():
    for server, table in commands.SERVER_DEFAULTS.items():
        flags = FLAGS[server]["flags"]
        for dest, (value, source) in table.items():
            f = flags.get("--" + dest.replace("_", "-"))
            assert f is not None, (server, dest)
            assert source
            if f.get("default") is not None:
                assert value == f["default"], (server, dest)
            elif dest not in ("enable_lora", "enable_chunked_prefill"):  # None -> off / on (V1), as the notes say
                assert value is None, (server, dest)
    assert commands.SERVER_DEFAULTS["vllm"]["enable_chunked_prefill"][0] is True
    assert "None -> on in the V1 engine" in FLAGS["vllm"]["flags"]["--enable-chunked-prefill"]["note"]


def test_model_context_covers_every_preset():
    for name in presets.MODELS:
        if presets.is_preset_model(name):
            ctx, source = commands.MODEL_CONTEXT[name]
            assert ctx >= 2048 and source
    for name, (_, _, cfg) in presets.HF_PRESET_CONFIGS.items():
        assert commands.MODEL_CONTEXT[name][0] == cfg["max_position_embeddings"]
    assert commands.MODEL_CONTEXT["llama-3.1-8b"][0] == VLLM_MAX_MODEL_LEN


# ---------------------------------------------------------------- what the CLI writes and prints
def test_plan_json_entry_and_terminal_lines_carry_both_parts():
    for cmd in _cmds("default", ()):
        doc = command_doc(cmd)
        assert json.loads(json.dumps(doc)) == doc
        assert doc["command"] == cmd.text and doc["trace"] == [list(t) for t in cmd.trace]
        assert [(a["setting"], a["assumed"]) for a in doc["assumptions"]] == cmd.assumptions
        assert doc["at_default"] == [list(t) for t in cmd.at_default]
        lines = assumption_lines(cmd)
        assert lines[0].startswith("# what the simulation assumed (not flags")
        assert all(line.startswith("#") for line in lines)
        for setting, text in cmd.assumptions:
            assert f"#   - {text} [{setting}]" in lines
        # the assumptions are comments: the shell line is still exactly the flags
        assert shlex.split("\n".join([cmd.text.replace("\\\n", ""), *lines]), comments=True) == cmd.argv
