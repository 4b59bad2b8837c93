"""CLI commands of the calibration: ``calibrate`` (fit cost-model parameters to measured runs) and
``validate`` (fit to the reference data, write the validation report).  Uses ``engine.calibration``;
nothing there imports this module."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..calibration import (
    DEFAULT_PARAMS,
    FIT_BOUNDS,
    _check_params,
    fit,
    load_measurements,
    run_validation,
    summarize_errors,
)
from ..scenario import Scenario
from .common import fail


def _fmt_table(t: pd.DataFrame) -> str:
    return t.to_string(index=False, float_format=lambda x: f"{x:.4g}")


def cmd_calibrate(a) -> int:
    try:
        params = [p.strip() for p in a.params.split(",") if p.strip()] if a.params else list(DEFAULT_PARAMS)
        _check_params(params, None)
        if a.scenario:
            try:
                base = Scenario.from_json(Path(a.scenario).read_text())
            except OSError as e:
                return fail(f"--scenario: cannot read {a.scenario!r} ({e.strerror})")
        else:
            base = Scenario.from_preset(a.preset)
        data = load_measurements(a.data, base=base)
        metrics = [m.strip() for m in a.metrics.split(",")] if a.metrics else None
        res = fit(base, data, params=params, metrics=metrics, max_nfev=a.max_nfev)
    except ValueError as e:
        return fail(str(e))
    ign = data.attrs.get("ignored_columns", [])
    if ign:
        print(f"ignored columns (not metrics or scenario fields): {', '.join(ign)}")
    print(f"fitted in {res.wall_s:.1f} s, {res.nfev} evaluations ({res.status})")
    for p, v in res.values.items():
        print(f"  {p:>20} = {v:.6g}   (start {res.start[p]:.6g})")
    cols = ["case", "metric", "measured", "simulated", "rel_error"]
    print(_fmt_table(res.table[cols]))
    print(_fmt_table(summarize_errors(res.table)))
    out = Path(a.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(res.scenario.to_json() + "\n")
        err = out.with_name(out.stem + "_errors.csv")
        res.table.to_csv(err, index=False)
    except OSError as e:
        return fail(f"--out: cannot write {a.out!r} ({e.strerror})")
    print(f"wrote {out} and {err}")
    return 0


def cmd_validate(a) -> int:
    try:
        run_validation(Path(a.out), quick=a.quick, plots=not a.no_plots)
    except ValueError as e:
        return fail(str(e))
    return 0


def add_commands(sub) -> None:
    c = sub.add_parser("calibrate", help="fit cost-model parameters to measured runs")
    c.add_argument("--data", required=True, help="measurements: CSV/JSON/JSONL with vllm-bench-serve metric "
                   "columns and scenario fields as extra columns")
    c.add_argument("--preset", default="default", help="base scenario preset")
    c.add_argument("--scenario", help="base scenario.json instead of a preset")
    c.add_argument("--out", required=True, help="fitted scenario JSON (errors CSV written next to it)")
    c.add_argument("--params", help=f"comma-separated parameters to fit (default {','.join(DEFAULT_PARAMS)}); "
                   f"allowed: {', '.join(FIT_BOUNDS)}")
    c.add_argument("--metrics", help="comma-separated metric columns to fit (default: all present)")
    c.add_argument("--max-nfev", type=int, default=60, help="cap on objective evaluations")
    c.set_defaults(func=cmd_calibrate)
    v = sub.add_parser("validate", help="fit to the reference data and write the validation report")
    v.add_argument("--out", default="docs/validation.md", help="markdown report path")
    v.add_argument("--quick", action="store_true", help="few runs, short windows (smoke test)")
    v.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    v.set_defaults(func=cmd_validate)

