"""Seed 3, the vLLM multi-LoRA benchmark (shared/seeds/vllm-multi-lora-benchmark.txt): its design
run on the ``seed3-llama31-8b-80gb`` preset.

``reproduce_seed3(out, mode)`` writes ``results/{throughput,latency,runs,published_comparison,
memory_decomposition}.csv``, ``results/summary.txt`` and the plots in ``plots/``.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ... import presets
from ...scenario import Scenario
from ...sweep import summarize_sweep
from ..common import Mode, cell, ci_of, fmt_ci, plot_lines, provenance, pyplot, run_specs

SEED3_PRESET = "seed3-llama31-8b-80gb"
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


def seed3_grids(quick: bool) -> dict[str, tuple[dict, dict]]:
    if quick:
        return {
            "uniform": ({"zipf_s": 0.0}, {"concurrency": [32], "num_adapters": [1, 10, 100, 1000]}),
            "skewed": ({"zipf_s": 1.0}, {"num_adapters": [10, 100, 1000]}),
            "max_loras": ({"zipf_s": 1.0}, {"num_adapters": [10, 100], "max_loras": [4, 32, 128]}),
        }
    return {
        "uniform": ({"zipf_s": 0.0}, {"concurrency": [1, 4, 16, 32, 64],
                                      "num_adapters": [1, 10, 50, 100, 250, 500, 1000]}),
        "skewed": ({"zipf_s": 1.0}, {"num_adapters": [10, 50, 100, 250, 500, 1000]}),
        "max_loras": ({"zipf_s": 1.0}, {"num_adapters": [1, 10, 50, 100, 250, 500],
                                        "max_loras": [4, 8, 16, 32, 64, 128]}),
    }


def seed3_specs(m: Mode):
    specs = []
    dur, warm = seed3_times(m)
    for name, (over, grid) in seed3_grids(m.quick).items():
        base = Scenario.from_preset(SEED3_PRESET, duration_s=dur, warmup_s=warm, **over)
        specs.append((name, (base, grid, ["vllm"])))
    return specs


def seed3_memory_table(max_loras: int | None = None) -> pd.DataFrame:
    """Host vs GPU adapter memory vs adapters loaded (from presets.adapter_bytes)."""
    p = presets.SCENARIOS[SEED3_PRESET]
    model = presets.get_model(p["model"])
    b = presets.adapter_bytes(model, p["adapter_rank"], p["target_modules"])
    slots = max_loras or p["max_loras"]
    rows = []
    for n in SEED3_MEMORY_COUNTS:
        host = n * b
        gpu = min(n, slots) * b
        rows.append({"adapters_loaded": n, "adapter_bytes": b, "max_loras": slots,
                     "host_bytes": host, "gpu_bytes": gpu, "gpu_slot_bytes_preallocated": slots * b,
                     "host_gib": host / presets.GIB, "gpu_gib": gpu / presets.GIB,
                     "host_share": host / (host + gpu) if host + gpu else math.nan})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- seed 3 report
def seed3_conditions(m: Mode) -> str:
    p = Scenario.from_preset(SEED3_PRESET)
    b = p.max_adapter_bytes()
    return (f"{presets.get_gpu(p.gpu).label} (the source: 'a single 80 GB GPU on Vast.ai'; its memory run is "
            f"labelled H100, so we use h100-80gb), Llama-3.1-8B fp16, rank-{p.adapter_rank} adapters on "
            f"{p.target_modules} ({b / presets.MIB:.1f} MiB each; the source does not state the target modules), "
            f"strategy vllm, closed loop (each of `concurrency` clients sends its next request when the last "
            f"finishes), fixed {p.prompt_tokens}-token prompt (the source uses one fixed prompt of unstated length), "
            f"output {p.output_tokens} tokens, max_num_seqs {p.max_batch_size}, gpu_mem_util {p.gpu_mem_util}, "
            f"adapter budget {p.vram_budget_gb:g} GiB (holds 128 slots), host cache unlimited and warm, roofline "
            f"service model (NOT calibrated yet); duration-based runs of {seed3_times(m)[0]:g} s after a "
            f"{seed3_times(m)[1]:g} s warm-up instead of the source's 1,000 measured requests after 50 warm-up requests "
            f"(tokens/s counts the tokens generated in the window); "
            f"{m.replications} replications")


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


def seed3_summary_text(data, m: Mode, cmd: str, prov: dict, comp: pd.DataFrame, mem: pd.DataFrame) -> str:
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
    L.append("   The model is not calibrated (a later issue fits it): compare the ratios (trend), not the absolute values.")
    L.append("")
    for name, keys, title in (("uniform", ["concurrency", "num_adapters"], "Uniform traffic, max_loras 32"),
                              ("skewed", ["num_adapters"], "Zipf (s=1) traffic, concurrency 32, max_loras 32"),
                              ("max_loras", ["num_adapters", "max_loras"], "Zipf (s=1) traffic, concurrency 32")):
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
    L.append(f"Memory decomposition (rank {presets.SCENARIOS[SEED3_PRESET]['adapter_rank']} adapters, "
             f"{mem.adapter_bytes.iloc[0] / presets.MIB:.1f} MiB each; GPU = min(adapters, max_loras={mem.max_loras.iloc[0]}) slots)")
    L.append(f"   {'adapters':<9} {'host GiB':<10} {'GPU GiB':<9} host share")
    for _, r in mem.iterrows():
        share = "-" if not math.isfinite(r.host_share) else f"{100 * r.host_share:.1f}%"
        L.append(f"   {int(r.adapters_loaded):<9} {r.host_gib:<10.3f} {r.gpu_gib:<9.3f} {share}")
    L.append("   (vLLM allocates its max_loras slots at start-up, so its GPU LoRA memory is the constant "
             f"{mem.gpu_slot_bytes_preallocated.iloc[0] / presets.GIB:.3f} GiB; either way GPU memory is bounded by the slots.)")
    return "\n".join(L) + "\n"


def reproduce_seed3(out: Path, m: Mode, workers: int | None = None, progress=False, cmd: str = "") -> dict:
    specs = seed3_specs(m)
    data = run_specs(specs, m, workers, progress)
    res, plots = out / "results", out / "plots"
    res.mkdir(parents=True, exist_ok=True)
    plots.mkdir(parents=True, exist_ok=True)
    keys = {"uniform": ["concurrency", "num_adapters"], "skewed": ["num_adapters"],
            "max_loras": ["num_adapters", "max_loras"]}
    fixed = {"uniform": {"zipf_s": 0.0, "max_loras": 32}, "skewed": {"zipf_s": 1.0, "concurrency": 32, "max_loras": 32},
             "max_loras": {"zipf_s": 1.0, "concurrency": 32}}
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
    pd.concat(thr, ignore_index=True).to_csv(res / "throughput.csv", index=False)
    pd.concat(lat, ignore_index=True).to_csv(res / "latency.csv", index=False)
    pd.concat(runs, ignore_index=True).to_csv(res / "runs.csv", index=False)
    comp = seed3_published_comparison(data)
    comp.to_csv(res / "published_comparison.csv", index=False)
    mem = seed3_memory_table()
    mem.to_csv(res / "memory_decomposition.csv", index=False)
    prov = provenance()
    (res / "summary.txt").write_text(seed3_summary_text(data, m, cmd, prov, comp, mem))

    cond = (f"H100 80 GB, Llama-3.1-8B, rank 16, prompt 64, output 128, vllm; {m.replications} seeds x "
            f"{seed3_times(m)[0]:g} s (uncalibrated)")
    u = summs["uniform"].copy()
    u["series"] = "uniform, concurrency " + u["concurrency"].astype(int).astype(str)
    sk = summs["skewed"].copy()
    sk["series"] = "Zipf s=1, concurrency 32"
    both = pd.concat([u, sk], ignore_index=True)
    plot_lines(plots / "throughput_vs_adapters.png", both, "num_adapters", "throughput_tok_s", "series",
               f"Throughput vs adapters (max_loras 32)\n{cond}", "adapters", "output tokens/s", logx=True, logy=False)
    u32 = both[(both["series"] == "uniform, concurrency 32") | (both["series"] == "Zipf s=1, concurrency 32")]
    for met, lab in (("ttft_p50_ms", "TTFT p50 (ms)"), ("ttft_p99_ms", "TTFT p99 (ms)")):
        plot_lines(plots / f"{met.replace('_ms', '')}_vs_adapters.png", u32, "num_adapters", met, "series",
                   f"{lab} vs adapters, concurrency 32, max_loras 32\n{cond}", "adapters", lab, logx=True)
    ml = summs["max_loras"].copy()
    ml["series"] = ml["num_adapters"].astype(int).astype(str) + " adapters"
    plot_lines(plots / "max_loras_throughput.png", ml, "max_loras", "throughput_tok_s", "series",
               f"Throughput vs max_loras, Zipf s=1, concurrency 32\n{cond}", "max_loras", "output tokens/s", logx=True, logy=False)
    plot_lines(plots / "max_loras_ttft_p99.png", ml, "max_loras", "ttft_p99_ms", "series",
               f"TTFT p99 vs max_loras, Zipf s=1, concurrency 32\n{cond}", "max_loras", "TTFT p99 (ms)", logx=True)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    x = mem["adapters_loaded"].to_numpy()
    ax.plot(x, mem["host_gib"], marker="o", label="host (CPU) memory: adapters x adapter bytes")
    ax.plot(x, mem["gpu_gib"], marker="s", label=f"GPU memory: min(adapters, max_loras={mem.max_loras.iloc[0]}) x adapter bytes")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlabel("adapters loaded")
    ax.set_ylabel("GiB")
    ax.set_title(f"Adapter memory decomposition (rank 16 on qkvo, {mem.adapter_bytes.iloc[0] / presets.MIB:.1f} MiB each; computed)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(plots / "memory_decomposition.png", dpi=110)
    plt.close(fig)
    return {"data": data, "comparison": comp, "memory": mem}
