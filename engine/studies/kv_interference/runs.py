"""The LoRA/KV interference benchmark's runs for its claims (seed 2 in the findings report).

``kv_collect(mode)`` runs every policy x model x workload at the presets' heavy load, a load
sweep, and two counterfactuals at heavy load (adapter loads free; loads and adapter weight reads
free), replication k with seed base + k everywhere (common random numbers): one row per run.
``kvc``, ``kv_pp``, ``kv_rel``, ``kv_reads_pp`` and ``kv_m`` read paired values from those rows.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ... import loop as L
from ... import presets
from ... import sim as S
from ...scenario import Scenario
from ...sim import simulate
from ...sweep import parallel_map
from ...workload import generate
from ..common import Mode, ci_of
from .bench import MODELS, POLICIES, WORKLOADS

#: The source's multi-adapter policies (slora is ours: reported, not part of any verdict).
KV_MULTI = ("round_robin_k1", "batch_t4_k2", "hotset_32mb", "hotset_64mb", "hotset_batch_t4")
KV_HOTSETS = ("hotset_32mb", "hotset_64mb", "hotset_batch_t4")
KV_BASE = "single_adapter"
#: Counterfactuals, run at the heavy-load point for single_adapter and KV_MULTI on the same streams:
#: "free_loads" makes adapter loads instantaneous (pcie 1e6 GB/s, no latency); "free_reads" in addition
#: makes the adapters' weights cost nothing in a step (bytes and FLOPs; their memory footprint is kept).
KV_VARIANTS = ("base", "free_loads", "free_reads")
#: Load sweep (the preset's heavy-load rate, ~90% of single-adapter capacity, is added).
KV_SWEEP_RATES = {"qwen2-0.5b": (10.0, 20.0, 40.0, 60.0), "qwen2-1.5b": (3.5, 7.0, 14.0, 21.0)}
KV_QUICK_RATES = {"qwen2-0.5b": (20.0,), "qwen2-1.5b": (7.0,)}
#: "Moderate load" for the K-1 sensitivity check: about a quarter of the heavy-load rate.
KV_MODERATE = {"qwen2-0.5b": 20.0, "qwen2-1.5b": 7.0}
KV_QUICK_TIMES = (15.0, 2.0)
KV_LABEL = {"qwen2-0.5b": "Qwen2-0.5B", "qwen2-1.5b": "Qwen2-1.5B"}


def kv_times(m: Mode) -> tuple[float, float]:
    if m.quick:
        return KV_QUICK_TIMES
    p = presets.SCENARIOS["kv-qwen2-0.5b-heavy"]
    return p["duration_s"], p["warmup_s"]


def kv_preset(model: str, workload: str, m: Mode) -> Scenario:
    dur, warm = kv_times(m)
    return Scenario.from_preset(f"kv-{model}-{workload}", duration_s=dur, warmup_s=warm)


def kv_tasks(m: Mode) -> list[tuple[dict, Scenario, bool]]:
    """(meta, scenario, free_reads) for every KV run: replication k uses seed base + k everywhere (CRN)."""
    rates = KV_QUICK_RATES if m.quick else KV_SWEEP_RATES
    tasks = []
    for model in MODELS:
        for w in WORKLOADS:
            base = kv_preset(model, w, m)
            heavy = base.arrival_rate_rps
            for r in (heavy,) + tuple(rates[model]):
                for p in POLICIES:
                    for v in (KV_VARIANTS if r == heavy and p in (KV_BASE,) + KV_MULTI else ("base",)):
                        sc = base.replace(strategy=p, arrival_rate_rps=r)
                        if v != "base":
                            sc = sc.replace(pcie_gbps=1e6, load_latency_ms=0.0)
                        for k in range(m.replications):
                            meta = {"model": model, "workload": w, "rate": float(r), "heavy": r == heavy,
                                    "policy": p, "variant": v, "replication": k}
                            tasks.append((meta, sc.replace(seed=base.seed + k).validate(), v == "free_reads"))
    return tasks


def _kv_one(meta: dict, sc: Scenario, free_reads: bool) -> dict:
    """One KV run: the summary, window means of the time series, and compactions in load iterations."""
    if free_reads:
        wl = generate(sc)
        arr = S._build(sc, wl)
        arr["A_i"][L.AI_BYTES] = 0  # adapter weights read and computed for free; memory footprint kept
        L.run_loop(*(arr[k] for k in S.LOOP_ARGS))
        r = S._result(sc, wl, arr)
    else:
        r = simulate(sc)
    s = r.summary
    row = dict(meta)
    for k in ("avg_frag", "throughput_req_s", "throughput_tok_s", "swap_events", "compact_events", "compacted_bytes",
              "rejections", "ttft_p50_ms", "gpu_busy_frac", "requests", "completed", "end_s"):
        row[k] = float(s[k])
    ts = r.timeseries
    w = ts[(ts.t_s >= sc.warmup_s) & (ts.t_s < sc.duration_s)]
    for k in ("batch_size", "kv_used_frac", "resident_adapters", "adapter_bytes_resident", "queue_len"):
        row[f"{k}_mean"] = float(w[k].mean())
    ev = r.events
    comp_t = ev.t_s[ev.kind == "compact"].to_numpy()
    load_t = ev.t_s[ev.kind == "swap"].to_numpy()
    row["compact_in_load_iter"] = float(np.isin(comp_t, load_t).sum())
    g = sc.gpu_spec
    row["compact_gpu_s"] = 2 * float(s["compacted_bytes"]) / (g.hbm_gbps * 1e9 * sc.bw_eff)
    return row


def _kv_task(task: tuple[dict, Scenario, bool]) -> dict:
    return _kv_one(*task)


def kv_collect(m: Mode, workers=None, progress=False, backend: str | None = None,
               ray_address: str | None = None) -> pd.DataFrame:
    """Run every KV task; one row per run, in task order.  ``engine.sweep.parallel_map``: ``backend``
    ``"process"`` (default: a spawn pool, interleaved chunks), ``"thread"`` or ``"ray"`` (with
    ``ray_address``), the first task in this process; the same rows whatever the backend or workers."""
    rows = parallel_map(_kv_task, kv_tasks(m), workers=workers, progress=progress, desc="kv-interference",
                        backend=backend, ray_address=ray_address)
    return pd.DataFrame(rows)


def kvc(kv: pd.DataFrame, metric: str, model: str, workload: str, policy: str, variant: str = "base",
        rate: float | None = None) -> np.ndarray:
    """Per-replication values (ordered by replication); rate None = the heavy-load (preset) rate."""
    d = kv[(kv["model"] == model) & (kv["workload"] == workload) & (kv["policy"] == policy) & (kv["variant"] == variant)]
    d = d[d["heavy"]] if rate is None else d[np.isclose(d["rate"], rate)]
    if d.empty:
        raise KeyError(f"no KV runs for {model} {workload} {policy} {variant} rate={rate}")
    return d.sort_values("replication")[metric].to_numpy(dtype=float)


def kv_pp(kv, policy, model, workload, rate=None, variant="base"):
    """Paired fragmentation overhead over single_adapter, percentage points: mean and CI."""
    return ci_of(100 * (kvc(kv, "avg_frag", model, workload, policy, variant, rate)
                        - kvc(kv, "avg_frag", model, workload, KV_BASE, variant, rate)))


def kv_rel(kv, metric, policy, model, workload, rate=None, variant="base"):
    """Paired relative change of a metric against single_adapter: mean and CI of x / x_single - 1."""
    x, y = (kvc(kv, metric, model, workload, p, variant, rate) for p in (policy, KV_BASE))
    with np.errstate(divide="ignore", invalid="ignore"):
        return ci_of(x / y - 1)


def kv_reads_pp(kv, policy, model, workload, a="free_loads", b="free_reads"):
    """Paired change (pp) of the throughput ratio to single_adapter from variant a to variant b."""
    r = {v: kvc(kv, "throughput_req_s", model, workload, policy, v) / kvc(kv, "throughput_req_s", model, workload, KV_BASE, v)
         for v in (a, b)}
    return ci_of(100 * (r[b] - r[a]))


def fmt_range(xs, d=0) -> str:
    lo, hi = min(xs), max(xs)
    return f"{lo:.{d}f}" if f"{lo:.{d}f}" == f"{hi:.{d}f}" else f"{lo:.{d}f} to {hi:.{d}f}"


def kv_m(kv, metric, model, workload, policy, variant="base", rate=None) -> float:
    return float(np.nanmean(kvc(kv, metric, model, workload, policy, variant, rate)))


def kv_cond(model, w) -> str:
    return f"{KV_LABEL[model]} {w}"


def kv_conditions(m: Mode) -> str:
    dur, warm = kv_times(m)
    parts = []
    for model in MODELS:
        sc = kv_preset(model, "heavy", m)
        sizes = sc.adapter_sizes()
        plan = sc.memory_plan()
        parts.append(f"{KV_LABEL[model]} ({plan['weights'] / 1e9:.2f} GB of weights; {sc.num_adapters} adapters of "
                     f"{min(sizes) / presets.MIB:.0f}-{max(sizes) / presets.MIB:.0f} MiB, ranks "
                     f"{'/'.join(map(str, sc.adapter_ranks))} on {sc.target_modules}; pool {sc.vram_budget_gb * 1024:.0f} "
                     f"MiB adapter budget + {sc.kv_cache_gb * 1024:.0f} MiB KV; heavy load {sc.arrival_rate_rps:g} req/s)")
    sc = kv_preset(MODELS[0], "heavy", m)
    return (f"{sc.gpu_spec.label}, " + " and ".join(parts) + f"; Zipf s={sc.zipf_s:g}; adapters and KV in one contiguous "
            f"arena (memory_mode unified, kv_allocator contiguous: first fit, compaction when the free total holds an "
            f"extent but no hole does); roofline service, sync loads at {sc.pcie_gbps:g} GB/s, max batch "
            f"{sc.max_batch_size}; workloads `heavy` (prompt {sc.prompt_tokens} / output {sc.output_tokens} tokens, "
            f"uniform +-50%) and `heavy_mixed` (same means, lognormal CV 1); {m.replications} replications x {dur:g} s "
            f"(first {warm:g} s discarded), seed k for replication k in every policy, rate and counterfactual")
