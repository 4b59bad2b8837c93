"""Validation page: how well the simulator reproduces public measurements, and a fit to yours.

Two parts:

* Reference datasets (S-LoRA S1; vLLM Llama-3.1-8B multi-LoRA runs): the per-run error tables
  that ``python -m engine validate`` writes to ``docs/validation/*_errors.csv``, shown as
  measured-vs-simulated scatters and curves, the per-metric error summary (MAPE, median, worst
  per split, from ``engine.calibration.summarize_errors``) and the targets, with the report
  ``docs/validation.md`` itself.  Nothing is simulated for this part.
* A benchmark file of your own (``vllm bench serve`` / benchmark_serving columns plus Scenario
  fields): ``engine.calibration.load_measurements`` and ``fit`` under a work cap (``MAX_FIT_ROWS``,
  ``FIT_MAX_DURATION_S``, ``FIT_MAX_REQUESTS_PER_ROW``, ``MAX_FIT_SIMULATIONS``).  The fitted
  scenario can be downloaded, or loaded into the shared scenario controls through the
  scenario.json import path (``controls.apply_scenario``) and opened on the What-if page.

The page does not draw the scenario controls; the fit can start from the shared scenario
(``controls.current()``: the values last set on the What-if, Sweeps or Crossover page).
"""
from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from app import charts, controls, exports, page_whatif, runner
from engine import Scenario, presets
from engine import calibration as C

ROOT = Path(__file__).resolve().parent.parent
VALIDATION_MD = ROOT / "docs" / "validation.md"
VALIDATION_DIR = ROOT / "docs" / "validation"
GENERATE_CMD = "python -m engine validate"
CALIBRATE_CMD = "python -m engine calibrate --data runs.csv --preset default --out fitted.json"
#: url_path of the What-if page (app/main.py registers it; pages are functions).
WHATIF_PAGE = "whatif"

# ------------------------------------------------------------------ work cap of a fit
#: Rows (measured runs) one uploaded file may have.
MAX_FIT_ROWS = 50
#: Simulated traffic time per row, in seconds (longer rows are shortened).
FIT_MAX_DURATION_S = 60.0
#: Requests per row and simulation (open loop: the duration is shortened to stay under it).
FIT_MAX_REQUESTS_PER_ROW = 5_000
#: Drain time per row, in seconds.
FIT_MAX_DRAIN_S = 60.0
#: Simulations of one fit: rows x evaluations, finite-difference evaluations included.
MAX_FIT_SIMULATIONS = 600
#: Optimiser iterations (scipy ``max_nfev``) never exceed this.
FIT_MAX_NFEV = 30

SIDEBAR_BASE = "Shared scenario (What-if page controls)"
FIT_KEY = "_validation_fit"
FIT_ERROR = "_validation_fit_error"
_COLUMNS = ("case", "metric", "measured", "simulated", "rel_error", "split")
_SPLITS = ("train", "held-out")

#: Metric column -> (label, unit); unit "share" is a fraction.
METRICS: dict[str, tuple[str, str]] = {
    "request_throughput": ("Request throughput", "req/s"),
    "output_throughput": ("Output throughput", "tok/s"),
    "mean_ttft_ms": ("Mean TTFT", "ms"),
    "median_ttft_ms": ("Median TTFT", "ms"),
    "p99_ttft_ms": ("P99 TTFT", "ms"),
    "mean_tpot_ms": ("Mean TPOT", "ms"),
    "median_tpot_ms": ("Median TPOT", "ms"),
    "p99_tpot_ms": ("P99 TPOT", "ms"),
    "slo_attainment": ("SLO attainment", "share"),
    "mean_latency_ms": ("Mean end-to-end latency", "ms"),
}


def metric_title(m: str) -> str:
    label, unit = METRICS.get(m, (m, ""))
    return label if unit in ("", "share") else f"{label} ({unit})"


def _metric_format(m: str) -> str:
    return ".0%" if METRICS.get(m, ("", ""))[1] == "share" else ",.4~r"


@dataclass(frozen=True)
class Dataset:
    key: str
    label: str
    csv: str
    about: str
    by: dict  # extra columns the error summary can be split by: column -> label


DATASETS: tuple[Dataset, ...] = (
    Dataset("slora_s1", "S-LoRA S1", "slora_s1_errors.csv",
            "S-LoRA's setting S1 (Llama-7B, rank-8 adapters on an A10G and an A100 80 GB; the paper's "
            "`slora_s1_results.csv`), each run replaying the exact request stream it received.  One fit per GPU "
            "on the suites `a10g-num-adapter`, `a10g-req-rate` and "
            "`a100-80-table`; held out: the `a10g-cv` burstiness sweep and the `ablation-no-mem` runs.  The A100 "
            "has training runs only, so its errors are in-sample.",
            {"gpu": "GPU", "suite": "Suite"}),
    Dataset("vllm", "vLLM runs", "vllm_errors.csv",
            "vLLM serving Llama-3.1-8B with many LoRA adapters on one GPU (H100 64 GB, assumed; "
            "`vllm_llama31_8b_multilora_runs.csv`), each run simulated over its full measured 3600 s window "
            "with on-demand KV.  Trained on `max_lora_rank` 16 with at most 128 adapters; held out: rank 32 and "
            "192-384 adapters.  Split by `measured_stable` to separate runs that kept up from overloaded ones, "
            "whose TTFT is mostly an hour-long backlog.",
            {"max_lora_rank": "max_lora_rank", "max_loras": "max_loras", "max_cpu_loras": "max_cpu_loras",
             "measured_stable": "kept up (measured)"}),
)


# ================================================================== pure part
def load_errors(path: Path) -> pd.DataFrame | None:
    """A per-run error CSV (docs/validation/*_errors.csv); None if missing, ValueError if malformed."""
    if not Path(path).is_file():
        return None
    df = _read_csv(str(path), Path(path).stat().st_mtime)
    missing = [c for c in _COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{Path(path).name}: {missing[0]}: missing column; expected {', '.join(_COLUMNS)} "
                         f"(regenerate with `{GENERATE_CMD}`)")
    return df


@st.cache_data(max_entries=8, show_spinner=False)
def _read_csv(path: str, mtime: float) -> pd.DataFrame:
    return pd.read_csv(path)


def is_met(mape: float, target: float, n: int, n_finite: int) -> bool:
    """docs/validation.md's rule: MAPE within the target and every run with a finite simulated value."""
    return bool(math.isfinite(mape) and mape <= target and n_finite == n)


def error_summary(table: pd.DataFrame, by: tuple[str, ...] = ()) -> pd.DataFrame:
    """MAPE, median and worst absolute relative error per metric (, ``by``) and split, with the target
    (where one is set) and whether it is met.  Metrics in the table's order, train before held-out."""
    s = C.summarize_errors(table, by=("metric", *by, "split"))
    if s.empty:
        return s.assign(no_finite_sim=pd.Series(dtype=int), target=pd.Series(dtype=float),
                        met=pd.Series(dtype=object))
    s["no_finite_sim"] = s["n"] - s["n_finite"]
    s["target"] = s["metric"].map(C.TARGETS).astype(float)
    s["met"] = [None if not math.isfinite(t) else is_met(m, t, n, nf)
                for m, t, n, nf in zip(s["mape"], s["target"], s["n"], s["n_finite"])]
    m_order = {m: i for i, m in enumerate(pd.unique(table["metric"]))}
    s_order = {sp: i for i, sp in enumerate(_SPLITS)}
    s = s.assign(_m=s["metric"].map(m_order), _s=s["split"].map(s_order).fillna(len(_SPLITS)))
    return s.sort_values(["_m", *by, "_s"], kind="stable").drop(columns=["_m", "_s"]).reset_index(drop=True)


def targets_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (dataset label, targeted metric, split): n, MAPE, target, worst, met."""
    rows = []
    for label, t in tables.items():
        s = error_summary(t[t["metric"].isin(list(C.TARGETS))])
        for _, r in s.iterrows():
            rows.append({"dataset": label, "metric": r["metric"], "split": r["split"], "n": int(r["n"]),
                         "mape": r["mape"], "target": r["target"], "worst_ape": r["worst_ape"],
                         "met": bool(r["met"])})
    return pd.DataFrame(rows, columns=["dataset", "metric", "split", "n", "mape", "target", "worst_ape", "met"])


_TARGET_LINE = re.compile(r"^- (?P<dataset>.+?), (?P<split>[\w-]+), `(?P<metric>\w+)`: MAPE (?P<mape>n/a|[0-9.]+ %)"
                          r".*-> \*\*(?P<status>MET|NOT MET)\*\*")
_FEAS_LINE = re.compile(r"^- vLLM start-up feasibility: accuracy (?P<acc>[0-9.]+) % on (?P<n>\d+) runs "
                        r"\(target >= (?P<target>[0-9.]+) %\) -> \*\*(?P<status>MET|NOT MET)\*\*")


def report_targets(text: str) -> tuple[pd.DataFrame, dict | None]:
    """The target lines of docs/validation.md: (dataset, split, metric, mape, met) rows, and the
    start-up feasibility line (accuracy, n, target, met; None if absent)."""
    rows, feas = [], None
    for line in text.splitlines():
        m = _TARGET_LINE.match(line.strip())
        if m:
            mape = m["mape"]
            rows.append({"dataset": m["dataset"], "split": m["split"], "metric": m["metric"],
                         "mape": math.nan if mape == "n/a" else float(mape.rstrip(" %")) / 100,
                         "met": m["status"] == "MET"})
            continue
        f = _FEAS_LINE.match(line.strip())
        if f and feas is None:
            feas = {"accuracy": float(f["acc"]) / 100, "n": int(f["n"]), "target": float(f["target"]) / 100,
                    "met": f["status"] == "MET"}
    return pd.DataFrame(rows, columns=["dataset", "split", "metric", "mape", "met"]), feas


def report_disagreements(targets: pd.DataFrame, report: pd.DataFrame) -> list[str]:
    """Targets whose status (or MAPE, to the report's 0.1 %) differs between the CSVs and the report."""
    out = []
    rep = {(r.dataset, r.split, r.metric): r for r in report.itertuples()}
    for r in targets.itertuples():
        q = rep.get((r.dataset, r.split, r.metric))
        if q is None:
            continue
        same_mape = (not math.isfinite(r.mape) and not math.isfinite(q.mape)) or abs(r.mape - q.mape) < 6e-4
        if q.met != r.met or not same_mape:
            out.append(f"{r.dataset}, {r.split}, {r.metric}")
    return out


def report_header(text: str) -> dict:
    """Command, mode and engine commit of docs/validation.md's 'Generated by' line (missing keys: unknown)."""
    out = {}
    m = re.search(r"Generated by `([^`]+)` \(mode: \*\*([A-Za-z]+)", text[:4000])
    if m:
        out["command"], out["mode"] = m.group(1), m.group(2)
    c = re.search(r"on engine commit (\S+)", text[:4000])
    if c:
        out["commit"] = c.group(1)
    return out


def report_body(text: str) -> str:
    """The report for rendering inside the page: headings two levels down, image lines dropped (the
    page draws its own charts), an empty 'Plots' section removed."""
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("!["):
            continue
        if re.match(r"#{1,4}\s", line):
            line = "##" + line
        out.append(line)
    body = "\n".join(out)
    return re.sub(r"\n#+ Plots\s*\n(?=\s*(#|$))", "\n", body)


def shorten(sc: Scenario) -> tuple[Scenario, bool]:
    """The fit's work cap on one row's scenario: at most FIT_MAX_DURATION_S of traffic, at most
    FIT_MAX_REQUESTS_PER_ROW requests (open loop) and FIT_MAX_DRAIN_S of drain.  A shortened run keeps
    at most a quarter of its duration as warm-up.  Returns the scenario and whether it changed."""
    dur = min(sc.duration_s, FIT_MAX_DURATION_S)
    if sc.arrival_process != "closed" and sc.arrival_rate_rps * dur > FIT_MAX_REQUESTS_PER_ROW:
        dur = FIT_MAX_REQUESTS_PER_ROW / sc.arrival_rate_rps
    kw: dict[str, Any] = {}
    if dur < sc.duration_s:
        kw["duration_s"] = dur
        if sc.warmup_s > 0.25 * dur:
            kw["warmup_s"] = 0.25 * dur
    if sc.drain_s > FIT_MAX_DRAIN_S:
        kw["drain_s"] = FIT_MAX_DRAIN_S
    if not kw:
        return sc, False
    return sc.replace(**kw).validate(), "duration_s" in kw


def max_evaluations(rows: int, n_params: int) -> int:
    """Optimiser iterations allowed for ``rows`` rows and ``n_params`` parameters under the cap (each
    iteration: one evaluation plus ``n_params`` finite-difference ones, every one simulating all rows)."""
    return min(FIT_MAX_NFEV, MAX_FIT_SIMULATIONS // max(1, rows * (n_params + 1)))


def work_cap_text() -> str:
    return (f"Work cap: at most {MAX_FIT_ROWS} rows; each row is simulated for at most {FIT_MAX_DURATION_S:g} s "
            f"of traffic and {FIT_MAX_REQUESTS_PER_ROW:,} requests (a longer run is shortened, its warm-up to at "
            f"most a quarter of it; drain at most {FIT_MAX_DRAIN_S:g} s); at most {MAX_FIT_SIMULATIONS:,} "
            "simulations per fit (rows x evaluations, finite-difference ones included), so the optimiser gets "
            f"{MAX_FIT_SIMULATIONS:,} / (rows x (parameters + 1)) iterations, at most {FIT_MAX_NFEV}.")


def fit_upload(data: bytes, name: str, base: Scenario, params, metrics=None, preset: str | None = None,
               base_label: str | None = None) -> dict:
    """Load an uploaded benchmark file and fit ``params`` of ``base`` to it under the work cap.

    Returns a plain dict (kept in session state): values, start, table (per row and metric),
    summary, scenario_json (``base`` with the fitted values), evaluations and simulations done,
    notes.  Raises ValueError naming the column / row (from the engine) or the cap.
    """
    params = list(params)
    if not params:
        raise ValueError("parameters: choose at least one parameter to fit")
    if len(data) > runner.MAX_UPLOAD_MB * 1024 * 1024:
        raise ValueError(f"file is {len(data) / 2**20:.1f} MB; allowed: at most {runner.MAX_UPLOAD_MB} MB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text; expected a CSV, JSON or JSONL file") from None
    if not text.strip():
        raise ValueError("measurements: empty file")
    if not text.endswith("\n"):
        text += "\n"  # the engine's loader reads a one-line string as a file path
    df = C.load_measurements(text, base=base)
    rows = len(df)
    if rows > MAX_FIT_ROWS:
        raise ValueError(f"{rows} rows; allowed: at most {MAX_FIT_ROWS} per fit (work cap)")
    nfev = max_evaluations(rows, len(params))
    if nfev < 2:
        most = MAX_FIT_SIMULATIONS // (2 * (len(params) + 1))
        raise ValueError(f"work cap: {rows} rows x ({len(params)} parameters + 1) leaves fewer than 2 "
                         f"evaluations within {MAX_FIT_SIMULATIONS:,} simulations; fit fewer parameters or at "
                         f"most {most} rows")
    cases = C.measurement_cases(base, df, list(metrics) if metrics else None)
    short = 0
    for i, c in enumerate(cases):
        sc, changed = shorten(c.scenario)
        short += changed
        cases[i] = dataclasses.replace(c, scenario=sc)
    res = C.fit(base, cases, params=params, max_nfev=nfev)
    table = res.table.rename(columns={"case": "row"})
    notes = []
    if short:
        notes.append(f"{short} of {rows} rows were simulated for less than their duration_s (work cap: "
                     f"{FIT_MAX_DURATION_S:g} s, {FIT_MAX_REQUESTS_PER_ROW:,} requests per row).")
    ignored = list(df.attrs.get("ignored_columns", []))
    return {
        "name": name, "preset": preset, "base_label": base_label or preset or "custom", "params": params,
        "values": dict(res.values), "start": dict(res.start),
        "bounds": {p: C.FIT_BOUNDS[p] for p in params},
        "table": table, "summary": C.summarize_errors(res.table, by=("metric",)),
        "scenario_json": res.scenario.to_json(), "rows": rows, "max_nfev": nfev, "evaluations": res.nfev,
        "simulations": res.nfev * rows, "wall_s": res.wall_s, "status": res.status,
        "metric_columns": list(df.attrs.get("metric_columns", [])),
        "fitted_metrics": list(cases[0].fit_metrics) if cases else [],
        "scenario_columns": list(df.attrs.get("scenario_columns", [])), "ignored": ignored, "notes": notes,
    }


# ================================================================ Streamlit part
def _show(chart) -> None:
    st.altair_chart(charts.unvalidated(chart), width="stretch")


def _pct_cols(**labels) -> dict:
    return {k: st.column_config.NumberColumn(v, format="percent") for k, v in labels.items()}


_SUMMARY_CONFIG = {
    "metric": st.column_config.TextColumn("Metric", width="medium"),
    "split": st.column_config.TextColumn("Split"),
    "n": st.column_config.NumberColumn("Runs", format="%d"),
    "no_finite_sim": st.column_config.NumberColumn("No finite sim.", format="%d",
                                                   help="Runs without a finite simulated value (the worst error is "
                                                        "then infinite, and a target cannot be met)."),
    "worst_case": st.column_config.TextColumn("Worst run"),
    "met": st.column_config.TextColumn("Target", help="met: MAPE within the target and every run with a finite "
                                                      "simulated value (docs/validation.md's rule)."),
    "target_status": st.column_config.TextColumn("Target", width="medium", help="MAPE target of the metric, and whether it is met "
                                                                "(MAPE within it and every run with a finite "
                                                                "simulated value)."),
    **_pct_cols(mape="MAPE", median_ape="Median |error|", worst_ape="Worst |error|", target="Target (MAPE <=)"),
}


def _status(met) -> str:
    return "" if met is None or (isinstance(met, float) and math.isnan(met)) else ("met" if met else "NOT met")


def _target_status(target: float, met) -> str:
    return "" if not math.isfinite(target) else f"≤ {target:.0%}: {_status(met)}"


def _finite(df: pd.DataFrame, cols) -> pd.DataFrame:
    """Infinite values as NaN (shown empty; the 'No finite sim.' column says why)."""
    d = df.copy()
    for c in cols:
        if c in d:
            d[c] = d[c].replace([np.inf, -np.inf], np.nan)
    return d


def _targets_section(tables: dict[str, pd.DataFrame], report: str | None) -> None:
    st.subheader("Targets", anchor=False)
    st.caption("Request throughput MAPE <= 10 % and mean TTFT MAPE <= 25 % per dataset and split (fitted on the "
               "training runs, checked on the held-out ones); vLLM start-up feasibility accuracy >= 95 %.  A "
               "metric counts as met only if every run has a finite simulated value (as in docs/validation.md).")
    tt = targets_table(tables) if tables else pd.DataFrame()
    rep_rows, feas = report_targets(report) if report else (pd.DataFrame(), None)
    if tables:
        cols = st.columns(len(tables) + (feas is not None))
        for col, label in zip(cols, tables):
            t = tt[tt["dataset"] == label]
            col.metric(f"{label}: targets met", f"{int(t['met'].sum())} of {len(t)}",
                       help="Throughput and mean TTFT MAPE, train and held-out splits, from the per-run CSV.")
        if feas is not None:
            cols[-1].metric("vLLM start-up feasibility", f"{feas['accuracy']:.1%}",
                            f"target >= {feas['target']:.0%}: {'met' if feas['met'] else 'NOT met'}",
                            delta_color="normal" if feas["met"] else "inverse", delta_arrow="off",
                            help=f"Predicted vs actual start-up of {feas['n']} vLLM runs (from docs/validation.md; "
                                 "one assumed constant, so partly fitted).")
        show = _finite(tt.assign(metric=tt["metric"].map(metric_title), met=tt["met"].map(_status)), ["worst_ape"])
        st.dataframe(show, hide_index=True, width="stretch", key="val_targets",
                     column_config={"dataset": st.column_config.TextColumn("Dataset"),
                                    "n": st.column_config.NumberColumn("Runs", format="%d"),
                                    **{k: v for k, v in _SUMMARY_CONFIG.items() if k in ("metric", "split", "met")},
                                    **_pct_cols(mape="MAPE", target="Target (MAPE <=)", worst_ape="Worst |error|")})
        if report and len(rep_rows):
            bad = report_disagreements(tt, rep_rows)
            if bad:
                st.warning("docs/validation.md and the per-run CSVs disagree on: " + "; ".join(bad) + ".  Both are "
                           f"written by `{GENERATE_CMD}`; regenerate them together.", icon=":material/sync_problem:")
    if report is None:
        st.info(f"The validation report (docs/validation.md) has not been generated yet.  Generate it from the "
                f"repository root with\n\n`{GENERATE_CMD}`\n\n(about 6 minutes; it needs shared/reference-data).",
                icon=":material/description:")
        return
    head = report_header(report)
    if head.get("mode") and head["mode"].lower() != "full":
        st.warning(f"docs/validation.md was generated in {head['mode']} mode (a smoke test, not the validation "
                   f"result); regenerate it with `{GENERATE_CMD}`.", icon=":material/warning:")
    with st.expander("Full report: docs/validation.md", icon=":material/description:"):
        if head:
            st.caption(f"Generated by `{head.get('command', GENERATE_CMD)}`"
                       + (f" on engine commit {head['commit']}" if "commit" in head else "")
                       + ".  The charts on this page replace the report's PNG plots.")
        st.markdown(report_body(report))


def _scatters(table: pd.DataFrame, height: int = 400) -> None:
    metrics = list(pd.unique(table["metric"]))
    st.markdown(charts.split_legend_html(pd.unique(table["split"]).astype(str),
                                         "dashed: simulated = measured · shaded: within ±10 % and ±25 %"),
                unsafe_allow_html=True)
    ncol = 2 if len(metrics) in (2, 4) else 3
    dropped = []
    for i in range(0, len(metrics), ncol):
        cols = st.columns(ncol, gap="medium")
        for col, m in zip(cols, metrics[i:i + ncol]):
            d = charts.validation_scatter_frame(table, m)
            n_all = int((table["metric"] == m).sum())
            if len(d) < n_all:
                dropped.append(f"{metric_title(m)}: {n_all - len(d)}")
            with col:
                _show(charts.validation_scatter_chart(d, metric_title(m), value_format=_metric_format(m),
                                                      height=height, legend=False))
    st.caption("One point per run.  Dashed line: simulated = measured; shaded: within ±10 % (darker) and ±25 %.  "
               "Both axes of a chart share one range.  "
               f"Log-log axes where a metric spans more than {charts.LOG_SPAN:g}x."
               + ("  Not drawn (no finite simulated value): " + "; ".join(dropped) + "." if dropped else ""))


def _slora_curves(table: pd.DataFrame) -> None:
    sweeps = {"a10g-num-adapter": ("num_adapters", "Adapters"), "a10g-req-rate": ("rate", "Request rate (req/s)"),
              "a10g-cv": ("cv", "Inter-arrival CV"), "a100-80-table": ("num_adapters", "Adapters"),
              "ablation-no-mem": ("num_adapters", "Adapters")}
    metrics = list(pd.unique(table["metric"]))
    m = st.selectbox("Metric", metrics, format_func=metric_title, key="val_slora_s1_curve_metric")
    suites = [s for s in pd.unique(table["suite"]) if s in sweeps]
    for i in range(0, len(suites), 3):
        cols = st.columns(3, gap="medium")
        for col, suite in zip(cols, suites[i:i + 3]):
            t = table[table["suite"] == suite]
            x, x_title = sweeps[suite]
            d = charts.validation_curve_frame(t, m, x)
            gpu, split = ", ".join(pd.unique(t["gpu"])), ", ".join(pd.unique(t["split"]))
            with col:
                _show(charts.validation_curve_chart(
                    d, x_title, metric_title(m), log_x=charts.use_log_scale(d["x"]), height=340,
                    title=f"{suite} ({gpu}, {split})", value_format=_metric_format(m)))


def load_levels(values) -> dict[float, str]:
    """Group per-adapter rates into load levels: sorted values split wherever one is more than twice the
    previous; value -> label of its level ("0.058-0.063 req/s per adapter")."""
    v = sorted(set(float(x) for x in values if math.isfinite(float(x))))
    groups: list[list[float]] = []
    for x in v:
        if groups and x <= 2 * groups[-1][-1]:
            groups[-1].append(x)
        else:
            groups.append([x])
    out = {}
    for g in groups:
        label = f"{g[0]:.2g} req/s per adapter" if g[0] == g[-1] else f"{g[0]:.2g}-{g[-1]:.2g} req/s per adapter"
        out.update({x: label for x in g})
    return out


def _vllm_curves(table: pd.DataFrame) -> None:
    per_adapter = table["offered_rps"] / table["max_cpu_loras"]
    level_of = load_levels(per_adapter)
    t = table.assign(load=per_adapter.map(level_of))
    levels = list(dict.fromkeys(level_of.values()))
    c1, c2, c3 = st.columns(3)
    metrics = list(pd.unique(t["metric"]))
    m = c1.selectbox("Metric", metrics, format_func=metric_title, key="val_vllm_curve_metric")
    ranks = sorted(int(r) for r in pd.unique(t["max_lora_rank"]))
    rank = c2.selectbox("max_lora_rank", ranks, key="val_vllm_curve_rank")
    level = c3.selectbox("Load per adapter", levels, index=len(levels) - 1, key="val_vllm_curve_load",
                         help="Each run offers about the same rate to every adapter, so its total rate grows "
                              "with the number of adapters served (max_cpu_loras); the runs come in a low- and "
                              "a high-load group.")
    sub = t[(t["max_lora_rank"] == rank) & (t["load"] == level)]
    d = charts.validation_curve_frame(sub, m, "max_cpu_loras", "max_loras")
    _show(charts.validation_curve_chart(
        d, "Adapters served (max_cpu_loras)", metric_title(m), series_title="GPU adapter slots (max_loras)",
        log_x=charts.use_log_scale(d["x"]), log_y=charts.use_log_scale(d["value"], 100.0), height=440,
        title=f"{metric_title(m)}: max_lora_rank {rank}, {level}", value_format=_metric_format(m)))


CURVES: dict[str, Callable[[pd.DataFrame], None]] = {"slora_s1": _slora_curves, "vllm": _vllm_curves}


def _dataset_section(ds: Dataset, table: pd.DataFrame | None, error: str | None) -> None:
    if error:
        st.error(error, icon=":material/error:")
        return
    if table is None:
        st.info(f"The per-run error table docs/validation/{ds.csv} has not been generated yet.  Generate it (with "
                f"docs/validation.md) from the repository root with\n\n`{GENERATE_CMD}`\n\n(about 6 minutes; it "
                "needs shared/reference-data; `--quick` writes `*_quick.csv` files, which this page does not "
                "read), then reload this page.", icon=":material/fact_check:")
        return
    runs = table.drop_duplicates("case")
    counts = runs["split"].value_counts()
    st.markdown(ds.about)
    st.caption(f"{len(runs)} runs: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in _SPLITS)
               + f" · source: docs/validation/{ds.csv}")

    st.markdown("##### Measured against simulated")
    _scatters(table)

    st.markdown("##### Errors per metric")
    by_opts = [c for c in ds.by if c in table.columns]
    by = st.selectbox("Split the table further by", ["(nothing)", *by_opts], key=f"val_{ds.key}_by",
                      format_func=lambda c: ds.by.get(c, c))
    extra = () if by == "(nothing)" else (by,)
    s = error_summary(table, extra)
    s = _finite(s.assign(metric=s["metric"].map(metric_title),
                         target_status=[_target_status(t, m) for t, m in zip(s["target"], s["met"])]),
                ["worst_ape", "mape", "median_ape"])
    cols = ["metric", *extra, "split", "n", "no_finite_sim", "mape", "median_ape", "worst_ape", "target_status",
            "worst_case"]
    st.dataframe(s[cols], hide_index=True, width="stretch", key=f"val_{ds.key}_summary",
                 column_config={**_SUMMARY_CONFIG, **{c: st.column_config.TextColumn(ds.by[c]) for c in extra}})
    st.caption("Error = simulated / measured - 1.  MAPE and median over runs with a finite simulated value; "
               "worst over all runs (None: some run has no finite simulated value, so the worst error is "
               "infinite).")

    st.markdown("##### Curves")
    try:
        CURVES[ds.key](table)
        st.caption("Solid lines and filled points: measured; dashed lines and open points: simulated.  The y axes "
                   "do not start at zero.")
    except KeyError as e:  # an older CSV without the dataset's sweep columns
        st.caption(f"No curves: the CSV lacks the column {e}.")

    with st.expander("Per-run errors", icon=":material/table_rows:"):
        per_run = _finite(table, ["rel_error"])
        st.dataframe(per_run, hide_index=True, width="stretch", key=f"val_{ds.key}_runs",
                     column_config={"rel_error": st.column_config.NumberColumn("rel_error", format="percent")})
        st.download_button("Download CSV", data=table.to_csv(index=False).encode(), file_name=ds.csv,
                           mime="text/csv", key=f"dl_val_{ds.key}", icon=":material/download:")


# ------------------------------------------------------------------ upload and fit
def _use_fitted() -> None:
    """Button callback: load the fitted scenario into the shared controls (scenario.json import path)."""
    ss = st.session_state
    fit = ss.get(FIT_KEY)
    if not fit:
        return
    sc = Scenario.from_json(fit["scenario_json"])
    if fit["preset"] in presets.SCENARIOS:
        ss[controls.PRESET_KEY] = fit["preset"]
    issues = controls.apply_scenario(sc)
    ss.pop("_upload_error", None)
    vals = ", ".join(f"{p}={v:.4g}" for p, v in fit["values"].items())
    msg = f"Loaded the scenario fitted to {fit['name']} (base: {fit['base_label']}; {vals})."
    if issues:
        msg += " Adjusted to the controls' ranges: " + "; ".join(i.message for i in issues)
    ss["_upload_msg"] = msg


def _param_help() -> str:
    return "Cost-model parameters the fit may vary, each within its physical range:\n\n" + "\n".join(
        f"- **{p}**: {lo:g} to {hi:g}" for p, (lo, hi) in C.FIT_BOUNDS.items())


def _fit_form(state) -> None:
    ss = st.session_state
    st.markdown(
        "Fit the simulator's cost model to **your own measurements**: one row per benchmark run, with the "
        "metric columns of a `vllm bench serve` / `benchmark_serving.py` result (`request_throughput`, "
        "`output_throughput`, `mean_ttft_ms`, `median_ttft_ms`, `p99_ttft_ms`, `mean_tpot_ms`, `median_tpot_ms`, "
        "`p99_tpot_ms`; `request_throughput` and `mean_ttft_ms` are required) and any Scenario field as extra columns "
        "describing the run (e.g. `arrival_rate_rps` for the request rate, `prompt_tokens`, `output_tokens`, "
        "`num_adapters`, `max_loras`).  Each row is simulated as the base scenario with its fields applied; "
        "other columns are ignored.  The same fit on the command line: "
        f"`{CALIBRATE_CMD}`.")
    options = [*presets.SCENARIOS, SIDEBAR_BASE]
    with st.form("fit_form"):
        up = st.file_uploader("Benchmark results (CSV, JSON or JSONL)", type=["csv", "json", "jsonl"],
                              key="fit_upload", max_upload_size=runner.MAX_UPLOAD_MB,
                              help=f"At most {runner.MAX_UPLOAD_MB} MB and {MAX_FIT_ROWS} rows.  JSON: one "
                                   "result object (a `vllm bench serve --save-result` file) or a list of them; "
                                   "JSONL: one per line.")
        c1, c2, c3 = st.columns(3)
        base = c1.selectbox("Base scenario", options,
                            index=options.index(state.preset) if state.preset in options else 0, key="fit_base",
                            help="Preset whose fields every row starts from (GPU, model, adapters, strategy...); "
                                 "or the shared scenario set with the sidebar controls of the What-if, Sweeps and "
                                 "Crossover pages.")
        params = c2.multiselect("Parameters to fit", list(C.FIT_BOUNDS), default=list(C.DEFAULT_PARAMS),
                                key="fit_params", help=_param_help())
        metrics = c3.multiselect("Metrics to fit", [*C.METRIC_COLUMNS, *C.EXTRA_METRICS], default=[],
                                 key="fit_metrics", placeholder="Every metric column in the file",
                                 help="Relative errors of these metrics are minimised (soft-L1 least squares); "
                                      "every metric column is reported.")
        st.caption(work_cap_text())
        submitted = st.form_submit_button("Fit", type="primary", icon=":material/tune:", key="fit_submit")
    if submitted:
        ss.pop(FIT_KEY, None)
        ss.pop(FIT_ERROR, None)
        if up is None:
            ss[FIT_ERROR] = "Choose a benchmark file to fit (CSV, JSON or JSONL)."
        else:
            try:
                if base == SIDEBAR_BASE:
                    if state.scenario is None:
                        raise ValueError(f"the shared scenario cannot be simulated ({state.error})")
                    base_sc, preset = state.scenario, None
                else:
                    base_sc, preset = Scenario.from_preset(base), base
                with st.spinner(f"Fitting {', '.join(params) or 'nothing'} to {up.name}..."):
                    ss[FIT_KEY] = fit_upload(up.getvalue(), up.name, base_sc, params, metrics, preset,
                                             "shared scenario" if preset is None else preset)
            except ValueError as e:
                ss[FIT_ERROR] = f"{up.name}: {e}"
            except Exception as e:  # never a traceback on the page
                ss[FIT_ERROR] = f"{up.name}: the fit failed ({type(e).__name__}: {e})"
    if ss.get(FIT_ERROR):
        st.error(ss[FIT_ERROR], icon=":material/error:")
    fit = ss.get(FIT_KEY)
    if fit:
        _fit_result(fit)


def _fit_result(fit: dict) -> None:
    st.success(f"Fitted {', '.join(fit['params'])} to the {fit['rows']} rows of {fit['name']} (base: "
               f"{fit['base_label']}) in {fit['wall_s']:.1f} s: {fit['evaluations']} evaluations x {fit['rows']} rows "
               f"= {fit['simulations']:,} simulations (cap {MAX_FIT_SIMULATIONS:,}; at most {fit['max_nfev']} "
               f"iterations).  Optimiser: {fit['status']}", icon=":material/check_circle:")
    for n in fit["notes"]:
        st.caption(n)
    stuck = [p for p in fit["params"] if fit["values"][p] == fit["start"][p]]
    if stuck:
        st.warning(f"{', '.join(stuck)} stayed at the base value: the simulated metrics of these rows did not "
                   "respond to it (for instance, a base scenario with service_mode 'fixed' uses fixed per-token "
                   "times instead of the efficiencies), or the base value already fits best.",
                   icon=":material/info:")
    if fit["ignored"]:
        ign = fit["ignored"]
        st.caption(f"Ignored columns (neither metrics nor Scenario fields): {', '.join(ign[:12])}"
                   + (f" and {len(ign) - 12} more" if len(ign) > 12 else "") + ".")
    cols = st.columns(max(len(fit["params"]), 3))
    for col, p in zip(cols, fit["params"]):
        v, s0 = fit["values"][p], fit["start"][p]
        lo, hi = fit["bounds"][p]
        at_bound = " (at its bound)" if min(abs(v - lo), abs(v - hi)) <= 1e-6 * max(1.0, hi - lo) else ""
        col.metric(p, f"{v:.4g}", f"{v - s0:+.3g} vs base {s0:.4g}", delta_color="off", delta_arrow="off",
                   help=f"Fitted value of {p}{at_bound}; allowed range {lo:g} to {hi:g}.")

    b1, b2, _ = st.columns([1, 1, 2])
    b1.download_button("Fitted scenario.json", data=exports.scenario_json(Scenario.from_json(fit["scenario_json"])),
                       file_name="scenario_fitted.json", mime="application/json", key="dl_fitted_scenario",
                       icon=":material/download:", width="stretch",
                       help="The base scenario with the fitted values: restore it on the What-if page, or pass it "
                            "to the engine (`python -m engine run --scenario ...`).")
    if b2.button("Use on the What-if page", type="primary", key="use_fitted", icon=":material/arrow_forward:",
                 width="stretch", on_click=_use_fitted,
                 help="Loads the fitted scenario into the scenario controls (like restoring a scenario.json) and "
                      "opens the What-if page."):
        st.switch_page(st.Page(page_whatif.render, url_path=WHATIF_PAGE), query_params={})

    st.markdown("##### Errors at the fitted values")
    s = _finite(fit["summary"].assign(metric=fit["summary"]["metric"].map(metric_title)), ["worst_ape"])
    s["fitted"] = fit["summary"]["metric"].isin(fit["fitted_metrics"]).to_numpy()
    st.dataframe(s[["metric", "fitted", "n", "mape", "median_ape", "worst_ape", "worst_case"]], hide_index=True,
                 width="stretch", key="fit_summary",
                 column_config={**_SUMMARY_CONFIG, "fitted": st.column_config.CheckboxColumn("Fitted"),
                                "worst_case": st.column_config.TextColumn("Worst row")})
    table = fit["table"]
    keep = ["row", *[c for c in fit["scenario_columns"] if c in table.columns], "metric", "measured", "simulated",
            "rel_error", "fitted"]
    st.dataframe(_finite(table[keep], ["rel_error"]), hide_index=True, width="stretch", key="fit_rows",
                 column_config={"row": st.column_config.TextColumn("Row"),
                                "rel_error": st.column_config.NumberColumn("Error (sim / meas - 1)", format="percent"),
                                "fitted": st.column_config.CheckboxColumn("Fitted")})
    scat = table.rename(columns={"row": "case"}).assign(
        split=np.where(table["fitted"].astype(bool), "fitted", "not fitted"))
    metrics = list(pd.unique(scat["metric"]))
    st.markdown(charts.split_legend_html(pd.unique(scat["split"]).astype(str),
                                         "fitted: a metric the fit minimised · dashed: simulated = measured"),
                unsafe_allow_html=True)
    for i in range(0, len(metrics), 3):
        cols = st.columns(3, gap="medium")
        for col, m in zip(cols, metrics[i:i + 3]):
            with col:
                _show(charts.validation_scatter_chart(charts.validation_scatter_frame(scat, m), metric_title(m),
                                                      value_format=_metric_format(m), height=320, legend=False))


# ------------------------------------------------------------------ page
def render() -> None:
    state = controls.current()
    st.title("Validation", anchor=False,
             help="The simulator against public measurements (fitted on training runs, checked on held-out runs), "
                  "and a fit of its cost model to a benchmark file of your own.")
    st.markdown("How close the simulator comes to **measured** multi-LoRA serving: two public datasets, each split "
                "into runs the cost model was fitted on (train) and runs it never saw (held-out).  Below them, fit "
                "the model to your own `vllm bench serve` results and use the fitted scenario on the What-if page.")
    controls.show_url_issues()
    tables: dict[str, pd.DataFrame] = {}
    errors: dict[str, str] = {}
    raw: dict[str, pd.DataFrame | None] = {}
    for ds in DATASETS:
        try:
            raw[ds.key] = load_errors(VALIDATION_DIR / ds.csv)
        except (ValueError, OSError, pd.errors.ParserError) as e:
            raw[ds.key], errors[ds.key] = None, f"docs/validation/{ds.csv}: {e}"
        if raw[ds.key] is not None:
            tables[ds.label] = raw[ds.key]
    report = VALIDATION_MD.read_text(encoding="utf-8") if VALIDATION_MD.is_file() else None
    _targets_section(tables, report)
    tabs = st.tabs([*(ds.label for ds in DATASETS), "Fit your own benchmark"])
    for ds, tab in zip(DATASETS, tabs):
        with tab:
            _dataset_section(ds, raw[ds.key], errors.get(ds.key))
    with tabs[-1]:
        _fit_form(state)
