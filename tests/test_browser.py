"""The real dashboard in a real browser: `streamlit run app/main.py` driven by Debian's
headless Chromium through Playwright.

Moves a slider with the keyboard and checks that the chart and the KPI table change, picks
another chart (a fragment rerun: nothing else runs again), checks that the arrow keys send the
slider values the server simulates ahead, opens a
shared URL and checks the controls, goes to a page without the scenario controls and back
(and Back/Forward) and checks that the scenario is kept, opens a bad URL and checks the
warning, downloads the per-request CSV (the click reruns nothing) and compares it with the engine, runs a tiny plan on
the Plan page, and saves docs/screenshot.png.

Without /usr/bin/chromium (or the playwright package) the test is skipped, unless
REQUIRE_BROWSER=1 (CI), where it fails instead.  Playwright never downloads a browser.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
SCREENSHOT = ROOT / "docs" / "screenshot.png"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
LOAD_MS = 180_000  # first run in a fresh process may compile the Numba kernels
STEP_MS = 90_000
#: The What-if page's chart: an SVG built by app/svgchart (drawn as Markdown: st.html's sanitiser drops SVG).
CHART = '[data-testid="stMain"] svg[role="img"]'


def _unavailable(reason: str):
    if os.environ.get("REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser test required (REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`streamlit run app/main.py` on a free port; always terminated."""
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("the playwright package is not installed")
    port = _free_port()
    log = tmp_path_factory.mktemp("streamlit") / "server.log"
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app/main.py", f"--server.port={port}",
             "--server.address=127.0.0.1", "--server.headless=true", "--server.fileWatcherType=none"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited early:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=5) as r:
                    if r.read().decode().strip() == "ok":
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit never became healthy:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield base
        assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-3000:]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    pg = ctx.new_page()
    pg.set_default_timeout(STEP_MS)
    try:
        yield pg
    finally:
        ctx.close()


# ------------------------------------------------------------------ helpers
#: The What-if page's comparison table (one HTML table, page_whatif.kpi_table_html: a row per strategy, a column
#: per KPI).
TABLE = '[data-testid="stMain"] table.wi-kpi'
METRICS_JS = f"() => document.querySelector('{TABLE}')?.innerText || ''"


def kpi_rows(pg) -> int:
    return pg.locator(f"{TABLE} tbody tr").count()


def wait_idle(pg, timeout: int = STEP_MS) -> None:
    """Until the script has finished its run (no 'Running...' status widget) and the KPI table exists."""
    pg.wait_for_selector(TABLE, timeout=timeout)
    pg.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=timeout)
    pg.wait_for_timeout(700)  # charts finish drawing
    pg.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=timeout)


def wait_run(pg, timeout: int = STEP_MS) -> None:
    """Until the script has finished its run (any page: no KPIs needed)."""
    for _ in range(2):
        pg.wait_for_timeout(700)
        pg.wait_for_function("() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=timeout)


def open_app(pg, base: str, query: str = "") -> None:
    pg.goto(f"{base}/{query}")
    wait_idle(pg, LOAD_MS)


def slider(pg, label: str):
    return pg.locator(f'input[type="range"][aria-label="{label}"]')


def metrics(pg) -> str:
    return pg.evaluate(METRICS_JS)


def rerun_requests(pg) -> list[str]:
    """The fragment id of every rerun request the page sends from now on ("" for a full run)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    reruns: list[str] = []

    def on_sent(payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            msg = BackMsg.FromString(bytes(payload))
            if msg.WhichOneof("type") == "rerun_script":
                reruns.append(msg.rerun_script.fragment_id)

    pg.on("websocket", lambda ws: ws.on("framesent", on_sent))
    return reruns


def assert_no_exception(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0


# -------------------------------------------------------------------- tests
def test_slider_moves_charts_and_kpis_and_screenshot(page, server):
    open_app(page, server)
    assert_no_exception(page)
    assert kpi_rows(page) == 5 and page.locator('[data-testid="stMetric"]').count() == 0
    assert page.locator(CHART).count() == 1, "one chart"
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))

    chart = page.locator(CHART).first
    chart.scroll_into_view_if_needed()
    chart_before = chart.screenshot()
    before = metrics(page)

    zipf = slider(page, "Popularity skew (Zipf s)")
    assert zipf.get_attribute("value") == "1"
    zipf.focus()
    for _ in range(6):
        page.keyboard.press("ArrowRight")
    page.wait_for_function(f"(b) => ({METRICS_JS})() !== b", arg=before, timeout=STEP_MS)
    wait_idle(page)
    assert zipf.get_attribute("value") == "1.3"
    assert metrics(page) != before
    assert "zipf_s=1.3" in page.url  # the control is bound to the URL
    chart.scroll_into_view_if_needed()
    assert chart.screenshot() != chart_before, "the TTFT chart did not change"
    assert_no_exception(page)
    # the steps were live (the page's fragment alone, controls._live_step): the share link in the sidebar, which
    # the fragment draws, has the new value; the uploads' expander, which only full runs draw, is still there
    page.get_by_test_id("stExpander").get_by_text("Share this scenario").click()
    assert "zipf_s=1.3" in page.locator('[data-testid="stSidebar"] [data-testid="stCode"]').inner_text()
    assert page.get_by_test_id("stExpander").get_by_text("Import: a scenario.json").count() == 1
    assert page.locator('[data-testid="stSidebar"] input[type="range"]').count() > 10


def test_shared_url_restores_the_controls(page, server):
    open_app(page, server, "?arrival_rate_rps=32&zipf_s=1.1&strategy=batch&gpu=a100-80gb")  # not the default's GPU
    assert_no_exception(page)
    assert slider(page, "Arrival rate (req/s)").get_attribute("value") == "32"
    assert slider(page, "Popularity skew (Zipf s)").get_attribute("value") == "1.1"
    assert slider(page, "PCIe bandwidth (GB/s)").get_attribute("value") == "25"  # the A100's link
    assert page.locator('input[role="combobox"][aria-label="GPU"]').input_value() == "a100-80gb"
    strategies = page.locator('[data-testid="stMultiSelect"]').first.inner_text()
    assert "batch" in strategies and "naive" not in strategies and "hot_set" not in strategies
    assert kpi_rows(page) == 1
    assert "A100" in page.locator('[data-testid="stCaptionContainer"]').first.inner_text()
    # the share link carries the values
    page.get_by_test_id("stExpander").get_by_text("Share this scenario").click()
    link = page.locator('[data-testid="stSidebar"] [data-testid="stCode"]').inner_text()
    assert "arrival_rate_rps=32" in link and "gpu=a100-80gb" in link


def test_share_link_copy_button_and_tie_banner(page, server):
    """Two strategies identical in effect (naive and vllm on the light preset: no slot is ever busy) give the
    tie banner, not a trophy; the share link's copy button puts the short link on the clipboard, and opening
    the copied link gives the same page."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    open_app(page, server, "?preset=a100-light&strategy=naive&strategy=vllm&duration_s=60")
    assert_no_exception(page)
    banner = page.locator('[data-testid="stAlert"]').filter(has_text="p99 TTFT").first.inner_text()
    assert banner.startswith("balance") and "Tie on p99 TTFT" in banner  # the balance icon, not the trophy
    assert "naive" in banner and "vllm" in banner and "wins" not in banner
    page.get_by_test_id("stExpander").get_by_text("Share this scenario").click()
    code = page.locator('[data-testid="stSidebar"] [data-testid="stCode"]')
    shown = code.inner_text().strip()
    code.hover()
    code.get_by_role("button", name="Copy to clipboard").click()
    page.wait_for_function("(s) => navigator.clipboard.readText().then(t => t === s)", arg=shown, timeout=10_000)
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied == shown and copied.startswith(server)
    assert "preset=a100-light" in copied and "duration_s=60" in copied and "zipf_s" not in copied  # short
    page.goto(copied)
    wait_idle(page, LOAD_MS)
    again = page.locator('[data-testid="stAlert"]').filter(has_text="p99 TTFT").first.inner_text()
    assert again == banner


def test_pages_without_controls_keep_the_scenario(page, server):
    """What-if -> Findings -> What-if through the top navigation, then Back and Forward: Findings shows no
    scenario controls and no scenario in its URL; What-if gets both back; no history entry loses them."""
    open_app(page, server, "?zipf_s=1.3&duration_s=60")
    sidebar_sliders = page.locator('[data-testid="stSidebar"] input[type="range"]')
    n = sidebar_sliders.count()
    assert n > 10

    def on_whatif_with_the_scenario() -> None:
        assert slider(page, "Popularity skew (Zipf s)").get_attribute("value") == "1.3"
        assert slider(page, "Duration (s)").get_attribute("value") == "60"
        assert "zipf_s=1.3" in page.url and "duration_s=60" in page.url
        assert kpi_rows(page) == 5

    page.get_by_role("link", name="Findings").click()
    wait_run(page)
    assert page.url.split("?")[0].endswith("/findings") and "zipf_s" not in page.url
    assert sidebar_sliders.count() == 0
    assert "engine" in page.locator('[data-testid="stSidebar"]').inner_text()  # the footer stays
    page.get_by_role("link", name="What-if").click()
    wait_idle(page)
    assert sidebar_sliders.count() == n
    on_whatif_with_the_scenario()
    # Back: Findings again (at most one extra step, the entry of the navigation itself), never a reset What-if
    for _ in range(2):
        page.go_back()
        wait_run(page)
        if sidebar_sliders.count() == 0:
            break
        on_whatif_with_the_scenario()
    assert page.url.split("?")[0].endswith("/findings") and sidebar_sliders.count() == 0
    page.go_forward()
    wait_run(page)
    if sidebar_sliders.count():
        wait_idle(page)
        on_whatif_with_the_scenario()
    assert_no_exception(page)


def test_bad_url_warns_and_still_renders(page, server):
    open_app(page, server, "?arrival_rate_rps=9999&zipf_s=abc&foo=1")
    assert_no_exception(page)
    text = " ".join(page.locator('[data-testid="stAlertContentWarning"]').all_inner_texts())
    for name in ["arrival_rate_rps", "zipf_s", "foo"]:
        assert name in text, text
    assert slider(page, "Arrival rate (req/s)").get_attribute("value") == "200"
    assert kpi_rows(page) == 5
    assert "foo" not in page.url and "arrival_rate_rps=200" in page.url


def test_picking_a_chart_reruns_only_its_fragment(page, server):
    """The chart selector is page-local: a click asks the server for a rerun of the charts' fragment alone (the
    rerun request names the fragment), so the simulations, the table and the sidebar are not run again; the
    chart shown changes, the table does not."""
    reruns = rerun_requests(page)
    open_app(page, server, "?duration_s=60&strategy=naive&strategy=slora")
    chart = page.locator(CHART)
    assert chart.count() == 1
    table = metrics(page)
    chart.first.scroll_into_view_if_needed()
    before = chart.first.screenshot()
    reruns.clear()
    page.get_by_role("radiogroup", name="Chart").get_by_role("radio", name="GPU busy").click()
    page.wait_for_function("() => document.querySelector('[data-testid=stMain]').innerText"
                           ".includes('Inside the server over time')", timeout=STEP_MS)
    wait_run(page)
    assert reruns and all(reruns), f"a fragment rerun, not a full one: {reruns}"
    assert chart.count() == 1
    chart.first.scroll_into_view_if_needed()
    assert chart.first.screenshot() != before, "the GPU-busy chart replaced the TTFT CDF"
    assert metrics(page) == table
    assert_no_exception(page)


def test_the_why_section_is_built_when_picked_by_a_fragment_rerun(page, server):
    """The sections under the table (page_whatif.DETAILS) build only the one picked: picking "Why" reruns the live
    fragment (not the app), shows each strategy's bottlenecks and drops the chart; the table stays as it was."""
    reruns = rerun_requests(page)
    open_app(page, server, "?duration_s=60&strategy=naive&strategy=slora")
    main = page.locator('[data-testid="stMain"]')
    assert page.locator(CHART).count() == 1 and "naive:" not in main.inner_text()
    table = metrics(page)
    reruns.clear()
    page.get_by_role("radiogroup", name="Details").get_by_role("radio", name="Why").click()
    page.wait_for_function("() => document.querySelector('[data-testid=stMain]').innerText.includes('slora:')",
                           timeout=STEP_MS)
    wait_run(page)
    assert reruns and all(reruns), f"a fragment rerun, not a full one: {reruns}"
    assert page.locator(CHART).count() == 0 and metrics(page) == table
    assert_no_exception(page)


def test_arrow_keys_send_the_values_the_server_anticipates(page, server):
    """A slider's arrow key in Chromium sends the value ``controls.step_values`` computes (the grid min + k x step,
    rounded to the step's decimals: 1.15, not 1.1 + 0.05 = 1.1500000000000001), so the scenario the server simulated
    ahead (``runner.anticipate``) is the one the step asks for, float for float.  Off-grid values snap as the
    browser snaps them (a VRAM budget of 1.05 GiB goes to 1.25)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    from app import controls

    sent: list = []

    def on_sent(payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            msg = BackMsg.FromString(bytes(payload))
            if msg.WhichOneof("type") == "rerun_script":
                sent.append({w.id.rsplit("-", 1)[-1]: w for w in msg.rerun_script.widget_states.widgets})

    page.on("websocket", lambda ws: ws.on("framesent", on_sent))
    query = {"duration_s": "60", "strategy": "naive", "zipf_s": "1.1", "pcie_gbps": "25.5", "vram_budget_gb": "1.05",
             "length_spread": "0.35"}
    open_app(page, server, "?" + "&".join(f"{k}={v}" for k, v in query.items()))
    values, _ = controls.resolve(query)
    for key, label, press, n in [("zipf_s", "Popularity skew (Zipf s)", "ArrowRight", 1),
                                 ("zipf_s", "Popularity skew (Zipf s)", "ArrowLeft", -1),
                                 ("pcie_gbps", "PCIe bandwidth (GB/s)", "ArrowRight", 1),
                                 ("vram_budget_gb", "Adapter VRAM budget (GiB)", "ArrowRight", 1),
                                 ("length_spread", "Length spread", "ArrowLeft", -1),
                                 ("arrival_rate_rps", "Arrival rate (req/s)", "ArrowRight", 1)]:
        (want,) = controls.step_values(values, key, [n])
        sent.clear()
        slider(page, label).focus()
        page.keyboard.press(press)
        page.wait_for_function(f"() => document.querySelector('input[type=range][aria-label=\"{label}\"]')"
                               f".getAttribute('value') !== '{values[key]}'", timeout=STEP_MS)
        wait_idle(page)
        got = [m[key].double_array_value.data[0] for m in sent if key in m]
        assert got and got[-1] == want[key], (key, values[key], got, want[key])
        values = want
    assert_no_exception(page)


def test_download_per_request_csv(page, server, tmp_path):
    """After a live step (the arrival rate: the page's fragment alone reruns, controls._live_step), the download
    exports that step's runs."""
    from engine import Scenario, simulate

    sent = rerun_requests(page)  # (from the websocket's opening on)
    open_app(page, server, "?duration_s=120&strategy=naive&strategy=batch&arrival_rate_rps=6.5")
    page.get_by_role("radiogroup", name="Details").get_by_role("radio", name="Export").click()  # (its buttons are built while it is shown)
    page.get_by_role("button", name="Per-request CSV").wait_for(timeout=STEP_MS)
    wait_idle(page)
    rate = slider(page, "Arrival rate (req/s)")
    rate.focus()
    before = metrics(page)
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"(b) => ({METRICS_JS})() !== b", arg=before, timeout=STEP_MS)
    wait_idle(page)
    assert "arrival_rate_rps=7" in page.url
    button = page.get_by_role("button", name="Per-request CSV")
    button.scroll_into_view_if_needed()
    sent.clear()
    with page.expect_download(timeout=STEP_MS) as info:
        button.click()
    path = tmp_path / "requests.csv"
    info.value.save_as(path)
    wait_run(page)
    # (a click that reran the fragment would end that run by dropping the file the click is fetching, a race the
    # download could lose: on_click="ignore")
    assert sent == [], sent
    df = pd.read_csv(path)
    sc = Scenario.from_preset("default", duration_s=120.0, arrival_rate_rps=7.0)
    ref = {s: simulate(sc.replace(strategy=s)).requests for s in ["naive", "batch"]}
    assert list(df.columns) == ["strategy", *ref["naive"].columns]
    assert df.groupby("strategy", sort=False).size().to_dict() == {s: len(r) for s, r in ref.items()}


def test_plan_page_runs_a_tiny_plan(page, server):
    """/plan with a one-replication, two-configuration plan in the URL: the controls take it, the button runs it,
    and the recommendation comes with its vLLM command line."""
    # 8 adapters: 8 slots hold them all, so the plan has an answer (the default's 200 adapters on 8 slots are
    # unstable at any rate a 60 s probe reaches)
    page.goto(f"{server}/plan?duration_s=60&num_adapters=8&plan_gpus=a100-80gb&plan_gpus=h100-80gb&plan_max_loras=8"
              "&plan_strategies=vllm&plan_reps=1")
    run = page.get_by_role("button", name="Run the plan")
    run.wait_for(timeout=LOAD_MS)
    wait_run(page)
    assert_no_exception(page)
    assert "2 configurations x 1 replication(s)" in page.locator('[data-testid="stMain"]').inner_text()
    run.click()
    code = page.locator('[data-testid="stMain"] [data-testid="stCode"]').filter(has_text="vllm serve")
    code.first.wait_for(timeout=STEP_MS)
    wait_run(page)
    assert "--max-loras 8" in code.first.inner_text()
    main = page.locator('[data-testid="stMain"]').inner_text()
    assert "Recommended: gpu" in main and "Best: gpu=" in main, main[-3000:]
    assert page.get_by_role("button", name="Open on What-if").count() == 1
    assert_no_exception(page)
