"""Capacity for a team against a real server, no browsers: N WebSocket clients speaking Streamlit's protocol.

    python bench/ws_load.py [--sessions 1 4 8] [--reruns 6] [--think-s 1.0] [--same]

Starts ``streamlit run app/main.py`` (``browser_rerun._serve``) and, once, opens the home page in Debian's headless
Chromium to record the message the browser sends when the arrival-rate slider moves one step (a ``BackMsg``
``rerun_script`` carrying every widget's state; widget ids do not depend on the session).  Then, per session
count, that many asyncio clients connect to ``/_stcore/stream`` as a browser tab does: each opens the home page
(a ``rerun_script`` with its URL), waits for ``script_finished``, and ``--reruns`` times pauses ``--think-s``
(a person reading the page; the server anticipates the next step meanwhile: ``app.runner.anticipate``), sends the
recorded message with its slider one step up, and times it until the server's ``script_finished`` for that run.
Session i starts at the default rate + 0.5 i req/s (``--same``: every session on the same rates, sharing results
through the cache).  A run that draws an exception element is an error.  Reports per session count: reruns, p50 /
p95 / max, errors, and the server's resident memory (RSS) before and after.  The server, its event loop, its
serialization and its simulation workers are the real ones; only the browsers' drawing is left out
(``bench/browser_rerun.py`` measures that, ``bench/load_test.py`` eight browsers).  Target (issue 26): 8 sessions
p95 <= 1 s, 0 errors, memory bounded.  Exits 0.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from browser_rerun import ARGS, CHROMIUM, LABEL, _serve  # noqa: E402

TARGET_P95_S = 1.0
KEY = "arrival_rate_rps"


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def record_step(url: str) -> bytes:
    """The serialized ``rerun_script`` BackMsg Chromium sends when the arrival-rate slider moves one step."""
    from playwright.sync_api import sync_playwright
    from streamlit.proto.BackMsg_pb2 import BackMsg

    sent: list[bytes] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            pg = browser.new_context().new_page()
            pg.set_default_timeout(180_000)
            pg.on("websocket", lambda ws: ws.on("framesent", lambda pl: sent.append(bytes(pl))
                                                   if isinstance(pl, (bytes, bytearray)) else None))
            pg.goto(url)
            slider = pg.locator(f'input[type="range"][aria-label="{LABEL}"]').first
            slider.wait_for()
            pg.locator("[data-testid=stMain] table.wi-kpi").first.wait_for()  # (the What-if table)
            n = len(sent)
            slider.focus()
            pg.keyboard.press("ArrowRight")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for raw in sent[n:]:
                    m = BackMsg.FromString(raw)
                    if m.WhichOneof("type") == "rerun_script" and any(
                            w.id.endswith("-" + KEY) for w in m.rerun_script.widget_states.widgets):
                        return raw
                pg.wait_for_timeout(20)
        finally:
            browser.close()
    raise SystemExit("the browser sent no rerun with the slider's state")


def step_message(template: bytes, rate: float) -> bytes:
    """The recorded step with the arrival-rate slider (and the URL) at ``rate``."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    m = BackMsg.FromString(template)
    for w in m.rerun_script.widget_states.widgets:
        if w.id.endswith("-" + KEY):
            del w.double_array_value.data[:]
            w.double_array_value.data.append(rate)
    m.rerun_script.query_string = f"{KEY}={rate:g}"
    return m.SerializeToString()


async def _run_until_finished(ws, msg: bytes | None) -> tuple[float, bool]:
    """Send ``msg`` (if any) and read until the server finishes the run it starts: (seconds, an exception shown)."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    t = time.perf_counter()
    if msg is not None:
        await ws.send(msg)
    started, failed = False, False
    while True:
        fm = ForwardMsg.FromString(await ws.recv())
        kind = fm.WhichOneof("type")
        if kind == "new_session":
            started = True
        elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element" and \
                fm.delta.new_element.WhichOneof("type") == "exception":
            failed = True
        elif kind == "script_finished" and started and fm.script_finished != fm.FINISHED_EARLY_FOR_RERUN:
            # (a live step's run ends early, for the fragment's run that follows: not the end of the step)
            return time.perf_counter() - t, failed


async def _session(i: int, url: str, template: bytes, reruns: int, think_s: float, same: bool, rate0: float,
                   start: asyncio.Event, ready: list, out: list, errors: list) -> None:
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg

    ws_url = url.replace("http://", "ws://") + "/_stcore/stream"
    try:
        async with websockets.connect(ws_url, subprotocols=["streamlit"], origin=url, max_size=None) as ws:
            first = BackMsg()
            first.rerun_script.query_string = ""
            first.rerun_script.context_info.url = url + "/"
            _, failed = await _run_until_finished(ws, first.SerializeToString())
            if failed:
                errors.append(f"session {i}: the first page showed an exception")
            ready.append(i)
            await start.wait()
            base = rate0 + (0.0 if same else 0.5 * i)
            for k in range(reruns):
                await asyncio.sleep(think_s)
                dt, failed = await _run_until_finished(ws, step_message(template, base + 0.5 * (k + 1)))
                out.append(dt)
                if failed:
                    errors.append(f"session {i} rerun {k}: an exception element")
    except Exception as e:  # noqa: BLE001  (reported, the other sessions go on)
        errors.append(f"session {i}: {type(e).__name__}: {e}")
        ready.append(i)


async def run(n: int, url: str, template: bytes, reruns: int, think_s: float, same: bool, rate0: float) -> dict:
    out: list[float] = []
    errors: list[str] = []
    ready: list[int] = []
    start = asyncio.Event()
    tasks = [asyncio.create_task(_session(i, url, template, reruns, think_s, same, rate0, start, ready, out, errors))
             for i in range(n)]
    while len(ready) < n:
        await asyncio.sleep(0.05)
    t = time.perf_counter()
    start.set()
    await asyncio.gather(*tasks)
    q = sorted(out)
    p95 = q[min(len(q) - 1, round(0.95 * (len(q) - 1)))] if q else float("nan")
    return dict(reruns=len(q), p50=statistics.median(q) if q else float("nan"), p95=p95,
                max=max(q) if q else float("nan"), errors=errors, wall=time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--reruns", type=int, default=6)
    ap.add_argument("--think-s", type=float, default=1.0, help="pause before each step (a person reading)")
    ap.add_argument("--same", action="store_true", help="every session on the same rates (shared cache)")
    ap.add_argument("--no-anticipate", action="store_true", help="the server with LORA_WHATIF_ANTICIPATE=0")
    a = ap.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing (apt-get install chromium): it records the browser's step message once")
        return 0
    from streamlit.proto.BackMsg_pb2 import BackMsg

    proc, url = _serve(ROOT / "app" / "main.py", ROOT, {"LORA_WHATIF_ANTICIPATE": "0"} if a.no_anticipate else None)
    try:
        template = record_step(url)
        rate0 = next(w.double_array_value.data[0] for w in BackMsg.FromString(template).rerun_script.widget_states
                     .widgets if w.id.endswith("-" + KEY)) - 0.5
        print(f"session load, real server, WebSocket clients (no browsers), {time.strftime('%Y-%m-%dT%H:%M:%S%z')}; "
              f"{os.cpu_count()} cores; {'same scenarios' if a.same else 'one scenario per session'}; think "
              f"{a.think_s:g} s; anticipation {'off' if a.no_anticipate else 'on'}; load average {os.getloadavg()}")
        for n in a.sessions:
            rss0 = _rss_mib(proc.pid)
            r = asyncio.run(run(n, url, template, a.reruns, a.think_s, a.same, rate0))
            ok = r["p95"] <= TARGET_P95_S and not r["errors"]
            print(f"{n} session(s): {r['reruns']} reruns, p50 {r['p50']:.2f} s, p95 {r['p95']:.2f} s, max "
                  f"{r['max']:.2f} s; errors {len(r['errors'])}; server RSS {rss0:.0f} -> {_rss_mib(proc.pid):.0f} "
                  f"MiB; wall {r['wall']:.1f} s" + (f"; target p95 <= {TARGET_P95_S:g} s: "
                                                     f"{'PASS' if ok else 'MISS'}" if n == 8 else ""))
            for e in r["errors"][:3]:
                print("   ", e[:300])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"load average at end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
