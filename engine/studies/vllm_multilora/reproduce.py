"""Seed 3, the vLLM multi-LoRA benchmark (shared/seeds/vllm-multi-lora-benchmark.txt): its design
run on the ``seed3-llama31-8b-80gb`` preset (vLLM's LoRA defaults and the cost model fitted to the real
vLLM runs; engine/presets/scenarios.py states every assumption).

``reproduce_seed3(out, mode)`` writes ``results/{throughput,latency,runs,published_comparison,
memory_decomposition,adapter_modules,predictions_skew,predictions_max_loras}.csv``, ``results/summary.txt``
and the plots in ``plots/``.  The predictions are of the results the source holds out (its skewed-traffic
and max_loras figures): reported, never compared.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ... import presets
from ...limits import write_csv
from ...presets.scenarios import SEED3_FROM_VLLM_FIT
from ...scenario import Scenario
from ...sweep import summarize_sweep
from ..common import Mode, cell, ci_of, fmt_ci, plot_lines, provenance, pyplot, run_specs

SEED3_PRESET = "seed3-llama31-8b-80gb"
#: The design as modelled before issue 12 item 5 (q,k,v,o, warm unlimited host cache, uncalibrated
#: roofline): the contrast view of docs/findings.md.
SEED3_ROOFLINE_PRESET = "seed3-llama31-8b-80gb-roofline"
#: Zipf exponent of the skewed runs.  The source says "zipf" and gives no exponent: s = 1 is ours.
SEED3_ZIPF_S = 1.0
#: Adapter counts of the max_loras predictions, and the max_loras values swept (full / quick): the
#: source's grid (4..128) and 256.
SEED3_PREDICT_COUNTS = (10, 50, 100, 500)
SEED3_MAX_LORAS = {False: (4, 8, 16, 32, 64, 128, 256), True: (4, 32, 128)}
SEED3_METRICS = ("throughput_tok_s", "throughput_req_s", "ttft_p50_ms", "ttft_p99_ms", "ttft_mean_ms",
                 "tpot_mean_ms", "swap_rate", "hit_rate_gpu", "gpu_busy_frac", "requests")
#: Published uniform-traffic throughput (seed 3: concurrency 32, max_loras 32), tokens/s.
SEED3_PUBLISHED_UNIFORM = {1: 1935.0, 10: 1489.0, 1000: 884.0}

SEED3_MEMORY_COUNTS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 250, 500, 750, 1000)
#: Full-mode run length for seed 3.  Closed-loop clients with fixed lengths finish in waves of
#: `concurrency` requests; request throughput (completions in the window) moves in whole waves,
#: ~1.7% at 60 s, ~0.3% at 300 s; token throughput counts tokens generated in the window.
SEED3_FULL_DURATION_S, SEED3_FULL_WARMUP_S = 300.0, 10.0


def seed3_times(m: Mode) -> tuple[float, float]:
    return (m.duration_s, m.warmup_s) if m.quick else (SEED3_FULL_DURATION_S, SEED3_FULL_WARMUP_S)


def seed3_grids(quick: bool, preset: str = SEED3_PRESET) -> dict[str, tuple[dict, dict]]:
    """Per experiment: (overrides of the preset, grid).  max_loras values whose slots the preset's adapter
    budget cannot hold are dropped."""
    p = Scenario.from_preset(preset)
    fit = int(p.vram_budget_gb * presets.GIB // p.max_adapter_bytes())
    slots = [v for v in SEED3_MAX_LORAS[quick] if v <= fit]
    z = SEED3_ZIPF_S
    if quick:
        return {
            "uniform": ({"zipf_s": 0.0}, {"concurrency": [32], "num_adapters": [1, 10, 100, 1000]}),
            "skewed": ({"zipf_s": z}, {"num_adapters": [10, 100, 1000]}),
            "max_loras": ({"zipf_s": z}, {"num_adapters": list(SEED3_PREDICT_COUNTS), "max_loras": slots}),
        }
    return {
        "uniform": ({"zipf_s": 0.0}, {"concurrency": [1, 4, 16, 32, 64],
                                      "num_adapters": [1, 10, 50, 100, 250, 500, 1000]}),
        "skewed": ({"zipf_s": z}, {"num_adapters": [10, 50, 100, 250, 500, 1000]}),
        "max_loras": ({"zipf_s": z}, {"num_adapters": [1, 10, 50, 100, 250, 500], "max_loras": slots}),
    }


def seed3_specs(m: Mode, preset: str = SEED3_PRESET, suffix: str = ""):
    """[(experiment id + suffix, (base, grid, ["vllm"]))].  When the preset follows vLLM's default
    max_cpu_loras = max_loras, the max_loras sweep moves max_cpu_loras with it: one spec per value
    (same experiment id; the runs are concatenated)."""
    specs = []
    dur, warm = seed3_times(m)
    for name, (over, grid) in seed3_grids(m.quick, preset).items():
        base = Scenario.from_preset(preset, duration_s=dur, warmup_s=warm, **over)
        if "max_loras" in grid and base.max_cpu_loras == base.max_loras > 0:
            for v in grid["max_loras"]:
                g = {**grid, "max_loras": [v], "max_cpu_loras": [v]}
                specs.append((name + suffix, (base, g, ["vllm"])))
        else:
            specs.append((name + suffix, (base, grid, ["vllm"])))
    return specs


def seed3_memory_table(max_loras: int | None = None) -> pd.DataFrame:
    """Host vs GPU adapter memory vs adapters loaded (from presets.adapter_bytes).  Host: every loaded
    adapter's bytes (vLLM's CPU cache holds ``max_cpu_loras`` of them; the files of the others sit in the OS
    page cache, which is what serves the preset's repeat reads); GPU: the active slots."""
    p = presets.SCENARIOS[SEED3_PRESET]
    model = presets.get_model(p["model"])
    b = presets.adapter_bytes(model, p["adapter_rank"], p["target_modules"])
    slots = max_loras or p["max_loras"]
    cpu = p.get("max_cpu_loras", 0) or 0
    cpu = slots if max_loras and cpu == p["max_loras"] else cpu  # vLLM's default follows max_loras
    rows = []
    for n in SEED3_MEMORY_COUNTS:
        host = n * b
        gpu = min(n, slots) * b
        rows.append({"adapters_loaded": n, "adapter_bytes": b, "max_loras": slots,
                     "host_bytes": host, "gpu_bytes": gpu, "gpu_slot_bytes_preallocated": slots * b,
                     "vllm_cpu_cache_bytes": (min(n, cpu) if cpu else n) * b,
                     "host_gib": host / presets.GIB, "gpu_gib": gpu / presets.GIB,
                     "host_share": host / (host + gpu) if host + gpu else math.nan})
    return pd.DataFrame(rows)


#: Adapters of the memory check: the benchmark's memory run reports about 13 GB of host memory for 1,000
#: rank-16 adapters (as quoted in issue 12; the seed text holds its memory figures out).
SEED3_MEMORY_CHECK = (1000, 13e9)


def seed3_module_bytes() -> pd.DataFrame:
    """Bytes of one rank-16 Llama-3.1-8B adapter (fp16) and of 1,000 of them, per target-module set: which
    set matches the benchmark's ~13 GB of host memory for 1,000 adapters."""
    p = presets.SCENARIOS[SEED3_PRESET]
    model = presets.get_model(p["model"])
    n, reported = SEED3_MEMORY_CHECK
    rows = []
    for mods in presets.TARGET_MODULES:
        b = presets.adapter_bytes(model, p["adapter_rank"], mods)
        rows.append({"target_modules": mods, "modules": "+".join(presets.TARGET_MODULES[mods]),
                     "adapter_bytes": b, "adapter_mib": b / presets.MIB, "adapters": n,
                     "total_gb": n * b / 1e9, "total_gib": n * b / presets.GIB,
                     "over_reported_13gb": n * b / reported, "preset": mods == p["target_modules"]})
    return pd.DataFrame(rows)


def seed3_disk_ms(preset: str = SEED3_PRESET) -> tuple[float, float]:
    """(disk -> host, host -> GPU) time of one adapter in ms, unqueued: the model's equations (docs/model.md 5.3)."""
    sc = Scenario.from_preset(preset)
    b = sc.max_adapter_bytes()
    return (sc.disk_latency_ms + b / (sc.disk_gbps * 1e9) * 1e3, sc.load_latency_ms + b / (sc.pcie_gbps * 1e9) * 1e3)


# ---------------------------------------------------------------------------- seed 3 report
def seed3_conditions(m: Mode) -> str:
    """The preset's conditions with every assumption and its source (the Conditions bullet of docs/findings.md
    and results/summary.txt)."""
    p = Scenario.from_preset(SEED3_PRESET)
    b = p.max_adapter_bytes()
    mods = seed3_module_bytes().set_index("target_modules")
    disk, act = seed3_disk_ms()
    fit = ", ".join(f"{k} {getattr(p, k):.3g}" for k in SEED3_FROM_VLLM_FIT)
    return (f"{presets.get_gpu(p.gpu).label} (the source: 'a single 80 GB GPU on Vast.ai'; its memory run is "
            f"labelled H100, so we use h100-80gb), Llama-3.1-8B fp16, {p.num_adapters:,} rank-{p.adapter_rank} "
            f"adapters, strategy vllm, closed loop (each of `concurrency` clients sends its next request when the "
            f"last finishes), output {p.output_tokens} tokens, vLLM defaults max_num_seqs {p.max_batch_size}, "
            f"gpu_memory_utilization {p.gpu_mem_util}, max_num_batched_tokens {p.max_batched_tokens}, chunked prefill "
            f"on; skewed traffic Zipf s={SEED3_ZIPF_S:g}. Assumptions, each with its source: "
            f"(1) a fixed {p.prompt_tokens}-token prompt (the source uses one fixed prompt of unstated length; ours); "
            f"(2) target modules q,v, PEFT's default for Llama-family models ({b / presets.MIB:.1f} MiB per adapter): "
            f"1,000 adapters then take {mods.loc['qv', 'total_gb']:.1f} GB of host memory, against "
            f"{mods.loc['qkvo', 'total_gb']:.1f} GB on q,k,v,o and {mods.loc['all', 'total_gb']:.1f} GB on all "
            f"seven linear modules, and the benchmark's memory run reports about 13 GB (as quoted in issue 12); "
            f"(3) max_cpu_loras = max_loras ({p.max_cpu_loras}), vLLM's default when the flag is not set (the source "
            f"sets neither), moved with max_loras in its sweep: adapters beyond the host cache are re-read from disk; "
            f"(4) adapters registered on first use, not pre-warmed (host_warm off: every adapter starts on disk); "
            f"(5) a disk -> host read of {disk:.2f} ms per adapter (disk_latency_ms {p.disk_latency_ms:.2f} + bytes / "
            f"{p.disk_gbps:g} GB/s), vLLM's measured repeat read of a rank-16 Llama-3.1-8B adapter "
            f"(engine/data/reference/vllm_lora_load_times.csv, disk_to_cpu_repeat, max_lora_rank 16, mean of 49; the "
            f"per-byte rate from that stage's rank 8/16/32 rows): repeat rather than first read because the source "
            f"re-reads the same adapter files case after case, which the OS page cache most likely serves; "
            f"(6) CPU -> GPU activation {act:.1f} ms ({p.load_latency_ms:g} ms + bytes / {p.pcie_gbps:g} GB/s, as "
            f"vllm-llama31-8b, from the same csv: 6.4 ms measured); (7) the cost model fitted to the 131 real vLLM "
            f"runs (vllm-llama31-8b: {fit}; docs/validation.md), TRANSFERRED from vLLM ~0.8.5 on an (unverified) "
            f"H100 64 GB to an H100 80 GB and the source's unstated vLLM version, without max_in_system (a property "
            f"of those overloaded runs' client; closed-loop clients never meet it); nothing is fitted to this "
            f"benchmark's numbers; (8) adapter budget {p.vram_budget_gb:g} GiB (holds "
            f"{int(p.vram_budget_gb * presets.GIB // b)} adapters, more than the largest max_loras swept; KV never binds); "
            f"(9) the engine updates host-cache recency when an adapter is loaded to the GPU, vLLM on every step, so "
            f"our model can only under-count disk reads. Duration-based runs of {seed3_times(m)[0]:g} s after a "
            f"{seed3_times(m)[1]:g} s warm-up instead of the source's 1,000 measured requests after 50 warm-up "
            f"requests (tokens/s counts the tokens generated in the window); {m.replications} replications")


def seed3_roofline_text() -> str:
    """What the contrast view (the roofline design) is."""
    r = Scenario.from_preset(SEED3_ROOFLINE_PRESET)
    return (f"the same design as modelled before issue 12 item 5 (preset {SEED3_ROOFLINE_PRESET}): adapters on "
            f"{r.target_modules} ({r.max_adapter_bytes() / presets.MIB:.0f} MiB each), every adapter in an unlimited "
            f"host cache warmed before measuring, activation {r.load_latency_ms:g} ms + bytes / {r.pcie_gbps:g} GB/s, "
            f"the roofline with the engine's default efficiencies (compute {r.compute_eff:g}, memory {r.bw_eff:g}, "
            f"step overhead {r.step_overhead_ms:g} ms) and no LoRA kernel or slot costs: uncalibrated")


def seed3_predictions(data: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The predictions for the results the source holds out (never compared with them):

    * skew: skewed (Zipf) / uniform output throughput at concurrency 32, max_loras 32, per adapter count,
      paired per replication (common random numbers);
    * max_loras: per adapter count of SEED3_PREDICT_COUNTS the max_loras with the highest mean output
      throughput, and the values tied with it (paired CI of best - other includes 0)."""
    u, sk = data["uniform"], data["skewed"]
    rows = []
    for n in sorted(sk["num_adapters"].unique()):
        if not np.any(np.isclose(u["num_adapters"], n) & np.isclose(u["concurrency"], 32)):
            continue
        a = cell(u, "throughput_tok_s", "vllm", num_adapters=n, concurrency=32)
        k = cell(sk, "throughput_tok_s", "vllm", num_adapters=n)
        rows.append({"num_adapters": int(n), "zipf_s": SEED3_ZIPF_S,
                     **dict(zip(("uniform_tok_s", "uniform_ci_low", "uniform_ci_high"), ci_of(a))),
                     **dict(zip(("skewed_tok_s", "skewed_ci_low", "skewed_ci_high"), ci_of(k))),
                     **dict(zip(("ratio", "ratio_ci_low", "ratio_ci_high"), ci_of(k / a))), "n": len(a)})
    skew = pd.DataFrame(rows)
    d = data["max_loras"]
    values = sorted(int(v) for v in d["max_loras"].unique())
    rows = []
    for n in SEED3_PREDICT_COUNTS:
        if not np.any(np.isclose(d["num_adapters"], n)):
            continue
        x = {v: cell(d, "throughput_tok_s", "vllm", num_adapters=n, max_loras=v) for v in values}
        best = max(values, key=lambda v: float(np.mean(x[v])))
        ties = [v for v in values if v != best and not ci_of(x[best] - x[v])[1] > 0]
        others = [v for v in values if v != best]
        runner = max(others, key=lambda v: float(np.mean(x[v]))) if others else best
        gap = ci_of(x[best] - x[runner])
        p99 = ci_of(cell(d, "ttft_p99_ms", "vllm", num_adapters=n, max_loras=best))
        rows.append({"num_adapters": n, "best_max_loras": best,
                     **dict(zip(("best_tok_s", "best_ci_low", "best_ci_high"), ci_of(x[best]))),
                     "tied_max_loras": " ".join(str(v) for v in ties), "runner_up": runner,
                     **dict(zip(("gap_tok_s", "gap_ci_low", "gap_ci_high"), gap)),
                     **dict(zip(("best_ttft_p99_ms", "best_ttft_p99_ci_low", "best_ttft_p99_ci_high"), p99)),
                     "max_loras_swept": " ".join(map(str, values)),
                     "tok_s_by_max_loras": " ".join(f"{v}:{np.mean(x[v]):.0f}" for v in values), "n": len(x[best])})
    return skew, pd.DataFrame(rows)


def seed3_prediction_lines(skew: pd.DataFrame, best: pd.DataFrame, md: bool = False) -> list[str]:
    """The predictions as text lines (``md``: Markdown tables for docs/findings.md)."""
    z = f"Zipf s={SEED3_ZIPF_S:g}, an exponent the source does not give"
    L = []
    if md:
        L += [f"**(a) Skewed / uniform output throughput** ({z}; concurrency 32, max_loras 32; paired per replication):",
              "", "| adapters | uniform tok/s | skewed tok/s | skewed / uniform |", "|---|---|---|---|"]
        for _, r in skew.iterrows():
            b = "**" if int(r.num_adapters) == 1000 else ""
            L.append(f"| {b}{int(r.num_adapters)}{b} | {fmt_ci(r.uniform_tok_s, r.uniform_ci_low, r.uniform_ci_high, 0)} | "
                     f"{fmt_ci(r.skewed_tok_s, r.skewed_ci_low, r.skewed_ci_high, 0)} | "
                     f"{b}{fmt_ci(r.ratio, r.ratio_ci_low, r.ratio_ci_high, 3)}{b} |")
        L += ["", f"**(b) Best max_loras by output tokens/s** ({z}; concurrency 32; max_loras swept over "
              f"{best.max_loras_swept.iloc[0].replace(' ', ', ') if len(best) else '-'}, max_cpu_loras = max_loras; "
              "tied: values whose paired CI of best minus it includes 0):", "",
              "| adapters | best max_loras | its tok/s | tied with it | runner-up: best - runner-up tok/s | its TTFT p99 ms "
              "| mean tok/s by max_loras |", "|---|---|---|---|---|---|---|"]
        for _, r in best.iterrows():
            L.append(f"| {int(r.num_adapters)} | **{int(r.best_max_loras)}** | {fmt_ci(r.best_tok_s, r.best_ci_low, r.best_ci_high, 0)} | "
                     f"{r.tied_max_loras.replace(' ', ', ') or 'none'} | {int(r.runner_up)}: "
                     f"{fmt_ci(r.gap_tok_s, r.gap_ci_low, r.gap_ci_high, 1)} | "
                     f"{fmt_ci(r.best_ttft_p99_ms, r.best_ttft_p99_ci_low, r.best_ttft_p99_ci_high, 0)} | "
                     f"{r.tok_s_by_max_loras.replace(' ', ', ')} |")
        return L
    L.append(f"   (a) skewed / uniform output throughput, {z}, concurrency 32, max_loras 32")
    L.append(f"   {'adapters':<9} {'uniform tok/s':<24} {'skewed tok/s':<24} skewed / uniform")
    for _, r in skew.iterrows():
        L.append(f"   {int(r.num_adapters):<9} {fmt_ci(r.uniform_tok_s, r.uniform_ci_low, r.uniform_ci_high, 0):<24} "
                 f"{fmt_ci(r.skewed_tok_s, r.skewed_ci_low, r.skewed_ci_high, 0):<24} "
                 f"{fmt_ci(r.ratio, r.ratio_ci_low, r.ratio_ci_high, 3)}")
    L.append(f"   (b) best max_loras by output tokens/s, {z}, concurrency 32, max_cpu_loras = max_loras "
             "(tied: paired CI of best - other includes 0)")
    L.append(f"   {'adapters':<9} {'best':<5} {'tok/s':<24} {'tied':<14} mean tok/s by max_loras")
    for _, r in best.iterrows():
        L.append(f"   {int(r.num_adapters):<9} {int(r.best_max_loras):<5} {fmt_ci(r.best_tok_s, r.best_ci_low, r.best_ci_high, 0):<24} "
                 f"{r.tied_max_loras or 'none':<14} {r.tok_s_by_max_loras}")
    return L


def _wide(summ: pd.DataFrame, keys: list[str], metrics) -> pd.DataFrame:
    out = None
    for mt in metrics:
        d = summ[summ["metric"] == mt][keys + ["mean", "ci_low", "ci_high", "n"]]
        d = d.rename(columns={"mean": f"{mt}_mean", "ci_low": f"{mt}_ci_low", "ci_high": f"{mt}_ci_high",
                              "n": "n"})
        out = d if out is None else out.merge(d.drop(columns="n"), on=keys)
    cols = [c for c in out.columns if c != "n"] + ["n"]
    return out[cols].reset_index(drop=True)


def seed3_published_comparison(data: dict[str, pd.DataFrame]) -> pd.DataFrame:
    df = data["uniform"]
    base = cell(df, "throughput_tok_s", "vllm", num_adapters=1, concurrency=32)
    rows = []
    for n, pub in SEED3_PUBLISHED_UNIFORM.items():
        if not np.any(np.isclose(df["num_adapters"], n)):
            continue
        v = cell(df, "throughput_tok_s", "vllm", num_adapters=n, concurrency=32)
        mu, lo, hi = ci_of(v)
        rm, rl, rh = ci_of(v / base)
        rows.append({"num_adapters": n, "published_tok_s": pub, "simulated_tok_s": mu, "simulated_ci_low": lo,
                     "simulated_ci_high": hi, "published_ratio_to_1": pub / SEED3_PUBLISHED_UNIFORM[1],
                     "simulated_ratio_to_1": rm, "simulated_ratio_ci_low": rl, "simulated_ratio_ci_high": rh,
                     "simulated_over_published": mu / pub})
    return pd.DataFrame(rows)


def seed3_summary_text(data, m: Mode, cmd: str, prov: dict, comp: pd.DataFrame, mem: pd.DataFrame,
                       preds: tuple[pd.DataFrame, pd.DataFrame] | None = None) -> str:
    L = ["Reproduction of the vLLM multi-LoRA benchmark design (seed 3) with LoRA What-If",
         f"command: {cmd}",
         f"engine {prov['engine']} (git {prov['git']}), {prov['date']}, mode {m.name}",
         f"conditions: {seed3_conditions(m)}.",
         "values: mean [95% Student-t CI] over replications (seed k for replication k).", "",
         "1. Uniform traffic, concurrency 32, max_loras 32: simulated vs published throughput (tokens/s)",
         f"   {'adapters':<9} {'published':<10} {'simulated':<28} {'published ratio to 1':<21} simulated ratio to 1"]
    for _, r in comp.iterrows():
        L.append(f"   {int(r.num_adapters):<9} {r.published_tok_s:<10.0f} "
                 f"{fmt_ci(r.simulated_tok_s, r.simulated_ci_low, r.simulated_ci_high, 0):<28} "
                 f"{r.published_ratio_to_1:<21.3f} {fmt_ci(r.simulated_ratio_to_1, r.simulated_ratio_ci_low, r.simulated_ratio_ci_high, 3)}")
    L.append("   Nothing is fitted to these numbers: the cost model is the one fitted to the real vLLM runs "
             "(vllm-llama31-8b), transferred to this GPU; the published values are the test.")
    L.append("")
    z = f"Zipf (s={SEED3_ZIPF_S:g})"
    for name, keys, title in (("uniform", ["concurrency", "num_adapters"], "Uniform traffic, max_loras 32"),
                              ("skewed", ["num_adapters"], f"{z} traffic, concurrency 32, max_loras 32"),
                              ("max_loras", ["num_adapters", "max_loras"],
                               f"{z} traffic, concurrency 32, max_cpu_loras = max_loras")):
        df = data[name]
        L.append(f"{title}: throughput tok/s | TTFT p50 ms | TTFT p99 ms")
        L.append("   " + " ".join(f"{k:<12}" for k in keys) + f" {'tok/s':<26} {'TTFT p50':<26} TTFT p99")
        for vals, g in df.groupby(keys, sort=True):
            vals = vals if isinstance(vals, tuple) else (vals,)
            t = ci_of(g["throughput_tok_s"])
            p50 = ci_of(g["ttft_p50_ms"])
            p99 = ci_of(g["ttft_p99_ms"])
            L.append("   " + " ".join(f"{v:<12g}" for v in vals) + f" {fmt_ci(*t, digits=0):<26} {fmt_ci(*p50, 1):<26} {fmt_ci(*p99, 1)}")
        L.append("")
    if preds is not None:
        L.append("Predictions (held out, not compared): the source withholds its skewed-traffic and max_loras figures")
        L += seed3_prediction_lines(*preds)
        L.append("")
    mods = seed3_module_bytes()
    L.append("Adapter bytes by target modules (rank 16, fp16; the benchmark reports about 13 GB of host memory for "
             "1,000 adapters)")
    for _, r in mods.iterrows():
        L.append(f"   {r.target_modules:<5} {r.adapter_mib:6.1f} MiB per adapter, {r.total_gb:6.1f} GB for "
                 f"{r.adapters:,} ({r.over_reported_13gb:.2f}x 13 GB){'  <- the preset' if r.preset else ''}")
    L.append("")
    L.append(f"Memory decomposition (rank {presets.SCENARIOS[SEED3_PRESET]['adapter_rank']} adapters, "
             f"{mem.adapter_bytes.iloc[0] / presets.MIB:.1f} MiB each; GPU = min(adapters, max_loras={mem.max_loras.iloc[0]}) slots)")
    L.append(f"   {'adapters':<9} {'host GiB':<10} {'GPU GiB':<9} host share")
    for _, r in mem.iterrows():
        share = "-" if not math.isfinite(r.host_share) else f"{100 * r.host_share:.1f}%"
        L.append(f"   {int(r.adapters_loaded):<9} {r.host_gib:<10.3f} {r.gpu_gib:<9.3f} {share}")
    L.append("   (vLLM allocates its max_loras slots at start-up, so its GPU LoRA memory is the constant "
             f"{mem.gpu_slot_bytes_preallocated.iloc[0] / presets.GIB:.3f} GiB; either way GPU memory is bounded by the slots.)")
    return "\n".join(L) + "\n"


def reproduce_seed3(out: Path, m: Mode, workers: int | None = None, progress=False, cmd: str = "",
                    backend: str | None = None, ray_address: str | None = None) -> dict:
    """``backend`` / ``ray_address``: where the simulations run (``run_specs``; default: processes); the files
    are the same whatever the backend."""
    specs = seed3_specs(m)
    data = run_specs(specs, m, workers, progress, backend=backend, ray_address=ray_address)
    res, plots = out / "results", out / "plots"
    res.mkdir(parents=True, exist_ok=True)
    plots.mkdir(parents=True, exist_ok=True)
    keys = {"uniform": ["concurrency", "num_adapters"], "skewed": ["num_adapters"],
            "max_loras": ["num_adapters", "max_loras"]}
    z = SEED3_ZIPF_S
    fixed = {"uniform": {"zipf_s": 0.0, "max_loras": 32}, "skewed": {"zipf_s": z, "concurrency": 32, "max_loras": 32},
             "max_loras": {"zipf_s": z, "concurrency": 32}}
    thr, lat, runs, summs = [], [], [], {}
    for name, df in data.items():
        s = summarize_sweep(df, list(SEED3_METRICS))
        summs[name] = s
        for tbl, mets in ((thr, ["throughput_tok_s", "throughput_req_s"]), (lat, ["ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms"])):
            w = _wide(s, keys[name], mets)
            for k in ("concurrency", "num_adapters", "max_loras", "zipf_s"):
                if k not in w.columns:
                    w.insert(0, k, fixed[name].get(k, np.nan))
            w.insert(0, "experiment", name)
            tbl.append(w[["experiment", "zipf_s", "concurrency", "num_adapters", "max_loras"] +
                         [c for c in w.columns if c not in ("experiment", "zipf_s", "concurrency", "num_adapters", "max_loras")]])
        r = df.copy()
        r.insert(0, "experiment", name)
        runs.append(r)
    write_csv(pd.concat(thr, ignore_index=True), res / "throughput.csv", index=False)
    write_csv(pd.concat(lat, ignore_index=True), res / "latency.csv", index=False)
    write_csv(pd.concat(runs, ignore_index=True), res / "runs.csv", index=False)
    comp = seed3_published_comparison(data)
    write_csv(comp, res / "published_comparison.csv", index=False)
    mem = seed3_memory_table()
    write_csv(mem, res / "memory_decomposition.csv", index=False)
    write_csv(seed3_module_bytes(), res / "adapter_modules.csv", index=False)
    preds = seed3_predictions(data)
    write_csv(preds[0], res / "predictions_skew.csv", index=False)
    write_csv(preds[1], res / "predictions_max_loras.csv", index=False)
    prov = provenance()
    (res / "summary.txt").write_text(seed3_summary_text(data, m, cmd, prov, comp, mem, preds))

    p = Scenario.from_preset(SEED3_PRESET)
    cond = (f"H100 80 GB, Llama-3.1-8B, rank {p.adapter_rank} on {p.target_modules}, prompt {p.prompt_tokens}, output "
            f"{p.output_tokens}, vllm, max_cpu_loras = max_loras, costs fitted to real vLLM runs; {m.replications} seeds x "
            f"{seed3_times(m)[0]:g} s")
    u = summs["uniform"].copy()
    u["series"] = "uniform, concurrency " + u["concurrency"].astype(int).astype(str)
    sk = summs["skewed"].copy()
    sk["series"] = f"Zipf s={SEED3_ZIPF_S:g}, concurrency 32"
    both = pd.concat([u, sk], ignore_index=True)
    plot_lines(plots / "throughput_vs_adapters.png", both, "num_adapters", "throughput_tok_s", "series",
               f"Throughput vs adapters (max_loras 32)\n{cond}", "adapters", "output tokens/s", logx=True, logy=False)
    u32 = both[(both["series"] == "uniform, concurrency 32") | (both["series"] == f"Zipf s={SEED3_ZIPF_S:g}, concurrency 32")]
    for met, lab in (("ttft_p50_ms", "TTFT p50 (ms)"), ("ttft_p99_ms", "TTFT p99 (ms)")):
        plot_lines(plots / f"{met.replace('_ms', '')}_vs_adapters.png", u32, "num_adapters", met, "series",
                   f"{lab} vs adapters, concurrency 32, max_loras 32\n{cond}", "adapters", lab, logx=True)
    ml = summs["max_loras"].copy()
    ml["series"] = ml["num_adapters"].astype(int).astype(str) + " adapters"
    plot_lines(plots / "max_loras_throughput.png", ml, "max_loras", "throughput_tok_s", "series",
               f"Throughput vs max_loras, Zipf s={SEED3_ZIPF_S:g}, concurrency 32\n{cond}", "max_loras", "output tokens/s", logx=True, logy=False)
    plot_lines(plots / "max_loras_ttft_p99.png", ml, "max_loras", "ttft_p99_ms", "series",
               f"TTFT p99 vs max_loras, Zipf s={SEED3_ZIPF_S:g}, concurrency 32\n{cond}", "max_loras", "TTFT p99 (ms)", logx=True)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    x = mem["adapters_loaded"].to_numpy()
    ax.plot(x, mem["host_gib"], marker="o", label="host (CPU) memory: adapters x adapter bytes")
    ax.plot(x, mem["gpu_gib"], marker="s", label=f"GPU memory: min(adapters, max_loras={mem.max_loras.iloc[0]}) x adapter bytes")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("adapters loaded")
    ax.set_ylabel("GiB")
    ax.set_title(f"Adapter memory decomposition (rank {p.adapter_rank} on {p.target_modules}, "
                 f"{mem.adapter_bytes.iloc[0] / presets.MIB:.1f} MiB each; computed)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(plots / "memory_decomposition.png", dpi=110)
    plt.close(fig)
    return {"data": data, "comparison": comp, "memory": mem, "predictions": preds}
