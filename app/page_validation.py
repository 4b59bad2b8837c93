"""Validation page: how well the simulator reproduces public measurements, and a fit to yours.

Two parts:

* Reference datasets (S-LoRA S1; vLLM Llama-3.1-8B multi-LoRA runs): the per-run error tables
  that ``python -m engine validate`` writes to ``docs/validation/*_errors.csv``, shown as
  measured-vs-simulated scatters and curves, the per-metric error summary (MAPE, median, worst
  per split, from ``engine.calibration.summarize_errors``); the targets from ``docs/validation/targets.json``
  (written by the same command: per dataset, metric and split MAPE, median, p90 and worst |error|, the
  run behind the worst, met or not; start-up feasibility; the run's header), with a line naming the run
  behind a large worst error; and the report ``docs/validation.md`` itself, shown as it is (never parsed
  for data).  Nothing is simulated for this part.
* Fit your own benchmark, two ways:

  - the result files the tools write (``vllm bench serve`` / ``benchmark_serving.py`` JSON, plain or
    ``--save-detailed``; GuideLLM reports; AIPerf exports), one or several: each is read by
    ``engine.calibration.read_tool_file`` (recognised from its own keys; an unknown or malformed file
    is the readers' message, never a traceback) and summarised as the CLI prints it (tool, version,
    traffic, lengths, metrics).  What a file cannot say (GPU, model -- prefilled from ``model_id``
    when it names a preset --, ``--max-loras``, ``--max-cpu-loras``, ``--max-lora-rank``, adapters,
    popularity -- uniform for vllm bench serve --, the parameters, the hold-out split) the user states
    in a form; ``server_scenario`` + ``fit_tool_runs`` replay each run's traffic and fit under the work
    cap below (runs, requests per run, simulations), showing errors per split and metric, parameters
    at a bound, errors above 25 %, the under-determination note, TTFT distributions and the
    provenance (``engine.calibration.provenance``), with the same ``python -m engine calibrate``
    command;
  - a measurement table (``vllm bench serve`` / benchmark_serving columns plus Scenario fields):
    ``engine.calibration.load_measurements`` and ``fit`` under a work cap (``MAX_FIT_ROWS``,
    ``FIT_MAX_DURATION_S``, ``FIT_MAX_REQUESTS_PER_ROW``, ``MAX_FIT_SIMULATIONS``).

  The fitted scenario can be downloaded (fitted.json: ``python -m engine run --scenario``), or loaded
  into the shared scenario controls through the scenario.json import path
  (``controls.apply_scenario``) and opened on the What-if page (and, for tool files, the Plan page).
  A tool-file fit can also become the user's own server profile ("Use as my server profile":
  ``engine.presets.register_profile`` with ``engine.calibration.profile_args``), offered in this session's
  sidebar Server control only (``controls.session_profiles``) and selected there; fitted parameters are
  shown by name with their units (``engine.calibration.PARAM_LABELS``), the field name in parentheses.

The page does not draw the scenario controls; the fit can start from the shared scenario
(``controls.current()``: the values last set on the What-if, Sweeps or Crossover page).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from app import charts, controls, exports, page_plan, page_whatif, runner
from engine import Scenario, presets
from engine import calibration as C

ROOT = Path(__file__).resolve().parent.parent
VALIDATION_MD = ROOT / "docs" / "validation.md"
VALIDATION_DIR = ROOT / "docs" / "validation"
#: The validation targets file under VALIDATION_DIR (read at render time, so tests can move VALIDATION_DIR).
TARGETS_NAME = "targets.json"
#: What ``validate --quick`` writes instead (the page shows only the full run's targets).
QUICK_TARGETS_NAME = "targets_quick.json"
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
    Dataset("reference_server", "Reference server (vLLM CPU)", "reference_server_errors.csv",
            "vLLM 0.32.0's CPU build serving a small random-weight Llama with rank-8 peft adapters on this project's "
            "machines, observed request by request (`engine/data/reference/reference_server/`, our own runs): "
            "`max_loras` 1-8, 8-64 adapters, host-cache misses, a small KV cache, prefix caching off, light to "
            "past-the-knee rates, bursts.  Fitted on the groups m2 and miss32; every other run is held out.  "
            "Each run replays its exact requests (send times, lengths, prefixes, adapters); the Observed vs twin "
            "page shows any of them request by request.",
            {"group": "Server group"}),
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


def error_summary(table: pd.DataFrame, by: tuple[str, ...] = (), targets: dict[str, float] | None = None) -> pd.DataFrame:
    """MAPE, median and worst absolute relative error per metric (, ``by``) and split, with the target
    (``targets``: the dataset's, ``engine.calibration.dataset_targets``; default ``TARGETS``) where one is set and
    whether it is met.  Metrics in the table's order, train before held-out."""
    targets = C.TARGETS if targets is None else targets
    s = C.summarize_errors(table, by=("metric", *by, "split"))
    if s.empty:
        return s.assign(no_finite_sim=pd.Series(dtype=int), target=pd.Series(dtype=float),
                        met=pd.Series(dtype=object))
    s["no_finite_sim"] = s["n"] - s["n_finite"]
    s["target"] = s["metric"].map(targets).astype(float)
    s["met"] = [None if not math.isfinite(t) else is_met(m, t, n, nf)
                for m, t, n, nf in zip(s["mape"], s["target"], s["n"], s["n_finite"])]
    m_order = {m: i for i, m in enumerate(pd.unique(table["metric"]))}
    s_order = {sp: i for i, sp in enumerate(_SPLITS)}
    s = s.assign(_m=s["metric"].map(m_order), _s=s["split"].map(s_order).fillna(len(_SPLITS)))
    return s.sort_values(["_m", *by, "_s"], kind="stable").drop(columns=["_m", "_s"]).reset_index(drop=True)


def targets_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per (dataset label, targeted metric, split): n, MAPE, target, worst, met."""
    rows = []
    keys = {v: k for k, v in C.DATASET_LABELS.items()}
    for label, t in tables.items():
        tg = C.dataset_targets(keys.get(label, ""))
        s = error_summary(t[t["metric"].isin(list(tg))], targets=tg)
        for _, r in s.iterrows():
            rows.append({"dataset": label, "metric": r["metric"], "split": r["split"], "n": int(r["n"]),
                         "mape": r["mape"], "target": r["target"], "worst_ape": r["worst_ape"],
                         "met": bool(r["met"])})
    return pd.DataFrame(rows, columns=["dataset", "metric", "split", "n", "mape", "target", "worst_ape", "met"])


#: Keys every record of targets.json has (``engine.calibration.report.targets_from_tables`` writes them).
TARGET_KEYS = ("dataset", "label", "split", "metric", "n", "n_finite", "mape_pct", "median_pct", "p90_pct",
               "worst_pct", "worst_case", "worst_measured", "worst_simulated", "worst_run", "target_mape_pct", "met")
#: A worst |error| above this many times its MAPE target is "large": the page names the run behind it.
LARGE_WORST_FACTOR = 2.0


def load_targets(path: Path) -> dict | None:
    """docs/validation/targets.json (``python -m engine validate`` writes it with the per-run CSVs): header,
    one record per (dataset, metric, split), start-up feasibility, keeps-up.  None if missing; ValueError naming
    what is wrong if malformed."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path.name}: not valid JSON ({e}); regenerate with `{GENERATE_CMD}`") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("targets"), list):
        raise ValueError(f"{path.name}: no 'targets' list; regenerate with `{GENERATE_CMD}`")
    for i, r in enumerate(doc["targets"]):
        missing = [k for k in TARGET_KEYS if not isinstance(r, dict) or k not in r]
        if missing:
            raise ValueError(f"{path.name}: targets[{i}]: {missing[0]}: missing; regenerate with `{GENERATE_CMD}`")
    return doc


def _frac(x) -> float:
    """A record's percent as a fraction (the page's tables format fractions); null -> NaN."""
    return math.nan if x is None else float(x) / 100


def _pct_text(x) -> str:
    return "n/a" if x is None else f"{x:.1f} %"


def _value_text(v, metric: str) -> str:
    unit = METRICS.get(metric, ("", ""))[1]
    if v is None:
        return "n/a"
    return (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}") + ("" if unit in ("", "share") else f" {unit}")


def run_facts_text(run: dict) -> str:
    """What the error table says about a run (a record's ``worst_run``: whether it kept up in the measurement,
    its measured and simulated throughput as shares of the offered rate, whether the simulator flagged it
    overloaded), as words; "" if the table says nothing of it."""
    off, mr, sr = run.get("offered_rps"), run.get("measured_rps"), run.get("simulated_rps")
    stable, over = run.get("measured_stable"), run.get("sim_overloaded")
    meas = f"throughput {100 * mr / off:.1f} % of the offered {off:g} req/s" if off and mr is not None else ""
    parts = []
    if stable is not None:
        parts.append(f"in the measurement it {'kept up' if stable else 'did not keep up'}" + (f" ({meas})" if meas else ""))
    elif meas:
        parts.append("measured " + meas)
    sim = [f"{100 * sr / off:.1f} %"] if off and sr is not None else []
    sim += [] if over is None else ["flagged overloaded" if over else "not flagged overloaded"]
    if sim:
        parts.append("simulated: " + ", ".join(sim))
    return "; ".join(parts)


def outlier_note(rec: dict, factor: float = LARGE_WORST_FACTOR) -> str | None:
    """One line naming the run behind a large worst |error| (above ``factor`` x the MAPE target, or infinite),
    and, when the target is met anyway, why that is so: the target is on MAPE.  None when the worst is not large."""
    n, nf, tgt, case = rec["n"], rec["n_finite"], rec["target_mape_pct"], rec["worst_case"]
    if nf < n:
        return (f"NOT met: {n - nf} of {n} runs have no finite simulated value, so the worst |error| is infinite "
                f"(among them `{case}`).")
    w = rec["worst_pct"]
    if w is None or w <= factor * tgt:
        return None
    head = (f"met: the target is on MAPE ({_pct_text(rec['mape_pct'])} <= {tgt:g} %)" if rec["met"] else
            f"NOT met: MAPE {_pct_text(rec['mape_pct'])} > {tgt:g} %")
    facts = run_facts_text(rec.get("worst_run") or {})
    return (f"{head}; the worst run, `{case}`, is {w:.1f} % off (simulated "
            f"{_value_text(rec['worst_simulated'], rec['metric'])}, measured "
            f"{_value_text(rec['worst_measured'], rec['metric'])})" + (f"; {facts}" if facts else "")
            + f".  Median |error| {_pct_text(rec['median_pct'])}, p90 {_pct_text(rec['p90_pct'])} over {n} runs.")


def targets_frame(doc: dict) -> pd.DataFrame:
    """targets.json's records as the page's table: one row per (dataset label, metric, split) with runs, runs
    without a finite simulated value, MAPE, median, p90 and worst |error| and the target (fractions; null ->
    NaN), the worst run, met ('met' / 'NOT met') and the outlier note (``outlier_note``, "" if none)."""
    cols = ["dataset", "metric", "split", "n", "no_finite_sim", "mape", "median_ape", "p90_ape", "worst_ape",
            "worst_case", "target", "met", "note"]
    rows = [{"dataset": r["label"], "metric": r["metric"], "split": r["split"], "n": int(r["n"]),
             "no_finite_sim": int(r["n"]) - int(r["n_finite"]), "mape": _frac(r["mape_pct"]),
             "median_ape": _frac(r["median_pct"]), "p90_ape": _frac(r["p90_pct"]), "worst_ape": _frac(r["worst_pct"]),
             "worst_case": r["worst_case"], "target": _frac(r["target_mape_pct"]), "met": "met" if r["met"] else "NOT met",
             "note": outlier_note(r) or ""} for r in doc["targets"]]
    return pd.DataFrame(rows, columns=cols)


def targets_disagreements(doc: dict, tables: dict[str, pd.DataFrame]) -> list[str]:
    """Targets whose runs, status or MAPE differ between targets.json and the per-run CSVs the page read
    (``targets_table``, keyed by dataset label): both are written by one validate run."""
    csv = {(r.dataset, r.split, r.metric): r for r in targets_table(tables).itertuples()}
    out = []
    for r in doc["targets"]:
        q = csv.get((r["label"], r["split"], r["metric"]))
        if q is None:
            continue
        mape = _frac(r["mape_pct"])
        same_mape = (math.isnan(mape) and not math.isfinite(q.mape)) or abs(mape - q.mape) < 1e-9
        if bool(r["met"]) != bool(q.met) or int(r["n"]) != int(q.n) or not same_mape:
            out.append(f"{r['label']}, {r['split']}, {r['metric']}")
    return out


def written_by_quick_run(quick: dict | None, md: Path, root: Path = ROOT) -> bool:
    """Whether the quick run that wrote ``quick`` (its targets_quick.json) wrote its report to ``md``: the ``--out``
    of the command in its header (relative to ``root``, where the command is run)."""
    try:
        argv = shlex.split(((quick or {}).get("header") or {}).get("command") or "")
    except ValueError:
        return False
    if "--out" not in argv[:-1]:
        return False
    out = Path(argv[argv.index("--out") + 1])
    return (out if out.is_absolute() else Path(root) / out).resolve() == Path(md).resolve()


def header_text(header: dict) -> str:
    """targets.json's header as the report's 'Generated by' sentence."""
    h = header or {}
    return (f"Generated by `{h.get('command') or GENERATE_CMD}` (mode: {h.get('mode') or 'unknown'})"
            + (f" on engine commit {h['commit']}" if h.get("commit") else "")
            + (" with uncommitted engine changes" if h.get("uncommitted_engine_changes") else "")
            + (f", {h['date']}" if h.get("date") else "") + ".")


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


# ------------------------------------------------------------------ benchmark tools' result files
TOOL_FIT_KEY = "_validation_tool_fit"
TOOL_FIT_ERROR = "_validation_tool_fit_error"
_TOOL_READ = "_validation_tool_read"
_TOOL_PREFILL = "_validation_tool_prefill"
#: url_path of the Plan page (app/main.py registers it).
PLAN_PAGE = "plan"
#: How requests chose adapters (the form's choices): vLLM's benchmark picks its --lora-modules uniformly.
POPULARITY_KINDS = ("uniform", "zipf", "power")
#: Hold-out choices of the form (besides a file name), in the engine's spelling.
HOLD_OUT_LABELS = {"none": "None: fit on every run", "highest-rate": "The run at the highest request rate",
                   "highest-concurrency": "The closed loop with the most clients", "last": "The last run given"}
#: The command line's option names in the engine's messages -> the form's labels.
_FORM_NAMES = {"--hold-out": "Hold-out", "--metrics": "Metrics to fit", "--model": "Model",
               "with --set ": "with Other scenario fields: "}


def _form_words(msg: str) -> str:
    for k, v in _FORM_NAMES.items():
        msg = msg.replace(k, v)
    return msg


def upload_digest(files) -> str:
    """One digest of uploaded (name, bytes) pairs: a change of any file (or of their order) changes it."""
    h = hashlib.sha256()
    for name, data in files:
        h.update(name.encode("utf-8", "replace") + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def _safe_name(name: str) -> str:
    n = re.sub(r"[^\w.+\- ]", "_", Path(str(name)).name).strip()
    return n if n.strip(".") else "upload.json"


def read_uploads(files) -> tuple[list, dict[str, str]]:
    """The runs (``engine.calibration.ToolRun``) of uploaded tool result files, and per refused file why.

    ``files``: (name, bytes) pairs.  Each file goes through ``engine.calibration.read_tool_file`` (the format
    is recognised from the file's own keys); a run's ``source`` is the upload's file name ("name#k" for the
    k-th run of a file holding several).  Refused: a file above ``runner.MAX_UPLOAD_MB``, not UTF-8, not
    JSON, of an unknown format (the readers' message, listing the formats understood), or malformed (the
    readers' message, naming the key)."""
    runs: list = []
    errors: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="lora-whatif-upload-") as tmp:
        for name, data in files:
            fname = _safe_name(name)
            if fname in errors or any(r.source.split("#")[0] == fname for r in runs):
                errors[f"{fname} (again)"] = f"{fname}: given twice; give each file once"
                continue
            if len(data) > runner.MAX_UPLOAD_MB * 1024 * 1024:
                errors[fname] = (f"{fname}: file is {len(data) / 2**20:.1f} MB; allowed: at most "
                                 f"{runner.MAX_UPLOAD_MB} MB")
                continue
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                errors[fname] = f"{fname}: not UTF-8 text; expected a JSON result file: {C.formats_understood()}"
                continue
            path = Path(tmp) / fname
            path.write_text(text, encoding="utf-8")
            try:
                got = C.read_tool_file(path)
            except ValueError as e:
                msg = str(e).replace(str(path), fname)
                if "not valid JSON" in msg:
                    msg += f"; expected a JSON result file: {C.formats_understood()}"
                if "unknown format" in msg:
                    msg += " (a measurement table goes into the Measurement table tab)"
                errors[fname] = msg
                continue
            except Exception as e:  # a reader's bug must not become a traceback on the page
                errors[fname] = f"{fname}: could not be read ({type(e).__name__}: {str(e).replace(str(path), fname)})"
                continue
            for r in got:
                r.source = r.source.replace(str(path), fname)
                r.notes = [n.replace(str(path), fname) for n in r.notes]
            runs.extend(got)
    return runs, errors


def traffic_text(r) -> str:
    """A run's traffic in words, as ``python -m engine calibrate`` prints it."""
    if r.arrival == "closed":
        return f"closed loop of {r.concurrency}"
    if r.arrival == "burst":
        return f"{r.num_requests} requests at t = 0 (rate inf)"
    kind = {"poisson": "Poisson", "constant": "constant gaps",
            "gamma": f"Gamma, burstiness {r.burstiness:g} (CV {1 / math.sqrt(r.burstiness):.3g})"}.get(r.arrival, r.arrival)
    return f"{r.rate_rps:g} req/s {kind}, {r.num_requests} requests"


def describe_run(r) -> str:
    """The per-run line ``python -m engine calibrate`` prints (its notes indented below)."""
    lens = "per-request lengths" if r.detailed else "fixed lengths"
    return (f"{r.source}: {r.tool} ({r.version or 'version not stated'}): {traffic_text(r)}; {r.mean_in:.1f} / "
            f"{r.mean_out:.1f} tokens mean ({lens}); duration {r.duration_s:.4g} s; metrics "
            f"{', '.join(sorted(r.measured))}" + "".join(f"\n    note: {n}" for n in r.notes))


def run_table(runs) -> pd.DataFrame:
    """One row per run: what its file says (tool, version, traffic, lengths, duration, metrics read)."""
    rows = []
    for r in runs:
        open_loop = r.arrival not in ("closed", "burst")
        rows.append({
            "run": r.source, "tool": r.tool, "version": r.version or "not stated", "traffic": traffic_text(r),
            "rate_rps": r.rate_rps if r.arrival != "closed" else math.nan,
            "burstiness": r.burstiness if open_loop else math.nan,
            "concurrency": r.concurrency if r.arrival == "closed" else (r.cap or None),
            "requests": int(r.num_requests), "failed": int(r.failed), "mean_in": r.mean_in, "mean_out": r.mean_out,
            "lengths": "per request" if r.detailed else "means only", "duration_s": r.duration_s,
            "ttfts": "per request" if r.ttfts_ms is not None else "summary only", "model_id": r.model_id,
            "metrics": ", ".join(sorted(r.measured)), "notes": "; ".join(r.notes)})
    return pd.DataFrame(rows)


def popularity_of(sc: Scenario) -> tuple[str, float]:
    """A scenario's adapter popularity as the form's (kind, value): power with alpha 1 is uniform."""
    if sc.popularity == "power":
        return ("uniform", 1.0) if sc.power_alpha == 1 else ("power", float(sc.power_alpha))
    return "zipf", float(sc.zipf_s)


def popularity_spec(kind: str, value: float) -> str:
    """The engine's popularity spelling ("uniform", "zipf:S", "power:A"; ``server_scenario``)."""
    return "uniform" if kind == "uniform" else f"{kind}:{float(value):g}"


def base_rank(sc: Scenario) -> int:
    return int(max(sc.adapter_ranks)) if sc.adapter_ranks else int(sc.adapter_rank)


def prefill(runs, base: Scenario) -> tuple[dict, list[str]]:
    """The server form's starting values: the base scenario's, the model from the files' ``model_id`` when
    it names one preset model, popularity uniform for ``vllm bench serve`` files (as the engine assumes).
    Returns the values (form field -> value) and one note per prefilled value that the files gave."""
    notes = []
    ids = sorted({r.model_id for r in runs if r.model_id})
    found = {C.match_model(i) for i in ids} - {None}
    model = base.model
    if len(found) == 1:
        model = found.pop()
        notes.append(f"model **{model}** from the files' model_id {', '.join(f'`{i}`' for i in ids)}")
    elif ids:
        notes.append(f"model_id {', '.join(f'`{i}`' for i in ids)} names no single preset model: the model is the "
                     f"base scenario's ({base.model}); state it below")
    kind, value = popularity_of(base)
    if any(r.tool == "vllm-bench-serve" for r in runs):
        kind, value = "uniform", 1.0
        notes.append("adapter popularity **uniform**: `vllm bench serve` picks its `--lora-modules` uniformly")
    values = {"gpu": base.gpu, "model": model, "max_loras": int(base.max_loras),
              "max_cpu_loras": int(base.max_cpu_loras), "max_lora_rank": base_rank(base),
              "num_adapters": int(base.num_adapters), "popularity": kind, "popularity_value": value,
              "params": list(C.DEFAULT_PARAMS), "metrics": [], "hold_out": "none", "fields": ""}
    return values, notes


def hold_out_options(runs) -> list[str]:
    """The hold-out choices that apply to ``runs``: none, highest-rate (an open loop at a finite rate),
    highest-concurrency (a closed loop), last, and each file when there are several."""
    if len(runs) < 2:
        return ["none"]
    opts = ["none"]
    if any(r.arrival not in ("closed", "burst") and math.isfinite(r.rate_rps) for r in runs):
        opts.append("highest-rate")
    if any(r.arrival == "closed" for r in runs):
        opts.append("highest-concurrency")
    opts.append("last")
    files = list(dict.fromkeys(r.source.split("#")[0] for r in runs))
    if len(files) > 1:
        opts.extend(files)
    return opts


def parse_fields(text: str) -> dict[str, str]:
    """"FIELD=VALUE" pairs (comma- or newline-separated) for any Scenario field (``--set``); the engine
    checks the names and values."""
    out = {}
    for part in re.split(r"[,\n]", text or ""):
        part = part.strip()
        if not part:
            continue
        k, sep, v = part.partition("=")
        if not sep or not k.strip() or not v.strip():
            raise ValueError(f"other scenario fields: {part!r}: expected FIELD=VALUE (e.g. max_batched_tokens=16384)")
        out[k.strip()] = v.strip()
    return out


def server_settings(form: dict, base: Scenario) -> dict:
    """The form's values as ``engine.calibration.server_scenario`` keywords (None: the base scenario's).
    The rank is stated only when it differs from the base's (stating it also sets vLLM's adapter budget);
    the popularity always (the engine's default for vllm bench serve files is uniform)."""
    def changed(key, cur):
        v = form[key]
        return None if v == cur else v
    rank = int(form["max_lora_rank"])
    return dict(gpu=changed("gpu", base.gpu), model=changed("model", base.model),
                max_loras=changed("max_loras", base.max_loras), max_cpu_loras=changed("max_cpu_loras", base.max_cpu_loras),
                max_lora_rank=None if rank == base_rank(base) else rank,
                num_adapters=changed("num_adapters", base.num_adapters),
                popularity=popularity_spec(form["popularity"], form["popularity_value"]),
                overrides=parse_fields(form["fields"]))


def calibrate_command(names, preset: str | None, settings: dict, params, metrics, hold_out: str, max_nfev: int) -> str:
    """The same fit with ``python -m engine calibrate`` (the files saved under their names)."""
    q = shlex.quote
    parts = ["python -m engine calibrate --data", *map(q, names),
             f"--preset {q(preset)}" if preset else "--scenario scenario.json"]
    for opt, key in (("--gpu", "gpu"), ("--model", "model"), ("--max-loras", "max_loras"),
                     ("--max-cpu-loras", "max_cpu_loras"), ("--max-lora-rank", "max_lora_rank"),
                     ("--num-adapters", "num_adapters"), ("--popularity", "popularity")):
        if settings.get(key) is not None:
            parts.append(f"{opt} {q(str(settings[key]))}")
    parts += [f"--set {q(f'{k}={v}')}" for k, v in (settings.get("overrides") or {}).items()]
    if list(params) != list(C.DEFAULT_PARAMS):
        parts.append(f"--params {','.join(params)}")
    if metrics:
        parts.append(f"--metrics {','.join(metrics)}")
    if hold_out and hold_out != "none":
        parts.append(f"--hold-out {q(hold_out)}")
    parts += [f"--max-nfev {max_nfev}", "--out fitted.json"]
    return " ".join(parts)


def tool_work_cap_text() -> str:
    return (f"Work cap: at most {MAX_FIT_ROWS} runs and {FIT_MAX_REQUESTS_PER_ROW:,} requests per run (each run is "
            f"replayed whole, as the file states it); at most {MAX_FIT_SIMULATIONS:,} simulations per fit (training "
            "runs x evaluations, finite-difference ones included, plus one per held-out run and per run with "
            f"per-request TTFTs), so the optimiser gets at most {FIT_MAX_NFEV} iterations.")


def fit_tool_upload(runs, base: Scenario, settings: dict, params, metrics=None, hold_out: str = "none",
                    preset: str | None = None, base_label: str | None = None, names=(), progress=None) -> dict:
    """Fit ``params`` to tool runs (``read_uploads``) under the work cap: ``engine.calibration``
    ``server_scenario`` (the server the user states), ``choose_hold_out``, ``fit_tool_runs``, ``provenance``.

    Returns a plain dict (kept in session state): values, start, bounds, the per-run table, the summary
    per split and metric, the headline errors (``engine.calibration.headline_errors``: throughput, per-step
    cost, TTFT mean / median / p99), TTFT distributions, parameters at a bound, errors above 25 %, notes, the
    fitted scenario.json, the provenance, the same command line, and the arguments of the server profile it
    makes (``engine.calibration.profile_args``; registered by "Use as my server profile").  ``progress(fraction, text)`` is called per
    evaluation.  Raises ValueError naming the setting, the run or the cap.
    """
    params = list(params)
    metrics = list(metrics or [])
    names = list(names) or sorted({r.source.split("#")[0] for r in runs})
    if not params:
        raise ValueError("parameters: choose at least one parameter to fit")
    if not runs:
        raise ValueError("no run to fit (every file was refused)")
    if len(runs) > MAX_FIT_ROWS:
        raise ValueError(f"{len(runs)} runs; allowed: at most {MAX_FIT_ROWS} per fit (work cap)")
    big = [r for r in runs if r.num_requests > FIT_MAX_REQUESTS_PER_ROW]
    if big:
        raise ValueError(f"{big[0].source}: {big[0].num_requests:,} requests; allowed: at most "
                         f"{FIT_MAX_REQUESTS_PER_ROW:,} per run (work cap; a run is replayed whole)")
    server, server_notes = C.server_scenario(base, runs, **settings)
    held = C.choose_hold_out(runs, hold_out)
    n_train = len(runs) - sum(held)
    extra = sum(held) + sum(r.ttfts_ms is not None for r in runs)
    nfev = min(FIT_MAX_NFEV, (MAX_FIT_SIMULATIONS - extra) // max(1, n_train * (len(params) + 1)))
    if nfev < 2:
        raise ValueError(f"work cap: {n_train} training runs x ({len(params)} parameters + 1) leaves fewer than 2 "
                         f"evaluations within {MAX_FIT_SIMULATIONS:,} simulations (MAX_FIT_SIMULATIONS); fit fewer "
                         "parameters, hold out more runs or give fewer files")
    total = nfev * (len(params) + 1) + 1
    done = [0]

    def log(_msg: str) -> None:
        done[0] += 1
        if progress:
            progress(min(1.0, done[0] / total), f"Evaluation {done[0]} (at most {total}) of {n_train} run(s)...")

    tf = C.fit_tool_runs(runs, server, params=params, metrics=metrics or None, hold_out=hold_out, max_nfev=nfev,
                         log=log)
    res = tf.result
    command = calibrate_command(names, preset, settings, params, metrics, hold_out, nfev)
    prov = C.provenance(tf, names, params, command)
    return {
        "kind": "tool", "name": ", ".join(names), "names": names, "preset": preset,
        "base_label": base_label or preset or "custom", "params": params, "metrics": metrics, "hold_out": hold_out,
        "values": dict(res.values), "start": dict(res.start), "bounds": {p: C.FIT_BOUNDS[p] for p in params},
        "table": tf.table, "summary": tf.summary(), "distributions": tf.distributions,
        "at_bounds": list(tf.at_bounds), "large_errors": list(tf.large_errors),
        "traffic_note": tf.notes[0] if tf.notes else "", "notes": list(tf.notes[1:]), "server_notes": server_notes,
        "server": server_text(server), "scenario_json": tf.scenario.to_json(),
        "provenance": prov, "command": command,
        "runs": len(runs), "n_train": n_train, "held_out": [r.source for r, h in zip(runs, held) if h],
        "evaluations": res.nfev, "simulations": res.nfev * n_train + extra, "max_nfev": nfev,
        "wall_s": res.wall_s, "status": res.status,
        "fitted_metrics": list(dict.fromkeys(tf.table.loc[tf.table["fitted"].astype(bool), "metric"])),
        "headline": C.headline_errors(tf.table),
        "profile_args": C.profile_args(tf, names, when=prov["created"][:10]),
    }


def server_text(sc: Scenario) -> str:
    """The server line ``python -m engine calibrate`` prints."""
    pop = popularity_spec(*popularity_of(sc))
    return (f"{sc.gpu} / {sc.model}, strategy {sc.strategy}, max_loras {sc.max_loras}, max_cpu_loras "
            f"{sc.max_cpu_loras}, {sc.num_adapters} adapters (rank {base_rank(sc)}), popularity {pop}")


def tool_summary(fit: dict) -> pd.DataFrame:
    """Errors per split and metric, with whether the metric was fitted and whether its worst error is above
    the flag (``engine.calibration.ERROR_FLAG``, 25 %)."""
    s = fit["summary"].copy()
    s["fitted"] = s["metric"].isin(fit["fitted_metrics"]).to_numpy()
    s["above_flag"] = (s["worst_ape"] > C.ERROR_FLAG).to_numpy()
    order = {sp: i for i, sp in enumerate(_SPLITS)}
    s = s.assign(_s=s["split"].map(order).fillna(len(_SPLITS)))
    return s.sort_values("_s", kind="stable").drop(columns="_s").reset_index(drop=True)


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


def _targets_section(doc: dict | None, doc_error: str | None, tables: dict[str, pd.DataFrame],
                     report: str | None) -> None:
    st.subheader("Targets", anchor=False)
    st.caption("Request throughput MAPE <= 10 % and mean TTFT MAPE <= 25 % per dataset and split (fitted on the "
               "training runs, checked on the held-out ones); vLLM start-up feasibility accuracy >= 95 %.  A "
               "metric counts as met only if every run has a finite simulated value (as in docs/validation.md).  "
               f"Source: docs/validation/{TARGETS_NAME}, written by `{GENERATE_CMD}`.")
    if doc_error:
        st.error(doc_error, icon=":material/error:")
    if doc is not None:
        tt = targets_frame(doc)
        labels = list(dict.fromkeys(tt["dataset"]))
        extra = [k for k in ("feasibility", "keeps_up") if doc.get(k)]
        cols = st.columns(len(labels) + len(extra)) if labels or extra else []
        for col, label in zip(cols, labels):
            t = tt[tt["dataset"] == label]
            col.metric(f"{label}: targets met", f"{int((t['met'] == 'met').sum())} of {len(t)}",
                       help="Throughput and mean TTFT MAPE, train and held-out splits.")
        for col, k in zip(cols[len(labels):], extra):
            f = doc[k]
            label, about = (("vLLM start-up feasibility", f"Predicted vs actual start-up of {f['n']} vLLM runs (one "
                             "assumed constant, so partly fitted).") if k == "feasibility" else
                            ("vLLM runs: keeps up", f"Does the server keep up with its offered rate (the planner's "
                             f"rule), predicted vs measured, on {f['n']} vLLM runs."))
            col.metric(label, f"{f['accuracy_pct'] / 100:.1%}",
                       f"target >= {f['target_pct']:g} %: {'met' if f['met'] else 'NOT met'}",
                       delta_color="normal" if f["met"] else "inverse", delta_arrow="off", help=about)
        show = _finite(tt.assign(metric=tt["metric"].map(metric_title)), ["mape", "median_ape", "p90_ape",
                                                                           "worst_ape"])
        st.dataframe(show.drop(columns="note"), hide_index=True, width="stretch", key="val_targets",
                     column_config={"dataset": st.column_config.TextColumn("Dataset"),
                                    "n": st.column_config.NumberColumn("Runs", format="%d"),
                                    **{k: v for k, v in _SUMMARY_CONFIG.items()
                                       if k in ("metric", "split", "met", "no_finite_sim", "worst_case")},
                                    **_pct_cols(mape="MAPE", median_ape="Median |error|", p90_ape="P90 |error|",
                                                worst_ape="Worst |error|", target="Target (MAPE <=)")})
        for _, r in tt[tt["note"] != ""].iterrows():
            st.caption(f"**{r['dataset']}, {metric_title(r['metric'])}, {r['split']}**: {r['note']}")
        mode = (doc.get("header") or {}).get("mode")
        if mode and str(mode).lower() != "full":
            st.warning(f"docs/validation/{TARGETS_NAME} was generated in {mode} mode (a smoke test, not the "
                       f"validation result); regenerate it with `{GENERATE_CMD}`.", icon=":material/warning:")
        bad = targets_disagreements(doc, tables) if tables else []
        if bad:
            st.warning(f"docs/validation/{TARGETS_NAME} and the per-run CSVs disagree on: " + "; ".join(bad)
                       + f".  Both are written by `{GENERATE_CMD}`; regenerate them together.",
                       icon=":material/sync_problem:")
    missing = [n for n, ok in ((f"docs/validation/{TARGETS_NAME}", doc is not None or doc_error),
                               ("the full report docs/validation.md", report is not None)) if not ok]
    if missing:
        st.info(f"Not generated yet: {' and '.join(missing)}.  Generate {'them' if len(missing) > 1 else 'it'} "
                f"(with the per-run CSVs) from the repository root with\n\n`{GENERATE_CMD}`\n\n(about 10 minutes; "
                "it reads the measurements shipped in engine/data/reference).", icon=":material/description:")
    if report is None:
        return
    _quick_report_warning(report)
    with st.expander("Full report: docs/validation.md", icon=":material/description:"):
        if doc is not None:
            st.caption(header_text(doc.get("header") or {}) + "  The charts on this page replace the report's PNG "
                       "plots.")
        st.markdown(report_body(report))


def _quick_report_warning(report: str | None) -> None:
    """A quick run writes targets_quick.json (and *_quick.csv) but its report to --out: when the latest run was
    quick and wrote docs/validation.md, the report shown is a smoke test's, not the targets' run."""
    quick, full = VALIDATION_DIR / QUICK_TARGETS_NAME, VALIDATION_DIR / TARGETS_NAME
    if report is None or not quick.is_file() or (full.is_file() and full.stat().st_mtime >= quick.stat().st_mtime):
        return
    try:
        q = load_targets(quick)
    except (ValueError, OSError):
        return
    if written_by_quick_run(q, VALIDATION_MD):
        st.warning(f"docs/validation.md was last written by a quick run (`{q['header']['command']}`: a smoke test, "
                   f"not the validation result); the targets above are docs/validation/{TARGETS_NAME}'s.  Regenerate "
                   f"the report with `{GENERATE_CMD}`.", icon=":material/warning:")


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
                f"docs/validation.md) from the repository root with\n\n`{GENERATE_CMD}`\n\n(about 10 minutes; it "
                "reads engine/data/reference; `--quick` writes `*_quick.csv` files, which this page does not "
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
    s = error_summary(table, extra, targets=C.dataset_targets(ds.key))
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
        st.download_button("Download CSV", data=exports.csv_bytes(table), file_name=ds.csv,
                           mime="text/csv", on_click="ignore", key=f"dl_val_{ds.key}", icon=":material/download:")


# ------------------------------------------------------------------ upload and fit
def _use_fitted(key: str = FIT_KEY) -> None:
    """Button callback: load the fitted scenario (``ss[key]``: the measurement-table fit, or the tool-file
    fit) into the shared controls (the scenario.json import path); the button then opens a page."""
    ss = st.session_state
    fit = ss.get(key)
    if not fit:
        return
    sc = Scenario.from_json(fit["scenario_json"])
    if fit["preset"] in presets.SCENARIOS:
        ss[controls.PRESET_KEY] = fit["preset"]
    issues = controls.apply_scenario(sc)
    ss.pop("_upload_error", None)
    vals = ", ".join(f"{p}={v:.4g}" for p, v in fit["values"].items())
    ss["_upload_msg"] = controls.restored_message(
        f"Loaded the scenario fitted to {fit['name']} (base: {fit['base_label']}; {vals}).", issues)


def _param_help() -> str:
    return "Cost-model parameters the fit may vary, each within its physical range:\n\n" + "\n".join(
        f"- **{C.PARAM_LABELS[p]}** (`{p}`): {lo:g} to {hi:g}" for p, (lo, hi) in C.FIT_BOUNDS.items())


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
        f"`{CALIBRATE_CMD}`.  (The result files `vllm bench serve`, GuideLLM and AIPerf write, as they write "
        "them, go into the Tool result files tab: their traffic is replayed run by run.)")
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
                                key="fit_params", help=_param_help(), format_func=C.param_label)
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
        st.warning(f"{', '.join(map(C.param_label, stuck))} stayed at the base value: the simulated metrics of "
                   "these rows did not respond to it (for instance, a base scenario with service_mode 'fixed' uses "
                   "fixed per-token times instead of the efficiencies), or the base value already fits best.",
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
        col.metric(C.param_label(p), f"{v:.4g}", f"{v - s0:+.3g} vs base {s0:.4g}", delta_color="off",
                   delta_arrow="off", help=f"Fitted value of {C.PARAM_LABELS.get(p, p)}, the scenario field `{p}`"
                                           f"{at_bound}; allowed range {lo:g} to {hi:g}.")

    b1, b2, _ = st.columns([1, 1, 2])
    b1.download_button("Fitted scenario.json", data=exports.scenario_json(Scenario.from_json(fit["scenario_json"])),
                       file_name="scenario_fitted.json", mime="application/json", on_click="ignore",
                       key="dl_fitted_scenario", icon=":material/download:", width="stretch",
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


# ------------------------------------------------------------------ benchmark tools' result files
_RUNS_CONFIG = {
    "run": st.column_config.TextColumn("Run", help="The file (file#k: its k-th run)."),
    "tool": st.column_config.TextColumn("Tool"),
    "version": st.column_config.TextColumn("Version", help="The tool / schema version the file states."),
    "traffic": st.column_config.TextColumn("Traffic", width="medium"),
    "rate_rps": st.column_config.NumberColumn("Rate (req/s)", format="%.4g",
                                              help="Offered request rate (inf: every request at t = 0)."),
    "burstiness": st.column_config.NumberColumn("Burstiness", format="%.3g",
                                                help="Gamma shape of the inter-arrival gaps (1 = Poisson)."),
    "concurrency": st.column_config.NumberColumn("Concurrency", format="%d",
                                                 help="Closed loop: clients.  Open loop: the tool's cap on "
                                                      "requests in flight (not modelled)."),
    "requests": st.column_config.NumberColumn("Requests", format="%d"),
    "failed": st.column_config.NumberColumn("Failed", format="%d"),
    "mean_in": st.column_config.NumberColumn("Mean prompt (tok)", format="%.1f"),
    "mean_out": st.column_config.NumberColumn("Mean output (tok)", format="%.1f"),
    "lengths": st.column_config.TextColumn("Lengths"),
    "duration_s": st.column_config.NumberColumn("Duration (s)", format="%.4g"),
    "ttfts": st.column_config.TextColumn("TTFTs"),
    "model_id": st.column_config.TextColumn("model_id"),
    "metrics": st.column_config.TextColumn("Metrics read", width="large"),
    "notes": st.column_config.TextColumn("Notes", width="medium"),
}


def _tool_key(field: str) -> str:
    return f"tool_{field}"


def _read_cached(files) -> tuple[str, list, dict]:
    """``read_uploads`` once per set of files (kept in session state, the last set only)."""
    ss = st.session_state
    digest = upload_digest(files)
    got = ss.get(_TOOL_READ)
    if not got or got[0] != digest:
        runs, errors = read_uploads(files)
        got = ss[_TOOL_READ] = (digest, runs, errors)
    return got


def _tool_base(state) -> tuple[str, Scenario | None, str | None]:
    options = [*presets.SCENARIOS, SIDEBAR_BASE]
    base = st.selectbox("Base scenario", options, key=_tool_key("base"),
                        index=options.index(state.preset) if state.preset in options else 0,
                        help="Where every setting a result file cannot state starts from (GPU, model, adapters, "
                             "strategy, cost model...): a preset, or the shared scenario set with the sidebar "
                             "controls of the What-if, Sweeps, Crossover and Plan pages.  Changing it refills the "
                             "form below.")
    if base == SIDEBAR_BASE:
        if state.scenario is None:
            return base, None, f"The shared scenario cannot be simulated ({state.error}); choose a preset."
        return base, state.scenario, None
    return base, Scenario.from_preset(base), None


def _tool_section(state) -> None:
    ss = st.session_state
    st.markdown(
        "Fit the simulator's cost model to **the result files your benchmark tool wrote**, as it wrote them: "
        "`vllm bench serve --save-result` (or `benchmarks/benchmark_serving.py`; with or without "
        "`--save-detailed`), a GuideLLM report (`benchmarks.json`) or an AIPerf export "
        "(`profile_export_aiperf.json`).  Each file is recognised from its own keys; its traffic (rate, "
        "burstiness, concurrency, lengths; the recorded send times and per-request lengths when the file has "
        "them) is replayed on the server you describe, and the file's metrics are computed the way the tool "
        "computes them.  Several files (a sweep) can be fitted together, one of them held out to check the "
        "fit.  The same fit on the command line: `python -m engine calibrate --data FILE [FILE ...] --preset "
        "NAME ... --out fitted.json`.")
    ups = st.file_uploader("Benchmark result files (JSON / JSON Lines)", type=["json", "jsonl"],
                           accept_multiple_files=True, key=_tool_key("upload"), max_upload_size=runner.MAX_UPLOAD_MB,
                           help=f"One or several result files, at most {runner.MAX_UPLOAD_MB} MB each: "
                                + C.formats_understood() + ".")
    if not ups:
        for k in (TOOL_FIT_KEY, TOOL_FIT_ERROR, _TOOL_PREFILL):
            ss.pop(k, None)
        st.caption(tool_work_cap_text())
        return
    files = [(f.name, f.getvalue()) for f in ups]
    digest, runs, errors = _read_cached(files)
    for msg in errors.values():
        st.error(msg, icon=":material/error:")
    fit = ss.get(TOOL_FIT_KEY)
    if fit and fit.get("digest") != digest:
        ss.pop(TOOL_FIT_KEY, None)
        ss.pop(TOOL_FIT_ERROR, None)
    if not runs:
        return
    if errors:
        st.caption(f"Left out (not read): {', '.join(errors)}.  The fit uses the {len(runs)} run(s) read.")

    n_files = len({r.source.split('#')[0] for r in runs})
    st.markdown(f"##### What the files say: {len(runs)} run(s) from {n_files} file(s)")
    st.dataframe(run_table(runs), hide_index=True, width="stretch", key=_tool_key("runs"),
                 column_config=_RUNS_CONFIG)
    with st.expander("As `python -m engine calibrate` prints it", icon=":material/terminal:"):
        st.code("\n".join(describe_run(r) for r in runs), language=None, wrap_lines=True)

    st.markdown("##### What the files cannot say: the server")
    base, base_sc, why = _tool_base(state)
    if why:
        st.error(why, icon=":material/error:")
        ss.pop(_TOOL_PREFILL, None)
        return
    values, notes = prefill(runs, base_sc)
    sig = (digest, base, base_sc.to_json())
    if ss.get(_TOOL_PREFILL) != sig or any(_tool_key(k) not in ss for k in values):
        for k, v in values.items():
            ss[_tool_key(k)] = v
        ss[_TOOL_PREFILL] = sig
    if notes:
        st.caption("Prefilled from the files: " + "; ".join(notes) + ".  Everything else comes from the base "
                   "scenario.")
    submitted, form = _tool_form(runs, base_sc)
    if submitted:
        ss.pop(TOOL_FIT_KEY, None)
        ss.pop(TOOL_FIT_ERROR, None)
        _run_tool_fit(runs, digest, base, base_sc, form)
    if ss.get(TOOL_FIT_ERROR):
        st.error(ss[TOOL_FIT_ERROR], icon=":material/error:")
    fit = ss.get(TOOL_FIT_KEY)
    if fit:
        _tool_result(fit)


def _metric_options(runs, base_sc: Scenario) -> list[str]:
    """Metrics every run has that the replay can compute (those of its Cases), the default ones first."""
    try:
        sets = [set(c.measured) for c in C.tool_cases(runs, base_sc)]
    except ValueError:  # the base cannot replay the runs (the fit will say why): the files' keys
        sets = [set(r.measured) for r in runs]
    common = set.intersection(*sets) if sets else set()
    return [m for m in C.DEFAULT_FIT_METRICS if m in common] + sorted(common - set(C.DEFAULT_FIT_METRICS))


def _tool_form(runs, base_sc: Scenario) -> tuple[bool, dict]:
    ss = st.session_state
    k = _tool_key
    gpus = list(presets.GPUS) + ([ss[k("gpu")]] if ss[k("gpu")] not in presets.GPUS else [])
    own = controls.model_options()  # the presets and this session's uploads, never another session's
    models = own + ([ss[k("model")]] if ss[k("model")] not in own else [])
    holds = hold_out_options(runs)
    if ss.get(k("hold_out")) not in holds:
        ss[k("hold_out")] = "none"
    metric_opts = _metric_options(runs, base_sc)
    ss[k("metrics")] = [m for m in ss.get(k("metrics"), []) if m in metric_opts]
    with st.form("tool_form"):
        c1, c2, c3, c4 = st.columns(4)
        c1.selectbox("GPU", gpus, key=k("gpu"), help="The GPU the server ran on (engine.presets GPUs).")
        c2.selectbox("Model", models, key=k("model"),
                     help="The served base model; prefilled from the file's model_id when it names a preset "
                          "model's Hugging Face repo.")
        c3.number_input("--max-loras", min_value=0, max_value=4096, step=1, key=k("max_loras"),
                        help="vLLM --max-loras: adapters resident on the GPU at once (0: limited by memory only).")
        c4.number_input("--max-cpu-loras", min_value=0, max_value=1 << 20, step=1, key=k("max_cpu_loras"),
                        help="vLLM --max-cpu-loras: the host adapter cache (0: unlimited).")
        c1, c2, c3, c4 = st.columns(4)
        c1.number_input("--max-lora-rank", min_value=1, max_value=1024, step=1, key=k("max_lora_rank"),
                        help="vLLM --max-lora-rank: every adapter at this rank; with --max-loras it also sets "
                             "the adapter budget vLLM reserves (when it differs from the base scenario's rank).")
        c2.number_input("Adapters", min_value=1, max_value=100_000, step=1, key=k("num_adapters"),
                        help="Adapters the requests chose from (the --lora-modules given to the benchmark).")
        c3.selectbox("Adapter popularity", POPULARITY_KINDS, key=k("popularity"),
                     help="How requests chose their adapter: uniform (vllm bench serve picks its --lora-modules "
                          "uniformly), Zipf with exponent S, or power with exponent A.")
        c4.number_input("Popularity exponent (S or A)", min_value=0.0, max_value=10.0, step=0.1, format="%.3g",
                        key=k("popularity_value"), help="Zipf S (>= 0) or power A (> 0); unused when uniform.")
        c1, c2, c3 = st.columns(3)
        c1.multiselect("Parameters to fit", list(C.FIT_BOUNDS), key=k("params"), help=_param_help(),
                       format_func=C.param_label)
        c2.multiselect("Metrics to fit", metric_opts, key=k("metrics"),
                       placeholder=", ".join(C.DEFAULT_FIT_METRICS) + " (default)",
                       help="Relative errors of these metrics are minimised; every metric the replay can compute "
                            "is reported.")
        if len(holds) > 1:
            c3.selectbox("Hold-out (not fitted, only evaluated)", holds, key=k("hold_out"),
                         format_func=lambda h: HOLD_OUT_LABELS.get(h, f"The file {h}"),
                         help="Runs left out of the fit and evaluated at the fitted values: a check on runs the "
                              "fit did not see.  At least one run must remain to fit.")
        else:
            c3.caption("Hold-out: one run, nothing to hold out (give several files to check the fit on one).")
        st.text_input("Other scenario fields (FIELD=VALUE, comma-separated)", key=k("fields"),
                      placeholder="e.g. max_batched_tokens=16384, kv_memory_mode=on_demand",
                      help="Any Scenario field the server differs in from the base (python -m engine calibrate "
                           "--set FIELD=VALUE).")
        st.caption(tool_work_cap_text())
        submitted = st.form_submit_button("Run the fit", type="primary", icon=":material/tune:", key=k("submit"))
    form = {f: ss[k(f)] for f in ("gpu", "model", "max_loras", "max_cpu_loras", "max_lora_rank", "num_adapters",
                                  "popularity", "popularity_value", "params", "metrics", "hold_out", "fields")}
    if len(holds) < 2:
        form["hold_out"] = "none"
    return submitted, form


def _run_tool_fit(runs, digest: str, base: str, base_sc: Scenario, form: dict) -> None:
    ss = st.session_state
    preset = None if base == SIDEBAR_BASE else base
    names = list(dict.fromkeys(r.source.split("#")[0] for r in runs))
    bar = st.progress(0.0, text="Replaying the runs...")
    try:
        settings = server_settings(form, base_sc)
        with st.spinner(f"Fitting {', '.join(form['params']) or 'nothing'} to {len(runs)} run(s)..."):
            fit = fit_tool_upload(runs, base_sc, settings, form["params"], form["metrics"], form["hold_out"], preset,
                                  "shared scenario" if preset is None else preset, names,
                                  progress=lambda f, t: bar.progress(f, text=t))
        fit["digest"] = digest
        ss[TOOL_FIT_KEY] = fit
    except ValueError as e:
        ss[TOOL_FIT_ERROR] = f"The fit refused these inputs: {_form_words(str(e))}"
    except Exception as e:  # never a traceback on the page
        ss[TOOL_FIT_ERROR] = f"The fit failed ({type(e).__name__}: {e})"
    bar.empty()


def _tool_result(fit: dict) -> None:
    held = fit["held_out"]
    st.success(f"Fitted {', '.join(fit['params'])} on {fit['n_train']} run(s)"
               + (f", {len(held)} held out ({', '.join(held)})" if held else "")
               + f" (base: {fit['base_label']}) in {fit['wall_s']:.1f} s: {fit['evaluations']} evaluations x "
               f"{fit['n_train']} run(s), {fit['simulations']:,} simulations in all (cap {MAX_FIT_SIMULATIONS:,}; at "
               f"most {fit['max_nfev']} iterations).  Optimiser: {fit['status']}", icon=":material/check_circle:")
    st.caption(f"Server: {fit['server']}."
               + "".join(f"  Note: {n}." for n in fit["server_notes"]))
    if fit["at_bounds"]:
        st.warning("The model cannot explain these runs with physical values: " + "; ".join(fit["at_bounds"])
                   + ".  The data push these parameters past their physical range: the fitted values are not "
                   "hardware properties and the fit is not trustworthy; check the server settings (GPU, model, "
                   "--max-loras, ...) and the runs.", icon=":material/report:")
    cols = st.columns(max(len(fit["params"]), 3))
    hits = {h.split(" = ")[0] for h in fit["at_bounds"]}
    for col, p in zip(cols, fit["params"]):
        v, s0 = fit["values"][p], fit["start"][p]
        lo, hi = fit["bounds"][p]
        delta = (f"at its {'lower' if abs(v - lo) <= abs(v - hi) else 'upper'} bound" if p in hits
                 else f"{v - s0:+.3g} vs start {s0:.4g}")
        col.metric(C.param_label(p), f"{v:.4g}", delta, delta_color="inverse" if p in hits else "off",
                   delta_arrow="off", help=f"Fitted value of {C.PARAM_LABELS.get(p, p)}, the scenario field `{p}` "
                                           f"(started at {s0:.4g}); allowed range {lo:g} to {hi:g}.")
    if fit["large_errors"]:
        errs = fit["large_errors"]
        more = f"; and {len(errs) - 10} more (see the table)" if len(errs) > 10 else ""
        st.warning(f"Error above {C.ERROR_FLAG:.0%} on {len(errs)} metric(s): " + "; ".join(errs[:10]) + more
                   + ".  The fitted scenario does not reproduce these runs there.", icon=":material/warning:")
    for n in fit["notes"]:
        st.info(n[:1].upper() + n[1:] + ".", icon=":material/info:")
    if fit["traffic_note"]:
        st.caption(f"The fitted scenario is the server with the fitted values and the {fit['traffic_note']} (as "
                   "Scenario fields).")

    st.markdown("##### Errors per metric and split")
    s = tool_summary(fit)
    s = _finite(s.assign(metric=s["metric"].map(metric_title)), ["worst_ape", "mape", "median_ape"])
    st.dataframe(s[["split", "metric", "fitted", "n", "mape", "median_ape", "worst_ape", "above_flag", "worst_case"]],
                 hide_index=True, width="stretch", key=_tool_key("fit_summary"),
                 column_config={**_SUMMARY_CONFIG, "fitted": st.column_config.CheckboxColumn("Fitted"),
                                "above_flag": st.column_config.CheckboxColumn(
                                    f"Above {C.ERROR_FLAG:.0%}", help="Worst |error| above the flag."),
                                "worst_case": st.column_config.TextColumn("Worst run")})
    st.caption("Error = simulated / measured - 1; train: the runs fitted, held-out: the runs only evaluated.  "
               "MAPE and median over runs with a finite simulated value.")
    head = fit["headline"]
    if len(head):
        st.markdown("##### Throughput, per-step cost and the TTFT distribution (mean, median, p99)")
        st.dataframe(_finite(head.assign(metric=head["metric"].map(metric_title)), ["mape", "p90_abs", "worst_abs"]),
                     hide_index=True, width="stretch", key=_tool_key("fit_headline"),
                     column_config={"split": st.column_config.TextColumn("Split"),
                                    "metric": st.column_config.TextColumn("Metric", width="medium"),
                                    "n_runs": st.column_config.NumberColumn("Runs", format="%d"),
                                    **_pct_cols(mape="MAPE", p90_abs="p90 |error|", worst_abs="Worst |error|")})
        st.caption("The TTFT distribution's mean, median and p99 side by side, per split (p90: the 90th percentile "
                   "over runs).  By default the fit minimises those the files have: "
                   f"{', '.join(C.DEFAULT_FIT_METRICS)}, relative errors weighted 1, the median TTFT "
                   f"{C.FIT_METRIC_WEIGHTS['median_ttft_ms']:g} and the p99 "
                   f"{C.FIT_METRIC_WEIGHTS['p99_ttft_ms']:g} (order statistics are noisier).  A server profile "
                   "made from this fit keeps these errors: held-out ones if runs were held out.")
    table = fit["table"]
    fitted = [m for m in fit["fitted_metrics"] if m in set(table["metric"])]
    if fitted:
        _scatters(table[table["metric"].isin(fitted)], height=320)
    with st.expander("Per-run errors", icon=":material/table_rows:"):
        cols = [c for c in ("split", "case", "metric", "measured", "simulated", "rel_error", "fitted") if c in table]
        st.dataframe(_finite(table[cols], ["rel_error"]), hide_index=True, width="stretch",
                     key=_tool_key("fit_rows"),
                     column_config={"case": st.column_config.TextColumn("Run"),
                                    "rel_error": st.column_config.NumberColumn("Error (sim / meas - 1)",
                                                                               format="percent"),
                                    "fitted": st.column_config.CheckboxColumn("Fitted")})
    dist = fit["distributions"]
    if len(dist):
        st.markdown("##### Per-request TTFT: measured against simulated")
        cfg = {"case": st.column_config.TextColumn("Run"), "split": st.column_config.TextColumn("Split"),
               "n_measured": st.column_config.NumberColumn("Measured requests", format="%d"),
               "n_simulated": st.column_config.NumberColumn("Simulated requests", format="%d"),
               "ks": st.column_config.NumberColumn("KS distance", format="%.3f",
                                                   help="Largest gap between the two empirical CDFs (0: identical, "
                                                        "1: disjoint).")}
        for c in dist.columns:
            m = re.match(r"p(\d+)_(measured|simulated)_ms$", c)
            if m:
                cfg[c] = st.column_config.NumberColumn(f"p{m.group(1)} {m.group(2)} (ms)", format="%.4g")
        order = [c for c in ("case", "split", "n_measured", "n_simulated", "ks") if c in dist]
        st.dataframe(_finite(dist[order + [c for c in dist.columns if c not in order]], ["ks"]), hide_index=True,
                     width="stretch", key=_tool_key("fit_ttft"), column_config=cfg)
        st.caption("Runs whose files list per-request TTFTs (vllm bench serve --save-detailed, GuideLLM): the "
                   "measured distribution against the simulated one at the fitted values.")

    st.markdown("##### Use it")
    sc = Scenario.from_json(fit["scenario_json"])
    b = st.columns(5)
    if b[0].button("Open on What-if", type="primary", key=_tool_key("open_whatif"), icon=":material/arrow_forward:",
                   width="stretch", on_click=_use_fitted, args=(TOOL_FIT_KEY,),
                   help="Loads the fitted scenario into the scenario controls and opens the What-if page."):
        st.switch_page(st.Page(page_whatif.render, url_path=WHATIF_PAGE), query_params={})
    if b[1].button("Open on Plan", key=_tool_key("open_plan"), icon=":material/target:", width="stretch",
                   on_click=_use_fitted, args=(TOOL_FIT_KEY,),
                   help="Loads the fitted scenario into the scenario controls and opens the Plan page: which GPU, "
                        "--max-loras and policy serve this traffic with the fitted cost model."):
        st.switch_page(st.Page(page_plan.render, url_path=PLAN_PAGE), query_params={})
    b[2].download_button("fitted.json", data=exports.scenario_json(sc), file_name="fitted.json",
                         mime="application/json", on_click="ignore", key=_tool_key("dl_fitted"),
                         icon=":material/download:", width="stretch",
                         help="The fitted scenario: `python -m engine run --scenario fitted.json`, or restore it on "
                              "the What-if page.")
    b[3].download_button("Provenance JSON", data=(json.dumps(fit["provenance"], indent=2, default=str) + "\n").encode(),
                         file_name="fitted_provenance.json", mime="application/json", on_click="ignore",
                         key=_tool_key("dl_provenance"), icon=":material/download:", width="stretch",
                         help="What the fitted scenario comes from: files, tools, date, split, errors, diagnostics "
                              "(as python -m engine calibrate writes it).")
    b[4].download_button("Errors CSV", data=exports.csv_bytes(table), file_name="fitted_errors.csv",
                         mime="text/csv", on_click="ignore", key=_tool_key("dl_errors"), icon=":material/download:",
                         width="stretch")
    _profile_part(fit)
    prov = fit["provenance"]
    with st.expander("Provenance", icon=":material/history_edu:"):
        st.markdown(f"Fitted on **{prov['created']}** from {', '.join(f'`{f}`' for f in prov['files'])} "
                    f"({', '.join(sorted({r['tool'] for r in prov['runs']}))}); the same fit on the command line "
                    "(the files saved under these names):")
        st.code(fit["command"], language="bash", wrap_lines=True)
        st.json(json.loads(json.dumps(prov, default=str)), expanded=1)


#: Server profiles one session may add from its fits (``_use_as_profile``).
MAX_SESSION_PROFILES = 20


def _use_as_profile() -> None:
    """Button callback: register the tool-file fit as this session's own server profile
    (``engine.presets.register_profile``), add it to the session's list (``controls.session_profiles``: only this
    session's Server control offers it) and select it there; the button then opens the What-if page."""
    ss = st.session_state
    fit = ss.get(TOOL_FIT_KEY)
    if not fit:
        return
    mine = controls.session_profiles()
    try:
        if len(mine) >= MAX_SESSION_PROFILES:
            raise ValueError(f"{len(mine)} profiles in this session; allowed: at most {MAX_SESSION_PROFILES} (a new "
                             "browser session starts with none)")
        p = presets.register_profile(**fit["profile_args"])
    except ValueError as e:
        ss[TOOL_FIT_ERROR] = f"The server profile was refused: {e}"
        fit.pop("profile_name", None)
        return
    ss[controls.FITTED_PROFILES_KEY] = [*(n for n in mine if n != p.name), p.name]
    ss["server"] = p.name
    fit["profile_name"] = p.name
    gpu, model = p.fitted_on
    if gpu in presets.GPUS and model in controls.model_options():  # the user's own server: its GPU and model
        ss["gpu"], ss["model"], ss["pcie_gbps"] = gpu, model, float(presets.GPUS[gpu].pcie_gbps)
    vals = ", ".join(f"{C.PARAM_LABELS.get(k, k)} {v:.4g}" for k, v in fit["values"].items())
    ss.pop("_upload_error", None)
    ss["_upload_msg"] = (f"Server profile {p.name} ({p.label}) added for this session and selected as the Server: "
                         f"the cost model fitted to {fit['name']} ({vals}) with {p.base}'s server settings; calibrated "
                         f"on {gpu} / {model}, transferred on another GPU or model (the badge above the results says "
                         "which, with its error band).")


def _profile_part(fit: dict) -> None:
    """The fit as the user's own server profile: what it holds, the button."""
    pa = fit["profile_args"]
    st.markdown("##### Your own server profile")
    errs = pa["errors"]
    split = next((e["split"] for e in errs.values()), "in-sample")
    st.caption(f"Use this fit as a server profile, like the built-in vLLM and S-LoRA ones: the fitted cost fields "
               f"with {pa['base']}'s server settings (its batch limits per GPU, memory, KV allocation, load path).  It "
               f"is *calibrated* on {pa['gpu']} / {pa['model']}, where it was fitted, and *transferred* on any other "
               "GPU or model; its error band is its own 90th-percentile error over "
               + ("the runs held out of the fit." if split == "held-out" else
                  "the fitted runs, never narrower than a transferred band (nothing was held out: hold out a run to "
                  "measure it).")
               + "  Only this browser session offers it in the sidebar's Server control.")
    if st.button("Use as my server profile", key=_tool_key("use_profile"), icon=":material/dns:",
                 on_click=_use_as_profile, help="Adds this fit as your server profile for this session, selects it "
                 "in the sidebar's Server control (every compared strategy then runs on it) and opens the What-if "
                 "page.") and fit.get("profile_name"):
        st.switch_page(st.Page(page_whatif.render, url_path=WHATIF_PAGE), query_params={})


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
    doc, doc_error = None, None
    try:
        doc = load_targets(VALIDATION_DIR / TARGETS_NAME)
    except (ValueError, OSError) as e:
        doc_error = f"docs/validation/{TARGETS_NAME}: {e}"
    # the report is shown as it is, never parsed for data (the targets are targets.json's)
    report = VALIDATION_MD.read_text(encoding="utf-8") if VALIDATION_MD.is_file() else None
    _targets_section(doc, doc_error, tables, report)
    tabs = st.tabs([*(ds.label for ds in DATASETS), "Fit your own benchmark"])
    for ds, tab in zip(DATASETS, tabs):
        with tab:
            _dataset_section(ds, raw[ds.key], errors.get(ds.key))
    with tabs[-1]:
        t_tools, t_table = st.tabs(["Tool result files", "Measurement table"])
        with t_tools:
            _tool_section(state)
        with t_table:
            _fit_form(state)
