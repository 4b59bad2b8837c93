"""CLI commands of the live layer: ``reference-server`` (start vLLM's CPU build over a built model and adapters),
``observe`` (drive a server with a scenario's traffic and record it) and ``replay`` (an observed run against the
twin: measured vs simulated per metric, per adapter, and the TTFT distribution).  ``calibrate --observed`` fits a
profile to observed runs (``engine/cli/calibration.py``)."""
from __future__ import annotations

import json
import math
import signal
import time
from pathlib import Path

from ..calibration import replay_observed
from ..limits import write_csv
from ..live import ReferenceServer, ReferenceSpec, observe
from ..live.device import cpu_device, measure
from ..presets import gpu_to_dict
from ..scenario import Scenario
from .common import fail, load_scenario_file, parse_pairs


def _spec(a) -> ReferenceSpec:
    return ReferenceSpec.from_strings(parse_pairs(a.server, "--server"))


def cmd_reference_server(a) -> int:
    try:
        srv = ReferenceServer(_spec(a), log_path=Path(a.log) if a.log else None, start_timeout_s=a.start_timeout)
        print(f"building the model and {srv.spec.num_adapters} adapters, starting vLLM on {srv.url} (log {srv.log_path})",
              flush=True)
        srv.start()
    except ValueError as e:
        return fail(str(e))
    print(f"ready in {srv.startup_s:.1f} s: {srv.url} (adapters {', '.join(srv.spec.adapter_names[:8])}"
          f"{' ...' if srv.spec.num_adapters > 8 else ''})", flush=True)
    if a.info:
        Path(a.info).write_text(json.dumps(srv.description(), indent=2) + "\n")
        print(f"wrote {a.info} (give it to observe --server-info)")
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        t_end = time.monotonic() + a.serve_for if a.serve_for else math.inf
        while not stop["now"] and time.monotonic() < t_end and srv.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
    print("stopped")
    return 0


def _traffic(a) -> Scenario:
    over = parse_pairs(a.set)
    sc = load_scenario_file(a.scenario) if a.scenario else Scenario.from_preset(a.preset)
    return sc.replace(**over) if over else sc


def cmd_observe(a) -> int:
    try:
        sc = _traffic(a)
        names = [x.strip() for x in a.adapters.split(",") if x.strip()] if a.adapters else None
        device = gpu_to_dict(cpu_device(measure())) if (a.reference or a.measure_device) else None
        kw = dict(out_dir=a.out, adapters=names, max_requests=a.max_requests, request_timeout_s=a.request_timeout,
                  drain_timeout_s=a.drain_timeout, metrics_period_s=a.metrics_period, device=device, progress=True)
        if a.reference:
            if a.url:
                raise ValueError("--url: not with --reference (which starts its own server)")
            with ReferenceServer(_spec(a)) as srv:
                print(f"reference server ready in {srv.startup_s:.1f} s at {srv.url}", flush=True)
                obs = observe(srv.url, sc, server=srv.description(), **kw)
        else:
            if not a.url:
                raise ValueError("--url: missing; allowed: the server's base URL (http://HOST:PORT), or --reference")
            info = json.loads(Path(a.server_info).read_text()) if a.server_info else None
            obs = observe(a.url, sc, server=info, **kw)
    except ValueError as e:
        return fail(str(e))
    s = obs.summary()
    print(f"observed {s['sent']} requests: {s['ok']} ok, {s['failed']} failed "
          + (f"({', '.join(f'{k} {v}' for k, v in s['by_status'].items() if k != 'ok')})" if s["failed"] else ""))
    for k in ("request_throughput", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms"):
        if k in s:
            print(f"  {k:>20} = {s[k]:.4g}")
    errs = obs.requests[obs.requests["status"] != "ok"]
    for e in errs["error"].dropna().unique()[:3]:
        print(f"  error: {e}")
    if a.out:
        print(f"wrote {a.out}/requests.csv, timeseries.csv, run.json (python -m engine replay --observed {a.out})")
    return 0


def cmd_replay(a) -> int:
    try:
        sc = load_scenario_file(a.scenario) if a.scenario else None
        t = replay_observed(a.observed, sc)
    except ValueError as e:
        return fail(str(e))
    fmt = lambda d: d.to_string(index=False, float_format=lambda x: f"{x:.4g}")
    print("measured vs simulated (rel_error = simulated / measured - 1):")
    print(fmt(t["metrics"]))
    print("per adapter, TTFT:")
    print(fmt(t["adapters"]))
    print("TTFT distribution (KS = largest gap between the two CDFs):")
    print(fmt(t["ttft"]))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        for k, d in t.items():
            write_csv(d, out / f"replay_{k}.csv", index=False)
        print(f"wrote {out}/replay_metrics.csv, replay_adapters.csv, replay_ttft.csv, replay_timeseries.csv, replay_requests.csv")
    return 0


def _server_arg(p) -> None:
    p.add_argument("--server", action="append", metavar="FIELD=VALUE",
                   help="reference server field (repeatable): max_loras, max_cpu_loras, max_lora_rank, kv_cache_gib, "
                   "max_num_seqs, max_num_batched_tokens, prefix_caching, num_adapters, adapter_ranks (comma list), "
                   "target_modules, hidden_size, num_layers, ... (engine.live.ReferenceSpec)")


def add_commands(sub) -> None:
    r = sub.add_parser("reference-server", help="start vLLM's CPU build over a small built model and peft adapters "
                       "(needs requirements-live.txt in .venv-live or LORA_WHATIF_LIVE_PYTHON)")
    _server_arg(r)
    r.add_argument("--info", help="write the server's description (flags, command, assets) to this JSON file")
    r.add_argument("--log", help="the server's log file")
    r.add_argument("--serve-for", type=float, default=0.0, help="stop after this many seconds (default: until "
                   "Ctrl-C or SIGTERM)")
    r.add_argument("--start-timeout", type=float, default=300.0, help="seconds to wait for /health")
    r.set_defaults(func=cmd_reference_server)
    o = sub.add_parser("observe", help="drive an OpenAI-compatible server with a scenario's traffic and record "
                       "every request and its /metrics")
    o.add_argument("--url", help="the server's base URL, e.g. http://127.0.0.1:8000")
    o.add_argument("--reference", action="store_true", help="start the reference server (--server fields), "
                   "observe it, stop it")
    _server_arg(o)
    o.add_argument("--server-info", help="the reference server's --info file (its flags, for the replay)")
    o.add_argument("--preset", default="default", help="the traffic's scenario preset")
    o.add_argument("--scenario", help="the traffic's scenario.json")
    o.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override a scenario field (repeatable)")
    o.add_argument("--adapters", help="comma-separated adapter names for the scenario's adapter indices 0, 1, ... "
                   "(default: the server's, in natural order)")
    o.add_argument("--max-requests", type=int, default=2000, help="cap on requests sent")
    o.add_argument("--request-timeout", type=float, default=120.0, help="seconds one request may take")
    o.add_argument("--drain-timeout", type=float, default=120.0, help="seconds after duration_s for the last ones")
    o.add_argument("--metrics-period", type=float, default=0.25, help="seconds between /metrics scrapes")
    o.add_argument("--measure-device", action="store_true", help="measure this machine's CPU as the device "
                   "(when the server runs here; --reference always does)")
    o.add_argument("--out", help="directory for requests.csv, timeseries.csv, run.json")
    o.set_defaults(func=cmd_observe)
    p = sub.add_parser("replay", help="an observed run against the twin: measured vs simulated per metric, per "
                       "adapter, the TTFT distribution and the running / waiting time series")
    p.add_argument("--observed", required=True, help="an observe --out directory")
    p.add_argument("--scenario", help="the twin's scenario.json (e.g. calibrate --observed's --out); default: the "
                   "run's own server on its device with the default cost fields")
    p.add_argument("--out", help="directory for the replay CSVs")
    p.set_defaults(func=cmd_replay)
