"""The findings report's seed-2 section: what our model shows for the LoRA/KV interference benchmark
(per-policy table at heavy load, throughput decomposition, mechanisms, fragmentation against load)."""
from __future__ import annotations

import math

import pandas as pd

from ... import presets
from ..common import Mode, fmt_ci
from ..verdicts import pct, significant
from .bench import MODELS, POLICIES, WORKLOADS
from .runs import (
    KV_BASE,
    KV_HOTSETS,
    KV_LABEL,
    KV_MODERATE,
    KV_MULTI,
    KV_VARIANTS,
    fmt_range,
    kv_cond,
    kv_m,
    kv_pp,
    kv_preset,
    kv_reads_pp,
    kv_rel,
)


def _signs(kv, p, model, w, rates, heavy) -> str:
    up, down = [], []
    for r in rates:
        t = kv_pp(kv, p, model, w, None if r == heavy else r)
        if significant(t, 1):
            up.append(r)
        elif significant(t, -1):
            down.append(r)
    f = lambda xs: ", ".join(f"{x:g}" for x in xs)
    return ("raises fragmentation at " + f(up) if up else "raises fragmentation at no rate") + (
        "; lowers it at " + f(down) if down else "")


def kv_section(kv: pd.DataFrame, m: Mode) -> list[str]:
    conds = [(model, w) for model in MODELS for w in WORKLOADS]
    heavy_rate = {model: kv_preset(model, "heavy", m).arrival_rate_rps for model in MODELS}
    L = ["## Seed 2 (LoRA/KV interference benchmark): what our model shows", "",
         "The source does not define its workloads (`heavy`, `heavy_mixed` are names only), its GPU or memory sizes, "
         "or how it measures fragmentation. Our choices (engine/presets/scenarios.py, docs/model.md 3.4): an A10G with a small "
         "KV region so that memory binds; adapters and KV share one contiguous arena; fragmentation of that arena is "
         "`1 - j / k`, where `k` is how many copies of the next waiting request the free blocks hold in total and `j` "
         "how many its free extents hold as they are (0 when memory is full), averaged over time (`avg_frag`); a "
         "compaction slides every extent to the front (one free extent, fragmentation 0) and costs the GPU "
         "2 x the moved bytes at HBM bandwidth. `heavy` runs at ~90% of what the GPU serves with one adapter. "
         "Absolute values therefore do not compare with the source's; directions and mechanisms do.", "",
         "### At heavy load, per policy", "",
         "Mean over replications (95% CI for the paired differences). Compactions: per run, with the share that "
         "happened in a scheduling iteration that also loaded an adapter; compaction time: GPU time spent moving "
         "extents, share of the run. Batch, KV used (KV bytes / the pool's room left by adapters) and resident "
         "adapters: time-weighted means over the measurement window. `slora` is ours, not the source's.", "",
         "| condition | policy | avg_frag | vs single_adapter (pp) | throughput (req/s) | vs single_adapter | swaps | "
         "compactions (in load iterations) | compaction time | batch | KV used | resident adapters (MiB) | rejections |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for model, w in conds:
        for p in POLICIES:
            g = lambda k, model=model, w=w, p=p: kv_m(kv, k, model, w, p)
            comp = g("compact_events")
            share = g("compact_in_load_iter") / comp if comp > 0 else math.nan
            fpp = "-" if p == KV_BASE else fmt_ci(*kv_pp(kv, p, model, w), 1)
            thr = "-" if p == KV_BASE else pct(kv_rel(kv, "throughput_req_s", p, model, w))
            L.append(f"| {kv_cond(model, w)} | {p} | {g('avg_frag'):.3f} | {fpp} | {g('throughput_req_s'):.1f} | {thr} | "
                     f"{g('swap_events'):.0f} | {comp:.0f}" + ("" if not math.isfinite(share) else f" ({100 * share:.0f}%)")
                     + f" | {100 * g('compact_gpu_s') / g('end_s'):.1f}% | {g('batch_size_mean'):.1f} | "
                     f"{100 * g('kv_used_frac_mean'):.0f}% | {g('resident_adapters_mean'):.1f} "
                     f"({g('adapter_bytes_resident_mean') / presets.MIB:.0f}) | {g('rejections'):.0f} |")
    # ---- throughput decomposition
    L += ["", "### Where the throughput goes (heavy load)", "",
          "Paired throughput change against single_adapter on the same streams, as simulated and in two "
          "counterfactuals: adapter loads made instantaneous, then also the adapters' weights made free in every "
          "step (no bytes read, no FLOPs; their memory footprint unchanged). What remains with both free is "
          "structural: which requests may share a batch, and how much of the pool adapters take from KV.", "",
          "| condition | policy | as simulated | loads free | loads and adapter weights free | cost of the "
          "adapter weights (pp) |", "|---|---|---|---|---|---|"]
    for model, w in conds:
        for p in KV_MULTI:
            cells = [pct(kv_rel(kv, "throughput_req_s", p, model, w, variant=v)) for v in KV_VARIANTS]
            L.append(f"| {kv_cond(model, w)} | {p} | " + " | ".join(cells) + f" | {fmt_ci(*kv_reads_pp(kv, p, model, w), 1)} |")
    # ---- mechanisms, measured
    reads = {model: [kv_reads_pp(kv, p, model, w)[0] for w in WORKLOADS for p in KV_HOTSETS] for model in MODELS}
    loads = [kv_reads_pp(kv, p, model, w, "base", "free_loads")[0] for model, w in conds for p in KV_MULTI]
    share = {model: [kv_m(kv, "adapter_bytes_resident_mean", model, w, p) for w in WORKLOADS for p in KV_HOTSETS]
             for model in MODELS}
    b = lambda p, model, w: kv_m(kv, "batch_size_mean", model, w, p)
    ku = lambda p, model, w: 100 * kv_m(kv, "kv_used_frac_mean", model, w, p)
    mib = lambda p, model, w: kv_m(kv, "adapter_bytes_resident_mean", model, w, p) / presets.MIB
    m0, m1 = MODELS
    wm = "heavy_mixed"
    weights = {model: kv_preset(model, "heavy", m).memory_plan()["weights"] / 1e9 for model in MODELS}
    comp = {p: [kv_m(kv, "compact_events", model, w, p) for model, w in conds] for p in POLICIES}
    cshare = [kv_m(kv, "compact_in_load_iter", model, w, p) / max(kv_m(kv, "compact_events", model, w, p), 1e-9)
              for model, w in conds for p in KV_HOTSETS]
    L += ["", "Mechanisms (measured in the runs above):", "",
          f"* **Batch composition.** `round_robin_k1` keeps one adapter resident under strict FCFS, so only consecutive "
          f"requests for the same adapter share a batch: its mean batch is {b('round_robin_k1', m0, wm):.1f} requests "
          f"({KV_LABEL[m0]} {wm}) against {b(KV_BASE, m0, wm):.1f} for single_adapter, and throughput collapses. "
          f"`batch_t4_k2` allows two resident adapters: batch {b('batch_t4_k2', m0, wm):.1f}. Neither is a "
          f"swap or fragmentation cost; it is the policy's cap on adapters per batch, which the loads-free and "
          f"weights-free columns leave in place.",
          f"* **Adapters take pool memory from KV.** The hot-set policies keep {mib('hotset_32mb', m0, wm):.0f} MiB of "
          f"adapters resident on average ({KV_LABEL[m0]} {wm}; {mib('hotset_32mb', m1, wm):.0f} MiB on {KV_LABEL[m1]}) "
          f"against {mib(KV_BASE, m0, wm):.0f} MiB for single_adapter, whose unused adapter budget holds KV; their KV is "
          f"{ku('hotset_32mb', m0, wm):.0f}% full against {ku(KV_BASE, m0, wm):.0f}%, they refuse requests for lack of "
          f"memory (rejections), and their batch is {b('hotset_32mb', m0, wm):.1f} against {b(KV_BASE, m0, wm):.1f}.",
          f"* **Every step reads the weights of each distinct adapter in the batch** (decode is memory-bound in the "
          f"roofline model, so a step costs about the bytes it reads). Making those reads free recovers "
          f"{fmt_range(reads[m0], 1)} pp of the hot-set policies' throughput on {KV_LABEL[m0]} and {fmt_range(reads[m1], 1)} pp "
          f"on {KV_LABEL[m1]} (last column above). Their resident adapters amount to "
          f"{fmt_range([100 * x / (weights[m0] * 1e9) for x in share[m0]])}% of the {weights[m0]:.2f} GB of weights a "
          f"{KV_LABEL[m0]} step reads and {fmt_range([100 * x / (weights[m1] * 1e9) for x in share[m1]])}% of "
          f"{KV_LABEL[m1]}'s {weights[m1]:.2f} GB (resident adapters bound those in a batch from above). "
          + ("The cost is larger for the smaller base model. " if min(reads[m0]) > max(reads[m1]) else
             "The cost is larger for the larger base model. " if min(reads[m1]) > max(reads[m0]) else
             "The ranges overlap: in our model this cost does not separate the small model from the large one as "
             "the source's K-2 / K-3 do. ")
          + f"Loads themselves cost little: making them instantaneous moves throughput by {fmt_range(loads, 1)} pp across "
          f"policies.",
          "* **Compactions reset fragmentation.** When an adapter load or a request's KV needs an extent that no hole "
          "holds but the free total does, the arena is compacted and fragmentation drops to 0. Per run at heavy load: "
          + ", ".join(f"{p} {fmt_range(comp[p])}" for p in POLICIES)
          + f" compactions; for the hot-set policies {fmt_range([100 * x for x in cshare])}% of them happen in "
          f"an iteration that loaded an adapter. The small-batch policies (`round_robin_k1`, `batch_t4_k2`) leave the "
          f"arena mostly empty (KV used {ku('round_robin_k1', m0, wm):.0f}% and {ku('batch_t4_k2', m0, wm):.0f}%), so "
          f"free memory is one large extent and fragmentation stays near 0.", ""]
    # ---- load sweep
    rates = {model: sorted(set(kv.loc[kv["model"] == model, "rate"])) for model in MODELS}
    multi = KV_MULTI + ("slora",)
    L += ["### Fragmentation against load", "",
          "Paired avg_frag(policy) - avg_frag(single_adapter) in pp, mean [95% CI], by arrival rate (the last rate "
          "is the heavy-load preset; single_adapter's own avg_frag in its column). Below it, compactions per run.", "",
          "| condition | req/s | single_adapter avg_frag | " + " | ".join(multi) + " |",
          "|---|---|---|" + "---|" * len(multi)]
    for model, w in conds:
        for r in rates[model]:
            rr = None if r == heavy_rate[model] else r
            L.append(f"| {kv_cond(model, w)} | {r:g} | {kv_m(kv, 'avg_frag', model, w, KV_BASE, rate=rr):.3f} | "
                     + " | ".join(fmt_ci(*kv_pp(kv, p, model, w, rr), 1) for p in multi) + " |")
    L += ["", "| condition | req/s | " + " | ".join(POLICIES) + " |", "|---|---|" + "---|" * len(POLICIES)]
    for model, w in conds:
        for r in rates[model]:
            rr = None if r == heavy_rate[model] else r
            L.append(f"| {kv_cond(model, w)} | {r:g} | "
                     + " | ".join(f"{kv_m(kv, 'compact_events', model, w, p, rate=rr):.0f}" for p in POLICIES) + " |")
    L += ["", "Where the sign flips (paired CI excludes 0; rates in req/s):", ""]
    for model, w in conds:
        L.append(f"* {kv_cond(model, w)}: " + "; ".join(
            f"`{p}` " + _signs(kv, p, model, w, rates[model], heavy_rate[model]) for p in multi) + ".")
    L += [""] + kv_reading(kv, m, conds, heavy_rate) + [""]
    return L


def kv_reading(kv, m: Mode, conds, heavy_rate) -> list[str]:
    """The load-sweep reading, from the numbers."""
    hot = KV_HOTSETS + ("slora",)
    mod = lambda model: KV_MODERATE[model]
    rng = fmt_range
    pp_mod = [kv_pp(kv, p, model, w, mod(model))[0] for model, w in conds for p in hot]
    mib_mod = [kv_m(kv, "adapter_bytes_resident_mean", model, w, p, rate=mod(model)) / presets.MIB
               for model, w in conds for p in hot]
    pool = {model: sum(kv_preset(model, "heavy", m).memory_plan()[k] for k in ("adapters", "kv")) / presets.MIB
            for model, _ in conds}
    comp_mod = [kv_m(kv, "compact_events", model, w, p, rate=mod(model)) for model, w in conds for p in hot]
    comp_hv = [kv_m(kv, "compact_events", model, w, p) for model, w in conds for p in hot]
    ku_hv = [100 * kv_m(kv, "kv_used_frac_mean", model, w, p) for model, w in conds for p in hot]
    ku_s = [100 * kv_m(kv, "kv_used_frac_mean", model, w, KV_BASE) for model, w in conds]
    fr_s = [kv_m(kv, "avg_frag", model, w, KV_BASE) for model, w in conds]
    fr_s_mod = [kv_m(kv, "avg_frag", model, w, KV_BASE, rate=mod(model)) for model, w in conds]
    pp_hv = [kv_pp(kv, p, model, w)[0] for model, w in conds for p in hot]
    small = [(model, w, p, None if r == heavy_rate[model] else r) for model, w in conds
             for p in ("round_robin_k1", "batch_t4_k2") for r in sorted(set(kv.loc[kv["model"] == model, "rate"]))]
    ku_small = [100 * kv_m(kv, "kv_used_frac_mean", model, w, p, rate=r) for model, w, p, r in small]
    pp_small = max(kv_pp(kv, p, model, w, r)[0] for model, w, p, r in small)
    return [f"Reading. At moderate load ({', '.join(f'{mod(x):g} req/s on {KV_LABEL[x]}' for x in KV_MODERATE)}) the "
            f"policies that keep many adapters resident (`hotset_*`, `slora`) raise fragmentation by {rng(pp_mod)} pp "
            f"(single_adapter's own avg_frag there: {rng(fr_s_mod, 3)}): with memory to spare, LRU keeps adapters "
            f"resident, and they fill {rng(mib_mod)} MiB of the {'/'.join(f'{v:.0f}' for v in pool.values())} MiB pool "
            f"(the adapter budget is not a cap on a unified pool; KV takes back idle adapters when it needs room), so "
            f"KV extents land in the holes evicted adapters leave; {rng(comp_mod)} compactions per run do not keep the "
            f"arena compact. At heavy load the same policies' KV region is {rng(ku_hv)}% full (single_adapter: "
            f"{rng(ku_s)}%) and they compact {rng(comp_hv)} times per run. The metric counts free memory that cannot "
            f"hold the next request at all as not fragmented (k = 0), and every compaction leaves a single free extent, "
            f"so their average falls to {rng(pp_hv)} pp against single_adapter, whose arena is busier than at moderate "
            f"load but not full (avg_frag {rng(fr_s, 3)}). `round_robin_k1` and `batch_t4_k2` keep one or two adapters "
            f"and few requests (KV used at most {max(ku_small):.0f}% at any rate), so their free memory stays one large "
            f"extent: they raise fragmentation by at most {max(pp_small, 0):.1f} pp at any rate. How much of the heavy-load drop is due to full memory and how "
            f"much to compactions cannot be separated from the recorded metrics (the engine does not record the time "
            f"spent with k = 0)."]
