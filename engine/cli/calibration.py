"""CLI commands of the calibration: ``calibrate`` (fit cost-model parameters to measured runs) and
``validate`` (fit to the reference data, write the validation report).  Uses ``engine.calibration``;
nothing there imports this module.

``calibrate --data`` takes benchmark tools' result files (``vllm bench serve`` /
``benchmark_serving.py``, GuideLLM, AIPerf; several files or a directory: a sweep), replays each
run's own traffic, and fits on all of them or on a train split (``--hold-out``); or one
measurement table (CSV/JSON of metric columns plus Scenario fields), as before.  The server's
settings, which no result file states, come from ``--preset`` / ``--scenario`` and the options
``--gpu``, ``--model``, ``--max-loras``, ``--max-cpu-loras``, ``--max-lora-rank``,
``--num-adapters``, ``--popularity`` and ``--set FIELD=VALUE``.  The output names the fitted parameters in
words with their units (``PARAM_LABELS``) and, for tool files, the TTFT mean / median / p99 errors beside
throughput and TPOT per split; ``--profile-out`` writes the fit as the user's own server profile (JSON,
``engine.presets.profile_from_dict``).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd

from ..calibration import (
    DEFAULT_FIT_METRICS,
    DEFAULT_PARAMS,
    FIT_BOUNDS,
    HOLD_OUT_CHOICES,
    _check_params,
    at_bounds,
    fit,
    fit_tool_runs,
    headline_text,
    is_tool_file,
    load_measurements,
    param_label,
    profile_args,
    provenance,
    read_tool_files,
    run_validation,
    server_scenario,
    summarize_errors,
    tool_paths,
)
from ..limits import write_csv
from ..presets.servers import profile_to_dict, register_profile
from ..scenario import Scenario, coerce
from .common import fail, load_scenario_file, parse_pairs, positive_int


def _fmt_table(t: pd.DataFrame) -> str:
    return t.to_string(index=False, float_format=lambda x: f"{x:.4g}")


def _bounds_warning(values: dict) -> list[str]:
    hits = at_bounds(values)
    if not hits:
        return []
    return [f"WARNING: the model cannot explain these runs with physical values: {'; '.join(hits)}.  The data push "
            "these parameters past their physical range: the fitted values are not hardware properties and the "
            "fit is not trustworthy; check the server settings (--gpu, --model, --max-loras, ...) and the runs."]


def _base(a) -> Scenario:
    if a.scenario:
        return load_scenario_file(a.scenario)
    return Scenario.from_preset(a.preset or "default")


#: What ``calibrate --observed`` fits by default: the per-step overhead, the front end's latency per request, the
#: LoRA cost per distinct adapter in a step, the fixed part of an adapter load and of its read from disk on a
#: host-cache miss (on a small model on a CPU the roofline's efficiencies barely move a step: --params adds them).
OBSERVED_PARAMS = ("step_overhead_ms", "frontend_ms", "lora_ms_per_adapter", "load_latency_ms", "disk_latency_ms")


def observed_base(path) -> Scenario:
    """The twin of an observed run (its server, model and device); the device measured now when the run has none."""
    from ..calibration.readers.observed import twin_base
    from ..limits import loads_json
    p = Path(path)
    f = p / "run.json" if p.is_dir() else p
    obj = loads_json(f.read_text(), str(f))
    if not obj.get("device"):
        from ..live.device import cpu_device
        from ..presets import gpu_to_dict
        obj["device"] = gpu_to_dict(cpu_device())
        print(f"device: {obj['device']['label']} (measured now: the run has no device; {obj['device']['source']})")
    return twin_base(obj, str(p))


def _settings(a) -> dict:
    over = parse_pairs(a.set)
    for k, v in over.items():
        over[k] = coerce(k, v)
    return dict(gpu=a.gpu, model=a.model, max_loras=a.max_loras, max_cpu_loras=a.max_cpu_loras,
                max_lora_rank=a.max_lora_rank, num_adapters=a.num_adapters, popularity=a.popularity, overrides=over)


def cmd_calibrate(a) -> int:
    try:
        params = [p.strip() for p in a.params.split(",") if p.strip()] if a.params else list(DEFAULT_PARAMS)
        _check_params(params, None)
        base = _base(a)
        settings = _settings(a)
        metrics = [m.strip() for m in a.metrics.split(",") if m.strip()] if a.metrics else None
        if bool(a.data) == bool(a.observed):
            raise ValueError("--data / --observed: give one of them (result files, or observe --out directories)")
        if a.observed:
            paths = tool_paths(a.observed)
            if not a.params:
                params = list(OBSERVED_PARAMS)
            if not a.scenario and a.preset is None:
                base = observed_base(paths[0])
            return _calibrate_tools(a, base, settings, params, metrics, paths)
        paths = tool_paths(a.data)
        tools = [is_tool_file(p) for p in paths]
        if any(tools):
            if not all(tools):
                bad = next(p for p, t in zip(paths, tools) if not t)
                raise ValueError(f"data: {bad} is not a tool result file, the others are; give tool files only, or "
                                 "one measurement table")
            return _calibrate_tools(a, base, settings, params, metrics, paths)
        if len(paths) > 1:
            raise ValueError("data: several measurement tables; give one table (it may hold many rows), or tool "
                             "result files")
        if a.hold_out:
            raise ValueError("--hold-out: needs benchmark tool result files (a measurement table is fitted whole)")
        if a.profile_out:
            raise ValueError("--profile-out: needs benchmark tool result files (a server profile is fitted from them)")
        base, _ = server_scenario(base, [], **settings)
        data = load_measurements(paths[0], base=base)
        res = fit(base, data, params=params, metrics=metrics, max_nfev=a.max_nfev)
    except ValueError as e:
        return fail(str(e))
    ign = data.attrs.get("ignored_columns", [])
    if ign:
        print(f"ignored columns (not metrics or scenario fields): {', '.join(ign)}")
    print(f"fitted in {res.wall_s:.1f} s, {res.nfev} evaluations ({res.status})")
    _print_values(res)
    for w in _bounds_warning(res.values):
        print(w)
    cols = ["case", "metric", "measured", "simulated", "rel_error"]
    print(_fmt_table(res.table[cols]))
    print(_fmt_table(summarize_errors(res.table)))
    try:
        out, err = _write_fit(a.out, res.scenario, res.table)
    except OSError as e:
        return fail(f"--out: cannot write {a.out!r} ({e.strerror})")
    print(f"wrote {out} and {err}")
    return 0


def _describe(r) -> str:
    if r.arrival == "closed":
        traffic = f"closed loop of {r.concurrency}"
    elif r.arrival == "burst":
        traffic = f"{r.num_requests} requests at t = 0 (rate inf)"
    else:
        kind = {"poisson": "Poisson", "constant": "constant gaps",
                "gamma": f"Gamma, burstiness {r.burstiness:g} (CV {1 / math.sqrt(r.burstiness):.3g})"}[r.arrival]
        traffic = f"{r.rate_rps:g} req/s {kind}, {r.num_requests} requests"
    lens = "per-request lengths" if r.detailed else "fixed lengths"
    return (f"  {r.source}: {r.tool} ({r.version or 'version not stated'}): {traffic}; {r.mean_in:.1f} / "
            f"{r.mean_out:.1f} tokens mean ({lens}); duration {r.duration_s:.4g} s; metrics "
            f"{', '.join(sorted(r.measured))}" + "".join(f"\n      note: {n}" for n in r.notes))


def _calibrate_tools(a, base, settings, params, metrics, paths) -> int:
    runs = read_tool_files(paths)
    server, notes = server_scenario(base, runs, **settings)
    print(f"read {len(runs)} run(s) from {len(paths)} file(s):")
    for r in runs:
        print(_describe(r))
    print(f"server: {server.gpu} / {server.model}, strategy {server.strategy}, max_loras {server.max_loras}, "
          f"max_cpu_loras {server.max_cpu_loras}, {server.num_adapters} adapters (rank {server.adapter_rank}), "
          f"popularity {server.popularity}" + "".join(f"\n  note: {n}" for n in notes))
    tf = fit_tool_runs(runs, server, params=params, metrics=metrics, hold_out=a.hold_out, max_nfev=a.max_nfev)
    res = tf.result
    n_test = sum(tf.held_out)
    print(f"fitted on {len(runs) - n_test} run(s), {n_test} held out, in {res.wall_s:.1f} s, {res.nfev} evaluations "
          f"({res.status})")
    _print_values(res)
    for w in _bounds_warning(res.values):
        print(w)
    if tf.large_errors:
        shown = tf.large_errors[:10]
        more = f"; and {len(tf.large_errors) - 10} more (see the table)" if len(tf.large_errors) > 10 else ""
        print(f"WARNING: error above 25 % on {len(tf.large_errors)} metric(s): " + "; ".join(shown) + more
              + ".  The fitted preset does not reproduce these runs there.")
    for n in tf.notes[1:]:
        print(f"note: {n}")
    cols = ["split", "case", "metric", "measured", "simulated", "rel_error", "fitted"]
    print(_fmt_table(tf.table[cols]))
    print(_fmt_table(tf.summary()))
    print("errors, |simulated / measured - 1| (MAPE; p90 over runs): throughput, per-step cost, TTFT mean / median "
          "/ p99:")
    for line in headline_text(tf.table):
        print(f"  {line}")
    if len(tf.distributions):
        print("per-request TTFT, measured vs simulated (KS = largest gap between the two CDFs):")
        print(_fmt_table(tf.distributions))
    try:
        out, err = _write_fit(a.out, tf.scenario, tf.table)
        prov = out.with_name(out.stem + "_provenance.json")
        cmd = "python -m engine " + " ".join(sys.argv[1:]) if sys.argv else ""
        prov.write_text(json.dumps(provenance(tf, paths, params, cmd), indent=2, default=str) + "\n")
    except OSError as e:
        return fail(f"--out: cannot write {a.out!r} ({e.strerror})")
    print(f"fitted scenario: {tf.notes[0]}")
    print(f"wrote {out} (python -m engine run --scenario {out}), {err} and {prov}")
    if a.profile_out:
        try:
            args = profile_args(tf, paths, a.profile_name or "", when=json.loads(prov.read_text())["created"][:10])
            p = register_profile(**args)
            dest = Path(a.profile_out)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(json.dumps(profile_to_dict(p), indent=2) + "\n")
        except ValueError as e:
            return fail(f"--profile-out: {e}")
        except OSError as e:
            return fail(f"--profile-out: cannot write {a.profile_out!r} ({e.strerror})")
        print(f"wrote {dest}: server profile {p.name!r} ({p.base}'s server, fitted on {p.fitted_on[0]} / "
              f"{p.fitted_on[1]}; errors {'held out' if any(e['split'] == 'held-out' for e in p.errors.values()) else 'in-sample only'}; "
              "engine.presets.profile_from_dict registers it)")
    return 0


def _print_values(res) -> None:
    """The fitted values, each under its name in words with the field name (``PARAM_LABELS``)."""
    w = max(len(param_label(p)) for p in res.values)
    for p, v in res.values.items():
        print(f"  {param_label(p):>{w}} = {v:.6g}   (start {res.start[p]:.6g})")


def _write_fit(out_arg: str, scenario: Scenario, table) -> tuple[Path, Path]:
    """Write the fitted scenario to ``out_arg`` and its error table beside it (``<stem>_errors.csv``)."""
    out = Path(out_arg)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(scenario.to_json() + "\n")
    err = out.with_name(out.stem + "_errors.csv")
    write_csv(table, err, index=False)
    return out, err


def cmd_validate(a) -> int:
    try:
        run_validation(Path(a.out), quick=a.quick, plots=not a.no_plots)
    except ValueError as e:
        return fail(str(e))
    return 0


def add_commands(sub) -> None:
    c = sub.add_parser("calibrate", help="fit cost-model parameters to measured runs")
    c.add_argument("--observed", nargs="+", action="extend", metavar="DIR",
                   help="observed runs (python -m engine observe --out directories, or a directory of them): fitted "
                   "request by request on the server, model and device they record")
    c.add_argument("--data", nargs="+", action="extend", metavar="FILE_OR_DIR",
                   help="benchmark result files (vllm bench serve / benchmark_serving.py --save-result JSON, GuideLLM "
                   "benchmarks.json, AIPerf profile_export_aiperf.json; several files or a directory = a sweep), or "
                   "one measurement table: CSV/JSON/JSONL with vllm-bench-serve metric columns and scenario fields "
                   "as extra columns")
    c.add_argument("--preset", default=None, help="base scenario preset (the server's settings; default: default, or "
                   "an observed run's own server)")
    c.add_argument("--scenario", help="base scenario.json instead of a preset")
    c.add_argument("--out", required=True, help="fitted scenario JSON (errors CSV and, for tool files, provenance "
                   "JSON written next to it)")
    c.add_argument("--params", help=f"comma-separated parameters to fit (default {','.join(DEFAULT_PARAMS)}); "
                   f"allowed: {', '.join(FIT_BOUNDS)}")
    c.add_argument("--metrics", help="comma-separated metrics to fit (default: all present for a table; those of "
                   f"{', '.join(DEFAULT_FIT_METRICS)} a tool file has, relative errors weighted 1, median TTFT 0.5, "
                   "p99 TTFT 0.25)")
    c.add_argument("--max-nfev", type=int, default=60, help="cap on objective evaluations")
    g = c.add_argument_group("the server (what a result file cannot say; default: the base scenario's)")
    g.add_argument("--gpu", help="GPU preset")
    g.add_argument("--model", help="model preset (default: the preset whose HF repo id the file's model_id names)")
    g.add_argument("--max-loras", type=int, help="vLLM --max-loras (GPU adapter slots)")
    g.add_argument("--max-cpu-loras", type=int, help="vLLM --max-cpu-loras (host adapter cache)")
    g.add_argument("--max-lora-rank", "--adapter-rank", dest="max_lora_rank", type=positive_int("--max-lora-rank"),
                   help="vLLM --max-lora-rank: adapter rank, and with --max-loras the adapter budget vLLM reserves")
    g.add_argument("--num-adapters", type=positive_int("--num-adapters"), help="adapters the requests chose from")
    g.add_argument("--popularity", help="how requests chose adapters: uniform (vllm bench serve's --lora-modules "
                   "pick; the default for its files), zipf:S, power:A")
    g.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override any scenario field (repeatable)")
    c.add_argument("--hold-out", help=f"runs not fitted, only evaluated: {', '.join(HOLD_OUT_CHOICES)} "
                   "(default none: fit on all)")
    c.add_argument("--profile-out", metavar="PATH", help="tool files: also write the fit as your own server profile "
                   "(JSON: the fitted cost fields, the GPU and model, the errors per metric, held-out if --hold-out; "
                   "engine.presets.profile_from_dict registers it)")
    c.add_argument("--profile-name", metavar="NAME", help="the profile's name (default my-vllm / my-slora; a name "
                   "taken by another profile gets a hash suffix)")
    c.set_defaults(func=cmd_calibrate)
    v = sub.add_parser("validate", help="fit to the reference data and write the validation report")
    v.add_argument("--out", default="docs/validation.md", help="markdown report path")
    v.add_argument("--quick", action="store_true", help="few runs, short windows (smoke test)")
    v.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    v.set_defaults(func=cmd_validate)
