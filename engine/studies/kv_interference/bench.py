"""The LoRA/KV interference benchmark, reproduced: each policy x model x workload, with replications.

``run_kv_interference(out_dir, quick)`` writes ``summary.csv`` (one row per model x workload x
policy with means and 95% CIs over replications, and the deltas against ``single_adapter`` on the
same stream), ``replications.csv`` (one row per run), ``timeseries.csv`` and ``events.csv``
(replication 0) and three kinds of plot per workload.  The runs go through
``engine.sweep.parallel_map`` (``workers``, ``backend``, ``ray_address``; default: one after the
other in this process); the files are the same whatever the backend or the number of workers.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...limits import write_csv
from ...metrics import mean_ci
from ...scenario import Scenario
from ...sim import simulate
from ...sweep import parallel_map

MODELS = ("qwen2-0.5b", "qwen2-1.5b")
WORKLOADS = ("heavy", "heavy_mixed")
POLICIES = ("single_adapter", "round_robin_k1", "batch_t4_k2", "hotset_32mb", "hotset_64mb",
            "hotset_batch_t4", "slora")
METRICS = ("avg_frag", "throughput_req_s", "throughput_tok_s", "swap_events", "compact_events",
           "rejections", "ttft_p50_ms", "gpu_busy_frac")


def _bench_run(task: tuple[dict, Scenario]) -> tuple[dict, pd.DataFrame | None, pd.DataFrame | None]:
    """One run: its row, and for replication 0 its time series and events (labelled with the run)."""
    meta, sc = task
    r = simulate(sc)
    row = {**meta, "seed": sc.seed, **{x: r.summary[x] for x in METRICS}}
    if meta["replication"] != 0:
        return row, None, None
    label = {k: meta[k] for k in ("model", "workload", "policy")}
    return row, r.timeseries.assign(**label), r.events.assign(**label)


def run_kv_interference(out_dir, quick: bool = False, replications: int | None = None,
                        progress: bool = True, workers: int | None = 1, backend: str | None = None,
                        ray_address: str | None = None) -> pd.DataFrame:
    """``workers``: 1 (default) runs in this process; None, one per core; ``backend`` / ``ray_address``:
    where the runs go (``engine.sweep.parallel_map``; default: processes)."""
    out = Path(out_dir)
    (out / "plots").mkdir(parents=True, exist_ok=True)
    reps = replications or (2 if quick else 5)
    if not (isinstance(reps, int) and 1 <= reps <= 100):
        raise ValueError(f"replications: invalid value {reps!r}; allowed: an integer in [1, 100]")
    over = {"duration_s": 15.0, "warmup_s": 2.0} if quick else {}
    tasks = []
    for m in MODELS:
        for w in WORKLOADS:
            base = Scenario.from_preset(f"kv-{m}-{w}", **over)
            for p in POLICIES:
                for k in range(reps):
                    tasks.append(({"model": m, "workload": w, "policy": p, "replication": k},
                                  base.replace(strategy=p, seed=base.seed + k)))
    done = parallel_map(_bench_run, tasks, workers=workers, progress=progress, desc="kv-interference",
                        backend=backend, ray_address=ray_address)
    runs = [row for row, _, _ in done]
    ts_rows = [ts for _, ts, _ in done if ts is not None]
    ev_rows = [ev for _, _, ev in done if ev is not None]
    df = pd.DataFrame(runs)
    # paired deltas against single_adapter on the same stream (same seed)
    base = df[df.policy == "single_adapter"].set_index(["model", "workload", "replication"])
    key = pd.MultiIndex.from_frame(df[["model", "workload", "replication"]])
    df["frag_overhead_pp"] = (df["avg_frag"].to_numpy() - base["avg_frag"].reindex(key).to_numpy()) * 100
    b_thr = base["throughput_req_s"].reindex(key).to_numpy()
    df["throughput_delta"] = np.where(b_thr > 0, df["throughput_req_s"].to_numpy() / b_thr - 1.0, np.nan)
    rows = []
    for (m, w, p), g in df.groupby(["model", "workload", "policy"], sort=False):
        row = {"model": m, "workload": w, "policy": p, "replications": len(g)}
        for x in METRICS + ("frag_overhead_pp", "throughput_delta"):
            mean, lo, hi = mean_ci(g[x].to_numpy(dtype=float))
            row[x] = mean
            row[f"{x}_ci_low"] = lo
            row[f"{x}_ci_high"] = hi
        rows.append(row)
    summary = pd.DataFrame(rows)
    write_csv(summary, out / "summary.csv", index=False)
    write_csv(df, out / "replications.csv", index=False)
    write_csv(pd.concat(ts_rows, ignore_index=True), out / "timeseries.csv", index=False)
    ev = pd.concat(ev_rows, ignore_index=True)
    write_csv(ev, out / "events.csv", index=False)
    _plots(summary, pd.concat(ts_rows, ignore_index=True), out / "plots", quick, reps)
    return summary


def _plots(summary: pd.DataFrame, ts: pd.DataFrame, plots: Path, quick: bool, reps: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cond = f"{'quick, ' if quick else ''}{reps} replications, 95% CI; contiguous KV, unified pool, A10G"
    for w in WORKLOADS:
        # 1. fragmentation over time (replication 0)
        fig, axes = plt.subplots(1, len(MODELS), figsize=(12, 4), sharey=True)
        for ax, m in zip(axes, MODELS):
            for p in POLICIES:
                g = ts[(ts.workload == w) & (ts.model == m) & (ts.policy == p)]
                ax.plot(g.t_s, g.kv_frag, label=p, lw=1)
            ax.set_title(f"{m}, {w}")
            ax.set_xlabel("simulated time (s)")
        axes[0].set_ylabel("KV fragmentation")
        axes[-1].legend(fontsize=7)
        fig.suptitle(f"KV fragmentation over time ({cond}; replication 0)")
        fig.tight_layout()
        fig.savefig(plots / f"01_frag_{w}.png", dpi=110)
        plt.close(fig)
        # 2. throughput per policy with CI
        fig, axes = plt.subplots(1, len(MODELS), figsize=(12, 4))
        for ax, m in zip(axes, MODELS):
            g = summary[(summary.workload == w) & (summary.model == m)]
            y = g.throughput_req_s.to_numpy()
            err = np.vstack([y - g.throughput_req_s_ci_low.to_numpy(), g.throughput_req_s_ci_high.to_numpy() - y])
            ax.bar(g.policy, y, yerr=np.nan_to_num(err), capsize=3)
            ax.set_title(f"{m}, {w}")
            ax.set_ylabel("throughput (req/s)")
            ax.tick_params(axis="x", rotation=45, labelsize=7)
        fig.suptitle(f"Throughput per policy ({cond})")
        fig.tight_layout()
        fig.savefig(plots / f"02_throughput_{w}.png", dpi=110)
        plt.close(fig)
        # 3. swaps against fragmentation
        fig, axes = plt.subplots(1, len(MODELS), figsize=(12, 4))
        for ax, m in zip(axes, MODELS):
            g = summary[(summary.workload == w) & (summary.model == m)]
            ax.scatter(g.swap_events, g.avg_frag)
            for _, row in g.iterrows():
                ax.annotate(row.policy, (row.swap_events, row.avg_frag), fontsize=7)
            ax.set_xscale("symlog")
            ax.set_xlabel("swap events (mean)")
            ax.set_ylabel("avg fragmentation")
            ax.set_title(f"{m}, {w}")
        fig.suptitle(f"Swaps against fragmentation ({cond})")
        fig.tight_layout()
        fig.savefig(plots / f"03_swap_vs_frag_{w}.png", dpi=110)
        plt.close(fig)
