"""Fleet speed: 100,000 requests on 4 replicas against the same requests on one GPU.

    python bench/fleet.py [--runs 5] [--requests 100000] [--replicas 4] [--strategy vllm] [--json]

Base: preset ``default`` (A100-80GB, Llama-2-7B, 200 adapters) with the given strategy, warm-up
5 s, duration = requests / rate.  Three conditions, each timed for every router (wall time of
``engine.simulate``: validation, workload, arrays, jitted loops, pandas results; median of
``--runs`` warm runs after one warm-up run per scenario):

1. **same requests, one GPU keeps up**: the stream at the preset's rate (16 req/s) on one GPU and on
   the fleet (each replica then serves a quarter of the load, with small batches: about five times
   as many loop iterations in total);
2. **same requests, one GPU overloaded**: the stream at N x 16 req/s on one GPU (its queue grows
   without bound) and on the fleet;
3. **same load per GPU**: the fleet at N x 16 req/s against one GPU at 16 req/s, both with the same
   number of requests (the same total work: how much the fleet machinery costs on top).

Target: the fleet within 2x of one GPU on the same requests (conditions 1 and 2).  The ratio is
printed per router with PASS/MISS; the 1-minute load average is printed with the figures (the
machine may be shared).  Exits 0: a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_RATIO = 2.0
BASE_RATE = 16.0


def _timed(sc, runs: int) -> tuple[float, dict]:
    from engine import simulate
    simulate(sc)  # warm-up (kernels compiled or loaded from the cache, pages touched)
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        res = simulate(sc)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), res.summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--strategy", default="vllm")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    args = ap.parse_args()

    from engine import ROUTERS, Scenario

    n, N = args.requests, args.replicas
    base = Scenario.from_preset("default", strategy=args.strategy, warmup_s=5.0)

    def at(rate: float, **kw):
        return base.replace(arrival_rate_rps=rate, duration_s=n / rate, **kw)

    out = {"requests": n, "replicas": N, "strategy": args.strategy, "runs": args.runs,
           "load_avg_1min_at_start": round(os.getloadavg()[0], 2), "conditions": {}}
    singles = {}
    for name, rate in (("one GPU at 16 req/s", BASE_RATE), (f"one GPU at {N * BASE_RATE:g} req/s", N * BASE_RATE)):
        singles[rate] = _timed(at(rate), args.runs)
        s = singles[rate][1]
        if not args.json:
            print(f"{name}: {singles[rate][0]:.3f} s ({s['requests']} requests in the window, "
                  f"{s['completed']} completed, TTFT p50 {s['ttft_p50_ms']:.1f} ms)", flush=True)
    conditions = [("same requests, one GPU keeps up", BASE_RATE, BASE_RATE, True),
                  ("same requests, one GPU overloaded", N * BASE_RATE, N * BASE_RATE, True),
                  ("same load per GPU", N * BASE_RATE, BASE_RATE, False)]
    for cname, fleet_rate, single_rate, targeted in conditions:
        rows = {}
        for router in ROUTERS:
            wall, s = _timed(at(fleet_rate, num_replicas=N, router=router), args.runs)
            ratio = wall / singles[single_rate][0]
            rows[router] = {"fleet_s": round(wall, 4), "single_s": round(singles[single_rate][0], 4),
                            "ratio": round(ratio, 3), "ttft_p50_ms": round(s["ttft_p50_ms"], 2),
                            "completed": s["completed"], "load_imbalance": round(s["load_imbalance"], 3),
                            "verdict": ("PASS" if ratio <= TARGET_RATIO else "MISS") if targeted else "n/a"}
            if not args.json:
                print(f"  [{cname}] {router:>13}: fleet {wall:.3f} s / one GPU {singles[single_rate][0]:.3f} s "
                      f"= {ratio:.2f}x  {rows[router]['verdict']}", flush=True)
        out["conditions"][cname] = rows
    out["load_avg_1min_at_end"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"load average (1 min): {out['load_avg_1min_at_start']} at start, {out['load_avg_1min_at_end']} at end; "
              f"target: fleet <= {TARGET_RATIO:g}x one GPU on the same requests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
