"""Dashboard rerun time after a slider change (home page, default scenario, three strategies).

    python bench/app_rerun.py [--reruns 10]

Drives app/main.py with Streamlit's AppTest: one warm-up run (Numba kernels, caches),
then ``--reruns`` reruns, each after moving the arrival-rate slider to a value not seen
before; each rerun follows the last at once, so the step ahead is never simulated in time
(``app.runner.anticipate`` waits 0.15 s after a script run): no result-cache hits.  Prints
the median and p90 wall time of ``AppTest.run()``.  Target: median <= 300 ms.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reruns", type=int, default=10)
    ap.add_argument("--target-ms", type=float, default=300.0)
    args = ap.parse_args()

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=300)
    t = time.perf_counter()
    at.run()
    first = time.perf_counter() - t
    if at.exception:
        print("app raised:", [e.value for e in at.exception], file=sys.stderr)
        return 2
    n_strategies = len(at.multiselect(key="strategy").value)
    # one untimed rerun so that one-off costs of the second run are not counted
    r0 = at.slider(key="arrival_rate_rps").value  # the default's rate; the steps stay near it (not saturated)
    at.slider(key="arrival_rate_rps").set_value(r0 + 0.5)
    at.run()

    times = []
    for i in range(args.reruns):
        at.slider(key="arrival_rate_rps").set_value(r0 + 1.0 + 0.5 * i)
        t = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t)
        if at.exception or len(at.table) != 1 or len(at.table[0].value) != n_strategies:  # the comparison table
            print("rerun failed:", [e.value for e in at.exception], file=sys.stderr)
            return 2
    ms = sorted(1e3 * x for x in times)
    median = statistics.median(ms)
    p90 = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
    print(f"first run (warm-up, may compile Numba): {first * 1e3:.0f} ms")
    print(f"home page rerun after a slider change, {n_strategies} strategies, {len(ms)} reruns: "
          f"median {median:.0f} ms, p90 {p90:.0f} ms, min {ms[0]:.0f} ms, max {ms[-1]:.0f} ms "
          f"(target median <= {args.target_ms:.0f} ms: {'ok' if median <= args.target_ms else 'MISSED'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
