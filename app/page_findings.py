"""Findings page: renders docs/findings.md (written by ``python -m engine findings``).

If the report has a verdict table (a Markdown
table under a heading that mentions verdicts, with a column of holds / partly / does
not hold), the page also shows the verdict counts as tiles; if that parsing finds
nothing, the report is just rendered.
"""
from __future__ import annotations

import re
from pathlib import Path

import streamlit as st

from engine import ENGINE_VERSION

FINDINGS_MD = Path(__file__).resolve().parent.parent / "docs" / "findings.md"
GENERATE_CMD = "python -m engine findings"
VERDICTS = ("holds", "partly", "does not hold")
_EMPTY = ("", "n/a", "-", "—")


def _cell(s: str) -> str:
    """Cell text without emphasis, code marks or surrounding space, lower case."""
    return re.sub(r"[*_`]", "", s).strip().lower()


def _cells(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", body)]


def tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """Markdown tables: (last heading above it, header cells, body rows)."""
    out, heading, block = [], "", []

    def flush():
        if len(block) >= 2 and re.fullmatch(r"\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?", block[1].strip()):
            out.append((heading, _cells(block[0]), [_cells(r) for r in block[2:]]))
        block.clear()

    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|"):
            block.append(s)
            continue
        flush()
        if s.startswith("#"):
            heading = s.lstrip("#").strip()
    flush()
    return out


def verdict_counts(text: str) -> tuple[dict[str, int], str] | None:
    """Counts of each verdict in the report's verdict table, and the column counted; None if there is none.

    The table is the first one under a heading mentioning "verdict" that has a column whose non-empty
    cells are all verdicts; of several such columns, the first whose header names a view or verdict.
    """
    for heading, header, rows in tables(text):
        if "verdict" not in heading.lower() or not rows:
            continue
        cols = []
        for j in range(len(header)):
            vals = [_cell(r[j]) for r in rows if j < len(r)]
            vals = [v for v in vals if v not in _EMPTY]
            if vals and all(v in VERDICTS for v in vals):
                cols.append(j)
        if not cols:
            continue
        named = [j for j in cols if re.search(r"verdict|view|preset", header[j], re.I)]
        j = (named or cols)[0]
        counts = {v: 0 for v in VERDICTS}
        for r in rows:
            if j < len(r) and _cell(r[j]) in counts:
                counts[_cell(r[j])] += 1
        return counts, _cell(header[j]) if j < len(header) else ""
    return None


def report_engine_version(text: str) -> str | None:
    m = re.search(r"\bwith engine\s+v?([0-9]+(?:\.[0-9]+)+)", text[:3000])
    return m.group(1) if m else None


def _split_title(text: str) -> tuple[str | None, str]:
    """The leading ``# `` heading (if any) and the rest."""
    lines = text.lstrip().splitlines()
    if lines and re.match(r"#\s", lines[0]):
        return lines[0], "\n".join(lines[1:])
    return None, text


def render() -> None:
    if not FINDINGS_MD.is_file():
        st.title("Findings", anchor=False)
        st.info("The findings report (docs/findings.md) has not been generated yet. It checks each published claim of "
                f"the source studies against the simulator. Generate it from the repository root with\n\n"
                f"`{GENERATE_CMD}`\n\n(add `--quick` for a shorter, rougher run), then reload this page.",
                icon=":material/lightbulb:")
        return
    text = FINDINGS_MD.read_text(encoding="utf-8")
    title, rest = _split_title(text)
    if title is None:
        st.title("Findings", anchor=False)
    else:
        st.markdown(title)
    version = report_engine_version(text)
    if version is not None and version != ENGINE_VERSION:
        st.warning(f"This report was generated with engine {version}; the app runs engine {ENGINE_VERSION}, so its "
                   f"numbers may be out of date. Regenerate it with `{GENERATE_CMD}`.", icon=":material/update:")
    try:
        parsed = verdict_counts(text)
    except Exception:  # an unexpected layout: render the report without tiles
        parsed = None
    if parsed is not None:
        counts, column = parsed
        total = sum(counts.values())
        where = f" (column '{column}')" if column else ""
        cols = st.columns(4)
        cols[0].metric("Claims checked", total, help=f"Rows of the report's verdict table{where}.")
        for col, v in zip(cols[1:], VERDICTS):
            col.metric(v.capitalize(), counts[v],
                       help=f"Claims whose verdict is '{v}' in the report's verdict table{where}.")
    st.markdown(rest)
