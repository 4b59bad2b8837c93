"""Command line: ``python -m engine {run,warmup,presets,sweep,reproduce,findings,calibrate,validate,plan} ...``.

The top layer of the engine: it parses arguments and calls the model
(``run``, ``warmup``, ``presets``, here; ``sweep``, ``engine/cli/sweep.py``), the studies
(``engine/cli/studies.py``), the calibration (``engine/cli/calibration.py``) and the planner
(``engine/cli/plan.py``); nothing below imports it.

Bad input exits with code 2 and one line naming the field; never a traceback.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .common import Parser, fail, jsonable, load_scenario_file, parse_pairs


def cmd_run(a) -> int:
    from ..scenario import Scenario
    from ..sim import simulate
    from ..workload import read_trace
    try:
        over = parse_pairs(a.set)
        if a.strategy:
            over["strategy"] = a.strategy
        if a.scenario:
            sc = load_scenario_file(a.scenario)
            sc = sc.replace(**over) if over else sc
        else:
            sc = Scenario.from_preset(a.preset, **over)
        sc.validate()
        trace = None
        if a.trace:
            if not Path(a.trace).is_file():
                return fail(f"--trace: no such file {a.trace!r}")
            trace = read_trace(a.trace, sc)
        t0 = time.perf_counter()
        res = simulate(sc, trace=trace)
        wall = time.perf_counter() - t0
    except ValueError as e:
        return fail(str(e))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        res.requests.to_csv(out / "requests.csv", index=False)
        res.timeseries.to_csv(out / "timeseries.csv", index=False)
        res.events.to_csv(out / "events.csv", index=False)
        import pandas as pd
        pd.DataFrame([{"strategy": sc.strategy, **res.summary}]).to_csv(out / "summary.csv", index=False)
        (out / "scenario.json").write_text(sc.to_json())
        if sc.num_replicas > 1:  # a fleet: one row per replica, and the time series of each replica
            res.replicas.to_csv(out / "replicas.csv", index=False)
            res.timeseries_by_replica.to_csv(out / "timeseries_by_replica.csv", index=False)
    if a.json:
        print(json.dumps(jsonable(res.summary), allow_nan=False))
    else:
        s = res.summary
        print(f"{sc.strategy} on {sc.gpu}/{sc.model}: {s['requests']} requests, {s['completed']} completed "
              f"in {wall * 1e3:.0f} ms wall")
        for k in ("ttft_p50_ms", "ttft_p99_ms", "throughput_tok_s", "swap_rate", "swap_share_of_ttft",
                  "slo_attainment"):
            print(f"  {k:>20} = {s[k]:.4g}")
        if a.out:
            fleet = ", replicas.csv, timeseries_by_replica.csv" if sc.num_replicas > 1 else ""
            print(f"  wrote {a.out}/requests.csv, timeseries.csv, events.csv, summary.csv, scenario.json{fleet}")
    return 0


def cmd_warmup(a) -> int:
    """Compile (and cache) the jitted loop for every policy path."""
    from ..policies import STRATEGIES
    from ..scenario import Scenario
    from ..sim import simulate
    t0 = time.perf_counter()
    base = Scenario.from_preset("default", duration_s=2.0, warmup_s=0.5)
    for s in STRATEGIES:
        simulate(base.replace(strategy=s))
    print(f"warm: {len(STRATEGIES)} strategies in {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_presets(a) -> int:
    from .. import presets
    print("scenarios:", ", ".join(sorted(presets.SCENARIOS)))
    print("gpus:     ", ", ".join(presets.GPUS))
    print("models:   ", ", ".join(presets.MODELS))
    from ..policies import STRATEGIES
    print("strategies:", ", ".join(STRATEGIES))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m engine", description="LoRA What-If: simulate multi-LoRA serving on one GPU.")
    sub = p.add_subparsers(dest="cmd", parser_class=Parser)
    r = sub.add_parser("run", help="simulate one scenario")
    r.add_argument("--preset", default="default", help="scenario preset (see `presets`)")
    r.add_argument("--scenario", help="scenario.json to start from instead of a preset")
    r.add_argument("--strategy", help="scheduling strategy")
    r.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override a scenario field (repeatable)")
    r.add_argument("--trace", help="replay a trace CSV: arrival_s, adapter_id, prompt_tokens, output_tokens")
    r.add_argument("--out", help="directory for requests.csv, timeseries.csv, events.csv, summary.csv, scenario.json; "
                                 "a fleet (num_replicas > 1) adds replicas.csv (one row per replica) and "
                                 "timeseries_by_replica.csv (the time series of each replica)")
    r.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    r.set_defaults(func=cmd_run)
    w = sub.add_parser("warmup", help="compile and cache the jitted engine")
    w.set_defaults(func=cmd_warmup)
    pr = sub.add_parser("presets", help="list presets, GPUs, models and strategies")
    pr.set_defaults(func=cmd_presets)
    from . import calibration, plan, studies, sweep  # the commands of the layers below the CLI
    sweep.add_commands(sub)
    studies.add_commands(sub)
    calibration.add_commands(sub)
    plan.add_commands(sub)
    return p


def main(argv=None) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    if not getattr(a, "func", None):
        p.print_help()
        return 0
    return a.func(a)
