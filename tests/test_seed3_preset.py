"""The seed-3 preset re-derived from vLLM's LoRA defaults and the cost model fitted to the real vLLM runs
(issue 12 item 5): each fact it rests on, checked against the engine (and the reference csv when present)."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from engine import Scenario, presets, simulate
from engine.calibration import REF_DIR, VLLM_PARAMS, calibration_status
from engine.costs import load_seconds
from engine.presets.scenarios import SCENARIOS, SEED3_DISK_TO_CPU_MS, SEED3_FROM_VLLM_FIT
from engine.studies import SEED3_PRESET, SEED3_ROOFLINE_PRESET, mode
from engine.studies.vllm_multilora import seed3_module_bytes, seed3_specs

ROOT = Path(__file__).resolve().parent.parent
LOAD_TIMES = REF_DIR / "vllm_lora_load_times.csv"
PRESET = Scenario.from_preset(SEED3_PRESET)
FIT = Scenario.from_preset("vllm-llama31-8b")


@pytest.mark.parametrize("modules, per_adapter_mib, total_gb", [("qv", 13.0, 13.6), ("qkvo", 26.0, 27.3),
                                                                 ("all", 80.0, 83.9)])
def test_host_memory_of_1000_rank16_adapters(modules, per_adapter_mib, total_gb):
    b = presets.adapter_bytes(presets.get_model("llama-3.1-8b"), 16, modules)
    assert b / presets.MIB == pytest.approx(per_adapter_mib)
    assert 1000 * b / 1e9 == pytest.approx(total_gb, abs=0.05)
    # only q,v (PEFT's default for Llama) is near the benchmark's ~13 GB for 1,000 adapters
    assert (abs(1000 * b / 13e9 - 1) < 0.1) == (modules == "qv")


def test_preset_takes_the_module_set_that_matches_13gb():
    t = seed3_module_bytes().set_index("target_modules")
    assert PRESET.target_modules == "qv" and bool(t.loc["qv", "preset"]) and t.preset.sum() == 1
    assert PRESET.max_adapter_bytes() == t.loc["qv", "adapter_bytes"]


def test_vllm_lora_defaults():
    assert PRESET.strategy == "vllm" and PRESET.max_loras == 32
    assert PRESET.max_cpu_loras == PRESET.max_loras  # vLLM: --max-cpu-loras unset = --max-loras
    assert PRESET.host_warm is False                 # registered on first use, not pre-warmed
    assert PRESET.chunked_prefill == "auto" and PRESET.chunked_prefill_on()
    assert PRESET.load_mode == "sync"
    # the design the seed states
    assert (PRESET.gpu, PRESET.model, PRESET.num_adapters, PRESET.adapter_rank) == ("h100-80gb", "llama-3.1-8b", 1000, 16)
    assert (PRESET.arrival_process, PRESET.concurrency, PRESET.output_tokens, PRESET.zipf_s) == ("closed", 32, 128, 0.0)


def test_cost_fields_are_those_of_the_vllm_fit():
    assert SEED3_FROM_VLLM_FIT == tuple(p for p in VLLM_PARAMS if p != "max_in_system")
    for f in SEED3_FROM_VLLM_FIT + ("load_latency_ms", "pcie_gbps", "service_mode", "cost_model"):
        assert getattr(PRESET, f) == getattr(FIT, f), f
    assert PRESET.max_in_system == 0  # a property of the overloaded open-loop runs' client, not copied
    assert PRESET.gpu != FIT.gpu      # transferred: h100-64gb -> h100-80gb


def test_cost_fields_are_read_from_the_fit_not_copied_as_numbers():
    """The preset takes the fitted values from the vllm-llama31-8b dict: a refit that rewrites that dict's
    numbers moves the seed-3 preset with it."""
    import engine.presets.scenarios as S
    src = Path(S.__file__).read_text()
    block = src.split('SCENARIOS["seed3-llama31-8b-80gb"] = {')[1].split("}\n")[0]
    for f in SEED3_FROM_VLLM_FIT:  # no fitted number is written into the seed-3 preset
        assert f"{getattr(FIT, f)!r}" not in block
    assert "_VLLM_FIT[k] for k in SEED3_FROM_VLLM_FIT" in block


def test_calibration_status_says_transferred():
    st = calibration_status(PRESET)
    assert st.kind == "transferred" and st.preset == "vllm-llama31-8b" and "h100-80gb" in st.detail


def test_disk_time_of_one_adapter_is_the_measured_repeat_read():
    b = PRESET.max_adapter_bytes()
    disk_s = (load_seconds(b, PRESET.pcie_gbps, PRESET.load_latency_ms, True, PRESET.disk_gbps, PRESET.disk_latency_ms)
              - load_seconds(b, PRESET.pcie_gbps, PRESET.load_latency_ms))
    assert disk_s * 1e3 == pytest.approx(SEED3_DISK_TO_CPU_MS, abs=1e-6)
    assert PRESET.disk_latency_ms + b / (PRESET.disk_gbps * 1e9) * 1e3 == pytest.approx(83.740259, abs=1e-6)
    # the activation: 6 ms + bytes / 50 GB/s (6.4 ms measured for rank 16, max_lora_rank 16)
    assert load_seconds(b, PRESET.pcie_gbps, PRESET.load_latency_ms) * 1e3 == pytest.approx(6.27, abs=0.01)


def test_disk_time_is_the_csv_row():
    rows = list(csv.DictReader(LOAD_TIMES.open()))
    rep = [r for r in rows if r["model"] == "llama-3.1-8b-instruct" and r["stage"] == "disk_to_cpu_repeat"]
    row, = [r for r in rep if r["adapter_rank"] == "16" and r["max_lora_rank"] == "16"]
    assert float(row["time_ms"]) == pytest.approx(SEED3_DISK_TO_CPU_MS, abs=1e-6) and row["n_samples"] == "49"
    # the per-byte rate reproduces the rank sweep of the same stage within 10 %
    for r in rep:
        bb = presets.adapter_bytes(PRESET.model_spec, int(r["adapter_rank"]), PRESET.target_modules)
        model_ms = PRESET.disk_latency_ms + bb / (PRESET.disk_gbps * 1e9) * 1e3
        assert model_ms == pytest.approx(float(r["time_ms"]), rel=0.1), r["adapter_rank"]


def test_first_use_reads_from_disk_and_the_host_cache_holds_32():
    few = simulate(PRESET.replace(num_adapters=10, duration_s=20.0, warmup_s=2.0)).summary
    assert few["loads_total"] == few["disk_loads_total"] == 10  # each adapter once, from disk, then resident
    many = simulate(PRESET.replace(num_adapters=1000, duration_s=20.0, warmup_s=2.0)).summary
    assert many["disk_loads_total"] > 0.9 * many["loads_total"] > 50  # beyond 32 adapters, misses go to disk
    warm = simulate(PRESET.replace(num_adapters=1000, duration_s=20.0, warmup_s=2.0, host_warm=True,
                                   max_cpu_loras=0)).summary
    assert warm["disk_loads_total"] == 0 and warm["throughput_tok_s"] > many["throughput_tok_s"]


def test_max_loras_sweep_moves_max_cpu_loras_with_it():
    specs = [(e, g) for e, (_, g, _) in seed3_specs(mode(True))]
    ml = [g for e, g in specs if e == "max_loras"]
    assert [g["max_loras"] for g in ml] == [[4], [32], [128]]
    assert all(g["max_cpu_loras"] == g["max_loras"] for g in ml)
    full = [g["max_loras"][0] for e, g in ((e, g) for e, (_, g, _) in seed3_specs(mode(False))) if e == "max_loras"]
    assert full == [4, 8, 16, 32, 64, 128, 256]
    # the roofline design keeps its unlimited host cache: one product grid, no max_cpu_loras, 256 dropped
    roof = [g for e, (_, g, _) in seed3_specs(mode(False), SEED3_ROOFLINE_PRESET) if e == "max_loras"]
    assert len(roof) == 1 and "max_cpu_loras" not in roof[0] and roof[0]["max_loras"] == [4, 8, 16, 32, 64, 128]


def test_roofline_design_and_the_calibrated_preset_built_on_it():
    r = Scenario.from_preset(SEED3_ROOFLINE_PRESET)
    assert (r.target_modules, r.max_cpu_loras, r.host_warm) == ("qkvo", 0, True)
    assert (r.compute_eff, r.bw_eff, r.lora_ms_per_adapter, r.lora_ms_per_slot) == (0.6, 0.8, 0.0, 0.0)
    cal = SCENARIOS["seed3-llama31-8b-80gb-calibrated"]
    assert cal == {**SCENARIOS[SEED3_ROOFLINE_PRESET], "lora_ms_per_adapter": 0.628446, "step_overhead_ms": 9.1616}
