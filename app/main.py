"""LoRA What-If dashboard: ``streamlit run app/main.py``.

The entry point is a frame around the pages: it cleans the URL, warms the engine,
draws the shared scenario controls in the sidebar and runs the selected page.
Pages are files under ``app/views/``; add one to ``PAGES`` (or just drop a new
file there: unlisted files are appended, titled after their file name).

The folder is deliberately not called ``pages/``: Streamlit treats a ``pages/``
folder next to the entry point as a legacy (v1) multipage app, and then runs a
page file without this entry point (AppTest from the second run on, and a fresh
server's first request to a page URL), i.e. without the sidebar and its state.
"""
from __future__ import annotations

import sys
from pathlib import Path

APP_DIR = Path(__file__).resolve().parent
ROOT = APP_DIR.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import controls, runner  # noqa: E402
from engine import ENGINE_VERSION  # noqa: E402

#: (file under app/views, title, icon, url path); the first one is the home page.
PAGES: list[tuple[str, str, str, str]] = [
    ("whatif.py", "What-if", ":material/tune:", "whatif"),
    ("sweeps.py", "Sweeps", ":material/show_chart:", "sweeps"),
    ("crossover.py", "Crossover", ":material/grid_view:", "crossover"),
    ("findings.py", "Findings", ":material/lightbulb:", "findings"),
    ("validation.py", "Validation", ":material/fact_check:", "validation"),
    ("kv_interference.py", "KV interference", ":material/memory_alt:", "kv_interference"),
    ("model.py", "Model", ":material/menu_book:", "model"),
]


def pages() -> list:
    """st.Page objects for the listed pages that exist, then any other file in app/views/."""
    out, seen = [], set()
    for fname, title, icon, path in PAGES:
        f = APP_DIR / "views" / fname
        if f.is_file():
            out.append(st.Page(f, title=title, icon=icon, url_path=path, default=not out))
            seen.add(fname)
    for f in sorted((APP_DIR / "views").glob("*.py")):
        if f.name not in seen and not f.name.startswith("_"):
            out.append(st.Page(f, title=f.stem.replace("_", " ").capitalize(), url_path=f.stem))
    return out


st.set_page_config(page_title="LoRA What-If", page_icon=":material/memory:", layout="wide",
                   initial_sidebar_state="expanded")
# Less empty space above the page title (the top navigation already provides a margin);
# KPI values small enough for six tiles in a row with their units.
st.html("<style>[data-testid='stMainBlockContainer']{padding-top:2.5rem}"
        "[data-testid='stMetricValue']{font-size:1.85rem}</style>")
controls.sanitize_url_once()
with st.spinner("Warming up the simulator (first start compiles its kernels, about 10 s)..."):
    try:
        runner.warmup()
    except Exception as e:  # the engine itself is broken: say so instead of a bare traceback
        st.error(f"The simulation engine failed to start ({type(e).__name__}: {e}).", icon=":material/error:")
        st.stop()
state = controls.render_sidebar()
page = st.navigation(pages(), position="top")
controls.render_share(state, page.url_path)
st.sidebar.caption(f"LoRA What-If · engine {ENGINE_VERSION}")
page.run()
