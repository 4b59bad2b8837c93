"""Dashboard rerun time in a real browser, against an empty one-slider Streamlit page in the same run.

    python bench/browser_rerun.py [--reruns 5] [--rounds 1] [--query "?wi_reps=3"] [--think-ms 0] [--no-anticipate]

Starts two Streamlit servers on free ports: ``app/main.py`` and a page with one slider and one line
of text.  In Debian's headless Chromium (Playwright, never a downloaded browser) each page is opened
and warmed, then ``--reruns`` times: focus the arrival-rate slider, press ArrowRight, and measure from
the key press until the page is idle — its text has changed, the server has finished the rerun (its
``new_session`` and ``script_finished`` messages, read off the WebSocket), Streamlit's status widget
is gone, and no DOM mutation has happened for ``QUIET_MS`` — taking the time of the last mutation as
the end (a MutationObserver records it).  Prints the median and every run for both pages and their
ratio, and when the server's ``script_finished`` arrived (the rest is the browser drawing).

``--rounds N``: N rounds on the same two servers, each measuring the empty page and then the dashboard in new
browser contexts; prints every round's medians and ratio, then in how many rounds the ratio met its target (one
round's ratio moves by about ±0.15 between runs on this machine: a claim about the target needs several).

``--think-ms``: after the page is idle, wait that long before the next key press (a person reading the page);
the server simulates the next slider step meanwhile (``app.runner.anticipate``), so a step that comes after
the speculative runs have finished reads their results.  ``--no-anticipate`` starts the dashboard with
``LORA_WHATIF_ANTICIPATE=0``: every step simulates (what a step the server did not anticipate costs).

Why the server's word on the run: Streamlit shows its status widget only after 500 ms of running, so a
rerun that draws its first elements and then computes for more than ``QUIET_MS`` (the simulations,
on a loaded machine) looked idle before it had finished: 178 ms was reported for a rerun whose
``script_finished`` came 2.1 s after the key press.

Targets (issue "Performance"): home page median <= 2.5 x the empty page and <= 300 ms.  Exits 0.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
QUIET_MS = 400
LABEL = "Arrival rate (req/s)"
EMPTY_APP = f'''import streamlit as st
v = st.slider("{LABEL}", 1.0, 100.0, 20.0, step=1.0)
st.write(f"rate {{v}}")
'''
OBSERVER_JS = """() => { window.__lastMut = performance.now();
  new MutationObserver(() => { window.__lastMut = performance.now(); })
    .observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true}); }"""
TEXT_JS = "() => document.querySelector('[data-testid=stMain]')?.innerText || document.body.innerText"
IDLE_JS = f"""() => !document.querySelector('[data-testid=stStatusWidget]')
  && (performance.now() - window.__lastMut) > {QUIET_MS}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(script: Path, cwd: Path, extra_env: dict | None = None) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false", **(extra_env or {}))
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(script), f"--server.port={port}",
                             "--server.address=127.0.0.1", "--server.headless=true",
                             "--server.fileWatcherType=none"], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=5) as r:
                if r.read().decode().strip() == "ok":
                    return proc, base
        except OSError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit(f"{script} did not become healthy")


def _track_runs(pg) -> dict:
    """The page's script runs as the server reports them on the WebSocket: ``starts`` counts the ``new_session``
    ForwardMsgs (one per full or fragment run), ``running`` is True from one until its ``script_finished``."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    runs = {"starts": 0, "running": False, "finished_at": 0.0}

    def on_frame(payload) -> None:
        if not isinstance(payload, (bytes, bytearray)):
            return
        try:
            msg = ForwardMsg.FromString(bytes(payload))
            kind = msg.WhichOneof("type")
        except Exception:  # noqa: BLE001  (not a ForwardMsg: nothing to track)
            return
        if kind == "new_session":
            runs["starts"] += 1
            runs["running"] = True
        elif kind == "script_finished" and msg.script_finished != msg.FINISHED_EARLY_FOR_RERUN:
            # (a live step's first run ends early, for the fragment's run that follows: that one ends the step)
            runs["running"] = False
            runs["finished_at"] = time.monotonic()

    pg.on("websocket", lambda ws: ws.on("framereceived", on_frame))
    return runs


def _wait_run_done(pg, runs: dict, starts_before: int, timeout_s: float = 180) -> None:
    """Until a run started after ``starts_before`` runs and the server has finished it, then the DOM rule."""
    deadline = time.monotonic() + timeout_s
    while runs["starts"] <= starts_before or runs["running"]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no finished script run within {timeout_s:g} s")
        pg.wait_for_timeout(10)
    pg.wait_for_function(IDLE_JS)


def _measure(browser, url: str, reruns: int, server: list | None = None, think_ms: float = 0.0) -> list[float]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(180_000)
    runs = _track_runs(pg)
    pg.goto(url)
    slider = pg.locator(f'input[type="range"][aria-label="{LABEL}"]').first
    slider.wait_for()
    pg.evaluate(OBSERVER_JS)
    _wait_run_done(pg, runs, 0)
    out = []
    for i in range(reruns + 1):  # the first key press warms caches of the new value path: not counted
        if think_ms:
            pg.wait_for_timeout(think_ms)
        before = pg.evaluate(TEXT_JS)
        slider.focus()
        n0 = runs["starts"]
        t0 = pg.evaluate("() => performance.now()")
        t0_mono = time.monotonic()
        pg.keyboard.press("ArrowRight")
        pg.wait_for_function(f"(b) => ({TEXT_JS})() !== b", arg=before)
        _wait_run_done(pg, runs, n0)
        end = pg.evaluate("() => window.__lastMut")
        if i:
            out.append(end - t0)
            if server is not None:
                server.append(1e3 * (runs["finished_at"] - t0_mono))
    ctx.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reruns", type=int, default=5)
    ap.add_argument("--query", default="", help="URL query for the dashboard, e.g. '?wi_reps=1'")
    ap.add_argument("--think-ms", type=float, default=0.0, help="pause before each key press, after the page is idle")
    ap.add_argument("--no-anticipate", action="store_true", help="the dashboard with LORA_WHATIF_ANTICIPATE=0")
    ap.add_argument("--rounds", type=int, default=1, help="rounds of both pages on the same servers (each: a ratio)")
    args = ap.parse_args()
    if args.rounds < 1 or args.reruns < 1:
        ap.error(f"--rounds {args.rounds} / --reruns {args.reruns}: allowed: 1 or more")
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing (apt-get install chromium)")
        return 0
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="empty-app-"))
    (tmp / "empty.py").write_text(EMPTY_APP)
    procs = []
    try:
        app, app_url = _serve(ROOT / "app" / "main.py", ROOT,
                              {"LORA_WHATIF_ANTICIPATE": "0"} if args.no_anticipate else None)
        procs.append(app)
        empty, empty_url = _serve(tmp / "empty.py", tmp)
        procs.append(empty)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            try:
                rounds = []
                for k in range(args.rounds):
                    t_empty = _measure(browser, empty_url, args.reruns, think_ms=args.think_ms)
                    t_server: list[float] = []
                    t_app = _measure(browser, app_url + "/" + args.query, args.reruns, t_server, args.think_ms)
                    rounds.append(_report(args, t_app, t_server, t_empty, k if args.rounds > 1 else None))
            finally:
                browser.close()
    finally:
        for pr in procs:
            pr.terminate()
            pr.wait(timeout=30)
    if args.rounds > 1:
        ratios = [r for r, _ in rounds]
        print(f"over {args.rounds} rounds: ratio {min(ratios):.2f}-{max(ratios):.2f}x, <= 2.5x in "
              f"{sum(r <= 2.5 for r in ratios)} of {args.rounds}; <= 300 ms in {sum(m <= 300 for _, m in rounds)} "
              f"of {args.rounds}")
    return 0


def _report(args, t_app: list[float], t_server: list[float], t_empty: list[float], k: int | None
            ) -> tuple[float, float]:
    """Print one round's figures; returns (ratio, the dashboard's median ms)."""
    m_app, m_empty = statistics.median(t_app), statistics.median(t_empty)
    ratio = m_app / m_empty
    fmt = lambda xs: ", ".join(f"{x:.0f}" for x in xs)  # noqa: E731
    how = (f"think {args.think_ms:g} ms, anticipation {'off' if args.no_anticipate else 'on'}"
           + (f", {args.query}" if args.query else ""))
    if k is not None:
        print(f"round {k + 1} of {args.rounds}:")
    print(f"home page rerun ({how}): median {m_app:.0f} ms ({fmt(t_app)})")
    print(f"  of which until the server's script_finished arrived: median {statistics.median(t_server):.0f} ms "
          f"({fmt(t_server)}); the rest is the browser drawing")
    print(f"empty one-slider page:       median {m_empty:.0f} ms ({fmt(t_empty)})")
    print(f"ratio {ratio:.2f}x (target <= 2.5x: {'PASS' if ratio <= 2.5 else 'MISS'}); "
          f"absolute target <= 300 ms: {'PASS' if m_app <= 300 else 'MISS'}; load average {os.getloadavg()[0]:.2f}",
          flush=True)
    return ratio, m_app


if __name__ == "__main__":
    sys.exit(main())
