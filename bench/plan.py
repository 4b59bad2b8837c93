"""Capacity-planner speed: the default plan, timed end to end.

    python bench/plan.py [--runs 3] [--workers 2]

The default plan: base scenario preset ``default`` (about 12,000 requests per run), SLO
``ttft_p99_ms <= 500``, grid gpu = a100-80gb, h100-80gb, l40s x max_loras = 4, 8, 16, 32 x
strategy = vllm, slora (24 configurations), 3 replications, objective ``max_rate``, the
planner's default search settings (rel_tol 3 %, probe_requests 6,000, threads).  One warm-up
plan first (Numba kernels), then ``--runs`` timed plans; prints the median and every run's wall
time, the probes simulated and the 1-minute load average.  Target: median <= 10 s.  Exits 0.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SLO = {"ttft_p99_ms": 500.0}
GRID = {"gpu": ["a100-80gb", "h100-80gb", "l40s"], "max_loras": [4, 8, 16, 32], "strategy": ["vllm", "slora"]}
TARGET_S = 10.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--band", default="auto", help="the error band: auto (each answer searched twice more), none")
    args = ap.parse_args()

    from engine import Scenario, planner, simulate

    base = Scenario.from_preset("default")
    simulate(base.replace(duration_s=60.0))  # compile / load the kernels
    planner.plan(base, SLO, {"gpu": ["a100-80gb"]}, replications=1, workers=1)
    walls, probes = [], 0
    for _ in range(args.runs):
        t0 = time.perf_counter()
        res = planner.plan(base, SLO, GRID, replications=3, workers=args.workers,
                           band=None if args.band == "none" else args.band)
        walls.append(time.perf_counter() - t0)
        probes = int(res.table["probes"].sum())
    med = statistics.median(walls)
    print(f"default plan (24 configurations x 3 replications, band {args.band}, {probes} simulated probes): "
          f"median {med:.2f} s over {len(walls)} runs ({', '.join(f'{w:.2f}' for w in walls)}); "
          f"target <= {TARGET_S:.0f} s -> {'PASS' if med <= TARGET_S else 'MISS'}; "
          f"load average {os.getloadavg()[0]:.2f}; {planner.plan_summary(res)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
