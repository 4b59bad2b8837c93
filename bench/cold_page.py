"""First page on a fresh install, in a real browser: how long until it is usable, and until its results show.

    python bench/cold_page.py [--runs 1]

Each run starts ``streamlit run app/main.py`` with a new, empty ``NUMBA_CACHE_DIR`` (nothing compiled: a fresh
install), opens the home page in Debian's headless Chromium (Playwright, never a downloaded browser) as soon as the
server is healthy, and times from ``page.goto``: **usable**, the sidebar's arrival-rate slider is on screen (the
controls can be used; the kernels compile on a background thread, ``app.runner.warmup_future``), and **results**,
the What-if verdict is on screen (compiled, simulated, drawn).  Then a second server on the now-filled cache:
the first visit of that new server process, then a second visit (a new browser tab) of the same server: the warm
full page load until results.  Targets (issue 26 item 3): usable <= 10 s on an empty cache; warm full page
load with results <= 1.5 s.  Prints the conditions and every time; exits 0.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from browser_rerun import ARGS, CHROMIUM, LABEL  # noqa: E402
from browser_rerun import _serve as serve  # noqa: E402

RESULTS = "[data-testid=stAlertContainer], [data-testid=stTable], [data-testid=stDataFrame]"
USABLE_S, WARM_S = 10.0, 1.5


def _serve(cache: str) -> tuple[subprocess.Popen, str]:
    """``streamlit run app/main.py`` with its own Numba cache directory (``browser_rerun._serve``)."""
    return serve(Path("app/main.py"), ROOT, {"NUMBA_CACHE_DIR": cache})


def _visit(browser, url: str) -> tuple[float, float]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(240_000)
    t0 = time.perf_counter()
    pg.goto(url)
    pg.locator(f'input[type="range"][aria-label="{LABEL}"]').first.wait_for()
    usable = time.perf_counter() - t0
    pg.locator("[data-testid=stMain]").get_by_text("wins", exact=False).or_(
        pg.locator("[data-testid=stMain]").get_by_text("tie", exact=False)).first.wait_for()
    results = time.perf_counter() - t0
    ctx.close()
    return usable, results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright
    print(f"cold page benchmark, {time.strftime('%Y-%m-%dT%H:%M:%S%z')}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores; load average at start {os.getloadavg()}")
    cold, first, warm = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for i in range(a.runs):
            with tempfile.TemporaryDirectory(prefix="cold-numba-") as cache:
                proc, base = _serve(cache)
                try:
                    cold.append(_visit(browser, base))
                finally:
                    proc.kill()
                    proc.wait()
                proc, base = _serve(cache)  # the same cache, now filled: a restart of an installed app
                try:
                    first.append(_visit(browser, base))
                    warm.append(_visit(browser, base))
                finally:
                    proc.kill()
                    proc.wait()
            print(f"run {i + 1}: empty cache: usable {cold[-1][0]:.2f} s, results {cold[-1][1]:.2f} s; "
                  f"filled cache, new server: usable {first[-1][0]:.2f} s, results {first[-1][1]:.2f} s; "
                  f"same server, second visit: usable {warm[-1][0]:.2f} s, results {warm[-1][1]:.2f} s")
        browser.close()
    u = statistics.median(c[0] for c in cold)
    w = statistics.median(x[1] for x in warm)
    print(f"empty cache, usable (median): {u:.2f} s; target <= {USABLE_S:g} s: {'PASS' if u <= USABLE_S else 'MISS'}")
    print(f"warm full page load with results (median, a second visit of a running server): {w:.2f} s; "
          f"target <= {WARM_S:g} s: {'PASS' if w <= WARM_S else 'MISS'}")
    print(f"load average at end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
