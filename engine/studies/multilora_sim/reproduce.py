"""Seed 1, the multi-LoRA serving simulator (shared/seeds/multi-lora-serving-sim.txt): its six
figures re-run on the ``seed1-rtx3090`` preset.

``reproduce_seed1(out, mode)`` writes ``results/sweep_summary.csv``, ``results/sweep_runs.csv``,
``results/summary.txt`` and one plot per figure in ``plots/``; ``winners_table`` and ``crossover``
are the readings the summary and the seed-1 claims share.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ... import presets
from ...limits import write_csv
from ...scenario import Scenario
from ...sweep import summarize_sweep
from ..common import VIEWS, Mode, cell, ci_of, fmt_ci, plot_lines, provenance, run_specs

SEED1_PRESET = "seed1-rtx3090"
SEED1_STRATEGIES = ("naive", "hot_set", "batch")

#: Metrics kept in the tidy summaries.
SEED1_METRICS = ("ttft_mean_ms", "ttft_p50_ms", "ttft_p99_ms", "swap_rate", "swap_share_of_ttft",
                 "hit_rate_gpu", "throughput_req_s", "throughput_tok_s", "slo_attainment", "gpu_busy_frac",
                 "queue_mean_ms", "load_wait_mean_ms", "not_completed")

#: Published numbers (seed 1: multi-lora-serving-sim; high pressure, 64 req/s).
SEED1_PUBLISHED = {
    "headline": {"naive": (10.50, 0.39, 0.293), "hot_set": (10.58, 0.40, 0.293), "batch": (8.43, 0.14, 0.109)},
    "output_len": {8: {"naive": 10.50, "batch": 8.43, "hot_set": 10.58},
                   32: {"naive": 10.51, "batch": 8.25, "hot_set": 10.59},
                   128: {"naive": 10.49, "batch": 8.09, "hot_set": 10.57}},
    "winners": {4: "hot_set", 16: "batch", 32: "batch", 64: "batch"},
    "crossover_rps": (10.0, 16.0),
}

#: Host adapter cache for the seed-1 runs: 0 = unlimited (every adapter warm in host memory).
SEED1_HOST_CAP = 0


@dataclass(frozen=True)
class Figure:
    name: str            # plot file stem / figure id in sweep_summary.csv
    experiment: str      # experiment whose runs it shows
    field: str           # x field
    metric: str          # plotted metric
    ylabel: str
    what: str            # title start
    scale: float = 1.0   # plotted = value * scale


SEED1_FIGURES = (
    Figure("latency_vs_arrival", "arrival", "arrival_rate_rps", "ttft_mean_ms", "mean TTFT (ms)",
           "Latency vs arrival rate"),
    Figure("swap_overhead", "arrival", "arrival_rate_rps", "swap_share_of_ttft", "swap share of TTFT (%)",
           "Swap overhead vs arrival rate", 100.0),
    Figure("distribution_effect", "distribution", "zipf_s", "ttft_mean_ms", "mean TTFT (ms)",
           "Popularity distribution effect (zipf_s 0 = uniform) at 64 req/s"),
    Figure("batch_window_effect", "window", "batch_window_ms", "ttft_mean_ms", "mean TTFT (ms)",
           "Batch-window effect at 64 req/s"),
    Figure("vram_capacity_effect", "vram", "vram_budget_gb", "ttft_mean_ms", "mean TTFT (ms)",
           "VRAM capacity effect (adapter budget) at 64 req/s"),
    Figure("vram_pressure_effect", "pressure", "num_adapters", "ttft_mean_ms", "mean TTFT (ms)",
           "VRAM pressure effect (number of adapters) at 64 req/s"),
)
EXTRA_FIGURES = (
    Figure("latency_vs_arrival_no_decode", "arrival@no_decode", "arrival_rate_rps", "ttft_mean_ms",
           "mean TTFT (ms)", "Latency vs arrival rate, no decode contention"),
    Figure("ttft_by_output_length", "output_len", "output_tokens", "ttft_mean_ms", "mean TTFT (ms)",
           "TTFT by output length at 64 req/s"),
    Figure("ttft_by_output_length_no_decode", "output_len@no_decode", "output_tokens", "ttft_mean_ms",
           "mean TTFT (ms)", "TTFT by output length at 64 req/s, no decode contention"),
)


def seed1_grids(quick: bool) -> dict[str, tuple[dict, dict]]:
    """Experiment name -> (base overrides, grid).  All at high pressure (the preset)."""
    if quick:
        rates, zipfs, windows, budgets, counts = [4, 16, 32, 64], [0.0, 1.0, 1.4], [5, 25, 100], [2, 6, 10], [100, 500, 1000]
    else:
        rates = [4, 8, 12, 16, 24, 32, 48, 64]
        zipfs, windows = [0.0, 0.6, 1.0, 1.4], [5, 10, 25, 50, 100]
        budgets, counts = [2, 4, 6, 8, 10], [100, 250, 500, 750, 1000]
    hi = {"arrival_rate_rps": 64.0}
    return {
        "arrival": ({}, {"arrival_rate_rps": rates}),
        "distribution": (hi, {"zipf_s": zipfs}),
        "window": (hi, {"batch_window_ms": windows}),
        "vram": (hi, {"vram_budget_gb": budgets}),
        "pressure": (hi, {"num_adapters": counts}),
        "output_len": (hi, {"output_tokens": [8, 32, 128]}),
    }


def seed1_specs(m: Mode, views=("contention",), extra_views: dict[str, tuple[str, ...]] | None = None,
                strategies=SEED1_STRATEGIES, extra: dict[str, tuple[dict, tuple[str, ...]]] | None = None):
    """[(experiment id, (base, grid, strategies))].

    ``views``: views every experiment runs in; ``extra_views``: experiment -> more views.
    ``extra``: suffix -> (overrides, strategies) added as "<exp>+<suffix>" in every view.
    Experiment ids are "<name>" for the contention view and "<name>@<view>" otherwise.
    """
    specs = []
    for name, (over, grid) in seed1_grids(m.quick).items():
        vs = list(views) + [v for v in (extra_views or {}).get(name, ()) if v not in views]
        for v in vs:
            base = Scenario.from_preset(SEED1_PRESET, duration_s=m.duration_s, warmup_s=m.warmup_s,
                                        max_cpu_loras=SEED1_HOST_CAP, **over, **VIEWS[v])
            eid = name if v == "contention" else f"{name}@{v}"
            specs.append((eid, (base, grid, list(strategies))))
            for suffix, (o2, strats) in (extra or {}).items():
                specs.append((f"{eid}+{suffix}", (base.replace(**o2), grid, list(strats))))
    return specs


# ---------------------------------------------------------------------------- seed 1 report
def seed1_conditions(m: Mode) -> str:
    sc = Scenario.from_preset(SEED1_PRESET)
    b = sc.max_adapter_bytes()
    fit = int(sc.vram_budget_gb * presets.GIB // b)
    pressure = sc.num_adapters * b / (sc.vram_budget_gb * presets.GIB)
    return (f"RTX 3090 24 GB, LLaMA-7B fp16, {sc.num_adapters} adapters (rank {sc.adapter_rank} on "
            f"{sc.target_modules}, {b / presets.MIB:.0f} MiB each), {sc.vram_budget_gb:g} GiB adapter budget "
            f"({fit} fit; pressure {pressure:.1f}x), PCIe {sc.pcie_gbps:g} GB/s, Zipf s={sc.zipf_s:g}, "
            f"prompt {sc.prompt_tokens}, output {sc.output_tokens}, fixed service (prefill "
            f"{sc.prefill_ms_per_token} ms/token, decode {sc.decode_ms_per_token} ms/step), max batch "
            f"{sc.max_batch_size}, batch window {sc.batch_window_ms:g} ms, Poisson arrivals, every adapter in a warm "
            f"host cache (unlimited, max_cpu_loras={SEED1_HOST_CAP}); "
            f"{m.replications} replications x {m.duration_s:g} s (first {m.warmup_s:g} s discarded)")


def winners_table(df: pd.DataFrame, rates, strategies=SEED1_STRATEGIES, metric="ttft_mean_ms") -> list[dict]:
    """Lowest mean TTFT per arrival rate, with the paired margin to the runner-up."""
    out = []
    for r in rates:
        means = {s: float(np.mean(cell(df, metric, s, arrival_rate_rps=r))) for s in strategies}
        order = sorted(means, key=means.get)
        w, ru = order[0], order[1]
        diff = cell(df, metric, ru, arrival_rate_rps=r) - cell(df, metric, w, arrival_rate_rps=r)
        mu, lo, hi = ci_of(diff)
        out.append({"rate": r, "winner": w, "runner_up": ru, "margin": (mu, lo, hi), "means": means,
                    "significant": math.isfinite(lo) and lo > 0})
    return out


def crossover(df: pd.DataFrame, strategies=SEED1_STRATEGIES, metric="ttft_mean_ms") -> dict:
    """Arrival rate where the low-rate winner stops winning (linear interpolation).

    Computed per replication (paired curves) and on the mean curves.  Returns the
    strategies involved, the per-replication crossover mean/CI and how many replications cross.
    """
    rates = sorted(df["arrival_rate_rps"].unique())
    reps = sorted(df["replication"].unique())

    def cross(curves: dict[str, np.ndarray]):
        w = min(strategies, key=lambda s: curves[s][0])
        others = [s for s in strategies if s != w]
        d = np.array([curves[w][i] - min(curves[s][i] for s in others) for i in range(len(rates))])
        for i in range(1, len(rates)):
            if d[i - 1] <= 0 < d[i]:
                x0, x1 = rates[i - 1], rates[i]
                xc = x0 + (x1 - x0) * (-d[i - 1]) / (d[i] - d[i - 1])
                taker = min(others, key=lambda s: curves[s][i])
                return w, taker, float(xc)
        return w, None, math.nan

    def curve(s, k=None):
        out = []
        for r in rates:
            v = cell(df, metric, s, arrival_rate_rps=r)
            out.append(v[k] if k is not None else float(np.mean(v)))
        return np.array(out)

    w, taker, xc = cross({s: curve(s) for s in strategies})
    per = [cross({s: curve(s, k) for s in strategies}) for k in range(len(reps))]
    xs = np.array([p[2] for p in per])
    mu, lo, hi = ci_of(xs)
    return {"low_winner": w, "taker": taker, "mean_curve": xc, "per_rep": (mu, lo, hi),
            "n_cross": int(np.isfinite(xs).sum()), "n": len(reps), "rates": rates}


def seed1_summary_text(data: dict[str, pd.DataFrame], m: Mode, cmd: str, prov: dict) -> str:
    P = SEED1_PUBLISHED
    L = []
    L.append("Reproduction of the multi-LoRA serving simulator (seed 1) with LoRA What-If")
    L.append(f"command: {cmd}")
    L.append(f"engine {prov['engine']} (git {prov['git']}), {prov['date']}, mode {m.name}")
    L.append(f"conditions: {seed1_conditions(m)}.")
    L.append("values: mean [95% Student-t CI] over replications; replication k uses seed k for every "
             "strategy (common random numbers); differences are paired per replication.")
    L.append("views: 'contention' = the preset (decode steps of running requests compete with prefill, "
             "so TTFT includes waiting for the current step); 'no decode' = decode_ms_per_token=0 "
             "(approximates the seed's TTFT-only model).")
    L.append("")
    for v, tag in (("contention", "arrival"), ("no_decode", "arrival@no_decode")):
        df = data[tag]
        L.append(f"1. Headline: high pressure, 64 req/s, output 8 [{v.replace('_', ' ')} view]")
        L.append(f"   {'strategy':<9} {'TTFT mean ms':<24} {'swap rate':<22} {'swap % of TTFT':<24} published (TTFT, swap rate, swap %)")
        for s in SEED1_STRATEGIES:
            t = ci_of(cell(df, "ttft_mean_ms", s, arrival_rate_rps=64))
            sr = ci_of(cell(df, "swap_rate", s, arrival_rate_rps=64))
            sh = ci_of(cell(df, "swap_share_of_ttft", s, arrival_rate_rps=64))
            pt, ps, psh = P["headline"][s]
            L.append(f"   {s:<9} {fmt_ci(*t):<24} {fmt_ci(*sr, digits=3):<22} {fmt_ci(*sh, digits=1, pct=True):<24} "
                     f"{pt:.2f} ms, {ps:.2f}, {100 * psh:.1f}%")
        rt = ci_of(cell(df, "ttft_mean_ms", "batch", arrival_rate_rps=64) / cell(df, "ttft_mean_ms", "naive", arrival_rate_rps=64) - 1)
        rs = ci_of(cell(df, "swap_rate", "batch", arrival_rate_rps=64) / cell(df, "swap_rate", "naive", arrival_rate_rps=64) - 1)
        L.append(f"   batch vs naive: TTFT {fmt_ci(*rt, digits=1, pct=True)}, swap rate {fmt_ci(*rs, digits=1, pct=True)} "
                 f"(published: -19.7%, -64.1%)")
        L.append("")
    for v, tag in (("contention", "output_len"), ("no_decode", "output_len@no_decode")):
        df = data[tag]
        L.append(f"2. TTFT (mean ms) by output length, 64 req/s [{v.replace('_', ' ')} view]")
        L.append(f"   {'output':<7} " + " ".join(f"{s:<26}" for s in SEED1_STRATEGIES) + " published (naive, hot_set, batch)")
        for o in (8, 32, 128):
            row = [fmt_ci(*ci_of(cell(df, "ttft_mean_ms", s, output_tokens=o))) for s in SEED1_STRATEGIES]
            nc = max(float(np.mean(cell(df, "not_completed", s, output_tokens=o))) for s in SEED1_STRATEGIES)
            p = P["output_len"][o]
            L.append(f"   {o:<7} " + " ".join(f"{c:<26}" for c in row) +
                     f" {p['naive']:.2f}, {p['hot_set']:.2f}, {p['batch']:.2f}" +
                     (f"   (overloaded: up to {nc:.0f} requests unfinished; TTFT over finished ones)" if nc > 0 else ""))
        L.append("")
    for v, tag in (("contention", "arrival"), ("no_decode", "arrival@no_decode")):
        df = data[tag]
        L.append(f"3. Winner (lowest mean TTFT) by arrival rate, high pressure [{v.replace('_', ' ')} view]")
        L.append(f"   {'rate':<6} {'winner':<8} {'runner-up':<10} {'margin ms (runner-up - winner)':<32} {'means naive / hot_set / batch (ms)':<36} published")
        for w in winners_table(df, sorted(df["arrival_rate_rps"].unique())):
            r = w["rate"]
            pub = P["winners"].get(int(r), "-") if float(r).is_integer() else "-"
            means = " / ".join(f"{w['means'][s]:.1f}" for s in SEED1_STRATEGIES)
            sig = "" if w["significant"] else " (CI includes 0)"
            L.append(f"   {r:<6g} {w['winner']:<8} {w['runner_up']:<10} {fmt_ci(*w['margin']) + sig:<32} {means:<36} {pub}")
        c = crossover(df)
        if c["taker"]:
            L.append(f"   crossover: {c['low_winner']} -> {c['taker']} at {c['mean_curve']:.1f} req/s on the mean curves; "
                     f"per replication {fmt_ci(*c['per_rep'], digits=1)} req/s ({c['n_cross']} of {c['n']} replications cross) "
                     f"(published: hot_set -> batch at ~10-16 req/s)")
        else:
            L.append(f"   crossover: none in {c['rates'][0]:g}-{c['rates'][-1]:g} req/s: {c['low_winner']} wins throughout on the "
                     f"mean curves ({c['n_cross']} of {c['n']} replications cross) (published: hot_set -> batch at ~10-16 req/s)")
        L.append("")
    return "\n".join(L) + "\n"


def reproduce_seed1(out: Path, m: Mode, workers: int | None = None, progress=False, cmd: str = "",
                    backend: str | None = None, ray_address: str | None = None) -> dict:
    """``backend`` / ``ray_address``: where the simulations run (``run_specs``; default: processes); the files
    are the same whatever the backend."""
    specs = seed1_specs(m, extra_views={"arrival": ("no_decode",), "output_len": ("no_decode",)})
    data = run_specs(specs, m, workers, progress, backend=backend, ray_address=ray_address)
    (out / "results").mkdir(parents=True, exist_ok=True)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    rows, runs = [], []
    summ_cache = {}
    for eid, df in data.items():
        summ_cache[eid] = summarize_sweep(df, list(SEED1_METRICS))
        r = df.copy()
        r.insert(0, "experiment", eid)
        runs.append(r)
    for f in SEED1_FIGURES + EXTRA_FIGURES:
        s = summ_cache[f.experiment]
        t = s.rename(columns={f.field: "x"})
        t.insert(0, "x_field", f.field)
        t.insert(0, "figure", f.name)
        rows.append(t[["figure", "x_field", "x", "strategy", "metric", "mean", "ci_low", "ci_high", "n"]])
    tidy = pd.concat(rows, ignore_index=True)
    write_csv(tidy, out / "results" / "sweep_summary.csv", index=False)
    write_csv(pd.concat(runs, ignore_index=True), out / "results" / "sweep_runs.csv", index=False)
    prov = provenance()
    (out / "results" / "summary.txt").write_text(seed1_summary_text(data, m, cmd, prov))
    cond = (f"RTX 3090, LLaMA-7B, 500 adapters x 96 MiB, 10 GiB budget, Zipf 1.0, 64 req/s, output 8, window 25 ms "
            f"unless varied; mean and 95% CI over {m.replications} seeds x {m.duration_s:g} s")
    xlabels = {"arrival_rate_rps": "arrival rate (req/s)", "zipf_s": "Zipf exponent s (0 = uniform)",
               "batch_window_ms": "batch window (ms)", "vram_budget_gb": "adapter VRAM budget (GiB)",
               "num_adapters": "number of adapters", "output_tokens": "output tokens"}
    for f in SEED1_FIGURES + EXTRA_FIGURES:
        d = summ_cache[f.experiment]
        plot_lines(out / "plots" / f"{f.name}.png", d, f.field, f.metric, "strategy",
                   f"{f.what}\n{cond}", xlabels[f.field], f.ylabel, scale=f.scale,
                   logx=f.field == "output_tokens")
    return {"data": data, "summary": tidy}
