"""engine.planner.commands: server command lines checked against the flags read from vLLM / SGLang sources."""
import argparse
import json
import re
import shlex
from pathlib import Path

import pytest

from engine import Scenario, presets
from engine.calibration import vllm_slot_bytes
from engine.planner import commands
from engine.planner.commands import server_commands, sglang_command, vllm_command
from engine.policies import STRATEGIES
from engine.prefix import caching_on
from engine.presets.servers import VLLM_MAX_LORA_RANKS

FLAGS = json.loads((Path(__file__).parent / "fixtures" / "server_flags.json").read_text())
TYPES = {"int": int, "float": float, "str": str}
FIELDS = set(Scenario.field_names())

CASES = {
    "default": Scenario.from_preset("default"),
    "vllm-llama31-8b": Scenario.from_preset("vllm-llama31-8b"),
    "slora-a10g-s1": Scenario.from_preset("slora-a10g-s1"),
    "seed1-rtx3090": Scenario.from_preset("seed1-rtx3090"),
    "seed3": Scenario.from_preset("seed3-llama31-8b-80gb"),
    "default-vllm-16": Scenario.from_preset("default", strategy="vllm", max_loras=16),
    "mixed-ranks-kv": Scenario.from_preset("default", strategy="vllm", max_loras=8, adapter_ranks=(8, 48, 100),
                                           vram_budget_gb=6.0, kv_cache_gb=20.0, max_cpu_loras=4),
    "preload-all": Scenario.from_preset("default", strategy="preload_lru", target_modules="all"),
    # a shared prefix with the cache turned off: the flags that turn the servers' (default on) cache off
    "prefix-cache-off": Scenario.from_preset("default", strategy="vllm", prefix_tokens=500, prefix_share=0.5,
                                             prefix_caching="off"),
}
SUPPORTED = [(name, server) for name in CASES for server in ("vllm", "sglang")]


def _cmd(server, sc):
    return (vllm_command if server == "vllm" else sglang_command)(sc)


def _parser(server, required: bool = True) -> argparse.ArgumentParser:
    """The server's argument parser as the flag fixture records it (``required``: keep required flags required;
    the round trip parses printed commands whose required flags may be defaults)."""
    p = argparse.ArgumentParser(prog=server, add_help=False, allow_abbrev=False)
    for name, f in FLAGS[server]["flags"].items():
        kw = {"default": f.get("default")}
        if f.get("action") == "boolean_optional":
            kw["action"] = argparse.BooleanOptionalAction
        elif f.get("action") == "store_true":
            kw["action"] = "store_true"
        else:
            kw["type"] = TYPES[f["type"]]
            for k in ("choices", "nargs", "required") if required else ("choices", "nargs"):
                if k in f:
                    kw[k] = f[k]
        p.add_argument(name, **kw)
    return p


def _flags_of(cmd, server):
    """(program, positional model or None, the argv after them)."""
    prog = FLAGS[server]["program"]
    assert cmd.argv[:len(prog)] == prog
    rest = cmd.argv[len(prog):]
    if FLAGS[server]["positional"]:
        return rest[0], rest[1:]
    return None, rest


def _parse(cmd, server):
    model, rest = _flags_of(cmd, server)
    try:
        ns = _parser(server).parse_args(rest)
    except SystemExit:  # pragma: no cover - shows the argv that failed
        pytest.fail(f"{server}: argv does not parse with the fixture's flags: {rest}")
    return model, ns


def _hf_id(sc):
    return sc.model_spec.source.split(" (")[0]


# ---------------------------------------------------------------- (1) flags exist and parse
@pytest.mark.parametrize("name,server", SUPPORTED)
def test_every_flag_is_in_the_fixture_and_parses(name, server):
    cmd = _cmd(server, CASES[name])
    assert cmd.supported and cmd.server == server
    _, rest = _flags_of(cmd, server)
    known = set(FLAGS[server]["flags"])
    bool_opt = {n for n, f in FLAGS[server]["flags"].items() if f.get("action") == "boolean_optional"}
    for tok in rest:
        if tok.startswith("--"):
            base = "--" + tok[5:] if tok.startswith("--no-") and "--" + tok[5:] in bool_opt else tok
            assert base in known, f"{server} flag {tok} is not in tests/fixtures/server_flags.json"
    _parse(cmd, server)
    # the shell text is the argv (continuations and the placeholder comment aside)
    assert shlex.split(cmd.text.replace("\\\n", ""), comments=True) == cmd.argv
    assert " \\\n  --" in cmd.text
    assert cmd.text.startswith("# add your adapters: " + ("--lora-modules" if server == "vllm" else "--lora-paths"))
    assert "--lora-modules" not in cmd.argv and "--lora-paths" not in cmd.argv  # no invented adapter paths


def test_parser_rejects_a_wrong_flag_or_value():
    """The fixture's parser is strict: the tests above can fail."""
    with pytest.raises(SystemExit):
        _parser("vllm").parse_args(["--max-lora-rank", "48"])
    with pytest.raises(SystemExit):
        _parser("sglang").parse_args(["--model-path", "m", "--max-loras", "4"])
    with pytest.raises(SystemExit):
        _parser("sglang").parse_args(["--model-path", "m", "--lora-target-modules", "qkvo"])


# ---------------------------------------------------------------- (2) trace
@pytest.mark.parametrize("name,server", SUPPORTED)
def test_trace_names_a_scenario_field_or_rule(name, server):
    cmd = _cmd(server, CASES[name])
    _, rest = _flags_of(cmd, server)
    traced = [t[0] for t in cmd.trace if t[0].startswith("--")]
    assert traced == [t for t in rest if t.startswith("--")]
    for flag, value, source in cmd.trace:
        rules = re.findall(r"rule: (\w+)", source)
        assert all(r in commands.RULES for r in rules), (flag, source)
        words = set(re.findall(r"[a-z_]+", source))
        assert rules or words & FIELDS, f"{flag}: trace {source!r} names no Scenario field or rule"
        if flag.startswith("--"):
            i = cmd.argv.index(flag)
            n = len(value.split()) if value else 0
            assert cmd.argv[i + 1:i + 1 + n] == value.split()


# ---------------------------------------------------------------- (3) values
# Issue 24 item 5: the command sets only the answer's flags that differ from the server's defaults (the fixture
# fills the others); the batch limits, chunked prefill, prefix caching and the request length are the
# simulation's assumptions (Command.assumptions), not flags.  tests/test_commands_roundtrip.py checks the
# whole configuration against the simulated server's.
def _assumed(cmd) -> set[str]:
    return {k for k, _ in cmd.assumptions}


@pytest.mark.parametrize("name", list(CASES))
def test_vllm_values_equal_the_scenario(name):
    sc = CASES[name]
    cmd = vllm_command(sc)
    model, ns = _parse(cmd, "vllm")
    assert model == _hf_id(sc)
    assert ns.enable_lora is True
    # the server's default (on, keyed by adapter) unless prefix_caching 'off' turns it off (the flag); an assumption
    # only where the simulated strategy has no prefix cache
    assert ns.enable_prefix_caching is (sc.prefix_caching != "off")
    assert ("enable_prefix_caching" in _assumed(cmd)) == (not caching_on(sc) and sc.prefix_caching != "off")
    r = max(sc.ranks())
    assert ns.max_lora_rank in VLLM_MAX_LORA_RANKS and ns.max_lora_rank >= r
    assert all(v < r for v in VLLM_MAX_LORA_RANKS if v < ns.max_lora_rank)  # the smallest that holds r
    if sc.max_loras > 0:
        assert ns.max_loras == sc.max_loras
    else:  # memory only: slots of vLLM's size in the adapter budget, at least 1 (vLLM's minimum)
        assert 1 <= ns.max_loras <= min(sc.num_adapters, sc.max_batch_size)
        if sc.memory_mode == "static" and STRATEGIES[sc.strategy].memory_mode is None and ns.max_loras > 1:
            assert ns.max_loras * vllm_slot_bytes(ns.max_lora_rank, sc.model) <= sc.vram_budget_gb * presets.GIB
    host = ns.max_cpu_loras or ns.max_loras  # vLLM: unset = --max-loras
    assert host == max(sc.max_cpu_loras or sc.num_adapters, ns.max_loras) >= ns.max_loras
    assert ns.gpu_memory_utilization == sc.gpu_mem_util
    # not decided by a plan: vLLM's own batch limits and chunked prefill, the scenario's are assumptions
    assert ns.max_num_seqs is None and ns.max_num_batched_tokens is None and ns.enable_chunked_prefill is None
    seqs, tokens, _ = commands.vllm_batch_defaults(sc.gpu)
    assert ("max_num_seqs" in _assumed(cmd)) == (sc.max_batch_size != seqs)
    assert ("max_num_batched_tokens" in _assumed(cmd)) == (sc.max_batched_tokens != tokens)
    assert ("enable_chunked_prefill" in _assumed(cmd)) == (not sc.chunked_prefill_on())
    ctx = commands.MODEL_CONTEXT[sc.model][0]
    assert ns.max_model_len is None or sc.max_request_tokens() <= ns.max_model_len < ctx
    assert "max_model_len" in _assumed(cmd)  # the simulated requests are shorter than what the server accepts
    assert ns.kv_cache_memory_bytes == (int(sc.kv_cache_gb * presets.GIB) if sc.kv_cache_gb > 0 else None)


@pytest.mark.parametrize("name", list(CASES))
def test_sglang_values_equal_the_scenario(name):
    sc = CASES[name]
    cmd = sglang_command(sc)
    _, ns = _parse(cmd, "sglang")
    assert ns.model_path == _hf_id(sc)
    assert ns.enable_lora is True
    assert ns.disable_radix_cache is (sc.prefix_caching == "off")
    assert ("disable_radix_cache" in _assumed(cmd)) == (not caching_on(sc) and sc.prefix_caching != "off")
    assert ns.lora_eviction_policy == "lru"
    assert ns.max_lora_rank == max(sc.ranks())
    assert ns.lora_target_modules == list(presets.TARGET_MODULES[sc.target_modules])
    if sc.max_loras > 0:
        assert ns.max_loras_per_batch == sc.max_loras
    else:
        assert 1 <= ns.max_loras_per_batch <= min(sc.num_adapters, sc.max_batch_size)
    if sc.max_cpu_loras > 0:
        assert ns.max_loaded_loras == max(sc.max_cpu_loras, ns.max_loras_per_batch)
    else:
        assert ns.max_loaded_loras is None  # SGLang's default: no limit, our 0
    expected = sc.gpu_mem_util - sc.reserve_gb / sc.gpu_spec.memory_gib
    assert expected - 0.001 < ns.mem_fraction_static <= expected
    # SGLang computes these at start (not recorded): the scenario's values are assumptions
    assert ns.max_running_requests is None and "max_running_requests" in _assumed(cmd)
    assert ns.chunked_prefill_size is None and "chunked_prefill_size" in _assumed(cmd)
    if ns.context_length is not None:  # only when the model's context does not fit in the KV pool
        assert ns.context_length - 1 >= sc.max_request_tokens()
        assert ns.context_length - 6 >= sc.length_bounds(sc.prompt_tokens)[1]
        assert ns.context_length < commands.MODEL_CONTEXT[sc.model][0]
    kv = sc.kv_cache_gb * presets.GIB // presets.kv_bytes_per_token(sc.model_spec)
    assert ns.max_total_tokens == (int(kv) if sc.kv_cache_gb > 0 else None)


def test_known_commands():
    """Hand-computed values for two presets (catch a wrong derivation that the generic checks share)."""
    c = vllm_command(CASES["vllm-llama31-8b"])
    v = c.argv
    assert v == ["vllm", "serve", "meta-llama/Llama-3.1-8B", "--enable-lora", "--max-loras", "32",
                 "--max-cpu-loras", "128", "--gpu-memory-utilization", "0.9"]
    assert [(f, val) for f, val, _ in c.at_default] == [("--max-lora-rank", "16")]  # vLLM's default rank
    assumed = dict(c.assumptions)  # H100 64 GB: under 70 GiB, so vLLM's API server runs 256 sequences
    assert "2,048 sequences (256 is vLLM's default" in assumed["max_num_seqs"]
    assert "max_num_batched_tokens" not in assumed  # 2,048: the same as vLLM's default there
    assert f"at most {222 * 4 + 194 * 4:,} tokens" in assumed["max_model_len"] and "131,072" in assumed["max_model_len"]
    mc = vllm_command(CASES["mixed-ranks-kv"])
    m = mc.argv
    assert m[m.index("--max-lora-rank") + 1] == "128"            # ranks 8/48/100 -> vLLM's 128
    # 4 < --max-loras 8: vLLM requires >=, so 8, which is vLLM's unset value (= --max-loras): not printed
    assert "--max-cpu-loras" not in m and ("--max-cpu-loras", "8") in [(f, v) for f, v, _ in mc.at_default]
    s = sglang_command(CASES["mixed-ranks-kv"]).argv
    assert s[s.index("--max-lora-rank") + 1] == "100"            # SGLang takes any rank
    s = sglang_command(CASES["slora-a10g-s1"]).argv
    assert s[s.index("--model-path") + 1] == "huggyllama/llama-7b"
    assert s[s.index("--mem-fraction-static") + 1] == "0.817"    # 1.0 - 4.3686 / 24
    d = vllm_command(CASES["default"]).argv
    assert d[d.index("--max-cpu-loras") + 1] == "200"            # max_cpu_loras 0 -> all 200 adapters


# ---------------------------------------------------------------- (4) strategies
NO_SERVER = ["hot_set", "batch", "oracle", "single_adapter", "round_robin_k1", "batch_t4_k2",
             "hotset_32mb", "hotset_64mb", "hotset_batch_t4"]


def test_every_strategy_is_decided():
    assert set(STRATEGIES) == set(commands.CLOSEST) | set(commands.UNSUPPORTED)
    assert set(commands.UNSUPPORTED) == set(NO_SERVER)


@pytest.mark.parametrize("strategy", NO_SERVER)
def test_unsupported_strategies_emit_no_flag(strategy):
    sc = Scenario.from_preset("default", strategy=strategy)
    for c in server_commands(sc):
        assert c.supported is False
        assert c.argv == [] and c.trace == [] and c.text == ""
        assert strategy in c.note and "no" in c.note and len(c.note) > 40
    if strategy == "hot_set":
        assert "hot-set pinning has no vLLM/SGLang flag" in vllm_command(sc).note


def test_closest_server_is_said():
    sc = CASES["slora-a10g-s1"]
    v, s = server_commands(sc)
    assert v.supported and s.supported
    assert "SGLang is closer" in v.note
    assert "Closest to S-LoRA" in s.note and "not S-LoRA's unified paging" in s.note
    v, s = server_commands(CASES["vllm-llama31-8b"])
    assert "Same policy family" in v.note and "vLLM is the closest" in s.note


def test_rank_vllm_cannot_serve():
    sc = Scenario.from_preset("default", strategy="vllm", adapter_rank=600, vram_budget_gb=2.0)
    v, s = server_commands(sc)
    assert not v.supported and v.argv == [] and "adapter_rank" in v.note
    assert s.supported and s.argv[s.argv.index("--max-lora-rank") + 1] == "600"


# ---------------------------------------------------------------- (5) bad input
@pytest.mark.parametrize("fn", [vllm_command, sglang_command, server_commands])
@pytest.mark.parametrize("bad", [None, "default", {"strategy": "vllm"}])
def test_bad_input_raises(fn, bad):
    with pytest.raises(ValueError, match=r"^sc: "):
        fn(bad)


def test_invalid_scenario_raises_naming_the_field():
    with pytest.raises(ValueError, match="model"):
        vllm_command(Scenario(model="no-such-model"))
