"""Does every slider step finish?  The home page's first slider steps on fresh servers, under CPU load.

    python bench/step_stress.py [--rounds 40] [--busy 1] [--timeout-s 20] [--out /tmp/step_stress]

Each round starts ``streamlit run app/main.py`` (a new process: the first steps of a server are the ones that
raced), opens the home page in Debian's headless Chromium, takes a screenshot of the page and of its chart (as
``tests/test_browser.py``'s first test does), then presses ArrowRight six times on the Zipf slider as fast as
Playwright types and waits ``--timeout-s`` for the comparison table to change.  ``--busy N`` runs N processes
that spin on a core meanwhile (CI runs the browser test beside another pytest worker: ``--busy 1``).

A round whose table never changes is a failure: the page's URL, its text and the run messages the WebSocket
carried (rerun requests sent, ``new_session`` / ``script_finished`` received) go to ``--out``, with the
server's Python stacks (``py-spy dump``, when installed).  This found the stuck step of session 19: the last
run waited forever for simulations an older run of the same session had dropped (``app.runner._gather``);
before the fix 2 of 54 rounds failed with one busy core and 1 of 80 with two, after it 0 of 100 with two.

Prints every round's outcome and the count of failures.  Exits 1 if any round failed.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser_rerun import ARGS, CHROMIUM, ROOT, _serve  # noqa: E402

TABLE_JS = "() => document.querySelector('[data-testid=stMain] table')?.innerText || ''"
SLIDER = 'input[type="range"][aria-label="Popularity skew (Zipf s)"]'
CHART = '[data-testid="stMain"] svg[role="img"]'


def _idle(pg, timeout_ms: int) -> None:
    pg.wait_for_function(f"() => ({TABLE_JS})() !== ''", timeout=timeout_ms)
    for _ in range(2):
        pg.wait_for_timeout(700)
        pg.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=timeout_ms)


def _watch(pg, t0: float) -> list:
    """The run messages of the page's WebSocket, with their time since ``t0``."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    events: list = []

    def sent(payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            msg = BackMsg.FromString(bytes(payload))
            if msg.WhichOneof("type") == "rerun_script":
                zipf = [list(w.double_array_value.data) for w in msg.rerun_script.widget_states.widgets
                        if w.id.endswith("zipf_s")]
                events.append([round(time.monotonic() - t0, 3), "sent rerun", msg.rerun_script.fragment_id,
                               zipf[0] if zipf else None])

    def received(payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            try:
                kind = ForwardMsg.FromString(bytes(payload)).WhichOneof("type")
            except Exception:  # noqa: BLE001 (not a ForwardMsg)
                return
            if kind in ("new_session", "script_finished"):
                events.append([round(time.monotonic() - t0, 3), "received", kind])

    pg.on("websocket", lambda ws: (ws.on("framesent", sent), ws.on("framereceived", received)))
    return events


def _round(browser, i: int, timeout_s: float, out: Path) -> bool:
    proc, base = _serve(ROOT / "app" / "main.py", ROOT)
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        pg = ctx.new_page()
        pg.set_default_timeout(180_000)
        events = _watch(pg, time.monotonic())
        pg.goto(base + "/")
        _idle(pg, 180_000)
        pg.screenshot()
        chart = pg.locator(CHART).first
        chart.scroll_into_view_if_needed()
        chart.screenshot()
        before = pg.evaluate(TABLE_JS)
        pg.locator(SLIDER).focus()
        for _ in range(6):
            pg.keyboard.press("ArrowRight")
        try:
            pg.wait_for_function(f"(b) => ({TABLE_JS})() !== b", arg=before, timeout=timeout_s * 1000)
            return True
        except Exception:  # noqa: BLE001 (Playwright's timeout: this round failed)
            out.mkdir(parents=True, exist_ok=True)
            if shutil.which("py-spy"):
                with open(out / f"round{i}_stacks.txt", "w") as f:
                    subprocess.run(["py-spy", "dump", "--pid", str(proc.pid)], stdout=f, stderr=subprocess.STDOUT,
                                   timeout=60, check=False)
            text = pg.locator('[data-testid="stMain"]').inner_text()
            (out / f"round{i}.json").write_text(json.dumps({"url": pg.url, "events": events, "page": text}, indent=1))
            return False
    finally:
        ctx.close()
        proc.terminate()
        proc.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--busy", type=int, default=1, help="processes spinning on a core meanwhile")
    ap.add_argument("--timeout-s", type=float, default=20.0, help="how long a step may take before it counts as stuck")
    ap.add_argument("--out", default="/tmp/step_stress", help="where a failed round's page, messages and stacks go")
    a = ap.parse_args(argv)
    if a.rounds < 1 or a.busy < 0 or a.timeout_s <= 0:
        ap.error("--rounds >= 1, --busy >= 0 and --timeout-s > 0")
    if not Path(CHROMIUM).exists():
        ap.error(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(a.busy)]
    failed = 0
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            for i in range(a.rounds):
                ok = _round(browser, i, a.timeout_s, Path(a.out))
                failed += not ok
                print(f"round {i + 1}/{a.rounds}: {'ok' if ok else 'STUCK (see ' + a.out + ')'}", flush=True)
            browser.close()
    finally:
        for b in busy:
            b.kill()
    print(f"{failed} of {a.rounds} rounds stuck ({a.busy} busy process(es), {a.timeout_s:g} s per step)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
