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

from ..limits import clip, short_repr, write_csv
from .common import Parser, fail, jsonable, load_scenario_file, parse_pairs

#: The top-level description of ``python -m engine --help``.
DESCRIPTION = ("LoRA What-If: simulate multi-LoRA LLM serving on one GPU or a fleet of GPUs behind a router\n"
               "(num_replicas), plan the GPUs and settings that meet an SLO, and calibrate the cost model to\n"
               "benchmark runs.")

#: The three worked examples ``--help`` ends with: (what it answers, the command), each runnable as printed
#: from the repository root (tests/test_cli_start.py parses them back out of the help).
EXAMPLES = (
    ("what-if: how S-LoRA scheduling does on the default scenario (TTFT, throughput, swaps)",
     "python -m engine run --preset default --strategy slora"),
    ("plan: which max_loras serves the most req/s at p99 TTFT <= 500 ms (and its vllm serve command)",
     "python -m engine plan --preset vllm-llama31-8b --slo ttft_p99_ms=500 --grid max_loras=8,16,32 --out out/plan"),
    ("calibrate: fit the cost model to a vllm bench serve result (then run --scenario out/fitted.json)",
     "python -m engine calibrate --data examples/vllm_bench_result.json --preset vllm-llama31-8b "
     "--out out/fitted.json"),
)
START_HERE = ("Start here (from the repository root; the first command compiles the engine, about 20 s):\n"
              + "".join(f"\n  # {what}\n  {cmd}\n" for what, cmd in EXAMPLES).rstrip("\n"))


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
        write_csv(res.requests, out / "requests.csv", index=False)
        write_csv(res.timeseries, out / "timeseries.csv", index=False)
        write_csv(res.events, out / "events.csv", index=False)
        import pandas as pd
        write_csv(pd.DataFrame([{"strategy": sc.strategy, **res.summary}]), out / "summary.csv", index=False)
        (out / "scenario.json").write_text(sc.to_json())
        if sc.num_replicas > 1:  # a fleet: one row per replica, and the time series of each replica
            write_csv(res.replicas, out / "replicas.csv", index=False)
            write_csv(res.timeseries_by_replica, out / "timeseries_by_replica.csv", index=False)
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


#: The preset every command starts from when ``--preset`` is not given (``run``, ``sweep``, ``plan``, ``calibrate``).
DEFAULT_PRESET = "default"
#: Columns ``presets`` keeps its tables within.
WIDTH = 100

PRESETS_JSON_HELP = """\
--json prints one object:
  default_preset  the preset every command uses when --preset is not given
  scenarios       [{name, description, status, status_preset, default}] in the table's order; status:
                  calibrated | transferred | modified | uncalibrated (engine.calibration.calibration_status),
                  status_preset: the calibrated preset it refers to (null if none), default: true for one
  gpus            [{name, memory_gib, label}]
  models          [{name, n_params, label}]
  strategies      [{name, role, description}]; role: policy | bound | baseline"""

#: What each calibration status means (the legend under the table).
STATUS_LEGEND = ("calibrated: cost model fitted to measurements (docs/validation.md); transferred: a calibrated "
                 "preset's fitted values on another GPU or model; modified: a calibrated GPU/model with other cost "
                 "parameters; uncalibrated: spec-sheet roofline or stated per-token times.")


def presets_info() -> dict:
    """What ``presets`` lists: scenario presets (description, calibration status, default), GPUs, models,
    strategies (the object ``presets --json`` prints; its keys: ``PRESETS_JSON_HELP``)."""
    from .. import presets
    from ..calibration import calibration_status
    from ..policies import STRATEGIES
    from ..scenario import Scenario
    scenarios = []
    for name in presets.SCENARIOS:
        st = calibration_status(Scenario.from_preset(name))
        scenarios.append(dict(name=name, description=presets.DESCRIPTIONS.get(name, ""), status=st.kind,
                              status_preset=st.preset, default=name == DEFAULT_PRESET))
    return dict(
        default_preset=DEFAULT_PRESET,
        scenarios=scenarios,
        gpus=[dict(name=g.name, memory_gib=g.memory_gib, label=g.label) for g in presets.GPUS.values()],
        models=[dict(name=m.name, n_params=m.n_params, label=m.label) for m in presets.MODELS.values()],
        strategies=[dict(name=s.name, role=s.role, description=s.description) for s in STRATEGIES.values()],
    )


def _table(header: tuple, rows: list[tuple], marks: list[str] | None = None, width: int = WIDTH) -> list[str]:
    """Aligned columns, a two-character margin (``marks``, e.g. ``"* "``) and the last column wrapped to ``width``."""
    import re
    import textwrap
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)][:-1]
    last = max(width - 2 - sum(w + 2 for w in widths), 20)
    lines = []
    for mark, row in zip(["  ", *(marks or ["  "] * len(rows))], [header, *rows]):
        head = "".join(f"{str(c):<{w}}  " for c, w in zip(row[:-1], widths))
        # a number stays on the line of its unit ("80 GB", "16 req/s")
        text = re.sub(r"(?<=\d) (?=(?:GB|GiB|MB|MiB|req/s|ms|s|%)(?!\w))", "\xa0", str(row[-1]))
        wrapped = [w.replace("\xa0", " ") for w in
                   textwrap.wrap(text, last, break_long_words=False, break_on_hyphens=False)] or [""]
        lines.append((mark + head + wrapped[0]).rstrip())
        lines += [" " * (2 + len(head)) + w for w in wrapped[1:]]
    return lines


def cmd_presets(a) -> int:
    import textwrap
    info = presets_info()
    if a.json:
        print(json.dumps(info))
        return 0
    sc = info["scenarios"]
    out = [f"Scenario presets (--preset NAME; * = {info['default_preset']}, used when --preset is not given):"]
    out += _table(("NAME", "STATUS", "DESCRIPTION"), [(s["name"], s["status"], s["description"]) for s in sc],
                  ["* " if s["default"] else "  " for s in sc])
    out += textwrap.wrap(STATUS_LEGEND, WIDTH, initial_indent="  ", subsequent_indent="  ")
    out += ["", "GPUs (--set gpu=NAME):"]
    out += _table(("NAME", "MEMORY", "LABEL"), [(g["name"], f"{g['memory_gib']:g} GiB", g["label"])
                                               for g in info["gpus"]])
    out += ["", "Models (--set model=NAME):"]
    out += _table(("NAME", "PARAMS", "LABEL"), [(m["name"], f"{m['n_params'] / 1e9:.2f} B", m["label"])
                                               for m in info["models"]])
    out += ["", "Strategies (--strategy NAME):"]
    out += _table(("NAME", "ROLE", "DESCRIPTION"), [(s["name"], s["role"], s["description"])
                                                   for s in info["strategies"]])
    print("\n".join(out))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m engine", description=DESCRIPTION, epilog=START_HERE,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", parser_class=Parser)
    r = sub.add_parser("run", help="simulate one scenario (one GPU, or a fleet with --set num_replicas=N)")
    r.add_argument("--preset", default=DEFAULT_PRESET, help="scenario preset (see `presets`)")
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
    pr = sub.add_parser("presets", help="list scenario presets (description, calibration status), GPUs, models "
                        "and strategies", epilog=PRESETS_JSON_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_argument("--json", action="store_true", help="print one JSON object (keys below)")
    pr.set_defaults(func=cmd_presets)
    from . import calibration, live, plan, studies, sweep  # the commands of the layers below the CLI
    sweep.add_commands(sub)
    live.add_commands(sub)
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
    try:
        return a.func(a)
    except OSError as e:  # e.g. an --out that cannot be written: one line, exit 2, never a traceback
        where = f"{short_repr(e.filename)}: " if e.filename else ""
        return fail(f"{where}{e.strerror or e}")
    except (ValueError, RecursionError, MemoryError) as e:
        return fail(clip(str(e)))
