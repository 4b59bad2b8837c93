"""What-if page: every chosen strategy on the sidebar's scenario, side by side."""
from __future__ import annotations

import functools
import html
import math
import re
from collections.abc import Mapping, Sequence

import pandas as pd
import streamlit as st

from app import charts, controls, exports, runner, svgchart, verdicts
from engine import (
    STRATEGIES,
    TRACE_CITATION,
    TRACES,
    causes,
    contenders_excluded,
    decide,
    effective_slots,
    presets,
)
from engine.calibration import error_band, winner_band

#: KPIs of the comparison table (``kpi_table``): summary key, label, better ("lower"/"higher"), help; the value's
#: unit is ``verdicts.UNITS[key]``.
KPIS = [
    ("ttft_p50_ms", "TTFT p50", "lower",
     "Median time to first token (ms or s): from arrival to the first output token."),
    ("ttft_p99_ms", "TTFT p99", "lower", "99th-percentile time to first token (ms or s)."),
    ("throughput_tok_s", "Tokens / s", "higher",
     "Throughput: output tokens finished per second in the measurement window (after warm-up)."),
    ("swap_rate", "Swap rate", "lower",
     "Adapter loads per completed request: the share of requests that had to bring their adapter to the GPU."),
    ("swap_share_of_ttft", "Swap share", "lower",
     "Swap share of TTFT: the part of all time-to-first-token spent waiting for adapter loads (PCIe/disk)."),
    ("slo_attainment", "SLO met", "higher",
     "SLO attainment: share of requests whose TTFT is at or under the TTFT SLO set in the sidebar."),
    ("prefix_cache_hit_rate", "Prefix hits", "higher",
     "Prefix-cache hit rate: the share of prompt tokens served from the server's prefix cache (keyed by adapter; "
     "0 without a shared system prompt or for a strategy without a prefix cache)."),
]


def fmt_ms(v: float, sign: bool = False) -> str:
    """Milliseconds, short: '31.8 ms', '12.35 s', '368 s' (signed for deltas)."""
    p = "+" if sign else ""
    if abs(v) < 1000:
        return f"{v:{p},.1f} ms"
    if abs(v) < 60_000:
        return f"{v / 1000:{p}.2f} s"
    return f"{v / 1000:{p},.0f} s"


def fmt_value(v: float, unit: str) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    if unit == "ms":
        return fmt_ms(v)
    if unit == "tok/s":
        return f"{v:,.0f}"
    return f"{v:.1%}"


def fmt_half(v: float, unit: str) -> str:
    """A CI half-width (or a lead): like the value, shares in percentage points."""
    return f"{v * 100:.1f} pp" if unit == "share" else fmt_value(v, unit)


def fmt_delta(v: float, ref: float, unit: str) -> str | None:
    if v is None or ref is None or not (math.isfinite(v) and math.isfinite(ref)):
        return None
    d = v - ref
    if unit == "share":
        return f"{d * 100:+.1f} pp"
    if unit == "ms":
        return fmt_ms(d, sign=True)
    return f"{d / ref:+.1%}" if ref else f"{d:+,.0f}"


PREFIX = "wi_"
K_REPS, K_OBJECTIVE = "wi_reps", "wi_objective"   # page controls, bound to the URL under these keys
K_AUTO = "wi_auto"   # replications until the verdict is decided (engine.sequential), at most wi_reps
DEFAULT_REPS, MAX_REPS = 3, 10
#: What a verdict ranks on: summary key -> (label, higher is better); its unit is ``verdicts.UNITS[key]``.
OBJECTIVES: dict[str, tuple[str, bool]] = {
    "ttft_p99_ms": ("p99 TTFT", False),
    "ttft_p50_ms": ("median TTFT", False),
    "ttft_mean_ms": ("mean TTFT", False),
    "slo_attainment": ("SLO attainment", True),
    "throughput_tok_s": ("tokens/s", True),
}
DEFAULT_OBJECTIVE = "ttft_p99_ms"
#: A strategy whose runs leave more than this share of the window's requests unfinished has collapsed:
#: its TTFT covers the finished ones only, so it never wins on a TTFT objective (the banner says so).
COLLAPSE_UNFINISHED = 0.05


def sanitize_query(params: Mapping[str, list[str]]) -> tuple[dict, list]:
    """Clean the page's ``wi_`` URL parameters (registered with ``controls.PAGE_PARAMS``)."""
    clean, issues = {}, []
    for key, vals in params.items():
        vals = [str(v) for v in (vals if isinstance(vals, (list, tuple)) else [vals])]
        raw = vals[-1].strip()
        if key == K_REPS:
            value, issue = controls.url_int(key, raw, 1, MAX_REPS, DEFAULT_REPS)
            if issue:
                issues.append(issue)
            if value is not None:
                clean[key] = value
        elif key == K_AUTO:
            if raw.lower() in ("true", "false"):
                clean[key] = raw.lower() == "true"
            else:
                issues.append(controls.Issue(key, f"URL parameter `{key}`={raw!r} dropped (allowed: true, false)",
                                             "malformed"))
        elif key == K_OBJECTIVE:
            if raw in OBJECTIVES:
                clean[key] = raw
            else:
                issues.append(controls.Issue(key, f"URL parameter `{key}`={raw!r} dropped (allowed: "
                                                  f"{', '.join(OBJECTIVES)})", "malformed"))
        else:
            issues.append(controls.Issue(key, f"Unknown URL parameter `{key}` ignored", "unknown"))
    return clean, issues


controls.PAGE_PARAMS[PREFIX] = sanitize_query


def unfinished_share(reps: Mapping[str, Sequence[Mapping]]) -> dict[str, float]:
    """Per strategy, the mean share of the window's requests that never finished."""
    out = {}
    for s, rs in reps.items():
        shares = [m.get("not_completed", 0) / m["requests"] for m in rs if m.get("requests")]
        out[s] = sum(shares) / len(shares) if shares else 0.0
    return out


def _fmt_ci(st_: Mapping, unit: str) -> str:
    v = fmt_value(st_["mean"], unit)
    if math.isfinite(st_.get("ci_low", math.nan)):
        return f"{v} (± {fmt_half((st_['ci_high'] - st_['ci_low']) / 2, unit)})"
    return v


#: The verdict's sentences (``verdicts.verdict_text``), by kind; collapses, bounds and baselines follow them.
VERDICT_TEXTS = {
    "none": "No contender has a {label} in the measurement window.",
    "single": "Only {best} is a contender on {label}: add strategies in the sidebar to compare.",
    "lead": "{best} leads on {label} in one replication; with one replication there is no confidence interval, "
            "so this is not a verdict: set Replications to 2 or more.",
    "tie": "Tie on {label}: {best} and {tied} are within the noise (the paired 95 % CI of each difference "
           "includes zero over {n} replications).",
    "win": "{best} wins on {label}: ahead of the runner-up {second} by {lead} ± {half} (paired 95 % CI over {n} "
           "replications, common random numbers).",
}


def verdict(reps: Mapping[str, Sequence[Mapping]], objective: str = DEFAULT_OBJECTIVE) -> tuple[str, str]:
    """Noise-aware plain-language verdict over paired replications; returns (text, kind).

    kind: "win" (the best's lead over every other contender has a paired 95 % CI excluding zero), "tie"
    (some are within the noise: named), "lead" (one replication: no CI, so no verdict), "single" (one
    contender) or "none" (``verdicts.judge``).  Bounds (the offline oracle) and baselines are reported, never
    crowned; a strategy that collapsed (many unfinished requests) never wins on a TTFT objective.
    """
    label, higher = OBJECTIVES[objective]
    unit = verdicts.UNITS[objective]
    names = list(reps)
    collapsed = {s: u for s, u in unfinished_share(reps).items() if u > COLLAPSE_UNFINISHED}
    excluded = contenders_excluded(names)
    if objective.startswith("ttft"):
        excluded += [s for s in collapsed if s not in excluded]
    j = verdicts.judge(verdicts.rep_values(reps, objective), higher, excluded)
    text = verdicts.verdict_text(j, VERDICT_TEXTS, lambda s, st_: f"**{s}** ({_fmt_ci(st_, unit)})",
                                 lambda v: fmt_half(v, unit), label=label)
    tail = []
    for s in names:
        if s in collapsed:
            tail.append(f"**{s}** collapses: {collapsed[s]:.0%} of the requests never finish (its TTFT covers the "
                        f"finished ones only{', so it is not ranked on TTFT' if objective.startswith('ttft') else ''})")
    for s in contenders_excluded(names):
        role = STRATEGIES[s].role
        what = "an offline bound, not a contender" if role == "bound" else "a baseline, not a contender"
        tail.append(f"**{s}** ({what}): {_fmt_ci(j.ranking.stats[s], unit)}")
    if tail:
        text += " " + "; ".join(tail) + "."
    return text, j.kind


def sequential_values(reps: Mapping[str, Sequence[Mapping]], objective: str) -> dict[str, list[float]]:
    """The contenders' per-replication values of ``objective`` for ``engine.decide``: bounds and baselines
    (``contenders_excluded``), strategies that collapsed (on a TTFT objective) and non-finite runs left out, as
    the banner leaves them out."""
    names = list(reps)
    out = set(contenders_excluded(names))
    if objective.startswith("ttft"):
        out |= {s for s, u in unfinished_share(reps).items() if u > COLLAPSE_UNFINISHED}
    vals = {s: [float(r.get(objective, math.nan)) for r in reps[s]] for s in names if s not in out}
    return {s: v for s, v in vals.items() if all(math.isfinite(x) for x in v)}


def _replications(sc, strategies: list[str], n_reps: int, trace=None, first: int = 0):
    """``runner.run_replications``, read in this thread when every run is cached (``runner.cached_replications``;
    a replayed trace's are not tracked: the workers)."""
    found = None if trace is not None else runner.cached_replications(sc, strategies, n_reps, first)
    return found if found is not None else runner.run_replications(sc, strategies, n_reps, trace, first=first)


def run_until_decided(sc, strategies: list[str], cap: int, objective: str, trace=None):
    """Replications with common random numbers until ``engine.decide`` settles the verdict (a win, or a tie within
    ±5 % of the leader, at an overall 5 % error rate spread over the looks), at most ``cap``: each look runs only
    its new replications.  With fewer than two contenders there is nothing to decide: ``cap`` replications, as a
    fixed count.  Returns (results, reps, failed, decision or None then)."""
    _, higher = OBJECTIVES[objective]
    n = min(2, cap)
    results, reps, failed = _replications(sc, strategies, n, trace)
    while True:
        vals = sequential_values(reps, objective)
        decision = decide(vals, higher, max_reps=cap) if len(vals) >= 2 and n >= 2 else None
        if n >= cap or (decision is not None and decision.status != "undecided"):
            return results, reps, failed, decision
        more = cap if decision is None else n + 1  # nothing to decide (one contender): the table's replications
        _, new, bad = _replications(sc, list(reps), more, trace, first=n)
        for s_, msg in bad.items():
            failed[s_] = msg
            results.pop(s_, None)
            reps.pop(s_, None)
        for s_, rs in new.items():
            reps[s_].extend(rs)
        n = more


def sequential_banner(text: str, kind: str, decision) -> tuple[str, str]:
    """The banner under the sequential rule: a "win" of the last look's plain 95 % CIs that the rule (which spends
    its error budget over every look) has not reached is not claimed."""
    if decision is not None and decision.status == "undecided" and kind == "win":
        return (f"No verdict yet at the stated error rate: {text} But over the looks this comparison took, the "
                "lead is not decided (raise the replications).", "tie")
    return text, kind


#: Marks the best of a KPI in the comparison table (``best_marked``).
BEST = "★"
#: Column of the comparison table naming the strategy (the KPI columns are the labels of ``KPIS``).
STRATEGY_COLUMN = "Strategy"


def _delta_md(v: float, ref: float, unit: str, better: str) -> str:
    """The difference to the baseline in Markdown: green if better, red if worse, grey and unsigned if it
    rounds to zero (as shown); empty if either is undefined."""
    d = fmt_delta(v, ref, unit)
    if d is None:
        return ""
    if not any(ch in "123456789" for ch in d):
        return f":gray[{d.lstrip('+-')}]"
    good = (v < ref) if better == "lower" else (v > ref)
    return f":{'green' if good else 'red'}[{d}]"


def best_marked(reps: Mapping[str, Sequence[Mapping]], key: str, higher: bool) -> set[str]:
    """The strategies the table marks ``BEST`` on the metric ``key``: the best mean among the contenders, and those
    within the noise of it, as the verdict judges (``verdicts.judge``: paired 95 % CI of each difference; bounds,
    baselines and, on a TTFT metric, collapsed strategies are not contenders); with one replication (no CI), the
    ones whose shown value (``fmt_value``) equals the best's.  None when that is every contender (nothing
    stands out) or there is only one."""
    names = list(reps)
    excluded = contenders_excluded(names)
    if key.startswith("ttft"):
        excluded += [s for s, u in unfinished_share(reps).items() if u > COLLAPSE_UNFINISHED and s not in excluded]
    j = verdicts.judge(verdicts.rep_values(reps, key), higher, excluded)
    pool = [s for s in j.ranking.order if s not in j.ranking.excluded and math.isfinite(j.ranking.stats[s]["mean"])]
    if j.kind == "win":
        marked = {j.best}
    elif j.kind == "tie":
        marked = {j.best, *j.tied}
    elif j.kind == "lead":
        shown = lambda s: fmt_value(j.ranking.stats[s]["mean"], verdicts.UNITS[key])  # noqa: E731
        marked = {s for s in pool if shown(s) == shown(j.best)}
    else:
        return set()
    return marked if len(marked) < len(pool) else set()


#: KPIs shown only when some strategy's run has what they measure (key -> the summary flag that says so).
OPTIONAL_KPIS = {"prefix_cache_hit_rate": "prefix_cache_ran"}


def shown_kpis(reps: Mapping[str, Sequence[Mapping]]) -> list[tuple[str, str, str, str]]:
    """``KPIS`` without the optional ones no run needs (no prefix cache ran: no "Prefix hits" column)."""
    return [k for k in KPIS if k[0] not in OPTIONAL_KPIS
            or any(r.get(OPTIONAL_KPIS[k[0]]) for rs in reps.values() for r in rs)]


def kpi_table(reps: Mapping[str, Sequence[Mapping]], baseline: str) -> pd.DataFrame:
    """The comparison table: one row per strategy (``reps`` order), one column per KPI (``KPIS``), cells in
    Markdown (drawn by ``kpi_table_html``): the mean over the replications (``fmt_value``, the unit from ``verdicts.UNITS``),
    ``± `` the half-width of its 95 % CI (two replications or more), ``BEST`` on the best (``best_marked``),
    and under it the difference to ``baseline``'s mean (``fmt_delta``; green: better, red: worse, grey: rounds
    to zero).  The strategy cell says which row is the baseline, the strategy's role if it is not a policy, and
    how many requests of replication 1 never finished."""
    names = list(reps)
    kpis = shown_kpis(reps)
    table = verdicts.ci_table(reps, [(key, key) for key, *_ in kpis], "strategy").set_index("strategy")
    stats = table.to_dict("index")  # strategy -> {column: value}: plain lookups below
    n = max((len(rs) for rs in reps.values()), default=0)
    best = {key: best_marked(reps, key, better == "higher") for key, _, better, _ in kpis}
    rows = []
    for s in names:
        role = STRATEGIES[s].role
        lines = [f"**{s}**"]
        notes = (["baseline"] if s == baseline else []) + (
            [] if role == "policy" else ["offline bound" if role == "bound" else "reference"])
        if notes:
            lines.append(f":gray[{' · '.join(notes)}]")
        first = reps[s][0] if reps[s] else {}
        if first.get("not_completed"):
            lines.append(f":orange[{first['not_completed']:,} of {first['requests']:,} requests unfinished]")
        row = {STRATEGY_COLUMN: "  \n".join(lines)}
        for key, label, better, _help in kpis:
            unit = verdicts.UNITS[key]
            v, half = float(stats[s][key]), float(stats[s][key + verdicts.CI_SUFFIX])
            text = fmt_value(v, unit)
            if s in best.get(key, ()):
                text = f"**{text}** {BEST}"
            if n > 1 and math.isfinite(half):
                text += f" ± {fmt_half(half, unit)}"
            if s != baseline and baseline in stats:
                delta = _delta_md(v, float(stats[baseline][key]), unit, better)
                if delta:
                    text += "  \n" + delta
            row[label] = text
        rows.append(row)
    return pd.DataFrame(rows, columns=[STRATEGY_COLUMN, *(label for _, label, *_ in kpis)])


#: The comparison table's look (``kpi_table_html``): theme-neutral (inherited text colour, translucent rules),
#: the deltas' colours readable on a light and a dark background.
TABLE_CSS = ("<style>table.wi-kpi{border-collapse:collapse;width:100%;font-size:.875rem;line-height:1.45}"
             "table.wi-kpi th{text-align:left;font-weight:600;opacity:.7;white-space:nowrap}"
             "table.wi-kpi th,table.wi-kpi td{padding:.45rem .6rem;vertical-align:top;"
             "border-bottom:1px solid rgba(128,128,128,.25)}"
             "table.wi-kpi .green{color:#1e9e4a}table.wi-kpi .red{color:#e0393e}"
             "table.wi-kpi .orange{color:#d97706}.wi-kpi .gray,.wi-cap .gray{opacity:.6}"
             ".wi-cap{margin:0 0 .25rem}.wi-def{margin:0 0 .25rem}.wi-def,.wi-def p,.wi-def li{font-size:.8rem}"
             ".wi-def summary{cursor:pointer;opacity:.6}.wi-def p,.wi-def ul{margin:.25rem 0}</style>")
_MD_COLOR = re.compile(r":(green|red|orange|gray)\[(.+?)\]")
_MD_BOLD = re.compile(r"\*\*(.+?)\*\*")


def cell_html(md: str) -> str:
    """A ``kpi_table`` cell (its Markdown: ``**bold**``, ``:green[...]``, ``:red[...]``, ``:orange[...]``,
    ``:gray[...]``, hard line breaks) as HTML; everything else is text (escaped)."""
    out = html.escape(md, quote=False)
    out = _MD_BOLD.sub(r"<b>\1</b>", out)
    out = _MD_COLOR.sub(r'<span class="\1">\2</span>', out)
    return out.replace("  \n", "<br>")


def kpi_table_html(table: pd.DataFrame, baseline: str | None = None, help_md: str = "") -> str:
    """The comparison table as one HTML element (``st.html``), under its heading (the baseline named; ``help_md``,
    the cells' definitions, as a disclosure a click or the keyboard opens): a browser draws one element faster than
    a heading and the same cells as Markdown in ``st.table`` (a Markdown renderer per cell), on every slider step."""
    head = "".join(f"<th>{html.escape(str(c), quote=False)}</th>" for c in table.columns)
    rows = "".join("<tr>" + "".join(f"<td>{cell_html(str(c))}</td>" for c in r) + "</tr>"
                   for r in table.itertuples(index=False))
    cap = ""
    if baseline is not None:
        cap = (f'<p class="wi-cap"><b>Strategies compared</b> <span class="gray">· under each value, the difference '
               f'to the baseline, <b>{html.escape(baseline, quote=False)}</b></span></p>')
        if help_md:
            cap += f'<details class="wi-def"><summary>What the cells mean</summary>{help_html(help_md)}</details>'
    return f'{TABLE_CSS}{cap}<table class="wi-kpi"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def help_html(md: str) -> str:
    """``kpi_help``'s Markdown (paragraphs, ``- `` items, ``**bold**``) as HTML; everything else is text (escaped)."""
    out, items = [], []
    for para in md.split("\n\n"):
        for line in para.split("\n"):
            item = line.startswith("- ")
            text = _MD_BOLD.sub(r"<b>\1</b>", html.escape(line[2:] if item else line, quote=False))
            if item:
                items.append(f"<li>{text}</li>")
                continue
            if items:
                out.append("<ul>" + "".join(items) + "</ul>")
                items = []
            if text:
                out.append(f"<p>{text}</p>")
    if items:
        out.append("<ul>" + "".join(items) + "</ul>")
    return "".join(out)


def kpi_help(n_reps: int, baseline: str, strategies: Sequence[str] = ()) -> str:
    """What the comparison table's cells are, each KPI's definition and each strategy's description (the tooltip
    of the table's heading)."""
    how = (f"Mean over {n_reps} replications ± the half-width of its 95 % CI" if n_reps > 1
           else "One replication: no confidence interval")
    return (f"{how}; under it, the difference to the baseline ({baseline}): green better, red worse, grey "
            f"rounds to zero. {BEST}: the best on that KPI among the contenders (bounds, baselines and, on TTFT, "
            "collapsed strategies are not ranked), with those tied with it within the noise (paired 95 % CI, as "
            "the verdict); none if all are tied.\n\n"
            + "\n".join(f"- **{label}**: {help_}" for _, label, _, help_ in KPIS)
            + "".join(f"\n- **{s}**: {STRATEGIES[s].description}" for s in strategies))


def _replay_trace(_name: str, record: dict) -> None:
    st.session_state["_trace"] = record


def _on_trace_upload() -> None:
    """file_uploader callback: replay the uploaded trace CSV (checked when it runs: ``runner.run_replications``)."""
    controls.on_upload("trace_upload", "_trace_error", runner.trace_record, _replay_trace)


#: The charts the page offers, one shown at a time: option -> its label in the selector.  "cdf" and "breakdown"
#: are the TTFT charts; the others are ``charts.TS_METRICS`` (the server over time).
CHARTS: dict[str, str] = {
    "cdf": "TTFT distribution",
    "breakdown": "TTFT breakdown",
    "queue_len": "Queue",
    "resident_adapters": "Resident adapters",
    "loads_in_flight": "Loads in flight",
    "kv_used_frac": "KV cache",
    "gpu_busy_frac": "GPU busy",
    "pcie_busy_frac": "PCIe busy",
}
DEFAULT_CHART = "cdf"
K_CHART = "whatif_chart"   # page-local (not in the URL): changing it reruns the fragment only
K_LOG = "cdf_log"
#: The sections under the table, one shown at a time and only it built (a slider step redraws it alone), picked by
#: a segmented control (one element: ``st.tabs`` sent four blocks with every step and cost a Chromium step about
#: 8 ms more): key -> label.
DETAILS: dict[str, str] = {"chart": "Charts", "why": "Why", "export": "Export"}
DEFAULT_DETAIL = "chart"
K_DETAIL = "wi_detail"
K_IMPORT = "wi_import_open"   # the uploads' expander is open (``_imports``)
#: Session-state keys of the uploads' outcomes (set by their callbacks, or by another page that loads a scenario
#: here): a new one opens the uploads' expander, so that it is seen.
IMPORT_MESSAGES = ("_upload_error", "_upload_msg", "_trace_error", "_config_error", "_config_msg")


@st.fragment
def _band_check(sc, names: tuple[str, ...], objective: str) -> None:
    """Would the winner change inside the cost model's measured error band (issue 24)?  On request (a button:
    2 x strategies more simulations), in a fragment (the page does not rerun); ``calibration.winner_band``."""
    band = error_band(sc)
    if not math.isfinite(band["band"]):
        st.caption(f"No measured error band for this cost model ({band['note']}).")
        return
    key = ("_band_check", sc.to_json(), names, objective)
    done = st.session_state.get("_band_check")
    if done is None or done[0] != key:
        if not st.button(f"Would the winner change within the model's error (±{band['band']:.0%})?",
                         key="wi_band_check", icon=":material/straighten:",
                         help="Runs every strategy again with the cost model as far off as its measured error "
                              f"band, slower and faster (cost_scale 1 ± {band['band']:.2f}; one seed per side, "
                              "common random numbers), and says whether the leader changes. " + band["note"]):
            return
        with st.spinner("Simulating with the cost model slower and faster..."):
            _, higher = OBJECTIVES[objective]
            r = winner_band(sc, list(names), objective, higher, exclude=contenders_excluded(list(names)),
                            run=runner.summary)
        st.session_state["_band_check"] = done = (key, r)
    r = done[1]
    icon = ":material/warning:" if r["changes"] else ":material/check_circle:"
    st.caption(f"{icon} {r['text']}")


def chart_svg(results: Mapping[str, Mapping], choice: str, log_x: bool) -> str:
    """The SVG of the chart ``choice`` (``CHARTS``) of the full results (replication 1); ``log_x``: the CDF's
    TTFT axis."""
    if choice == "cdf":
        return svgchart.ttft_cdf_svg(pd.concat([r["cdf"] for r in results.values()], ignore_index=True), log_x=log_x)
    if choice == "breakdown":
        return svgchart.ttft_breakdown_svg(charts.breakdown_frame({s: r["summary"] for s, r in results.items()}))
    return svgchart.timeseries_svg(pd.concat([r["ts"] for r in results.values()], ignore_index=True), choice)


def table_html(reps: Mapping[str, Sequence[Mapping]], baseline: str, n_reps: int) -> str:
    """The comparison table's one HTML element: ``kpi_table`` under its heading and definitions."""
    return kpi_table_html(kpi_table(reps, baseline), baseline, kpi_help(n_reps, baseline, list(reps)))


def _kept(digest: bytes | None, what: tuple, build):
    """``build()``, kept by ``runner.view`` under the runs it is built from (``digest``: ``runner.replication_digest``)
    and ``what`` (the product and its settings): a step to a scenario the server anticipated finds it built
    (``_prebuild``).  ``digest`` None (a replayed trace): built each time."""
    return build() if digest is None else runner.view((VIEW_COMPONENT, digest, *what), build)


def _prebuild(strategies: tuple[str, ...], n_reps: int, objective: str, baseline: str | None, chart: str | None,
              log_x: bool, sc) -> None:
    """The verdict, table and (``chart`` not None) chart a rerun of ``sc`` with these settings draws, built ahead of
    the step on a worker once ``sc``'s runs are cached (``runner.anticipate``'s ``then``)."""
    digest = runner.replication_digest(sc, strategies, n_reps)
    if digest is None:
        return
    results, reps, _ = runner.read_replications(sc, list(strategies), n_reps)
    if not results:
        return
    base = baseline if baseline in results else controls.default_baseline(list(results))
    _kept(digest, ("verdict", objective), lambda: verdict(reps, objective))
    _kept(digest, ("table", base), lambda: table_html(reps, base, n_reps))
    if chart is not None:
        _kept(digest, ("chart", chart, log_x), lambda: chart_svg(results, chart, log_x))


@st.fragment
def _charts(results: Mapping[str, Mapping], sc, n_reps: int, digest: bytes | None = None) -> None:
    """The chart the user picked, alone (a fragment: picking another chart, or the CDF's log scale, reruns
    this function with the results of the last full run: nothing is simulated again)."""
    choice = st.segmented_control("Chart", list(CHARTS), format_func=CHARTS.__getitem__, default=DEFAULT_CHART,
                                  required=True, key=K_CHART, label_visibility="collapsed") or DEFAULT_CHART
    title = "Time to first token" if choice in ("cdf", "breakdown") else "Inside the server over time"
    cap = (controls.conditions(sc) + f" · measured on arrivals in [{sc.warmup_s:g} s, {sc.duration_s:g} s)"
           + (f" · charts show replication 1 of {n_reps} (seed {sc.seed}); the table and the verdict use all"
              if n_reps > 1 else ""))
    # One element: the heading, the conditions and the SVG built here (app/svgchart), since a browser redraws every
    # element a slider step sends; drawn by a small component that sets it as the element's HTML (a Markdown
    # element would parse the SVG's ~170 nodes into React elements on every step; st.html's sanitiser drops SVG).
    svg = lambda s, after="": _SVG_VIEW(  # noqa: E731
        data=f'<h4 class="wi-h">{title}</h4><p class="wi-cond">{html.escape(cap, quote=False)}</p>{s}'
        + (f'<p class="wi-cond">{after}</p>' if after else ""), key="wi_chart_view")
    log_x = st.toggle("Log-scale TTFT axis", value=True, key=K_LOG) if choice == "cdf" else True
    body = _kept(digest, ("chart", choice, log_x), lambda: chart_svg(results, choice, log_x))
    svg(body, "Mean TTFT = queueing (waiting for a batch slot) + adapter load wait (PCIe/disk transfer) "
              "+ prefill (prompt compute)." if choice == "breakdown" else "")


#: Draws trusted HTML built by this page (headings, captions and app/svgchart's SVG, every text in it escaped)
#: as one element's innerHTML: no Markdown parse and no React element per SVG node on each step.
VIEW_COMPONENT = "lora_whatif.svg_view"
_SVG_VIEW = st.components.v2.component(
    VIEW_COMPONENT, html='<div class="wi-svg"></div>', isolate_styles=False,
    css=".wi-svg .wi-cond{font-size:.875rem;opacity:.6;margin:0 0 .5rem}"
        ".wi-svg .wi-h{font-size:1.25rem;font-weight:600;margin:.25rem 0 .5rem;padding:0}",
    js="export default function({data, parentElement}) {"
       " const el = parentElement.querySelector('.wi-svg'); if (el.__html !== data) { el.innerHTML = data;"
       " el.__html = data; } }")


K_LAST = "_wi_last_values"   # the slider values of this session's previous rerun (which one moved)
K_MOVED = "_wi_last_moved"   # (slider key, direction) of the last slider step this session took
#: The slider ``_anticipate`` steps when none has moved yet in this session (a first visit).
ANTICIPATE_DEFAULT = ("arrival_rate_rps", 1)


def last_moved(values: Mapping, last: Mapping | None, before: tuple[str, int] = ANTICIPATE_DEFAULT
               ) -> tuple[str, int]:
    """(key, +1 or -1) of the slider that moved since ``last`` (the previous rerun's values); ``before`` (the one
    that moved last before that, else the arrival rate going up) when none did."""
    for c in controls.CONTROLS:
        if c.kind == "slider" and last and c.key in values and c.key in last and values[c.key] != last[c.key]:
            return c.key, 1 if values[c.key] > last[c.key] else -1
    return before


def anticipated_values(values: Mapping, moved: tuple[str, int]) -> list[dict]:
    """The control values the next rerun most likely asks for: the slider ``moved[0]`` one step on in the direction
    it last moved, then one step back."""
    key, d = moved
    return controls.step_values(values, key, [d, -d])


def _anticipate(state, n_reps: int, auto: bool = False) -> None:
    """Speculative runs of the scenarios one slider step away (``anticipated_values``) on idle workers
    (``runner.anticipate``): a step to one of them is a cache hit; then (``auto`` off) the verdict, table and open
    chart of each, built for this session's settings (``_prebuild``)."""
    ss = st.session_state
    moved = ss[K_MOVED] = last_moved(state.values, ss.get(K_LAST), ss.get(K_MOVED, ANTICIPATE_DEFAULT))
    ss[K_LAST] = {k: v for k, v in state.values.items() if not k.startswith("_")}
    scenarios = []
    for vals in anticipated_values(state.values, moved):
        try:
            scenarios.append(controls.build_scenario(vals, state.base)[0])
        except ValueError:
            continue  # not a valid scenario: the step, if taken, reports it
    then = None
    if not auto:
        chart = (ss.get(K_CHART) or DEFAULT_CHART) if (ss.get(K_DETAIL) or DEFAULT_DETAIL) == "chart" else None
        log_x = bool(ss.get(K_LOG, True)) if chart == "cdf" else True  # (as _charts keys it)
        then = functools.partial(_prebuild, tuple(state.strategies), n_reps, ss.get(K_OBJECTIVE) or DEFAULT_OBJECTIVE,
                                 ss.get(controls.BASELINE_KEY), chart, log_x)
    runner.anticipate(scenarios, state.strategies, n_reps, then)


#: The page's live fragment (``controls._live_step``: a slider step reruns it alone).
LIVE_KEY = "wi_live"
#: The live fragment's last outcome and what the uploads under it were drawn for (a dict in session state:
#: "shape" and "drawn", each ``_shape``), so that a live step that changes it asks for a full run.
K_VIEW = "_wi_view"


def render() -> None:
    """The page's title and settings (``_settings``), the live fragment (the scenario's conditions, verdict, table,
    the picked section of chart / why / export, share link), then the uploads, which only full runs draw (``_imports``)."""
    view = st.session_state.setdefault(K_VIEW, {})
    _settings(controls.current())
    view["full_run"] = True
    _live(view)
    view["full_run"] = False
    view["drawn"] = results, replaying = view["shape"]
    if results:
        _imports(replaying)
    controls.live_ready(LIVE_KEY)


def _settings(state: controls.AppState) -> None:
    """The page's title and comparison settings, above the live fragment: a slider step does not redraw them
    (changing one reruns the app)."""
    st.title("What-if", anchor=False, help="Every selected strategy serves the same simulated request stream "
             "(same seed) on the scenario set in the sidebar; the table compares them with the baseline you pin "
             "on the right.")
    c_reps, c_auto, c_obj, c_base, _ = st.columns([1, 1, 1, 1, 1], vertical_alignment="bottom")
    # Off by default: at the default 3 replications the rule (its error budget split over the looks and the
    # comparisons) rarely decides, and the home page would show "no verdict" for a lead as clear as slora's.
    auto = c_auto.toggle("Until decided", value=False, key=K_AUTO, bind="query-params",
                         help="Run replications one look at a time until the verdict is decided (the leader's paired "
                              "lead over every other strategy excludes zero, or they are within ±5 % of each other) "
                              "at an overall 5 % error rate (the error budget split over every look: stopping at "
                              "the first CI that excludes zero would crown false winners; engine/sequential.py), at "
                              "most the number on the left. Off: exactly that number.")
    c_reps.number_input(
        "At most (replications)" if auto else "Replications", 1, MAX_REPS, DEFAULT_REPS, step=1, key=K_REPS,
        bind="query-params",
        help="Seeds per strategy (replication k uses seed + k for every strategy: common random numbers). The "
             "table shows the mean and the half-width of its 95 % CI; a strategy wins only when its paired lead "
             "excludes zero. With a replayed trace the request stream is the trace's: one run.")
    c_obj.selectbox("Verdict on", list(OBJECTIVES), format_func=lambda k: OBJECTIVES[k][0], key=K_OBJECTIVE,
                    bind="query-params", help="The metric the banner ranks the strategies on.")
    names = list(state.strategies)
    if names:
        if st.session_state.get(controls.BASELINE_KEY) not in names:
            st.session_state[controls.BASELINE_KEY] = controls.default_baseline(names)
        c_base.selectbox("Baseline for the deltas", names, key=controls.BASELINE_KEY, bind="query-params",
                         help="Strategy the others are compared with in the table (deltas = strategy - baseline, "
                              "mean over paired replications).")


def _shape(snap: tuple | None) -> tuple[bool, bool]:
    """What the uploads' section depends on: results (it is drawn with them), a replayed trace (its stop button)."""
    return snap is not None, snap is not None and snap[6] is not None


@st.fragment(key=LIVE_KEY)
def _live(view: dict) -> None:
    """Everything a slider step changes.  A live step whose outcome changes what the uploads below it show
    (results or none, a trace) asks for a full run instead."""
    with runner.SCHEDULER.rendering():
        state = controls.live_state()
        view["shape"] = _shape(_compare(state))  # (only its shape: the results stay in the caches, not per session)
        box, path = controls.share_box()
        controls.render_share(state, path, box)
        controls.draw_notes()
    if not view.get("full_run") and view["shape"] != view.get("drawn"):
        st.rerun()


def _compare(state: controls.AppState) -> tuple | None:
    """The comparison; returns (results, summaries, scenario, strategies, replications, baseline, trace), or None
    when there is nothing to compare (an invalid scenario, no strategy, a rejected trace, every run failed)."""
    controls.show_header(state, "What-if", titled=False)
    if not controls.runnable(state):
        return

    sc = state.scenario
    trace = st.session_state.get("_trace")
    if trace is not None:
        header = trace["data"][:4096].split(b"\n", 1)[0].decode("utf-8", "replace")
        if "arrived_at" in header and "adapter_id" not in header:  # the Azure/Vidur form: adapters drawn here
            how = (f"its arrival times (divided by trace_time_scale = {sc.trace_time_scale:g}) and lengths replace "
                   "the sidebar's arrival process, rate and lengths; each request's adapter is drawn from the "
                   f"sidebar's popularity model ({sc.popularity}) with seed {sc.seed}")
        else:
            how = "the sidebar's arrival process, rate, lengths and popularity are replaced by the trace"
        st.info(f"Replaying the uploaded trace **{trace['name']}** ({trace['size'] / 1e6:.1f} MB): {how}; requests "
                "arriving after the duration are dropped.", icon=":material/replay:")

    ss = st.session_state  # (the page's settings, drawn above the fragment by ``_settings``)
    auto, n_reps = bool(ss.get(K_AUTO)), int(ss.get(K_REPS) or DEFAULT_REPS)
    objective = ss.get(K_OBJECTIVE) or DEFAULT_OBJECTIVE
    if trace is not None:
        n_reps = 1

    decision = None
    cap = n_reps
    found = None if trace is not None or (auto and n_reps >= 2) else runner.cached_replications(
        sc, state.strategies, n_reps)
    if found is not None:  # (every run in the cache: read here, no spinner)
        results, reps, failed = found
    else:
        with st.spinner("Simulating..."):
            if auto and n_reps >= 2:
                results, reps, failed, decision = run_until_decided(sc, state.strategies, cap, objective, trace)
                n_reps = len(next(iter(reps.values()))) if reps else n_reps
            else:
                results, reps, failed = runner.run_replications(sc, state.strategies, n_reps, trace)
    if trace is not None and failed and all(m.startswith("trace:") for m in failed.values()):
        st.error(f"The trace CSV was rejected: {next(iter(failed.values()))}", icon=":material/error:")
        if st.button("Stop replaying the trace"):
            st.session_state.pop("_trace", None)
            st.rerun()
        return
    for s, msg in failed.items():
        st.error(f"**{s}** cannot run this scenario: {msg}", icon=":material/error:")
    if not results:
        return

    names = list(results)
    summaries = {s: r["summary"] for s, r in results.items()}
    baseline = st.session_state.get(controls.BASELINE_KEY)
    if baseline not in names:  # (a strategy that failed: its selectbox above offers it, the table cannot)
        baseline = controls.default_baseline(names)

    # (what a step to an anticipated scenario finds built: _prebuild; not a trace's or an adaptive comparison's)
    digest = None if trace is not None or decision is not None else runner.replication_digest(
        sc, state.strategies, n_reps)
    text, kind = sequential_banner(*_kept(digest, ("verdict", objective), lambda: verdict(reps, objective)), decision)
    st.info(text, icon={"win": ":material/emoji_events:", "tie": ":material/balance:"}.get(kind, ":material/info:"))
    if decision is not None:
        st.caption(f"{n_reps} replication{'s' if n_reps > 1 else ''} (until decided, at most {cap}): "
                   f"{decision.reason}.")
    hint = presets.HINTS.get(state.preset)
    if hint and controls.preset_unchanged(state):
        st.caption(f":material/lightbulb: **Try next:** {hint}")

    # ------------------------------------------------------------ comparison table
    st.html(_kept(digest, ("table", baseline), lambda: table_html(reps, baseline, n_reps)))

    # ----------------------------------------------- details: one at a time, built only when open
    if trace is None:
        # (until decided: as many replications as this step's looks took)
        _anticipate(state, n_reps, auto)
    snap = results, summaries, sc, list(state.strategies), n_reps, baseline, trace
    detail = st.segmented_control("Details", list(DETAILS), format_func=DETAILS.__getitem__, default=DEFAULT_DETAIL,
                                  required=True, key=K_DETAIL, label_visibility="collapsed") or DEFAULT_DETAIL
    if detail == "chart":
        _charts(results, sc, n_reps, digest)
    if detail == "why":
        _why(results, sc)
        if kind in ("win", "tie", "lead") and trace is None:
            _band_check(sc, tuple(names), objective)
    if detail == "export":
        _downloads(snap)
    return snap


def _why(results: Mapping[str, Mapping], sc) -> None:
    """Each strategy's bottlenecks (``engine.causes``) from its first replication's measures."""
    lines = []
    for s_, r in results.items():
        found = causes(r["summary"], r["timeseries"], sc.warmup_s, sc.duration_s,
                       effective_slots(sc.replace(strategy=s_)))
        lines.append(f"{charts.strategy_dot(s_)}**{s_}**: " + "; ".join(c.message for c in found) + ".")
    st.markdown("  \n".join(lines), unsafe_allow_html=True)
    st.caption("From each strategy's own measures in the window (replication 1): PCIe link and GPU busy time, "
               "KV occupancy, adapter slots, queue length and the TTFT breakdown; the rules are in "
               "engine/bottlenecks.py.")


def _downloads(snap: tuple) -> None:
    """The exports of what the page shows, each built on click; in the live fragment, since a download button's
    file lives as long as the run that drew it (a live step starts as a full run, which drops the files of every
    button, and then runs only the fragment)."""
    results, summaries, sc, strategies, n_reps, baseline, _ = snap
    e = st.columns(4)
    req_frames = {s: r["requests"] for s, r in results.items()}
    e[0].download_button("Per-request CSV", data=lambda: exports.requests_csv(req_frames), file_name="requests.csv",
                         mime="text/csv", on_click="ignore", key="dl_requests", icon=":material/download:",
                         width="stretch",
                         help="Every simulated request of every strategy (one row per request, built on click).")
    e[1].download_button("Summary CSV", data=lambda: exports.summary_csv(summaries, sc), file_name="summary.csv",
                         mime="text/csv", on_click="ignore", key="dl_summary", icon=":material/download:",
                         width="stretch",
                         help="One row per strategy with every summary metric, then the scenario's fields (built on "
                              "click).")
    ts_frames = {s: r["timeseries"] for s, r in results.items()}
    e[2].download_button("Time-series CSV", data=lambda: exports.timeseries_csv(ts_frames),
                         file_name="timeseries.csv", mime="text/csv", on_click="ignore", key="dl_timeseries",
                         icon=":material/download:", width="stretch",
                         help="Queue, batch, residency, loads and memory over time, per strategy (built on click).")
    e[3].download_button("scenario.json",
                         data=lambda: exports.scenario_json(sc.replace(strategy=baseline), strategies, n_reps),
                         file_name="scenario.json", mime="application/json", on_click="ignore", key="dl_scenario",
                         icon=":material/download:", width="stretch",
                         help="Every field of this scenario (strategy: the baseline), the compared strategies and "
                              "the replications; upload it below to restore them all.")
    ex = st.columns(max(4, len(TRACES)))  # (under the four above, as wide)
    for col, name in zip(ex, TRACES):
        col.download_button(f"Example: {name}.csv", data=lambda n=name: runner.example_trace_csv(n, sc),
                            file_name=f"{name}.csv", mime="text/csv", on_click="ignore", key=f"dl_trace_{name}",
                            icon=":material/download:", width="stretch",
                            help=f"{TRACES[name].get('label', name)} in the upload format (a trace to replay below), "
                                 f"adapters drawn by this scenario's popularity model and seed (built on click). "
                                 f"{TRACE_CITATION}")


def _imports(replaying: bool) -> None:
    """The uploads that restore a scenario, replay a trace or add a model (full runs only: each changes the
    sidebar), in an expander that builds them only when open (a first page draws no file uploader); ``replaying``: a trace is replayed (its stop button, outside it)."""
    if replaying and st.button("Stop replaying the trace", key="stop_trace", icon=":material/stop_circle:"):
        st.session_state.pop("_trace", None)
        st.rerun()
    ss = st.session_state
    outcome = tuple(ss.get(k) for k in IMPORT_MESSAGES)
    if any(outcome) and ss.get("_import_shown") != outcome:  # a new outcome (here or from another page): shown
        ss[K_IMPORT] = True
    ss["_import_shown"] = outcome
    box = st.expander("Import: a scenario.json, a trace to replay, a base model's config.json",
                      icon=":material/upload_file:", key=K_IMPORT, on_change="rerun")
    st.caption("Example traces: " + TRACE_CITATION + ".")
    if not box.open:
        return
    u1, u2, u3 = box.columns(3, gap="large")
    with u1:
        st.file_uploader("Restore a scenario.json", type=["json"], key="scenario_upload",
                         on_change=controls.on_scenario_upload, max_upload_size=runner.MAX_UPLOAD_MB,
                         help="A scenario.json exported here or written by hand (engine.Scenario fields). "
                              "Sets every control; other fields are kept as the scenario's base.")
        if st.session_state.get("_upload_error"):
            st.error(st.session_state["_upload_error"], icon=":material/error:")
        elif st.session_state.get("_upload_msg"):
            st.success(st.session_state["_upload_msg"], icon=":material/check_circle:")
    with u2:
        st.file_uploader("Replay a trace CSV", type=["csv"], key="trace_upload", on_change=_on_trace_upload,
                         max_upload_size=runner.MAX_UPLOAD_MB,
                         help=f"Columns arrival_s, adapter_id, prompt_tokens, output_tokens (as the examples "
                              f"below), or an Azure LLM inference trace as processed by Vidur: arrived_at, "
                              f"num_prefill_tokens, num_decode_tokens (adapter_id optional: else drawn from this "
                              f"scenario's popularity model and seed; arrival times divided by trace_time_scale). "
                              f"At most {runner.MAX_UPLOAD_MB} MB. Replayed instead of the generated workload.")
        if st.session_state.get("_trace_error"):
            st.error(st.session_state["_trace_error"], icon=":material/error:")
        st.caption("Pick an example trace as the sidebar's traffic source, or download one (Export) as a template. "
                   "Uploads in either format: arrival_s, adapter_id, prompt_tokens, output_tokens, or the "
                   "Azure/Vidur arrived_at, num_prefill_tokens, num_decode_tokens.")
    with u3:
        st.file_uploader("Add a base model (Hugging Face config.json)", type=["json"], key="config_upload",
                         on_change=controls.on_config_upload, max_upload_size=1,
                         help="A model's config.json from the Hugging Face Hub (llama, mistral, qwen2, phi, gemma, "
                              "gpt_neox families; engine.model_from_hf_config). It joins the Base model list of "
                              f"this session only (a shared link does not show it to others); at most {controls.MAX_CONFIG_BYTES // 1024} KB.")
        if st.session_state.get("_config_error"):
            st.error(st.session_state["_config_error"], icon=":material/error:")
        elif st.session_state.get("_config_msg"):
            st.success(st.session_state["_config_msg"], icon=":material/check_circle:")
