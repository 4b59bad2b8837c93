"""Capacity for a team, server side: N dashboard sessions at once in one process, no browsers.

    python bench/session_load.py [--sessions 1 4 8] [--reruns 6] [--same] [--think-s 0]

Each session is a Streamlit ``AppTest`` of ``app/main.py`` on its own thread, in this one process: the sessions
share what a server's sessions share (the simulation workers of ``app.runner.SCHEDULER``, the result caches, the
interpreter), without a browser per session on the same 2 cores (``bench/load_test.py`` is the browser figure).
Every session opens the home page, then ``--reruns`` times moves its arrival-rate slider by one step and reruns;
each rerun (the script run, its simulations included) is timed.  Session i starts at the default's rate + 0.5 i
req/s, so sessions do not share results; ``--same`` puts every session on the same rates (results shared through
the cache, as colleagues on one link are).  ``--think-s``: each session pauses that long after each rerun before
its next step (a person reading the page; the server simulates the next slider step meanwhile:
``app.runner.anticipate``); 0, the default, reruns back to back (no time to anticipate anything).  Reports, per session count: reruns, p50 / p95 / max, errors, and the
process's resident memory (RSS) before and after.  Target (issue 26): 8 sessions p95 <= 1 s, 0 errors, memory
bounded.  Exits 0.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MAIN = str(ROOT / "app" / "main.py")
TARGET_P95_S = 1.0


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _session(i: int, reruns: int, same: bool, start: threading.Barrier, out: list, errors: list,
             think_s: float = 0.0) -> None:
    try:
        _reruns(i, reruns, same, start, out, errors, think_s)
    except Exception as e:  # noqa: BLE001  (AppTest itself is not made for threads: reported, not hidden)
        errors.append(f"session {i}: the AppTest harness raised {type(e).__name__}: {e}")
        start.abort()  # never leave the other sessions waiting at the barrier


def _reruns(i: int, reruns: int, same: bool, start: threading.Barrier, out: list, errors: list,
            think_s: float = 0.0) -> None:
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(MAIN, default_timeout=300)
    at.query_params["duration_s"] = "60"  # the sidebar's smallest duration: a live view, not a study
    at.run()
    rate0 = at.slider(key="arrival_rate_rps").value + (0.0 if same else 0.5 * i)
    try:
        start.wait()
    except threading.BrokenBarrierError:
        pass  # another session failed to open: go on without it
    for k in range(reruns):
        time.sleep(think_s)
        at.slider(key="arrival_rate_rps").set_value(rate0 + 0.5 * (k + 1))
        t = time.perf_counter()
        at.run()
        out.append(time.perf_counter() - t)
        if at.exception or at.error or len(at.table) != 1:
            errors.append(f"session {i} rerun {k}: " + "; ".join([e.value for e in at.exception] +
                                                                 [e.value for e in at.error]))


def _distinct_sessions() -> None:
    """AppTest gives every session the same id ("test session id"), so the runner's fair scheduler would take the
    sessions for one and let each one's rerun supersede the others' jobs; a server gives each browser tab its own.
    Key the scheduler on each AppTest's own session state instead, as a server's session ids would."""
    from app import runner
    runner._session_key = lambda ctx: id(ctx.session_state) if ctx is not None else runner.NO_SESSION


def run(n: int, reruns: int, same: bool, think_s: float = 0.0) -> dict:
    out: list[float] = []
    errors: list[str] = []
    start = threading.Barrier(n)
    rss0 = _rss_mib()
    threads = [threading.Thread(target=_session, args=(i, reruns, same, start, out, errors, think_s)) for i in range(n)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    q = sorted(out)
    p95 = q[min(len(q) - 1, round(0.95 * (len(q) - 1)))] if q else float("nan")
    return dict(sessions=n, reruns=len(q), p50=statistics.median(q) if q else float("nan"), p95=p95,
                max=max(q) if q else float("nan"), errors=errors, rss0=rss0, rss1=_rss_mib(), wall=wall)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--reruns", type=int, default=6)
    ap.add_argument("--same", action="store_true", help="every session on the same rates (shared cache)")
    ap.add_argument("--think-s", type=float, default=0.0, help="pause after each rerun before the next step")
    a = ap.parse_args()
    from app import runner
    _distinct_sessions()
    runner.compile_kernels()  # Numba's kernels loaded before any timing
    print(f"session load, server side (in-process AppTest sessions), {time.strftime('%Y-%m-%dT%H:%M:%S%z')}; "
          f"{os.cpu_count()} cores; {'same scenarios' if a.same else 'one scenario per session'}; think {a.think_s:g} s; load average "
          f"{os.getloadavg()}")
    for n in a.sessions:
        r = run(n, a.reruns, a.same, a.think_s)
        ok = r["p95"] <= TARGET_P95_S and not r["errors"]
        print(f"{n} session(s): {r['reruns']} reruns, p50 {r['p50']:.2f} s, p95 {r['p95']:.2f} s, max "
              f"{r['max']:.2f} s; errors {len(r['errors'])}; RSS {r['rss0']:.0f} -> {r['rss1']:.0f} MiB; wall "
              f"{r['wall']:.1f} s" + (f"; target p95 <= {TARGET_P95_S:g} s: {'PASS' if ok else 'MISS'}"
                                      if n == 8 else ""))
        for e in r["errors"][:3]:
            print("   ", e[:300])
    print(f"load average at end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
