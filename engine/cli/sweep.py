"""CLI command of the sweeps: ``python -m engine sweep``.

    python -m engine sweep --preset seed1-rtx3090 --grid arrival_rate_rps=8,32 --grid zipf_s=0.6,1.2 \\
        --strategies naive,batch [--replications 3] [--set duration_s=20] [--workers N] \\
        [--backend process|thread|ray] [--ray-address ADDR] --out DIR

Writes ``sweep.csv`` (one row per grid point x strategy x replication: ``engine.sweep.run_sweep``,
common random numbers) and ``summary.csv`` (mean and 95 % CI per grid point, strategy and metric)
to ``--out``.  The same rows whatever the backend or the number of workers.
"""
from __future__ import annotations

import time
from pathlib import Path

from ..backends import BackendError
from ..limits import write_csv
from ..scenario import coerce
from ..sweep import run_sweep, summarize_sweep
from .common import (
    add_backend_args,
    add_base_args,
    backend_args,
    base_scenario,
    end_backend,
    fail,
    parse_grid,
    positive_int,
    progress_default,
)


def cmd_sweep(a) -> int:
    kw = {}
    try:
        kw = backend_args(a)
        base = base_scenario(a)
        grid = {k: [coerce(k, v) for v in vals] for k, vals in parse_grid(a.grid).items()}
        strategies = [s.strip() for s in (a.strategies or base.strategy).split(",") if s.strip()]
        t0 = time.perf_counter()
        df = run_sweep(base, grid, strategies, a.replications, workers=a.workers, progress=progress_default(), **kw)
        wall = time.perf_counter() - t0
    except (ValueError, BackendError) as e:
        return fail(str(e))
    finally:
        end_backend(kw)
    out = Path(a.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_csv(df, out / "sweep.csv", index=False)
        write_csv(summarize_sweep(df), out / "summary.csv", index=False)
    except OSError as e:
        return fail(f"--out: cannot write to {a.out!r} ({e.strerror})")
    print(f"sweep: {len(df)} runs ({len(strategies)} strategies x {a.replications} replications per grid point) "
          f"in {wall:.1f} s; wrote {a.out}/sweep.csv, summary.csv")
    return 0


def add_commands(sub) -> None:
    p = sub.add_parser("sweep", help="simulate a grid of scenario fields x strategies x replications")
    add_base_args(p, "scenario.json to start from instead of a preset")
    p.add_argument("--grid", action="append", metavar="FIELD=V1,V2", help="values of a field to sweep (repeatable)")
    p.add_argument("--strategies", metavar="S1,S2", help="strategies to compare (default: the base scenario's)")
    p.add_argument("--replications", type=positive_int("--replications"), default=3,
                   help="replications per grid point and strategy, seeds base.seed + k (default: 3)")
    p.add_argument("--workers", type=positive_int("--workers"), default=None,
                   help="workers (default: one per core; 1: in this process)")
    add_backend_args(p, "process")
    p.add_argument("--out", required=True, help="directory for sweep.csv and summary.csv")
    p.set_defaults(func=cmd_sweep)
