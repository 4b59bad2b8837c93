"""Cold start: the first simulation in a fresh Python process whose Numba cache is empty.

    python bench/cold_start.py [--runs 1] [--top 12] [--json]

Each run makes a new empty directory, points ``NUMBA_CACHE_DIR`` at it (engine/jitcache.py then caches under
``$NUMBA_CACHE_DIR/engine-<digest>``) and starts two fresh processes on it, one after the other:

1. **cold**: ``import engine`` (numba included), then ``engine.simulate(Scenario.from_preset("default"))``: every
   kernel is compiled and written to the empty cache;
2. **warm cache**: the same in a new process, which loads the kernels the first one wrote.

Each process reports its import time, its first ``simulate`` (compile or cache load, plus the run; wall time and
the process's CPU time, which other processes on a shared machine inflate less) and a second ``simulate`` (the
warm run alone, for scale); the parent adds the process's wall time (interpreter start included).  The cold
process also records Numba's compile events (``numba.core.event``: ``numba:compile`` per dispatcher and
signature, ``numba:run_pass`` per compiler pass, fired only on a cache miss) and prints the functions with the
most compile time of their own (callees' compiles, which nest inside the caller's type inference, subtracted;
"incl." keeps them) and the passes where that time goes.  Target: the cold first simulation <= 10 s of wall
time (median over ``--runs``; each run takes a minute or more on a loaded 2-core machine): PASS/MISS.
Exits 0: a benchmark.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET_S = 10.0


def loadavg() -> list[float]:
    """1-, 5- and 15-minute load averages (/proc/loadavg)."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return [round(x, 2) for x in os.getloadavg()]


def child() -> dict:
    """In the fresh process: time the import and two simulations, recording Numba's compile events."""
    t0 = time.perf_counter()
    from numba.core import event as ev

    clock = time.perf_counter
    stack, funcs, passes = [], defaultdict(lambda: [0.0, 0.0, 0]), defaultdict(float)

    class Recorder(ev.Listener):
        def on_start(self, e):
            if e.kind == "numba:compile":
                f = e.data["dispatcher"].py_func
                key = f"{f.__module__}.{f.__qualname__}"
            else:
                key = e.data["name"].split(" [")[0]  # "<pass> [<function>]"
            stack.append([e.kind, key, clock(), 0.0])  # kind, key, start, nested compile time

        def on_end(self, e):
            kind, key, start, nested = stack.pop()
            dur = clock() - start
            if kind == "numba:compile":
                rec = funcs[key]
                rec[0] += dur - nested  # self
                rec[1] += dur           # inclusive
                rec[2] += 1             # signatures compiled
            else:
                passes[key] += dur - nested
            if stack:
                stack[-1][3] += dur if kind == "numba:compile" else nested

    rec = Recorder()
    ev.register("numba:compile", rec)
    ev.register("numba:run_pass", rec)
    import engine
    from engine import Scenario, jitcache
    t1, c1 = time.perf_counter(), time.process_time()
    sc = Scenario.from_preset("default")
    engine.simulate(sc)
    t2, c2 = time.perf_counter(), time.process_time()
    ev.unregister("numba:compile", rec)
    ev.unregister("numba:run_pass", rec)
    res = engine.simulate(sc)
    t3 = time.perf_counter()
    return {"import_s": t1 - t0, "first_simulate_s": t2 - t1, "first_simulate_cpu_s": c2 - c1, "second_simulate_s": t3 - t2,
            "requests": len(res.requests), "cache_dir": jitcache.CACHE_DIR,
            "functions": {k: {"self_s": v[0], "incl_s": v[1], "signatures": v[2]} for k, v in funcs.items()},
            "passes_self_s": dict(passes)}


def _spawn(cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    env["NUMBA_CACHE_DIR"] = cache
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"child exited {p.returncode}: {p.stderr.strip().splitlines()[-1:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = wall
    out["cache_files"] = sum(len(f) for _, _, f in os.walk(cache))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--top", type=int, default=12, help="functions listed by compile time (default 12)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child()))
        return 0

    from bench.__main__ import machine

    say = (lambda *x: None) if a.json else (lambda *x: print(*x, flush=True))
    m = machine()
    out = {"machine": m, "load_avg_at_start": loadavg(), "runs": []}
    say(f"cold-start benchmark, {m['date']} (engine {m['engine']}, git {m['git'] or '-'})")
    say(f"machine: {m['cpu']}; {m['cores']} cores ({m['cores_usable']} usable); Python {m['python']}; numba "
        f"{m['numba']}; numpy {m['numpy']}; load average at start {out['load_avg_at_start']}")
    say('each run: a new empty NUMBA_CACHE_DIR; process 1 (cold), then process 2 (warm cache): import engine, '
        'simulate(Scenario.from_preset("default")) twice')
    for k in range(max(1, a.runs)):
        cache = tempfile.mkdtemp(prefix="lora-whatif-numba-")
        try:
            cold, warm = _spawn(cache), _spawn(cache)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        out["runs"].append({"cold": cold, "warm": warm})
        say(f"run {k + 1}: {cold['requests']:,} requests; cache {cold['cache_dir']} ({cold['cache_files']} files "
            "after the cold process)")
        for name, r in (("cold", cold), ("warm cache", warm)):
            say(f"  {name:<10}: import {r['import_s']:6.2f} s, first simulate {r['first_simulate_s']:6.2f} s, "
                f"(CPU {r['first_simulate_cpu_s']:6.2f} s), second {r['second_simulate_s'] * 1e3:4.0f} ms; process wall time {r['process_wall_s']:6.2f} s")
    first = statistics.median(r["cold"]["first_simulate_s"] for r in out["runs"])
    last = out["runs"][-1]["cold"]
    funcs = sorted(last["functions"].items(), key=lambda kv: -kv[1]["self_s"])
    total = sum(v["self_s"] for _, v in funcs)
    out.update(cold_first_simulate_s=first, compile_events_total_s=total, target=f"<= {TARGET_S:g} s",
               verdict="PASS" if first <= TARGET_S else "MISS", load_avg_at_end=loadavg())
    say(f"compile time in Numba's compile events (last cold run): {total:.2f} s over {len(funcs)} functions, "
        f"{sum(v['signatures'] for _, v in funcs)} signatures; top {a.top} by own time:")
    say(f"  {'function':<56} {'own s':>6} {'incl. s':>7} {'sigs':>4}")
    for name, v in funcs[:a.top]:
        say(f"  {name:<56} {v['self_s']:6.2f} {v['incl_s']:7.2f} {v['signatures']:>4}")
    top_passes = sorted(last["passes_self_s"].items(), key=lambda kv: -kv[1])[:6]
    say("  by compiler pass (own time): " + ", ".join(f"{p} {s:.2f} s" for p, s in top_passes))
    say(f"cold first simulation (median of {len(out['runs'])}): {first:.2f} s; target <= {TARGET_S:g} s: "
        f"{out['verdict']}")
    say(f"load average (1/5/15 min): {out['load_avg_at_start']} at start, {out['load_avg_at_end']} at end")
    if a.json:
        print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - a benchmark reports, it does not fail
        print(f"cold_start: error: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(0)
