"""Memory that adds up (issue 24, item 7): the planner's memory sentence and table come from one breakdown whose
products and sums hold, and the adapters' target modules are a dashboard control (URL-bound) like the rank.

The old sentence said "32 slots of 26 MiB (2.88 GiB)": the 26 MiB was one adapter's own bytes (q/k/v/o at rank 16)
and the 2.88 GiB was 32 of vLLM's slots (every linear module plus the embedding and lm_head buffers at
--max-lora-rank 16: 92.1 MiB each).  Now both numbers are the slot's."""
from __future__ import annotations

import re
from urllib.parse import parse_qs

import pytest

from app import controls, page_plan
from engine import ENUMS, Scenario, presets
from engine.calibration import vllm_slot_bytes
from engine.planner import memory_sentence, memory_split, plan
from engine.planner.memory import memory_breakdown, vllm_max_lora_rank, vllm_slot_budget_gb

GIB, MIB = presets.GIB, presets.MIB


def vllm_sized(sc: Scenario) -> Scenario:
    """The adapter budget as the planner sizes it for vLLM (max_loras slots at --max-lora-rank)."""
    return sc.replace(vram_budget_gb=vllm_slot_budget_gb(sc))


CASES = {
    "default": Scenario.from_preset("default"),
    "default-rank8": Scenario.from_preset("default", adapter_rank=8),
    "default-rank64-all": Scenario.from_preset("default", adapter_rank=64, target_modules="all",
                                               vram_budget_gb=4.0),
    "default-qv-8gib": Scenario.from_preset("default", target_modules="qv", vram_budget_gb=8.0, max_loras=40),
    "default-vllm": vllm_sized(Scenario.from_preset("default", strategy="vllm", max_loras=16)),
    "default-vllm-small-budget": Scenario.from_preset("default", strategy="vllm", max_loras=32),
    "default-slora": Scenario.from_preset("default", strategy="slora"),
    # the issue's case: Llama-3.1-8B, rank 16, q/k/v/o (26 MiB), 32 vLLM slots
    "issue-32-slots": vllm_sized(Scenario.from_preset("default", model="llama-3.1-8b", gpu="h100-80gb",
                                                      adapter_rank=16, strategy="vllm", max_loras=32)),
    "vllm-llama31-8b": Scenario.from_preset("vllm-llama31-8b"),
    "vllm-llama31-8b-64": vllm_sized(Scenario.from_preset("vllm-llama31-8b", max_loras=64)),
    "seed3-qv": Scenario.from_preset("seed3-llama31-8b-80gb"),
    "slora-a10g": Scenario.from_preset("slora-a10g-s1"),
    "kv-capped-rank-mix": Scenario.from_preset("kv-qwen2-0.5b-heavy"),
}


def num(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    assert m, (pattern, text)
    return float(m.group(1).replace(",", ""))


@pytest.mark.parametrize("name", list(CASES))
def test_the_breakdown_adds_up(name):
    sc = CASES[name].validate()
    b = memory_breakdown(sc)
    assert b.slots_total == b.slots * b.slot
    assert b.adapter_budget == b.slots_total + b.spare and b.spare >= 0
    assert b.weights + b.reserve + b.adapter_budget + b.kv + b.unallocated == b.usable
    assert sum(b.parts().values()) == b.gpu == round(sc.gpu_spec.memory_gib * GIB)
    assert min(b.parts().values()) >= 0, b.parts()
    # the same amounts as the engine's memory plan (to the byte)
    plan_ = sc.memory_plan()
    for k, v in (("usable", b.usable), ("weights", b.weights), ("reserve", b.reserve),
                 ("adapters", b.adapter_budget), ("kv", b.kv)):
        assert abs(plan_[k] - v) <= 1, (k, plan_[k], v)
    # what a slot is
    assert b.adapter == sc.max_adapter_bytes() == max(
        presets.adapter_bytes(sc.model_spec, r, sc.target_modules) for r in set(sc.ranks()))
    if sc.strategy == "vllm" and sc.max_loras > 0:
        assert b.slot_kind == "vllm" and b.slot == vllm_slot_bytes(vllm_max_lora_rank(sc), sc.model) > b.adapter
        assert b.slots == min(sc.max_loras, b.adapter_budget // b.slot)
    else:
        assert b.slot_kind == "adapter" and b.slot == b.adapter and b.slots == b.adapters_fit
        assert b.slots == min(b.adapter_budget // b.adapter, b.slot_cap or b.adapter_budget)
    assert b.kv_requests == b.kv // b.kv_request


@pytest.mark.parametrize("name", list(CASES))
def test_the_columns_are_the_breakdown(name):
    sc = CASES[name].validate()
    b, m = memory_breakdown(sc), memory_split(sc)
    assert m["adapter_slots"] == b.slots and m["adapters_fit"] == b.adapters_fit
    assert m["slot_mib"] * MIB == pytest.approx(b.slot) and m["adapter_mib"] * MIB == pytest.approx(b.adapter)
    assert m["slots_gib"] == pytest.approx(m["adapter_slots"] * m["slot_mib"] / 1024)
    parts = ("weights_gib", "reserve_gib", "slots_gib", "adapter_spare_gib", "kv_gib", "unallocated_gib",
             "headroom_gib")
    assert sum(m[k] for k in parts) == pytest.approx(m["gpu_gib"])
    assert m["adapters_gib"] == pytest.approx(m["slots_gib"] + m["adapter_spare_gib"])
    assert m["adapters_gib"] == pytest.approx(sc.vram_budget_gb)
    # the Plan page's memory table: the same numbers, the parts summing to its last row
    t = page_plan.memory_table(m)
    assert t["GiB"].iloc[:-1].sum() == pytest.approx(t["GiB"].iloc[-1]) == pytest.approx(m["gpu_gib"])
    assert f"{b.slots} x {b.slot / MIB:.1f} MiB" in t["part"].iloc[2]


@pytest.mark.parametrize("name", list(CASES))
def test_the_sentence_numbers_are_the_breakdowns_and_multiply_out(name):
    sc = CASES[name].validate()
    b, s = memory_breakdown(sc), memory_sentence(sc)
    usable = num(r"([\d.]+) GiB usable", s)
    weights, reserve = num(r"([\d.]+) GiB of weights", s), num(r"([\d.]+) GiB reserve", s)
    kv, kv_req = num(r"([\d.]+) GiB of KV", s), num(r"about ([\d,]+) requests", s)
    n = num(r"(\d+) (?:slots|adapters) x", s)
    slot = num(r"(?:slots|adapters) x ([\d.]+) MiB", s)
    total = num(r"x [\d.]+ MiB = ([\d.]+) GiB", s)
    # every number is the breakdown's, rounded as printed
    assert usable == round(b.usable / GIB, 1) and weights == round(b.weights / GIB, 1)
    assert reserve == round(b.reserve / GIB, 1) and kv == round(b.kv / GIB, 1) and kv_req == b.kv_requests
    assert (n, slot, total) == (b.slots, round(b.slot / MIB, 1), round(b.slots_total / GIB, 2))
    # n x per-slot = the slots' total, within the printed rounding
    assert abs(n * slot / 1024 - total) <= n * 0.05 / 1024 + 0.005 + 1e-9, (n, slot, total)
    # the printed parts sum to the usable memory, within their rounding (a part below its rounding is not printed)
    spare = num(r"\+ ([\d.]+) GiB of the adapter budget unused", s) if "unused" in s else 0.0
    unalloc = num(r"([\d.]+) GiB unallocated", s) if "unallocated" in s else 0.0
    assert abs(weights + reserve + total + spare + kv + unalloc - usable) <= 0.05 * 4 + 0.005 * 2 + 0.05 + 1e-9, s
    if b.slot_kind == "vllm":
        assert f"{sc.max_loras} slots" in s and f"is {b.adapter / MIB:.1f} MiB" in s  # the adapter's own size too
    else:
        assert f"{b.adapters_fit} adapters" in s


def test_the_issue_sentences_now_multiply_out():
    s32 = memory_sentence(CASES["issue-32-slots"])
    assert "32 slots x 92.1 MiB = 2.88 GiB of adapters" in s32 and "qkvo at rank 16, is 26.0 MiB" in s32
    s64 = memory_sentence(CASES["vllm-llama31-8b-64"])
    assert "64 slots x 92.1 MiB = 5.76 GiB of adapters" in s64 and "all at rank 16, is 80.0 MiB" in s64
    # a budget smaller than vLLM's slots says so, and what vLLM would reserve
    small = memory_sentence(CASES["default-vllm-small-budget"])
    b = memory_breakdown(CASES["default-vllm-small-budget"])
    assert b.slots < b.slots_wanted == 32
    assert f"{b.slots} slots x " in small and f"of the 32 slots vLLM reserves for --max-loras 32 ({32 * b.slot / GIB:.2f} GiB" in small
    # unified memory: the pool
    assert "share one pool" in memory_sentence(CASES["slora-a10g"])


def test_target_modules_size_the_adapters_in_the_breakdown():
    base = Scenario.from_preset("default", adapter_rank=16, vram_budget_gb=2.0)
    size = {t: memory_breakdown(base.replace(target_modules=t)).adapter for t in ENUMS["target_modules"]}
    assert size["qv"] < size["qkvo"] < size["all"]
    fits = {t: memory_breakdown(base.replace(target_modules=t)).adapters_fit for t in ENUMS["target_modules"]}
    assert fits["qv"] > fits["qkvo"] > fits["all"]
    # vLLM's slot is the same whatever the adapters target
    slots = {t: memory_breakdown(vllm_sized(base.replace(target_modules=t, strategy="vllm", max_loras=8))).slot
             for t in ENUMS["target_modules"]}
    assert len(set(slots.values())) == 1


def test_a_plans_memory_columns_are_its_recommendations_breakdown():
    sc = Scenario.from_preset("default", duration_s=60.0, warmup_s=5.0, drain_s=30.0, arrival_rate_rps=10.0,
                              num_adapters=50, strategy="vllm")
    res = plan(sc, {"ttft_p99_ms": 400.0}, {"max_loras": [4, 16]}, replications=1, workers=1)
    rec = res.scenario(int(res.best["config"]))
    m = memory_split(rec)
    for k, v in m.items():
        assert res.best[k] == pytest.approx(v), k
    assert res.best["adapter_slots"] == res.best["max_loras"]
    assert res.best["adapter_spare_gib"] == pytest.approx(0.0, abs=1e-12)


# ------------------------------------------------------------------ the control
def test_target_modules_is_a_url_bound_control():
    c = controls.BY_KEY["target_modules"]
    assert c.is_field and c.kind == "select" and c.section == "Adapters"
    keys = [x.key for x in controls.CONTROLS]
    assert keys.index("adapter_rank") < keys.index("target_modules") < keys.index("vram_budget_gb")
    values, issues = controls.resolve({})
    assert not issues and c.options(values) == list(ENUMS["target_modules"])
    assert values["target_modules"] == Scenario.from_preset("default").target_modules
    # each preset's own value is the default (not in the share link)
    seed3, _ = controls.resolve({"preset": "seed3-llama31-8b-80gb"})
    assert seed3["target_modules"] == "qv" and "target_modules" not in controls.url_params(seed3)


def test_target_modules_round_trip_through_the_url():
    values, issues = controls.resolve({"target_modules": "all"})
    assert not issues
    q = controls.share_query(values)
    assert "target_modules=all" in q
    back, issues = controls.resolve({k: v[-1] for k, v in parse_qs(q).items()})
    assert not issues and back["target_modules"] == "all"
    sc = controls.build_scenario(back)[0]
    assert sc.target_modules == "all"
    assert sc.max_adapter_bytes() == presets.adapter_bytes(sc.model_spec, sc.adapter_rank, "all")
    clean, issues = controls.sanitize_query({"target_modules": ["qv"]})
    assert not issues and clean["target_modules"] == "qv"
    # an unknown value is dropped with a message naming it
    bad, issues = controls.resolve({"target_modules": "mlp"})
    assert bad["target_modules"] == "qkvo" and len(issues) == 1 and "target_modules" in issues[0].message
    # the VRAM caption (the memory sentence) follows it
    note = controls.BY_KEY["vram_budget_gb"].note(back, back["vram_budget_gb"])
    assert "all at rank" in note and memory_sentence(sc) in note
