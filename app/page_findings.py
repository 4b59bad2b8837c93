"""Findings page: renders docs/findings.md (written by ``python -m engine findings``).

If the report has a verdict table (a Markdown
table under a heading that mentions verdicts, with a column of holds / partly / does
not hold), the page also shows the verdict counts as tiles; if that parsing finds
nothing, the report is just rendered.

The report is drawn section by section (``doc_sections``), each heading with its own anchor, and
the sidebar lists them (``toc_markdown``; the Model page uses the same helpers).  Each claim gets a
link that opens its scenario on the What-if page (``claim_links``): the preset its conditions name
(or the seed's preset from the report's "Conditions" list), the single values its conditions state
(rate, output length, window, Zipf s, ...) and the strategies its preset-view row compares.  What
the text does not state (a swept range, "both workloads") is left at the preset's values.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from app import controls
from engine import ENGINE_VERSION, STRATEGIES, Scenario, presets

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


def split_title(text: str) -> tuple[str | None, str]:
    """The leading ``# `` heading (if any) and the rest."""
    lines = text.lstrip().splitlines()
    if lines and re.match(r"#\s", lines[0]):
        return lines[0], "\n".join(lines[1:])
    return None, text


# ------------------------------------------------------------------ sections and contents
@dataclass(frozen=True)
class Section:
    level: int      # 2 for ``##``, 3 for ``###``
    title: str      # the heading's text (Markdown)
    anchor: str     # unique within the document
    body: str       # the Markdown up to the next ``##`` / ``###`` heading


_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{2,3})\s+(.+?)\s*#*\s*$")


def plain(md: str) -> str:
    """Heading text without Markdown marks (emphasis, code, links)."""
    md = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", md)
    md = re.sub(r"[*`]", "", md)
    return re.sub(r"(?<!\w)_+|_+(?!\w)", "", md).strip()  # emphasis, not the _ inside names


def slug(title: str) -> str:
    """Anchor of a heading: lower case, runs of other characters as one ``-``."""
    return re.sub(r"[^0-9a-z]+", "-", plain(title).lower()).strip("-") or "section"


def doc_sections(text: str) -> tuple[str, list[Section]]:
    """The Markdown before the first ``##``/``###`` heading, and the sections (headings inside code
    fences are not headings).  Anchors are made unique with ``-2``, ``-3``, ..."""
    intro: list[str] = []
    sections: list[tuple[int, str, list[str]]] = []
    fence = None
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
        h = None if fence or m else _HEADING.match(line)
        if h:
            sections.append((len(h.group(1)), h.group(2), []))
        else:
            (sections[-1][2] if sections else intro).append(line)
    seen: dict[str, int] = {}
    out = []
    for level, title, body in sections:
        a = slug(title)
        seen[a] = seen.get(a, 0) + 1
        if seen[a] > 1:
            a = f"{a}-{seen[a]}"
        out.append(Section(level, title, a, "\n".join(body).strip("\n")))
    return "\n".join(intro).strip("\n"), out


def toc_markdown(sections: list[Section], width: int = 64) -> str:
    """Nested Markdown list of links to the sections (titles shortened to ``width`` characters)."""
    lines = []
    for s in sections:
        t = plain(s.title)
        t = t if len(t) <= width else t[: width - 1].rstrip() + "…"
        t = t.replace("[", "\\[").replace("]", "\\]")
        lines.append(f"{'  ' * (s.level - 2)}- [{t}](#{s.anchor})")
    return "\n".join(lines)


def render_doc(text: str, extra: Callable[[Section], None] | None = None,
               after_intro: Callable[[], None] | None = None) -> None:
    """Draw ``text`` (a Markdown document without its ``#`` title) section by section, each heading with its
    anchor, and its table of contents in the sidebar.  ``extra(section)`` draws under a heading,
    ``after_intro()`` between the text before the first heading and the first section."""
    intro, sections = doc_sections(text)
    if sections:
        st.sidebar.markdown("**Contents**")
        st.sidebar.markdown(toc_markdown(sections))
    if intro:
        st.markdown(intro)
    if after_intro is not None:
        after_intro()
    for s in sections:
        (st.header if s.level == 2 else st.subheader)(s.title, anchor=s.anchor)
        if extra is not None:
            extra(s)
        if s.body:
            st.markdown(s.body)


# ------------------------------------------------------------------ links to What-if
WHATIF_PATH = "whatif"
_CLAIM = re.compile(r"^(?P<id>[A-Z][A-Z0-9]*-\d+)\s+\(seed\s+(?P<seed>\d+)\)")
#: Conditions that state one value of a control: pattern (case-insensitive, on one comma-separated part).
_VALUES = [
    (re.compile(r"^(\d+(?:\.\d+)?)\s*req/s$"), "arrival_rate_rps"),
    (re.compile(r"^output\s+(\d+)$"), "output_tokens"),
    (re.compile(r"^prompt\s+(\d+)$"), "prompt_tokens"),
    (re.compile(r"^window\s+(\d+(?:\.\d+)?)\s*ms$"), "batch_window_ms"),
    (re.compile(r"^concurrency\s+(\d+)$"), "concurrency"),
    (re.compile(r"^max_loras\s+(\d+)$"), "max_loras"),
    (re.compile(r"^rank\s+(\d+)\b"), "adapter_rank"),
    (re.compile(r"\bzipf(?:\s+s)?\s*=?\s*(\d+(?:\.\d+)?)\)?$"), "zipf_s"),
]


def seed_presets(text: str) -> dict[str, list[str]]:
    """Seed number -> the presets its bullet of the report's "Conditions" list names (a name in backticks,
    or a pattern such as ``kv-<model>-<workload>``)."""
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"^\* Seed (\d+) \([^)]*\):(.*)$", text, re.M):
        names: list[str] = []
        for tok in re.findall(r"`([^`]+)`", m.group(2)):
            if tok in presets.SCENARIOS:
                names.append(tok)
            elif "<" in tok:
                pat = re.compile("^" + re.sub(r"<[^>]+>", ".+", re.escape(tok).replace("\\<", "<")
                                              .replace("\\>", ">")) + "$")
                names += [p for p in presets.SCENARIOS if pat.match(p)]
        if names:
            out[m.group(1)] = list(dict.fromkeys(names))
    return out


def _strategies_in(text: str) -> list[str]:
    found = []
    for name in sorted(STRATEGIES, key=len, reverse=True):
        for m in re.finditer(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text):
            found.append((m.start(), name))
    return list(dict.fromkeys(n for _, n in sorted(found)))


def claim_scenarios(section: Section, seeds: dict[str, list[str]]) -> list[tuple[str, dict, list[str]]]:
    """(preset, values, strategies) to open for a claim's section; [] if it is not a claim or names none."""
    m = _CLAIM.match(plain(section.title))
    if not m:
        return []
    cond = next((ln.split(":", 1)[1] for ln in section.body.splitlines() if ln.startswith("* Conditions:")), "")
    cond = re.sub(r"\{[^}]*\}", "", cond)
    seed = seeds.get(m.group("seed"), [])
    named = [p for p in presets.SCENARIOS if re.search(rf"(?<![\w.-]){re.escape(p)}(?![\w.-])", cond)]
    if not named:  # "kv-qwen2-0.5b presets", "seed3 preset": presets the word starts
        words = re.findall(r"([\w.-]+) presets?\b", cond)
        named = [p for p in presets.SCENARIOS for w in words if p.startswith(w) and w != "seed"]
        named = [p for p in named if p in seed] or ([] if not named else named[:1])
    named = named or seed
    values: dict[str, str] = {}
    strategies: list[str] = []
    for part in (x.strip() for x in cond.split(",")):
        if " vs " in part or "swept" in part:
            continue
        for pat, key in _VALUES:
            v = pat.search(part.lower())
            if v:
                values[key] = v.group(1)
        if part.lower() == "uniform":
            values["zipf_s"] = "0"
        strategies += [s for s in _strategies_in(part) if s == part]
    row = next((ln for ln in section.body.splitlines() if re.match(r"^\|\s*preset\s*\|", ln)), "")
    cells = [c.strip() for c in row.strip("|").split("|")]
    if len(cells) > 1:
        strategies += _strategies_in(cells[1])
    return [(p, dict(values), preset_strategies(p, strategies)) for p in dict.fromkeys(named)]


def preset_strategies(preset: str, named: list[str] = ()) -> list[str]:
    """Strategies to compare for a preset: its own strategy first, then ``named``; the app's default set when
    that leaves only the preset's strategy and it is one of the defaults (e.g. naive)."""
    own = Scenario.from_preset(preset).strategy
    out = list(dict.fromkeys([own, *named]))
    if out == [own] and own in controls.DEFAULT_STRATEGIES:
        return list(controls.DEFAULT_STRATEGIES)
    return out


def whatif_query(preset: str, values: dict, strategies: list[str]) -> str:
    """The What-if page's short query for a preset, some control values and the compared strategies (through
    the app's own URL rules: values it would reject or that do not apply are left out)."""
    raw = {controls.PRESET_KEY: [preset], **{k: [str(v)] for k, v in values.items()},
           controls.STRATEGY_KEY: list(strategies)}
    clean, issues = controls.sanitize_query(raw)
    bad = {i.key for i in issues}
    resolved, _ = controls.resolve({k: v for k, v in clean.items() if k not in bad or k == controls.PRESET_KEY})
    return controls.share_query(resolved)


def links_markdown(items: list[tuple[str, dict, list[str]]]) -> str:
    """"Open on What-if ...: [preset](whatif?...) · ..." for (preset, values, strategies) items."""
    if not items:
        return ""
    what = []
    if len({tuple(sorted(v.items())) for _, v, _ in items}) == 1 and items[0][1]:
        what.append(", ".join(f"{k}={v}" for k, v in items[0][1].items()))
    if len({tuple(st_) for *_, st_ in items}) == 1:
        what.append(f"comparing {', '.join(items[0][2])}")
    links = " · ".join(f"[{p}]({WHATIF_PATH}?{whatif_query(p, v, st_)})" for p, v, st_ in items)
    return f":material/open_in_new: Open on What-if{' (' + '; '.join(what) + ')' if what else ''}: {links}"


def claim_links(seeds: dict[str, list[str]]) -> Callable[[Section], None]:
    """``render_doc`` hook: under each claim's heading, the link(s) that open its scenario on What-if; under a
    seed's own section, its presets."""
    def draw(s: Section) -> None:
        items = claim_scenarios(s, seeds)
        if not items:
            m = re.match(r"^Seed (\d+)\b", plain(s.title))
            items = [(p, {}, preset_strategies(p)) for p in seeds.get(m.group(1), [])] if m else []
        if items:
            st.markdown(links_markdown(items))
    return draw


def render() -> None:
    if not FINDINGS_MD.is_file():
        st.title("Findings", anchor=False)
        st.info("The findings report (docs/findings.md) has not been generated yet. It checks each published claim of "
                f"the source studies against the simulator. Generate it from the repository root with\n\n"
                f"`{GENERATE_CMD}`\n\n(add `--quick` for a shorter, rougher run), then reload this page.",
                icon=":material/lightbulb:")
        return
    text = FINDINGS_MD.read_text(encoding="utf-8")
    title, rest = split_title(text)
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
    seeds = seed_presets(text)

    def seed_links() -> None:
        for n, ps in seeds.items():
            st.markdown(links_markdown([(p, {}, preset_strategies(p)) for p in ps])
                        .replace("Open on What-if", f"Seed {n}'s preset{'s' if len(ps) > 1 else ''} on What-if", 1))

    render_doc(rest, claim_links(seeds), seed_links)
