"""Every download button of the dashboard downloads without rerunning the app (``on_click="ignore"``).

Streamlit's default (``"rerun"``) reruns the app, or the button's fragment, on the click.  That run ends by dropping
every file its own buttons no longer reference (``MediaFileManager.remove_orphaned_files``), the clicked one's
included: a deferred (built-on-click) export then fails with "Deferred file ... not found" when the run ends before
the server has looked the file up, a race the download loses under load (seen in CI).  The What-if page's buttons
are checked on the rendered page (test_app.py); this checks every call in the app's source, so a new button cannot
bring the race back.
"""
from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app"


def _download_calls() -> list[tuple[str, int, ast.Call]]:
    calls = []
    for path in sorted(APP.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "download_button"):
                calls.append((path.name, node.lineno, node))
    return calls


def test_every_download_button_ignores_the_click():
    calls = _download_calls()
    assert len(calls) >= 10, calls  # (the checker finds the buttons: What-if, Plan, Validation, Sweeps, KV, Crossover)
    bad = []
    for name, line, call in calls:
        kw = {k.arg: k.value for k in call.keywords}
        on_click = kw.get("on_click")
        if not (isinstance(on_click, ast.Constant) and on_click.value == "ignore"):
            bad.append(f"{name}:{line}")
    assert not bad, f"download_button without on_click='ignore' (a click would rerun and may drop its file): {bad}"
