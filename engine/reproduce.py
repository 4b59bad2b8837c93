"""Reproductions of the source studies, and the ``reproduce`` / ``findings`` commands.

``python -m engine reproduce seed1 --out DIR [--quick]`` re-runs the six figures of the
multi-LoRA serving simulator (shared/seeds/multi-lora-serving-sim.txt) on the
``seed1-rtx3090`` preset; ``reproduce seed3`` runs the design of the vLLM multi-LoRA
benchmark (shared/seeds/vllm-multi-lora-benchmark.txt) on ``seed3-llama31-8b-80gb``.
``python -m engine findings`` checks each published claim (see engine/findings.py).

Every number is a mean over replications with a 95% Student-t interval; replication k
uses seed k for every strategy and grid point (common random numbers).
"""
from __future__ import annotations

import datetime as _dt
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import ENGINE_VERSION, presets
from .metrics import mean_ci
from .scenario import Scenario
from .sweep import run_sweeps, summarize_sweep

SEED1_PRESET = "seed1-rtx3090"
SEED3_PRESET = "seed3-llama31-8b-80gb"
SEED1_STRATEGIES = ("naive", "hot_set", "batch")

#: Metrics kept in the tidy summaries.
SEED1_METRICS = ("ttft_mean_ms", "ttft_p50_ms", "ttft_p99_ms", "swap_rate", "swap_share_of_ttft",
                 "hit_rate_gpu", "throughput_req_s", "throughput_tok_s", "slo_attainment", "gpu_busy_frac",
                 "queue_mean_ms", "load_wait_mean_ms", "not_completed")
SEED3_METRICS = ("throughput_tok_s", "throughput_req_s", "ttft_p50_ms", "ttft_p99_ms", "ttft_mean_ms",
                 "tpot_mean_ms", "swap_rate", "hit_rate_gpu", "gpu_busy_frac", "requests")

#: Published numbers (seed 1: multi-lora-serving-sim; high pressure, 64 req/s).
SEED1_PUBLISHED = {
    "headline": {"naive": (10.50, 0.39, 0.293), "hot_set": (10.58, 0.40, 0.293), "batch": (8.43, 0.14, 0.109)},
    "output_len": {8: {"naive": 10.50, "batch": 8.43, "hot_set": 10.58},
                   32: {"naive": 10.51, "batch": 8.25, "hot_set": 10.59},
                   128: {"naive": 10.49, "batch": 8.09, "hot_set": 10.57}},
    "winners": {4: "hot_set", 16: "batch", 32: "batch", 64: "batch"},
    "crossover_rps": (10.0, 16.0),
}
#: Published uniform-traffic throughput (seed 3: concurrency 32, max_loras 32), tokens/s.
SEED3_PUBLISHED_UNIFORM = {1: 1935.0, 10: 1489.0, 1000: 884.0}

#: The two views of service time (see docs/findings.md): the preset as specified
#: (decode iterations compete with prefill for the GPU) and decode_ms_per_token = 0,
#: which removes decode contention (approximates the seed's TTFT-only model).
VIEWS = {"contention": {}, "no_decode": {"decode_ms_per_token": 0.0}}

#: Host adapter cache for the seed-1 runs: 0 = unlimited (every adapter warm in host memory).
SEED1_HOST_CAP = 0


@dataclass(frozen=True)
class Mode:
    quick: bool
    replications: int
    duration_s: float
    warmup_s: float

    @property
    def name(self) -> str:
        return "quick" if self.quick else "full"


def mode(quick: bool, replications: int | None = None) -> Mode:
    if quick:
        return Mode(True, replications or 2, 20.0, 2.0)
    return Mode(False, replications or 10, 60.0, 5.0)


# ---------------------------------------------------------------------------- seed 1
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


# ---------------------------------------------------------------------------- seed 3
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


# ---------------------------------------------------------------------------- running
def run_specs(specs, m: Mode, workers: int | None, progress) -> dict[str, pd.DataFrame]:
    dfs = run_sweeps([s for _, s in specs], m.replications, workers=workers, progress=progress,
                     desc="simulations")
    return {eid: df for (eid, _), df in zip(specs, dfs)}


def _progress_default() -> bool:
    return sys.stderr.isatty()


def provenance() -> dict[str, str]:
    try:
        root = Path(__file__).resolve().parent.parent
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "engine"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        git = (rev or "unknown") + ("+uncommitted engine changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        git = "unknown"
    return {"engine": ENGINE_VERSION, "git": git,
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def fmt_ci(mean: float, lo: float, hi: float, digits: int = 2, pct: bool = False) -> str:
    if pct:
        mean, lo, hi = 100 * mean, 100 * lo, 100 * hi
    suf = "%" if pct else ""
    if not math.isfinite(mean):
        return "n/a"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{mean:.{digits}f}{suf}"
    return f"{mean:.{digits}f}{suf} [{lo:.{digits}f}, {hi:.{digits}f}]"


def cell(df: pd.DataFrame, metric: str, strategy: str | None = None, **where) -> np.ndarray:
    """Per-replication values of a metric at one grid point (ordered by replication)."""
    m = np.ones(len(df), bool)
    if strategy is not None:
        m &= (df["strategy"] == strategy).to_numpy()
    for k, v in where.items():
        m &= np.isclose(df[k].to_numpy(dtype=float), float(v))
    sub = df[m].sort_values("replication")
    if sub.empty:
        raise KeyError(f"no runs for {strategy} {where}")
    return sub[metric].to_numpy(dtype=float)


def ci_of(x: np.ndarray) -> tuple[float, float, float]:
    return mean_ci(np.asarray(x, float))


# ---------------------------------------------------------------------------- plotting
def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_lines(path: Path, summ: pd.DataFrame, x: str, metric: str, series: str, title: str,
               xlabel: str, ylabel: str, scale: float = 1.0, logx: bool = False, logy: bool | None = None,
               series_label=str) -> None:
    import textwrap
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 5))
    d = summ[summ["metric"] == metric]
    allv = [v * scale for v in d["mean"] if math.isfinite(v)]
    pos = [v for v in allv if v > 0]
    if logy is None:
        logy = bool(pos) and len(pos) == len(allv) and max(pos) / min(pos) > 30
    floor = min(pos) / 3 if logy and pos else None
    for s, g in d.groupby(series, sort=False):
        g = g.sort_values(x)
        xs = g[x].to_numpy(float)
        mu, lo, hi = (g[c].to_numpy(float) * scale for c in ("mean", "ci_low", "ci_high"))
        if floor is not None:  # a CI reaching below 0 cannot be drawn on a log axis: clip it
            lo = np.maximum(lo, floor)
        ax.plot(xs, mu, marker="o", ms=4, label=series_label(s))
        ax.fill_between(xs, lo, hi, alpha=0.2)
    if logy:
        ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title("\n".join(textwrap.fill(t, 100) for t in title.split("\n")), fontsize=8.5)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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


def reproduce_seed1(out: Path, m: Mode, workers: int | None = None, progress=False, cmd: str = "") -> dict:
    specs = seed1_specs(m, extra_views={"arrival": ("no_decode",), "output_len": ("no_decode",)})
    data = run_specs(specs, m, workers, progress)
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
    tidy.to_csv(out / "results" / "sweep_summary.csv", index=False)
    pd.concat(runs, ignore_index=True).to_csv(out / "results" / "sweep_runs.csv", index=False)
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
    plt = _plt()
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


# ---------------------------------------------------------------------------- CLI
def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def default_workers(workers: int | None, m: Mode) -> int | None:
    """Quick mode runs in-process by default: its few seconds of simulation do not pay for
    starting worker processes (measured: 8.6 s in-process vs 14 s with 2 workers, warm cache)."""
    if workers is not None:
        return workers
    return 1 if m.quick else None


def _positive_int(name):
    def parse(s):
        import argparse
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: invalid value {s!r}; allowed: a positive integer") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name}: invalid value {s!r}; allowed: a positive integer")
        return v
    return parse


def _cmdline(argv_tail: str) -> str:
    return f"python -m engine {argv_tail}"


def cmd_reproduce(a) -> int:
    t0 = time.perf_counter()
    out = Path(a.out)
    m = mode(a.quick, a.replications)
    if m.replications < 2:
        return _fail("--replications: invalid value 1; allowed: at least 2 (a CI needs two replications)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return _fail(f"--out: cannot create {a.out!r} ({e.strerror})")
    try:
        parts = [f"reproduce {a.which}"] + (["--quick"] if a.quick else []) + [f"--out {a.out}"]
        if a.replications:
            parts.append(f"--replications {a.replications}")
        if a.workers:
            parts.append(f"--workers {a.workers}")
        cmd = _cmdline(" ".join(parts))
        if a.which == "kv-interference":
            from .kvbench import run_kv_interference
            run_kv_interference(out, quick=a.quick, replications=a.replications,
                                progress=_progress_default())
        else:
            fn = reproduce_seed1 if a.which == "seed1" else reproduce_seed3
            fn(out, m, workers=default_workers(a.workers, m), progress=_progress_default(), cmd=cmd)
    except ValueError as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(f"--out: cannot write to {a.out!r} ({e.strerror})")
    where = (f"{out}/summary.csv, replications.csv, timeseries.csv, events.csv and {out}/plots"
             if a.which == "kv-interference" else f"{out}/results and {out}/plots")
    print(f"reproduce {a.which} ({m.name}): wrote {where} in {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_findings(a) -> int:
    from . import findings
    t0 = time.perf_counter()
    try:
        m = mode(a.quick, a.replications or (3 if a.quick else None))
        if m.replications < 2:
            return _fail("--replications: invalid value 1; allowed: at least 2 (a CI needs two replications)")
        parts = ["findings"] + (["--quick"] if a.quick else []) + [f"--out {a.out}"]
        if a.replications:
            parts.append(f"--replications {a.replications}")
        text = findings.generate(m, workers=default_workers(a.workers, m), progress=_progress_default(),
                                 cmd=_cmdline(" ".join(parts)))
    except ValueError as e:
        return _fail(str(e))
    try:
        p = Path(a.out)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    except OSError as e:
        return _fail(f"--out: cannot write {a.out!r} ({e.strerror})")
    print(f"findings ({m.name}, {m.replications} replications): wrote {a.out} in {time.perf_counter() - t0:.1f} s")
    return 0


def add_commands(sub) -> None:
    r = sub.add_parser("reproduce", help="re-run a source study's experiments (figures, tables, summary)")
    r.add_argument("which", choices=("seed1", "seed3", "kv-interference"),
                   help="seed1: the multi-LoRA serving simulator's six figures; seed3: the vLLM multi-LoRA "
                        "benchmark design; kv-interference: the LoRA/KV interference benchmark")
    r.add_argument("--quick", action="store_true", help="fewer points, 2 replications, 20 s runs (< 1 min)")
    r.add_argument("--out", required=True, help="output directory (results/ and plots/ are written in it)")
    r.add_argument("--workers", type=_positive_int("--workers"), help="worker processes (default: one per core)")
    r.add_argument("--replications", type=_positive_int("--replications"),
                   help="replications per point (default: 10, quick: 2)")
    r.set_defaults(func=cmd_reproduce)
    f = sub.add_parser("findings", help="check the published claims of the source studies; write a Markdown report")
    f.add_argument("--out", default="docs/findings.md", help="report path (default: docs/findings.md)")
    f.add_argument("--quick", action="store_true", help="fewer points, fewer replications, shorter runs")
    f.add_argument("--workers", type=_positive_int("--workers"), help="worker processes (default: one per core)")
    f.add_argument("--replications", type=_positive_int("--replications"),
                   help="replications per point (default: 10, quick: 3)")
    f.set_defaults(func=cmd_findings)
