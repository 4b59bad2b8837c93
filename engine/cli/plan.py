"""CLI command of the capacity planner: ``python -m engine plan``.

    python -m engine plan --preset default --slo ttft_p99_ms=500 \\
        --grid gpu=a100-80gb,h100-80gb --grid max_loras=8,16,32 --grid strategy=vllm,slora \\
        [--objective max_rate] [--replications 3] [--price h100-80gb=2.5] [--out DIR] [--json]
        [--workers N] [--backend thread|process|ray] [--ray-address ADDR]

    python -m engine plan --preset default --set arrival_rate_rps=64 --slo ttft_p99_ms=500 \
        --objective min_replicas --grid gpu=a100-80gb,h100-80gb --grid router=least_loaded,lora_affinity \
        [--max-replicas 16]

Writes ``plan.csv`` (one row per configuration, ranked, ties marked), ``plan.json`` (the
inputs, the recommendation and its server command lines: the flags the answer sets, each traced, and
what the simulation assumed, never as flags) and ``plan.png`` (goodput against cost) to ``--out``.
Bad ``--slo`` / ``--grid`` / ``--price`` items exit 2 with one line naming them.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

from ..backends import BackendError
from ..limits import write_csv
from ..planner import MAX_REPLICAS_SEARCH, OBJECTIVES, VALUE_COLUMNS, plan, plan_commands, plan_summary
from ..planner.band import BOUNDED
from ..planner.commands import assumption_lines
from ..scenario import MAX_REPLICAS
from .common import (
    add_backend_args,
    add_base_args,
    backend_args,
    base_scenario,
    end_backend,
    fail,
    jsonable,
    parse_grid,
    parse_pairs,
    positive_int,
    progress_default,
)


def _number_pairs(items, option: str) -> dict[str, float]:
    out = {}
    for k, v in parse_pairs(items, option, "name=number").items():
        try:
            out[k] = float(v)
        except ValueError:
            raise ValueError(f"{option}: {k}: invalid value {v!r}; allowed: a number") from None
    return out


def _plot(res, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = res.table[res.table["feasible"]]
    y = "throughput_tok_s" if res.objective == "min_cost" else VALUE_COLUMNS[res.objective]
    x = "fleet_price_usd_per_hour" if res.objective == "min_replicas" else "price_usd_per_hour"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for ok, marker, label in ((True, "o", "meets the SLO"), (False, "x", "does not")):
        g = t[t["meets_slo"] == ok]
        ax.scatter(g[x], g[y], marker=marker, label=label)
    b = res.best
    if b is not None:
        ax.scatter([b[x]], [b[y]], s=160, facecolors="none", edgecolors="k", label="recommended")
    ax.set_xlabel(("fleet price (replicas needed x GPU price)" if x != "price_usd_per_hour" else "GPU price")
                  + ", US$/h (presets; override with --price)")
    ax.set_ylabel(y)
    ax.set_title(f"plan: {res.objective}; SLO " + ", ".join(f"{k}={v:g}" for k, v in res.slo.items()), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def deployment_base(a):
    """``--server``: the scenario of the deployment the ``--set`` inputs state (``planner.Deployment``): its
    server's profile and nothing from a preset, so the same inputs plan the same whatever else is given."""
    from ..planner.deployment import Deployment
    from ..scenario import coerce
    if a.scenario:
        raise ValueError("--server: given with --scenario; allowed: one of them (--server plans the deployment "
                         "that --set states; --scenario starts from a file)")
    names = [f.name for f in dataclasses.fields(Deployment) if f.name != "server"]
    kw = {}
    for k, v in parse_pairs(a.set).items():
        if k not in names:
            raise ValueError(f"--set: {k!r} is not a deployment input; allowed with --server: {', '.join(names)}")
        kw[k] = coerce(k, v)
    d = Deployment(server=a.server, **kw)
    d.scenario()  # (a bad input is refused here, naming it, before any plan)
    return d


def _band(v: str):
    """``--band``: auto | none | a fraction (0.2 = the cost model 20 % slower and faster)."""
    if v in ("auto", "none"):
        return "auto" if v == "auto" else None
    try:
        return float(v)
    except ValueError:
        raise ValueError(f"--band: invalid value {v!r}; allowed: auto, none or a fraction such as 0.2") from None


def cmd_plan(a) -> int:
    kw = {}
    try:
        kw = backend_args(a)
        base = deployment_base(a) if a.server else base_scenario(a)
        slo = _number_pairs(a.slo, "--slo")
        if not slo:
            return fail("--slo: missing; allowed: metric=threshold, e.g. --slo ttft_p99_ms=500")
        grid = parse_grid(a.grid)
        prices = _number_pairs(a.price, "--price")
        t0 = time.perf_counter()
        res = plan(base, slo, grid, replications=a.replications, objective=a.objective,
                   gpu_prices_usd_per_hour=prices, workers=a.workers, max_replicas=a.max_replicas,
                   progress=progress_default() and not a.json, band=_band(a.band), **kw)
        wall = time.perf_counter() - t0
    except (ValueError, BackendError) as e:
        return fail(str(e))
    finally:
        end_backend(kw)
    # the grid's fields are the plan's decisions (a decided batch limit is a flag); SGLang's line rests on the
    # sglang strategy when the grid compared it
    cmds = plan_commands(res)
    best_cmds = [command_doc(c) for c in cmds]
    doc = {"objective": res.objective, "slo": res.slo, "grid": {k: list(v) for k, v in res.grid.items()},
           "replications": res.replications, "base": res.base.to_dict(),
           "deployment": dataclasses.asdict(res.deployment) if res.deployment else None, "summary": plan_summary(res),
           "best": jsonable(res.best) if res.best else None, "tie_break": res.tie_break, "notes": list(res.notes),
           "commands": best_cmds, "wall_s": round(wall, 2)}
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        write_csv(res.table, out / "plan.csv", index=False)
        (out / "plan.json").write_text(json.dumps(doc, indent=1, default=_json_default, allow_nan=False))
        _plot(res, out / "plan.png")
    if a.json:
        print(json.dumps(doc, default=_json_default, allow_nan=False))
        return 0
    print(plan_summary(res) + f" ({wall:.1f} s)")
    fleet = ("replicas_needed_max", "replicas_by_replication", "fleet_price_usd_per_hour") \
        if res.objective == "min_replicas" else ()
    stem = BOUNDED[res.objective][1]
    band = (f"{stem}_pessimistic", f"{stem}_optimistic")
    cols = [c for c in dict.fromkeys((*res.grid, "feasible", VALUE_COLUMNS[res.objective], *band, *fleet, *res.slo,
                                      "cost_per_mtok_usd", "tie_with_best", "reason")) if c in res.table]
    print(res.table[cols].to_string(index=False, max_colwidth=60))
    for n in res.notes:
        print(f"note: {n}")
    if res.best is not None and res.objective == "min_replicas":
        n, router = int(res.best["replicas_needed_max"]), res.best["router"]
        print(f"\n# fleet: {n} replica(s), each running the server below, behind a {router} router "
              "(the router is the load balancer's setting, not a server flag)")
    for c in cmds:
        print(f"\n# {c.server}{'' if c.supported else ' (no equivalent)'}: {c.note}")
        if c.supported:
            print("# the flags this answer sets (each traced in plan.json):")
            print(c.text)
            print("\n".join(assumption_lines(c)))
    if a.out:
        print(f"\nwrote {a.out}/plan.csv, plan.json, plan.png")
    return 0


def command_doc(c) -> dict:
    """plan.json's entry for one server command: the flags this answer sets (``command``, ``trace``), the
    answer's values that are the server's defaults (``at_default``, not printed) and what the simulation
    assumed (``assumptions``: setting and plain words, never flags)."""
    return {"server": c.server, "supported": c.supported, "command": c.text, "note": c.note,
            "trace": [list(t) for t in c.trace], "at_default": [list(t) for t in c.at_default],
            "assumptions": [{"setting": k, "assumed": text} for k, text in c.assumptions]}


def _json_default(o):
    if hasattr(o, "item"):
        v = o.item()
        return None if isinstance(v, float) and not math.isfinite(v) else v
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(type(o).__name__)


def add_commands(sub) -> None:
    p = sub.add_parser("plan", help="capacity planner: rank GPUs / flags / policies under an SLO")
    add_base_args(p, "scenario.json to start from instead of a preset (e.g. a fitted one)")
    p.add_argument("--server", choices=("vllm", "slora"), default=None,
                   help="plan a deployment stated with --set (model, gpu, num_adapters, adapter_rank, target_modules, "
                        "arrival_rate_rps, prompt_tokens, output_tokens, ...) on this server's profile, not a preset")
    p.add_argument("--slo", action="append", metavar="METRIC=THRESHOLD", help="e.g. ttft_p99_ms=500 (repeatable)")
    p.add_argument("--grid", action="append", metavar="FIELD=V1,V2", help="candidate values of a field (repeatable)")
    p.add_argument("--objective", default="max_rate", choices=OBJECTIVES)
    p.add_argument("--replications", type=positive_int("--replications"), default=3)
    p.add_argument("--max-replicas", type=positive_int("--max-replicas"), default=MAX_REPLICAS_SEARCH,
                   help=f"min_replicas: the most replicas a search tries (default {MAX_REPLICAS_SEARCH}, "
                        f"at most {MAX_REPLICAS})")
    p.add_argument("--price", action="append", metavar="GPU=USD_PER_HOUR", help="override a GPU price preset")
    p.add_argument("--band", default="auto", metavar="auto|none|FRACTION",
                   help="the error band: each answer again with the cost model slower and faster by the measured "
                        "90th-percentile error of the profile it rests on (auto), by a given fraction, or none")
    p.add_argument("--workers", type=positive_int("--workers"), default=None)
    add_backend_args(p, "thread")
    p.add_argument("--out", help="directory for plan.csv, plan.json, plan.png")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=cmd_plan)
