"""Error bases of the planner's band (issue 24 items 1 and 3): how far off the cost model is, measured, for a
calibrated, a transferred and an uncalibrated cost model, per metric; and the band of a scenario.

Four bases, each a set of runs with a measured and a simulated value per metric:

* ``calibrated:vllm``: the ``vllm-llama31-8b`` fit on its held-out vLLM runs (docs/validation/vllm_errors.csv,
  split "held-out");
* ``calibrated:slora``: the ``slora-a10g-s1`` fit on its held-out A10G runs (slora_s1_errors.csv, GPU a10g,
  split "held-out");
* ``transferred:slora-a10g->a100``: the A10G fit (``slora-a10g-s1``'s ``FITTED_FIELDS``) simulated on the S-LoRA
  A100 80 GB runs: a fit carried to another GPU through the spec-sheet roofline, against measurements;
* ``uncalibrated:roofline-on-vllm``: the engine's default cost fields (``Scenario()``'s: the default roofline, no
  front-end or LoRA terms, no cap on requests in the server; the ``default`` preset's up to engine 0.5)
  simulated on all the vLLM runs.

Per (basis, metric): runs with a finite relative error, runs dropped (non-finite), MAPE, median, 90th
percentile (numpy's linear interpolation) and worst |simulated / measured - 1|, and the share of runs the
simulation / the measurement found overloaded.  The metrics: request throughput, mean and p99 TTFT, mean TPOT;
S-LoRA reports no TPOT, so its tables carry ``mean_decode_ms`` instead, mean latency minus mean TTFT (both
means over the same finished requests: the mean time from the first token to the last, i.e. output tokens x
TPOT, the per-step cost's share of latency).

``run_validation`` computes them (``profile_errors``) and writes docs/validation/profile_errors.csv and a section
of docs/validation.md; ``write_profile_errors`` does it alone from the per-run tables already written;
``error_bases`` reads the CSV and ``error_band`` gives a scenario its band (the rule in its docstring).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..limits import write_csv
from ..scenario import Scenario
from .cases import Case, _rel, error_table, simulate_cases
from .slora_s1 import slora_cases
from .status import _ERROR_NAMES, CALIBRATED, FITTED_FIELDS, CalibrationStatus, calibration_status
from .vllm_runs import vllm_cases

CAL_VLLM = "calibrated:vllm"
CAL_SLORA = "calibrated:slora"
TRANSFER = "transferred:slora-a10g->a100"
UNCAL = "uncalibrated:roofline-on-vllm"

#: basis -> what it measures (one sentence; docs/validation.md prints it).
BASES: dict[str, str] = {
    CAL_VLLM: "the vllm-llama31-8b fit (30 training runs) on the vLLM runs it was not fitted to (max_lora_rank 32, "
              "or 192-384 adapters): the error of a calibrated profile on its own GPU and model, out of sample.",
    CAL_SLORA: "the slora-a10g-s1 fit on the A10G runs it was not fitted to (the arrival-burstiness sweep and the "
               "no-unified-pool ablation): the same for the S-LoRA server.",
    TRANSFER: "the A10G fit's cost parameters (slora-a10g-s1) simulated, unchanged, on the S-LoRA runs measured "
              "on an A100 80 GB: a fit carried to another GPU through the spec-sheet roofline, which is what a "
              "'transferred' profile does.",
    UNCAL: "the engine's default cost model (Scenario()'s roofline: compute_eff, bw_eff, step_overhead_ms "
           "and no front-end, LoRA or admission terms) on all the vLLM runs, nothing fitted to them: the error "
           "of an 'uncalibrated' scenario.",
}
#: Metrics of the table (those a basis has).
BAND_METRICS = ("request_throughput", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_decode_ms")
#: The per-step cost metric of a basis: TPOT, or where it is not measured (S-LoRA) the mean decode time.
LATENCY_METRICS = ("mean_tpot_ms", "mean_decode_ms")
COLUMNS = ["basis", "metric", "n_runs", "n_dropped", "mape", "p50_abs", "p90_abs", "worst_abs", "worst_case",
           "sim_overloaded_share", "measured_overloaded_share"]
#: Where ``run_validation`` writes the table (relative to the repository).
VALIDATION_DIR = Path(__file__).resolve().parents[2] / "docs" / "validation"
PROFILE_ERRORS_CSV = VALIDATION_DIR / "profile_errors.csv"
SECTION_TITLE = "## Error bases for the planner's band"


# ---------------------------------------------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------------------------------------------

def with_decode(table: pd.DataFrame) -> pd.DataFrame:
    """An S-LoRA error table with ``mean_decode_ms`` rows added: mean_latency_ms - mean_ttft_ms, measured and
    simulated, per case (the cases that have both)."""
    lat = table[table["metric"] == "mean_latency_ms"].set_index("case")
    ttft = table[table["metric"] == "mean_ttft_ms"].set_index("case")
    both = lat.index.intersection(ttft.index)
    if not len(both):
        return table
    d = lat.loc[both].copy()
    d["measured"] = lat.loc[both, "measured"] - ttft.loc[both, "measured"]
    d["simulated"] = lat.loc[both, "simulated"] - ttft.loc[both, "simulated"]
    d["rel_error"] = [_rel(s, m) for s, m in zip(d["simulated"], d["measured"])]
    d["metric"] = "mean_decode_ms"
    if "fitted" in d:
        d["fitted"] = False
    return pd.concat([table, d.reset_index()[table.columns]], ignore_index=True)


def basis_stats(table: pd.DataFrame, basis: str, metrics=BAND_METRICS) -> pd.DataFrame:
    """One row per metric of ``table`` (a long error table: case, metric, rel_error, ...) in ``metrics``: the
    statistics of |rel_error| over the runs where it is finite (``COLUMNS``)."""
    rows = []
    for m in metrics:
        g = table[table["metric"] == m]
        if not len(g):
            continue
        ae = g["rel_error"].astype(float).abs()
        fin = np.isfinite(ae.to_numpy())
        gf, a = g[fin], ae[fin].to_numpy()
        sim_ov = gf["sim_overloaded"].astype(bool).mean() if "sim_overloaded" in gf and len(gf) else math.nan
        meas_ov = (~gf["measured_stable"].astype(bool)).mean() if "measured_stable" in gf and len(gf) else math.nan
        rows.append({"basis": basis, "metric": m, "n_runs": int(len(a)), "n_dropped": int((~fin).sum()),
                     "mape": float(a.mean()) if len(a) else math.nan,
                     "p50_abs": float(np.median(a)) if len(a) else math.nan,
                     "p90_abs": float(np.percentile(a, 90)) if len(a) else math.nan,
                     "worst_abs": float(a.max()) if len(a) else math.nan,
                     "worst_case": str(gf["case"].iloc[int(np.argmax(a))]) if len(a) else "",
                     "sim_overloaded_share": float(sim_ov), "measured_overloaded_share": float(meas_ov)})
    return pd.DataFrame(rows, columns=COLUMNS)


def calibrated_runs(v_tab: pd.DataFrame, sl_tab: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The per-run rows of the two calibrated bases, from the validation's error tables (vllm_errors.csv,
    slora_s1_errors.csv): the vLLM held-out runs; the S-LoRA A10G held-out runs (with ``mean_decode_ms``)."""
    v = v_tab[v_tab["split"] == "held-out"]
    s = sl_tab[(sl_tab["gpu"] == "a10g") & (sl_tab["split"] == "held-out")]
    return {CAL_VLLM: v.reset_index(drop=True), CAL_SLORA: with_decode(s.reset_index(drop=True))}


# ---------------------------------------------------------------------------------------------------------------
# the two simulated bases
# ---------------------------------------------------------------------------------------------------------------

def _cost_fields(preset: str) -> dict:
    """``preset``'s values of the fields a calibration fits (``FITTED_FIELDS``)."""
    ref = Scenario.from_preset(preset)
    return {f: getattr(ref, f) for f in FITTED_FIELDS}


def _with_costs(cases: list[Case], fields: dict) -> list[Case]:
    return [dataclasses.replace(c, scenario=c.scenario.replace(**fields)) for c in cases]


def transfer_runs(quick: bool = False, log=print) -> pd.DataFrame:
    """``TRANSFER``'s per-run error table: the S-LoRA A100 80 GB runs simulated with ``slora-a10g-s1``'s fitted
    fields (the preset's values, what a user transfers; tests/test_calibrate.py keeps them equal to
    docs/validation/fitted_params.json), every other field as ``slora_cases`` sets it.  ``quick``: windows a
    quarter as long."""
    cases = [c for c in slora_cases(include_ablation=True, duration_scale=0.25 if quick else 1.0)
             if c.info["gpu"] == "a100-80gb"]
    cases = _with_costs(cases, _cost_fields("slora-a10g-s1"))
    log(f"error bases: {TRANSFER}: {len(cases)} S-LoRA A100 runs with the A10G fit")
    return with_decode(error_table(cases, simulate_cases(cases)))


def uncalibrated_runs(cases: list[Case] | None = None, quick: bool = False, log=print) -> pd.DataFrame:
    """``UNCAL``'s per-run error table: the vLLM runs (``cases``, default all of ``vllm_cases()``: the real
    3600 s window, as the validation; ``quick``: its 4-run subset) simulated with the engine's default
    fitted fields; every other field as ``vllm_cases`` sets it.  Every run counts (nothing was fitted to them)."""
    if cases is None:
        cases = vllm_cases(duration_s=3600.0, warmup_s=0.0)
        if quick:
            cases = [c for c in cases if c.info["offered_rps"] <= 2.0][:4]
    cases = _with_costs(cases, {f: getattr(Scenario(), f) for f in FITTED_FIELDS})  # the engine's defaults
    log(f"error bases: {UNCAL}: {len(cases)} vLLM runs with the default roofline")
    t = error_table(cases, simulate_cases(cases))
    # the vLLM fit's split (report._vllm_train), for reading only: every run counts here
    split = {c.name: ("train" if c.info["max_lora_rank"] == 16 and c.info["max_cpu_loras"] <= 128 else "held-out")
             for c in cases}
    return t.assign(split=t["case"].map(split))


def profile_errors(v_tab: pd.DataFrame, sl_tab: pd.DataFrame, v_cases: list[Case] | None = None,
                   quick: bool = False, log=print) -> tuple[pd.DataFrame, dict[str, pd.DataFrame], float]:
    """The error-basis table (one row per basis x metric, ``COLUMNS``), the per-run tables behind it, and the
    wall time (s) of the two simulated bases.  ``v_tab`` / ``sl_tab``: the validation's vLLM and S-LoRA error
    tables; ``v_cases``: the vLLM cases to simulate uncalibrated (default: all, or the quick subset)."""
    t0 = time.perf_counter()
    runs = calibrated_runs(v_tab, sl_tab)
    runs[TRANSFER] = transfer_runs(quick=quick, log=log)
    runs[UNCAL] = uncalibrated_runs(v_cases, quick=quick, log=log)
    wall = time.perf_counter() - t0
    table = pd.concat([basis_stats(runs[b], b) for b in BASES], ignore_index=True)
    return table, runs, wall


# ---------------------------------------------------------------------------------------------------------------
# report section, CSV
# ---------------------------------------------------------------------------------------------------------------

def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:.1f} %"


def _table_md(t: pd.DataFrame) -> str:
    cols = ["basis", "metric", "n_runs", "n_dropped", "mape", "p50_abs", "p90_abs", "worst_abs",
            "sim_overloaded_share", "measured_overloaded_share"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in t.iterrows():
        cells = [str(r["basis"]), str(r["metric"]), str(int(r["n_runs"])), str(int(r["n_dropped"]))]
        cells += [_pct(float(r[c])) for c in cols[4:]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _regime_md(runs: pd.DataFrame) -> str:
    """The uncalibrated basis by measured regime (kept up / overloaded)."""
    rows = []
    for regime, g in runs.groupby(runs["measured_stable"].astype(bool).map({True: "kept up", False: "overloaded"})):
        s = basis_stats(g, regime, ("request_throughput", "mean_ttft_ms", "mean_tpot_ms"))
        for _, r in s.iterrows():
            rows.append(f"| {regime} | {r['metric']} | {int(r['n_runs'])} | {_pct(r['mape'])} | {_pct(r['p50_abs'])} "
                        f"| {_pct(r['p90_abs'])} | {_pct(r['worst_abs'])} | {_pct(r['sim_overloaded_share'])} |")
    return "\n".join(["| measured regime | metric | n_runs | mape | p50_abs | p90_abs | worst_abs | "
                      "sim_overloaded_share |", "|---|---|---|---|---|---|---|---|", *rows])


def _signed_md(runs: pd.DataFrame, metrics=("request_throughput", "mean_ttft_ms", "mean_decode_ms")) -> str:
    """Per run of a small basis: the signed errors."""
    cases = list(dict.fromkeys(runs["case"]))
    lines = ["| case | " + " | ".join(f"{m} err" for m in metrics) + " |", "|---|" + "---|" * len(metrics)]
    for c in cases:
        g = runs[runs["case"] == c].set_index("metric")["rel_error"]
        lines.append(f"| {c} | " + " | ".join(f"{100 * g[m]:+.1f} %" if m in g and math.isfinite(g[m]) else "n/a"
                                              for m in metrics) + " |")
    return "\n".join(lines)


def section(table: pd.DataFrame, runs: dict[str, pd.DataFrame] | None = None, wall_s: float | None = None,
            csv_name: str = "profile_errors.csv", origin: str = "") -> list[str]:
    """The markdown lines of docs/validation.md's section on the error bases (``origin``: a sentence on how it
    was made, when not with the rest of the report)."""
    L = [SECTION_TITLE, "",
         "What the planner's error band rests on (issue 24; docs/model.md 10, `engine.calibration.error_band`): "
         f"per basis and metric, over runs, |simulated / measured - 1| (`docs/validation/{csv_name}`, read by "
         "`engine.calibration.error_bases`).  p90_abs is the 90th percentile (numpy's linear interpolation), "
         "`n_dropped` the runs whose error is not finite; `sim_overloaded_share` / `measured_overloaded_share`: the "
         "share of those runs the simulation flagged overloaded (its backlog grew) / whose measured throughput "
         "stayed under 95 % of the offered rate (vLLM only).  `mean_decode_ms` (S-LoRA, which reports no TPOT): "
         "mean latency - mean TTFT, output tokens x TPOT." + (f"  The two simulated bases took {wall_s:.0f} s."
                                                             if wall_s is not None else "")
         + (f"  {origin}" if origin else ""), "",
         _table_md(table), ""]
    L += [f"- `{b}`: {d}" + ("" if b in set(table["basis"]) else "  **No runs in this mode.**")
          for b, d in BASES.items()]
    L.append("")
    if runs is not None and TRANSFER in runs and len(runs[TRANSFER]):
        L += [f"`{TRANSFER}` per run (signed errors; only "
              f"{runs[TRANSFER]['case'].nunique()} runs, so its 90th percentile is close to its worst):", "",
              _signed_md(runs[TRANSFER]), ""]
    for b in (CAL_VLLM, UNCAL):
        if runs is not None and b in runs and len(runs[b]) and "measured_stable" in runs[b]:
            L += [f"`{b}` by measured regime (kept up: measured throughput >= 95 % of the offered rate; the planner's "
                  "answers sit in that regime, the overloaded runs widen the band):", "", _regime_md(runs[b]), ""]
    L += ["The band of a scenario (`error_band`): " + BAND_RULE, ""]
    return L


def write_profile_errors(csv_dir: Path | str | None = None, quick: bool = False, md: Path | str | None = None,
                         log=print) -> pd.DataFrame:
    """The table computed alone, from the per-run tables ``validate`` already wrote in ``csv_dir`` (default
    docs/validation): writes ``profile_errors.csv`` (``_quick`` in quick mode) there and, given ``md`` (a
    validation report), puts the section in it (replacing an earlier one)."""
    csv_dir = Path(csv_dir) if csv_dir is not None else VALIDATION_DIR
    sfx = "_quick" if quick else ""
    v_tab = pd.read_csv(csv_dir / f"vllm_errors{sfx}.csv")
    sl_tab = pd.read_csv(csv_dir / f"slora_s1_errors{sfx}.csv")
    table, runs, wall = profile_errors(v_tab, sl_tab, quick=quick, log=log)
    write_csv(table, csv_dir / f"profile_errors{sfx}.csv", index=False)
    if md is not None:
        put_section(Path(md), section(
            table, runs, wall, f"profile_errors{sfx}.csv",
            origin=f"This section was written alone (`engine.calibration.write_profile_errors`) from the per-run "
                   f"tables `vllm_errors{sfx}.csv` and `slora_s1_errors{sfx}.csv` above, which it does not change."))
    log(f"wrote {csv_dir / f'profile_errors{sfx}.csv'} ({wall:.0f} s of simulation)")
    return table


def put_section(md: Path, lines: list[str]) -> None:
    """Put ``lines`` (a section starting with ``SECTION_TITLE``) into the markdown file ``md``: in place of an
    earlier one, else before "## Plots" or "## Known limitations", else at the end."""
    text = md.read_text().split("\n")
    if SECTION_TITLE in text:
        i = text.index(SECTION_TITLE)
        j = next((k for k in range(i + 1, len(text)) if text[k].startswith("## ")), len(text))
        text[i:j] = lines
    else:
        i = next((k for k, s in enumerate(text) if s in ("## Plots", "## Known limitations")), len(text))
        text[i:i] = lines
    md.write_text("\n".join(text))


# ---------------------------------------------------------------------------------------------------------------
# readers: the table, a scenario's band
# ---------------------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def _read(path: str, mtime: float) -> pd.DataFrame:
    return pd.read_csv(path)


def error_bases(path: Path | str | None = None, copy: bool = True) -> pd.DataFrame:
    """The error-basis table (docs/validation/profile_errors.csv, written by ``python -m engine validate``): one
    row per basis x metric (``COLUMNS``).  FileNotFoundError if it has not been generated.  ``copy=False``: the
    cached table itself, for readers that never modify it (``error_band``)."""
    p = Path(path) if path is not None else PROFILE_ERRORS_CSV
    if not p.exists():
        raise FileNotFoundError(f"{p} not found: generate it with `python -m engine validate` (docs/validation.md)")
    t = _read(str(p), p.stat().st_mtime)
    return t.copy() if copy else t


#: (basis, metric) -> (p90_abs, n_runs) of a table, by id (the table is kept with it, so its id is not reused).
_INDEXES: dict[int, tuple[pd.DataFrame, dict]] = {}


def _index(t: pd.DataFrame) -> dict:
    """The first row of each (basis, metric) of ``t`` as a dict, built once per table object."""
    hit = _INDEXES.get(id(t))
    if hit is not None and hit[0] is t:
        return hit[1]
    idx: dict = {}
    for b, m, p, n in zip(t["basis"], t["metric"], t["p90_abs"], t["n_runs"]):
        idx.setdefault((b, m), (p, n))
    if len(_INDEXES) >= 8:
        _INDEXES.clear()
    _INDEXES[id(t)] = (t, idx)
    return idx


BAND_RULE = (
    "a scenario's band is the larger of the 90th-percentile |relative error| of request throughput and of the "
    "per-step cost (mean TPOT; S-LoRA's mean decode time where TPOT is not measured), over the runs of the "
    "error basis its calibration status points to.  *Calibrated* (the GPU, model and fitted cost fields of a "
    "calibrated preset): that preset's held-out errors, `calibrated:vllm` or `calibrated:slora` by its server; a "
    "calibrated preset with nothing held out (fitted in-sample only: slora-a100-80-s1, "
    "seed3-llama31-8b-80gb-calibrated) is treated as transferred, since its out-of-sample error is unmeasured.  "
    "*Transferred* (a calibrated preset's cost fields on another GPU or model): the measured transfer error "
    "`transferred:slora-a10g->a100`, never narrower than the held-out errors of the preset it transfers from "
    "(per metric, the larger of the two).  *Modified* or *uncalibrated*: the default roofline's error on the real "
    "vLLM runs, `uncalibrated:roofline-on-vllm`, never narrower than any transferred band (per metric, the "
    "largest of it, the transfer basis and both calibrated bases).  So calibrated <= transferred <= uncalibrated "
    "by construction.  *A user's own server profile* (`engine.presets.register_profile`, fitted from their "
    "benchmark file): on the GPU and model it was fitted on, its own 90th percentiles (throughput; the per-step "
    "cost, mean TPOT or ITL, else mean TTFT) over the runs held out of its fit; fitted in-sample only (nothing "
    "held out), per metric never narrower than a transferred band of its server (the transfer basis and the "
    "server's calibrated basis), as a calibrated preset with nothing held out; on another GPU or model, per metric "
    "the largest of its own errors, the transfer basis and its server's calibrated basis.  The planner runs the "
    "search again with the cost model 1 + band times slower and faster (`Scenario.cost_scale`).")


def _family(preset: str) -> str:
    return CAL_SLORA if preset.startswith("slora") else CAL_VLLM


def _p90(t: pd.DataFrame, basis: str, metrics) -> tuple[float, str, int]:
    """The basis' p90 |error| of the first of ``metrics`` it has: (value, metric, runs)."""
    idx = _index(t)
    for m in metrics:
        r = idx.get((basis, m))
        if r is not None and math.isfinite(float(r[0])):
            return float(r[0]), m, int(r[1])
    return math.nan, "", 0


def _describe(t: pd.DataFrame, basis: str) -> str:
    thr, _, n = _p90(t, basis, ("request_throughput",))
    lat, lm, _ = _p90(t, basis, LATENCY_METRICS)
    what = "TPOT" if lm == "mean_tpot_ms" else "decode time"
    return f"{n} runs, 90 % of them within ±{100 * thr:.0f} % throughput and ±{100 * lat:.0f} % {what}"


def error_band(sc: Scenario, table: pd.DataFrame | None = None, status: CalibrationStatus | None = None) -> dict:
    """The error band of ``sc``'s cost model: {"basis", "bases", "status", "throughput_p90", "latency_p90",
    "band", "note"}.

    Rule (docs/model.md 10): ``band`` = max(throughput_p90, latency_p90), each the 90th percentile of
    |simulated / measured - 1| of request throughput and of the per-step cost (mean TPOT; for the S-LoRA bases,
    which have no TPOT, the mean decode time) over the runs of the error basis (``error_bases()``) that the
    calibration status (``calibration_status``) points to:

    * calibrated: the preset's own held-out errors, ``calibrated:vllm`` (vllm-llama31-8b) or ``calibrated:slora``
      (slora-a10g-s1); a calibrated preset fitted in-sample only (nothing held out: slora-a100-80-s1,
      seed3-llama31-8b-80gb-calibrated) is treated as transferred from its server's calibrated basis;
    * transferred: the measured transfer error ``transferred:slora-a10g->a100``, never narrower than the
      calibrated basis it transfers from (per metric, the larger of the two);
    * modified or uncalibrated: ``uncalibrated:roofline-on-vllm``, never narrower than any transferred band (per
      metric, the largest of it, the transfer basis and both calibrated bases);
    * a user's own server profile (``engine.presets.register_profile``; ``_user_band``): on its fitted GPU and
      model, its own p90s over the runs held out of its fit (basis ``user:<name>``, no table needed); fitted
      in-sample only, or on another pair, per metric the largest of its own p90s, ``transferred:slora-a10g->a100``
      and its server's calibrated basis (so never narrower than a transferred band).

    So calibrated <= transferred <= uncalibrated.  ``table``: the error-basis table (default ``error_bases()``);
    when it has not been generated the band is NaN and the note says so (the planner then runs no band).
    ``status``: ``calibration_status(sc)`` when the caller has it already (not computed again).
    """
    st = calibration_status(sc) if status is None else status
    out = {"status": st.kind, "basis": "", "bases": (), "throughput_p90": math.nan, "latency_p90": math.nan,
           "band": math.nan}
    if st.profile is not None and st.kind in ("calibrated", "transferred"):
        return _user_band(sc, st, table, out)
    try:
        t = error_bases(copy=False) if table is None else table
    except FileNotFoundError as e:
        return {**out, "note": f"no measured error: {e}"}
    in_sample = st.kind == "calibrated" and "in-sample only" in CALIBRATED[st.preset].caveat
    if st.kind == "calibrated" and not in_sample:
        bases = (_family(st.preset),)
    elif st.kind in ("calibrated", "transferred"):
        bases = (TRANSFER, _family(st.preset))
    else:
        bases = (UNCAL, TRANSFER, CAL_VLLM, CAL_SLORA)
    thr = max(_p90(t, b, ("request_throughput",))[0] for b in bases)
    lat = max(_p90(t, b, LATENCY_METRICS)[0] for b in bases)
    ref = Scenario.from_preset(st.preset) if st.preset else None
    server = "S-LoRA" if bases[-1] == CAL_SLORA or (ref is not None and ref.strategy == "slora") else "vLLM"
    if st.kind == "calibrated" and not in_sample:
        note = (f"{server} profile fitted on {ref.gpu} / {ref.model} ({st.preset}), held-out "
                f"{_describe(t, bases[0])}")
    elif st.kind in ("calibrated", "transferred"):
        how = ("fitted in-sample only, on " if in_sample else "fitted on ") + f"{ref.gpu} / {ref.model}"
        note = (f"{server} profile {st.preset} ({how}" + ("" if in_sample else f", transferred to {sc.gpu} / "
                                                           f"{sc.model}") + "): the wider of its held-out errors "
                f"({_describe(t, bases[1])}) and the measured transfer of the S-LoRA A10G fit to the A100 "
                f"({_describe(t, TRANSFER)})")
    else:
        what = (f"cost fields of your profile {st.profile} changed" if st.kind == "modified" and st.profile else
                f"cost fields of the calibrated {st.preset} changed" if st.kind == "modified" else
                "uncalibrated stated per-token times (service_mode fixed)" if sc.service_mode == "fixed" else
                "uncalibrated roofline")
        note = (f"{what} on {sc.gpu} / {sc.model}: the default roofline's error on the real vLLM runs "
                f"({_describe(t, UNCAL)}), never narrower than a transferred profile's")
    note += f": ±{100 * max(thr, lat):.0f} % (error basis {bases[0]})."
    return {**out, "basis": bases[0], "bases": bases, "throughput_p90": thr, "latency_p90": lat,
            "band": max(thr, lat), "note": note}


#: A user profile's per-step cost metrics, in order of preference; without any, its mean TTFT stands for latency.
USER_LATENCY_METRICS = ("mean_tpot_ms", "mean_itl_ms", "mean_ttft_ms")


def user_profile_p90(p) -> tuple[float, float, str, str, int]:
    """A user profile's own (throughput p90, latency p90, latency metric, split, runs) from its ``errors``
    (NaN where not measured): the latency is the first of ``USER_LATENCY_METRICS`` it has."""
    e = p.errors or {}
    def get(m):
        v = (e.get(m) or {}).get("p90_abs")
        return math.nan if v is None else float(v)
    lm = next((m for m in USER_LATENCY_METRICS if not math.isnan(get(m))), "")
    split = next((x["split"] for x in e.values()), "in-sample")
    n = max((int(x["n_runs"]) for x in e.values()), default=0)
    return get("request_throughput"), get(lm) if lm else math.nan, lm, split, n


def _user_band(sc: Scenario, st, table: pd.DataFrame | None, out: dict) -> dict:
    """``error_band`` of a scenario on a user's server profile (``st.profile``), calibrated or transferred: its own
    held-out 90th percentiles on its pair; fitted in-sample only, or on another pair, per metric the largest of its
    own, the transfer basis and its server's calibrated basis (``BAND_RULE``)."""
    from ..presets.servers import PROFILES
    p = PROFILES[st.profile]
    thr, lat, lm, split, n = user_profile_p90(p)
    what = (f"your profile {p.name} (fitted on {' / '.join(p.fitted_on)}; {split}, {n} run{'s' if n != 1 else ''}: "
            f"{_pm(thr)} throughput, {_pm(lat)} {_ERROR_NAMES.get(lm, 'latency')})")
    if st.kind == "calibrated" and split == "held-out":
        vals = [v for v in (thr, lat) if math.isfinite(v)]
        band = max(vals) if vals else math.nan
        return {**out, "basis": f"user:{p.name}", "bases": (f"user:{p.name}",), "throughput_p90": thr,
                "latency_p90": lat, "band": band,
                "note": f"{what}, held out of its fit: ±{100 * band:.0f} % (its own held-out runs)." if
                math.isfinite(band) else f"{what}: no finite held-out error."}
    try:
        t = error_bases(copy=False) if table is None else table
    except FileNotFoundError as e:
        return {**out, "note": f"no measured error: {e}"}
    fam = CAL_SLORA if p.base == "slora" else CAL_VLLM
    bases = (TRANSFER, fam)
    thr_b = max(thr if math.isfinite(thr) else 0.0, *(_p90(t, b, ("request_throughput",))[0] for b in bases))
    lat_b = max(lat if math.isfinite(lat) else 0.0, *(_p90(t, b, LATENCY_METRICS)[0] for b in bases))
    band = max(thr_b, lat_b)
    how = ("fitted in-sample only (nothing held out), so treated as transferred" if st.kind == "calibrated" else
           f"transferred to {sc.gpu} / {sc.model}")
    note = (f"{what}, {how}: per metric the widest of its own errors, the measured transfer of the S-LoRA A10G fit "
            f"to the A100 ({_describe(t, TRANSFER)}) and its server's calibrated basis {fam} "
            f"({_describe(t, fam)}): ±{100 * band:.0f} % (error basis {TRANSFER}).")
    return {**out, "basis": TRANSFER, "bases": (f"user:{p.name}", *bases), "throughput_p90": thr_b,
            "latency_p90": lat_b, "band": band, "note": note}


def _pm(x: float) -> str:
    """A band in words, "±19 %" (named apart from ``_pct``, the report table's "18.6 %", which it used to shadow)."""
    return f"±{100 * x:.0f} %" if math.isfinite(x) else "n/a"


SIDES = ("pessimistic", "optimistic")


def winner_band(sc: Scenario, strategies, metric: str, higher_is_better: bool, seeds: int = 1,
                exclude=(), band: float | None = None, run=None) -> dict:
    """Would the winner of a comparison change inside the cost model's error band (issue 24 item 3)?

    Every strategy of ``strategies`` is simulated on ``sc`` with its cost model ``1 + e`` times slower and
    ``1 + e`` times faster (``Scenario.cost_scale``, as the planner's band; ``e`` = ``band`` or
    ``error_band(sc)["band"]``) and as is, on seeds ``sc.seed .. sc.seed + seeds - 1`` (common random numbers);
    the leader of each side is the best mean of ``metric`` among the strategies not in ``exclude`` (bounds such as
    the oracle never win).  Returns {"band", "note", "leaders": {side: name}, "values": {side: {name: mean}},
    "changes": bool, "text"}; with no measured band (NaN) nothing is simulated and "changes" is None.
    ``run``: the summary function (default ``engine.simulate_summary``)."""
    from ..sim import simulate_summary
    run = run or simulate_summary
    names = list(dict.fromkeys(strategies))
    if not names:
        raise ValueError("strategies: empty; allowed: at least one strategy")
    if not isinstance(seeds, int) or isinstance(seeds, bool) or not 1 <= seeds <= 10:
        raise ValueError(f"seeds: invalid value {seeds!r}; allowed: an integer in [1, 10]")
    eb = error_band(sc) if band is None else {"band": float(band), "note": f"a band of {float(band):.0%} given"}
    e = float(eb["band"])
    if not math.isfinite(e):
        return {"band": e, "note": eb["note"], "leaders": {}, "values": {}, "changes": None,
                "text": f"No measured error band for this scenario ({eb['note']})."}
    if e < 0:
        raise ValueError(f"band: invalid value {e!r}; allowed: a fraction >= 0")
    contenders = [s for s in names if s not in set(exclude)] or names
    values, leaders = {}, {}
    for side in ("nominal", *SIDES):
        base = sc if side == "nominal" else scaled_cost(sc, e, side)
        values[side] = {s: float(np.mean([run(base.replace(strategy=s, seed=sc.seed + k))[metric]
                                          for k in range(seeds)])) for s in names}
        finite = [s for s in contenders if math.isfinite(values[side][s])]
        pick = max if higher_is_better else min
        leaders[side] = pick(finite, key=lambda s: values[side][s]) if finite else None
    changes = len({leaders[s] for s in ("nominal", *SIDES)}) > 1
    if changes:
        moved = "; ".join(f"{leaders[s]} if the model is {e:.0%} {'slower' if s == SIDES[0] else 'faster'}"
                          for s in SIDES if leaders[s] != leaders["nominal"])
        text = (f"The winner could change inside the cost model's error (±{e:.0%}): {leaders['nominal']} as "
                f"simulated, {moved}.")
    else:
        text = (f"The winner holds inside the cost model's error: {leaders['nominal']} leads with the cost model "
                f"{e:.0%} slower and {e:.0%} faster too.")
    return {"band": e, "note": eb["note"], "leaders": leaders, "values": values, "changes": changes,
            "text": text + f" ({seeds} seed{'s' if seeds > 1 else ''} per side, common random numbers.)"}


def scaled_cost(sc: Scenario, e: float, side: str) -> Scenario:
    """``sc`` with its cost model ``1 + e`` times slower ("pessimistic") or faster ("optimistic"), within
    ``Scenario.cost_scale``'s range."""
    f = (1.0 + e) if side == "pessimistic" else 1.0 / (1.0 + e)
    return sc.replace(cost_scale=min(10.0, max(0.1, sc.cost_scale * f)))
