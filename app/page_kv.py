"""KV interference page: adapter swaps against the KV cache, per policy, side by side.

The page has its own controls (model, workload, memory mode, allocator, policies, rate,
replications, duration) and runs the ``kv-<model>-<workload>`` presets (``engine.presets``);
the shared scenario is not used, so the app does not draw its controls in the sidebar here.
Replication k uses seed ``preset seed + k`` for every policy (common random numbers), so the
deltas against ``single_adapter`` are paired per replication, and so is the frontier's dominance
check (``dominance``, on ``engine.rank``): "Dominated: X (by Y)" only when the paired 95% CI of each
difference excludes zero, else "not distinguishable".  ``single_adapter`` is the baseline (an
offline bound alike): shown and labelled, never on the frontier.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import streamlit as st

from app import charts, controls, exports
from engine import ENGINE_VERSION, STRATEGIES, Scenario, contenders_excluded, mean_ci, presets, rank, simulate

MODELS = ["qwen2-0.5b", "qwen2-1.5b"]
WORKLOADS = ["heavy", "heavy_mixed"]
MEMORY_MODES = ["static", "unified"]
ALLOCATORS = ["contiguous", "paged"]
#: The policies of the LoRA/KV interference benchmark (``engine.STRATEGIES``), the default selection.
KV_POLICIES = ["single_adapter", "round_robin_k1", "batch_t4_k2", "hotset_32mb", "hotset_64mb",
               "hotset_batch_t4", "slora"]
#: Reference of the deltas (run even when not selected, then not shown as a row).
REFERENCE = "single_adapter"
MAX_REPLICATIONS = 5
DEFAULT_REPLICATIONS = 3
DEFAULT_DURATION_S = 20.0
DURATION_RANGE = (5.0, 120.0, 5.0)
RATE_RANGE = (1.0, 200.0, 1.0)
#: Moving-average window of the fragmentation chart (seconds of simulated time).
SMOOTH_S = 1.0
#: Cap on the work of one page run: policies (with the reference) x replications x expected requests.
MAX_KV_REQUESTS = 300_000

#: Summary metrics the table averages (``SimResult.summary`` keys).
METRICS = ["avg_frag", "throughput_req_s", "swap_events", "compact_events", "rejections"]

WORKLOAD_HELP = ("Workloads of the LoRA/KV benchmark (engine.presets): **heavy**: uniform lengths (prompt "
                 "256 +-50%, output 128 +-50%) at about 90% of what the GPU serves with a single adapter, so KV "
                 "memory stays nearly full; **heavy_mixed**: the same means with lognormal lengths (CV 1.0), a mix "
                 "of short and long requests whose extents differ in size, the case that fragments a contiguous "
                 "arena.")
PAGED_NOTE = ("Paged KV has no external fragmentation by definition: any free block can take any request's next "
              "block, so avg_frag is 0 for every policy with the paged allocator (docs/model.md, section 3.4). "
              "Fragmentation is 1 - j/k, the share of request-sized slots that free memory holds in total (k) but its "
              "holes cannot (j), averaged over the measurement window.")


def preset_name(model: str, workload: str) -> str:
    return f"kv-{model}-{workload}"


def warmup_for(duration_s: float, preset_warmup_s: float) -> float:
    """The preset's warm-up, shortened to a quarter of short runs."""
    return float(min(preset_warmup_s, 0.25 * duration_s))


def build_scenario(model: str, workload: str, memory_mode: str, allocator: str, rate: float,
                   duration_s: float) -> Scenario:
    """The benchmark scenario for these conditions (validated; ValueError naming the field)."""
    name = preset_name(model, workload)
    base = Scenario.from_preset(name)
    return Scenario.from_preset(name, memory_mode=memory_mode, kv_allocator=allocator,
                                arrival_rate_rps=float(rate), duration_s=float(duration_s),
                                warmup_s=warmup_for(duration_s, base.warmup_s)).validate()


def plan(sc: Scenario, policies: Sequence[str], replications: int) -> list[tuple[str, int, Scenario]]:
    """(policy, replication, scenario) of every run; the reference is added if not selected."""
    runs_for = list(policies) + ([REFERENCE] if REFERENCE not in policies else [])
    return [(p, k, sc.replace(strategy=p, seed=sc.seed + k)) for p in runs_for for k in range(replications)]


def expected_requests(runs: Sequence[tuple[str, int, Scenario]]) -> float:
    return float(sum(s.expected_requests() for _, _, s in runs))


def conditions(sc: Scenario, replications: int) -> str:
    """One line stating the conditions of the comparison."""
    m = sc.model_spec
    ranks = "/".join(str(r) for r in (sc.adapter_ranks or (sc.adapter_rank,)))
    if sc.length_dist == "uniform":
        lengths = (f"uniform lengths (prompt {sc.prompt_tokens} +-{sc.length_spread:.0%}, output {sc.output_tokens} "
                   f"+-{sc.length_spread:.0%})")
    elif sc.length_dist == "lognormal":
        lengths = (f"lognormal lengths (CV {sc.length_spread:g}; means: prompt {sc.prompt_tokens}, output "
                   f"{sc.output_tokens})")
    else:
        lengths = f"prompt {sc.prompt_tokens}, output {sc.output_tokens} tokens"
    return (f"{sc.gpu_spec.label} · {m.label} · {sc.memory_mode} memory, {sc.kv_allocator} KV · KV cache "
            f"{sc.kv_cache_gb:g} GiB + adapter space {sc.vram_budget_gb:g} GiB · {sc.num_adapters} adapters "
            f"(ranks {ranks}, Zipf s={sc.zipf_s:g}) · {sc.arrival_rate_rps:g} req/s {sc.arrival_process} · "
            f"{lengths} · {sc.duration_s:g} s simulated, first {sc.warmup_s:g} s discarded · "
            f"{replications} replication{'s' if replications != 1 else ''} per policy")


def _ci(x: np.ndarray) -> tuple[float, float]:
    """Mean and 95% CI half-width (NaN with fewer than two values)."""
    mean, lo, hi = mean_ci(x)
    return mean, (hi - lo) / 2 if math.isfinite(hi) else math.nan


def summary_table(summaries: Mapping[str, Sequence[Mapping]], policies: Sequence[str]) -> pd.DataFrame:
    """Per-policy table: role (``Policy.role``), means (and 95% CI half-widths ``*_ci95`` with two or more
    replications).

    ``summaries``: policy -> summaries of replications 0..n-1 (same seeds for every policy), with
    ``REFERENCE`` among them.  Deltas against the reference are paired per replication:
    ``frag_overhead_pp`` = 100 x (avg_frag - reference's), ``throughput_delta_pct`` =
    100 x (throughput / reference's - 1).
    """
    ref = summaries[REFERENCE]
    n = min(len(v) for v in summaries.values())
    with_ci = n >= 2
    ref_frag = np.array([s["avg_frag"] for s in ref[:n]], dtype=float)
    ref_thr = np.array([s["throughput_req_s"] for s in ref[:n]], dtype=float)
    rows = []
    for p in policies:
        reps = summaries[p][:n]
        col = {k: np.array([s[k] for s in reps], dtype=float) for k in METRICS}
        with np.errstate(divide="ignore", invalid="ignore"):
            derived = {
                "frag_overhead_pp": 100 * (col["avg_frag"] - ref_frag),
                "throughput_delta_pct": np.where(ref_thr > 0, 100 * (col["throughput_req_s"] / ref_thr - 1), np.nan),
            }
        values = {"avg_frag": col["avg_frag"], "frag_overhead_pp": derived["frag_overhead_pp"],
                  "throughput_req_s": col["throughput_req_s"],
                  "throughput_delta_pct": derived["throughput_delta_pct"],
                  "swap_events": col["swap_events"], "compact_events": col["compact_events"],
                  "rejections": col["rejections"]}
        row = {"policy": p, "role": STRATEGIES[p].role, "memory_mode": str(reps[0].get("memory_mode", ""))}
        for k, v in values.items():
            mean, hw = _ci(v)
            row[k] = mean
            if with_ci:
                row[f"{k}_ci95"] = hw
        row["replications"] = n
        rows.append(row)
    return pd.DataFrame(rows)


#: The frontier's metrics: summary key -> (label, higher is better).
FRONTIER_METRICS = {"throughput_req_s": ("throughput", True), "avg_frag": ("fragmentation", False)}


def _rep_values(summaries: Mapping[str, Sequence[Mapping]], key: str, n: int) -> dict[str, list[float]]:
    return {p: [float(s.get(key, math.nan)) for s in reps[:n]] for p, reps in summaries.items()}


def _paired(a: Sequence[float], b: Sequence[float], higher: bool) -> str:
    """How ``a`` compares with ``b`` over paired replications: "better" (the paired 95% CI of the difference
    excludes zero, in a's favour, ``engine.rank``), "equal" (identical in every replication, e.g. both 0
    fragmentation) or "noise" (within the noise, worse, or one replication: no CI)."""
    if np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float)):
        return "equal"
    r = rank({"a": a, "b": b}, higher_is_better=higher)
    return "better" if r.has_ci and r.winner == "a" else "noise"


def dominance(summaries: Mapping[str, Sequence[Mapping]], policies: Sequence[str]) -> dict[str, dict]:
    """Noise-aware Pareto dominance of the selected policies (higher throughput, lower fragmentation).

    ``summaries``: policy -> summaries of replications 0..n-1, replication k of every policy on the same
    seed (paired).  The frontier is that of the means over the contenders (bounds and baselines,
    ``engine.contenders_excluded``, are references: never on it, never dominating).  A contender off it
    is "dominated" by Y only when, on each metric, Y's paired difference excludes zero in Y's favour (or
    the two are identical in every replication) and excludes it on at least one; else it is "not
    distinguishable" from the frontier policies that dominate it on the means.

    Returns policy -> {"role", "status" ("on the frontier", "dominated", "not distinguishable",
    "reference" or "no data"), "by" (significant dominators), "near" (mean dominators it is not
    distinguishable from: {policy: metrics inside the noise}), "n"}.
    """
    n = min(len(summaries[p]) for p in policies)
    excluded = set(contenders_excluded(policies))
    vals = {k: _rep_values({p: summaries[p] for p in policies}, k, n) for k in FRONTIER_METRICS}
    means = {k: {p: float(np.mean(v)) if np.isfinite(v).all() else math.nan for p, v in vals[k].items()}
             for k in FRONTIER_METRICS}
    contenders = [p for p in policies if p not in excluded]
    frame = pd.DataFrame({"strategy": contenders, "avg_frag": [means["avg_frag"][p] for p in contenders],
                          "throughput_req_s": [means["throughput_req_s"][p] for p in contenders]})
    on = dict(zip(contenders, charts.pareto_front(frame).tolist()))
    out: dict[str, dict] = {}
    for p in policies:
        rec = {"role": STRATEGIES[p].role, "status": "reference", "by": [], "near": {}, "n": n}
        out[p] = rec
        if p in excluded:
            continue
        if not all(math.isfinite(means[k][p]) for k in FRONTIER_METRICS):
            rec["status"] = "no data"
            continue
        if on[p]:
            rec["status"] = "on the frontier"
            continue
        # every contender that dominates p on the means (one of them is on the frontier)
        mean_dom = [q for q in contenders if q != p and all(math.isfinite(means[k][q]) for k in FRONTIER_METRICS)
                    and means["throughput_req_s"][q] >= means["throughput_req_s"][p]
                    and means["avg_frag"][q] <= means["avg_frag"][p]]
        for q in mean_dom:
            cmp = {k: _paired(vals[k][q], vals[k][p], higher) for k, (_, higher) in FRONTIER_METRICS.items()}
            if "noise" not in cmp.values() and "better" in cmp.values():
                rec["by"].append(q)
            elif on[q]:
                rec["near"][q] = [FRONTIER_METRICS[k][0] for k, c in cmp.items() if c == "noise"]
        rec["status"] = "dominated" if rec["by"] else "not distinguishable"
    return out


def _reps(n: int) -> str:
    return f"{n} replication{'s' if n != 1 else ''}"


def dominance_notes(dom: Mapping[str, Mapping]) -> dict[str, tuple[str, str]]:
    """Per contender off the frontier: (status, note) for the frontier chart's points and tooltips."""
    out = {}
    for p, r in dom.items():
        if r["status"] == "dominated":
            out[p] = ("dominated", f"dominated by {', '.join(r['by'])} (paired 95% CI excludes zero)")
        elif r["status"] == "not distinguishable":
            out[p] = ("not distinguishable", f"not distinguishable from {', '.join(r['near'])} with "
                                             f"{_reps(r['n'])}")
    return out


def frontier_sentence(table: pd.DataFrame, summaries: Mapping[str, Sequence[Mapping]]) -> str:
    """Which policies are on the Pareto frontier (higher throughput, lower fragmentation), which are dominated
    outside the noise (paired replications, ``engine.rank``) and which are not distinguishable from it; the
    baseline (and any bound) is named as a reference, never ranked."""
    policies = list(table["policy"])
    dom = dominance(summaries, policies)
    refs = [p for p in policies if dom[p]["status"] == "reference"]
    ref_text = ""
    if refs:
        t = table.set_index("policy")
        ref_text = " " + "; ".join(
            f"**{p}** ({'the baseline' if dom[p]['role'] == 'baseline' else 'an offline bound'}: "
            f"{t.at[p, 'throughput_req_s']:.1f} req/s, fragmentation {t.at[p, 'avg_frag']:.1%}) is a reference "
            "point, not ranked" for p in refs) + "."
    ranked = [p for p in policies if dom[p]["status"] not in ("reference", "no data")]
    if not ranked:
        if refs and len(refs) == len(policies):
            return "Only references ran; select policies to see a frontier." + ref_text
        return "No policy completed any request in the measurement window, so there is no frontier." + ref_text
    front = sorted([p for p in ranked if dom[p]["status"] == "on the frontier"],
                   key=lambda p: table.set_index("policy").at[p, "avg_frag"])
    names = ", ".join(f"**{s}**" for s in front)
    if len(ranked) == 1:
        return f"Only **{ranked[0]}** is a contender; select more policies to see a frontier." + ref_text
    n = dom[ranked[0]]["n"]
    frag = table.set_index("policy").loc[ranked, "avg_frag"]
    if (frag == 0).all():
        thr = _rep_values(summaries, "throughput_req_s", n)
        r = rank({p: thr[p] for p in ranked}, higher_is_better=True)
        text = f"Every policy has zero fragmentation here, so the frontier reduces to the highest throughput: {names}"
        if r.tied:
            text += (f", not distinguishable from {', '.join(f'**{s}**' for s in r.tied)} with {_reps(n)} (the paired "
                     "95% CI of the difference includes zero)")
        elif not r.has_ci:
            text += " (one replication: no confidence interval, so no verdict)"
        return text + "." + ref_text
    text = (f"On the Pareto frontier (no other policy has both higher or equal mean throughput and lower or equal "
            f"mean fragmentation): {names}.")
    if len(front) > 1:
        text += " Along it, less fragmentation costs throughput: there is no free lunch."
    dominated = [p for p in ranked if dom[p]["status"] == "dominated"]
    close = [p for p in ranked if dom[p]["status"] == "not distinguishable"]
    if dominated:
        text += " Dominated: " + "; ".join(f"{p} (by {', '.join(dom[p]['by'])})" for p in dominated) + (
            f", each paired 95% CI of the differences excluding zero over {_reps(n)}.")
    if close:
        parts = []
        for p in close:
            near = dom[p]["near"]
            on_what = sorted({m for ms in near.values() for m in ms})
            parts.append(f"{p} is not distinguishable from {', '.join(near)} with {_reps(n)}"
                         + (f" (on {' and '.join(on_what)})" if on_what and n > 1 else
                            " (no confidence interval)" if n == 1 else ""))
        text += " Behind the frontier on the means but inside the noise: " + "; ".join(parts) + "."
    return text + ref_text


# ------------------------------------------------------------------ running
@st.cache_data(max_entries=2_000, show_spinner=False)
def _run(scenario_json: str, engine_version: str) -> dict:
    """Summary and the fragmentation time series of one scenario (cached on every field + engine)."""
    r = simulate(Scenario.from_json(scenario_json))
    return {"summary": r.summary, "ts": r.timeseries[["t_s", charts.KV_FRAG]].reset_index(drop=True)}


def run(sc: Scenario) -> dict:
    return _run(sc.validate().to_json(), ENGINE_VERSION)


# ------------------------------------------------------------------ widgets
_RATE_KEY = "kv_rate"


def _default_rate(model: str) -> float:
    return float(presets.SCENARIOS[preset_name(model, WORKLOADS[0])]["arrival_rate_rps"])


def _on_model_change() -> None:
    st.session_state[_RATE_KEY] = _default_rate(st.session_state["kv_model"])


def _controls() -> dict:
    ss = st.session_state
    with st.container(border=True):
        r1 = st.columns(4, gap="medium")
        model = r1[0].selectbox("Model", MODELS, key="kv_model", on_change=_on_model_change,
                                help="Base model of the benchmark preset: Qwen2-0.5B (adapters 4-24 MiB, 0.25 GiB KV "
                                     "cache, 0.125 GiB adapter space) or Qwen2-1.5B (adapters 8-64 MiB, 0.5 GiB KV, "
                                     "0.25 GiB adapter space), on an A10G.")
        workload = r1[1].selectbox("Workload", WORKLOADS, key="kv_workload", help=WORKLOAD_HELP)
        memory_mode = r1[2].selectbox("Memory mode", MEMORY_MODES, index=MEMORY_MODES.index("unified"),
                                      key="kv_memory_mode",
                                      help="static: adapters and KV in separate regions; unified: one pool, adapter "
                                           "extents sit between KV extents (the interference studied here). slora "
                                           "always runs unified.")
        allocator = r1[3].selectbox("KV allocator", ALLOCATORS, key="kv_allocator",
                                    help="contiguous: each request reserves one extent (first fit), which can "
                                         "fragment; paged: fixed-size blocks anywhere, no external fragmentation.")
        r2 = st.columns([3, 1.3, 1, 1.3], gap="medium")
        options = KV_POLICIES + [s for s in STRATEGIES if s not in KV_POLICIES]
        policies = r2[0].multiselect("Policies", options, default=KV_POLICIES, key="kv_policies",
                                     placeholder="Choose policies",
                                     help="\n".join(f"- **{s}**: {STRATEGIES[s].description}" for s in options))
        if _RATE_KEY not in ss:
            ss[_RATE_KEY] = _default_rate(model)
        lo, hi, step = RATE_RANGE
        rate = r2[1].slider("Arrival rate (req/s)", lo, hi, step=step, key=_RATE_KEY, format="%.0f",
                            help="Poisson arrivals. The default is the preset's: about 90% of what the GPU serves "
                                 "with a single adapter (78 req/s for Qwen2-0.5B, 27 for Qwen2-1.5B).")
        reps = r2[2].slider("Replications", 1, MAX_REPLICATIONS, DEFAULT_REPLICATIONS, key="kv_reps",
                            help="Paired seeds per policy (replication k uses seed + k for every policy: common "
                                 "random numbers); 95% CIs, and so any dominance statement, need at least 2.")
        lo, hi, step = DURATION_RANGE
        duration = r2[3].slider("Simulated duration (s)", lo, hi, DEFAULT_DURATION_S, step=step, key="kv_duration",
                                format="%.0f", help="Simulated seconds per run; the first quarter (at most the "
                                                    "preset's 5 s) is warm-up and not measured.")
    return dict(model=model, workload=workload, memory_mode=memory_mode, allocator=allocator,
                policies=list(policies), rate=float(rate), reps=int(reps), duration=float(duration))


#: Table columns shown: label, width (px), format, help; CI half-widths ("*_ci95") follow their mean where shown.
_SHOWN = {
    "avg_frag": ("avg_frag", 82, "percent", "Time-weighted mean KV fragmentation over the measurement window."),
    "frag_overhead_pp": ("Δ frag (pp)", 90, "%+.1f", "avg_frag minus single_adapter's, in percentage points "
                         "(paired per replication)."),
    "throughput_req_s": ("Req/s", 70, "%.1f", "Throughput: requests finished per second in the measurement window."),
    "throughput_delta_pct": ("Δ req/s (%)", 92, "%+.1f", "Relative throughput change against single_adapter, in % "
                             "(paired per replication)."),
    "swap_events": ("Swaps", 78, "%.1f", "Adapter loads (swap events) per run."),
    "compact_events": ("Compactions", 96, "%.1f", "Arena compactions per run (contiguous KV only)."),
    "rejections": ("Rejections", 86, "%.1f", "Requests refused admission for lack of memory at least once, per run."),
}
#: Metrics whose CI is shown in the table (the counts' CIs are in the CSV only, to keep the table readable).
_CI_SHOWN = ("avg_frag", "frag_overhead_pp", "throughput_req_s", "throughput_delta_pct")


def _table_view(table: pd.DataFrame) -> tuple[list[str], dict]:
    """Column order and column config of the per-policy table."""
    order = ["policy", "role", "memory_mode"]
    config = {"policy": st.column_config.TextColumn("Policy", width=128, pinned=True),
              "role": st.column_config.TextColumn("Role", width=72,
                                                  help="policy: a contender; baseline (single_adapter: all traffic "
                                                       "on one adapter) or bound: a reference point, never ranked "
                                                       "on the frontier."),
              "memory_mode": st.column_config.TextColumn("Memory", width=72,
                                                         help="Memory mode the run used (slora forces unified).")}
    for k, (label, width, fmt, help_) in _SHOWN.items():
        order.append(k)
        config[k] = st.column_config.NumberColumn(label, width=width, format=fmt, help=help_)
        ci = f"{k}_ci95"
        if ci in table.columns:
            config[ci] = st.column_config.NumberColumn("±", width=56, format="percent" if fmt == "percent" else "%.1f",
                                                       help=f"Half-width of the 95% CI of {label}.")
            if k in _CI_SHOWN:
                order.append(ci)
    return order, config


def render() -> None:
    st.title("KV interference", anchor=False,
             help="Adapter swaps and the KV cache share GPU memory: with a contiguous allocator (and in a unified "
                  "pool) adapter extents punch holes between KV extents. Each policy serves the same request "
                  "streams; the shared scenario (What-if, Sweeps, Crossover) is not used on this page.")
    st.markdown("Fragmentation, throughput, swaps and rejections per policy on the LoRA/KV benchmark presets, and "
                "the *no free lunch* frontier of throughput against fragmentation. This page has its own controls; "
                "the shared scenario of the What-if, Sweeps and Crossover pages does not apply here.")
    controls.show_url_issues()
    c = _controls()
    if not c["policies"]:
        st.warning("Select at least one policy.", icon=":material/checklist:")
        return
    try:
        sc = build_scenario(c["model"], c["workload"], c["memory_mode"], c["allocator"], c["rate"], c["duration"])
    except ValueError as e:
        st.error(f"These conditions cannot be simulated. {e}", icon=":material/error:")
        return
    runs = plan(sc, c["policies"], c["reps"])
    n_req = expected_requests(runs)
    extra = "" if REFERENCE in c["policies"] else f" (including {REFERENCE}, the reference of the deltas)"
    st.caption(f"{len({p for p, _, _ in runs})} policies{extra} x {c['reps']} replications = {len(runs)} "
               f"simulations, about {n_req:,.0f} simulated requests (cap {MAX_KV_REQUESTS:,}: policies x "
               f"replications x arrival rate x duration).")
    if n_req > MAX_KV_REQUESTS:
        st.error(f"This comparison would simulate about {n_req:,.0f} requests, above the cap of "
                 f"{MAX_KV_REQUESTS:,}. Choose fewer policies or replications, a shorter duration or a lower "
                 "arrival rate.", icon=":material/block:")
        return

    summaries: dict[str, list[dict]] = {}
    frag_ts: dict[str, pd.DataFrame] = {}
    failed: dict[str, str] = {}
    bar = st.progress(0.0, text="Simulating...")
    for i, (p, k, s) in enumerate(runs):
        if p in failed:
            continue
        try:
            r = run(s)
        except ValueError as e:
            failed[p] = str(e)
            continue
        summaries.setdefault(p, []).append(r["summary"])
        if k == 0:
            frag_ts[p] = r["ts"]
        bar.progress((i + 1) / len(runs), text=f"Simulating run {i + 1} of {len(runs)}...")
    bar.empty()
    for p, msg in failed.items():
        st.error(f"**{p}** cannot run these conditions: {msg}", icon=":material/error:")
    shown = [p for p in c["policies"] if p in summaries]
    if REFERENCE not in summaries or not shown:
        return

    table = summary_table(summaries, shown)
    st.caption(conditions(sc, c["reps"]))
    forced = [p for p in shown if table.set_index("policy").at[p, "memory_mode"] != sc.memory_mode]
    if forced:
        st.caption(f"{', '.join(forced)} ran with {table.set_index('policy').at[forced[0], 'memory_mode']} memory: "
                   "the policy forces its memory mode.")

    # ---------------------------------------------------------------- table
    st.subheader("Per policy")
    order, config = _table_view(table)
    st.dataframe(table, hide_index=True, width="stretch", column_order=order, column_config=config)
    ci_note = ("Means per run over replications; ± is the half-width of the 95% Student-t CI (the CSV also has "
               "those of swaps, compactions and rejections)." if c["reps"] >= 2 else
               "One replication: no confidence intervals (choose 2 or more).")
    if c["reps"] == 2:
        ci_note += " With 2 replications the CIs are wide (t = 12.7); use 3 to 5 for tighter ones."
    st.caption(f"{ci_note} Deltas are against {REFERENCE} on the same seeds. {PAGED_NOTE}")
    st.download_button("Table CSV", exports.csv_bytes(table), mime="text/csv", on_click="ignore", key="dl_kv_table",
                       file_name=f"kv_{c['model']}_{c['workload']}_{c['memory_mode']}_{c['allocator']}.csv",
                       icon=":material/download:", help="The table above, one row per policy.")

    # --------------------------------------------------------------- charts
    show = lambda chart: st.altair_chart(charts.unvalidated(chart), width="stretch")  # noqa: E731
    st.subheader("Fragmentation over time")
    smooth = st.toggle(f"Smooth ({SMOOTH_S:g} s moving average)", value=True, key="kv_smooth",
                       help="The raw series jumps from one time bucket to the next; the moving average shows the "
                            "level each policy runs at.")
    ts = charts.kv_frag_frame({p: frag_ts[p] for p in shown if p in frag_ts}, t_max=sc.duration_s,
                              smooth_s=SMOOTH_S if smooth else 0.0)
    show(charts.kv_frag_chart(ts, warmup_s=sc.warmup_s, title="KV fragmentation over time (replication 0)"))
    st.caption("Fragmentation of the KV arena per time bucket in replication 0"
               + (f", trailing {SMOOTH_S:g} s moving average" if smooth else "")
               + "; the table's avg_frag is its time-weighted mean over the measurement window, averaged over "
                 "replications."
               + (" Flat at 0: paged KV has no external fragmentation by definition." if c["allocator"] == "paged"
                  else ""))

    c1, c2 = st.columns(2, gap="large")
    with c1:
        st.subheader("Throughput")
        thr = pd.DataFrame({"strategy": table["policy"], "mean": table["throughput_req_s"],
                            "half_width": table.get("throughput_req_s_ci95", pd.Series(np.nan, index=table.index))})
        show(charts.kv_throughput_chart(thr, height=360 if len(shown) > 6 else None))
        if c["reps"] >= 2:
            st.caption("Whiskers: 95% CI over replications.")
    with c2:
        st.subheader("The no-free-lunch frontier")
        dom = dominance(summaries, shown)
        frame = charts.kv_frontier_frame(table.rename(columns={"policy": "strategy"}),
                                         exclude=contenders_excluded(shown), status=dominance_notes(dom))
        show(charts.kv_frontier_chart(frame))
    st.markdown(frontier_sentence(table, summaries))
