"""Server-built SVG charts for the live chart of the What-if page: DataFrame in, SVG string out.

The What-if page redraws one chart on every slider step.  Measured in headless Chromium (a one-slider page
with the collector frozen as the app's is, 7 steps x 2 rounds), a Vega-Lite chart (``st.altair_chart``) adds
about 39 ms to a step whatever its data size, this module's CDF drawn as Markdown
(``st.markdown(svg, unsafe_allow_html=True)``; ``st.html`` sanitises SVG away) about 18 ms, hover tooltips
included.  So the live chart is drawn here, from the frames app/charts.py builds (``cdf_frame``,
``breakdown_frame``, ``timeseries_frame``), with its colours and formats.  No Streamlit here (numpy/pandas only).
The string has no line break: Markdown takes it as one HTML block.

Text and axes use ``currentColor`` (the page may be dark); tooltips are SVG ``<title>`` children.  The
root carries ``data-plot="x0,y0,x1,y1"``, the plot area in px (the tests read it).
"""
from __future__ import annotations

import html
import math
import re

import numpy as np
import pandas as pd

from app.charts import (
    _BREAKDOWN_COLORS,
    _LOG10_MAX,
    _LOG10_MIN,
    BREAKDOWN,
    TS_METRICS,
    _cap,
    _log_ticks,
    _nice_ticks,
    _sorted_strategies,
    _widen,
    strategy_color,
)

_FMT = re.compile(r"^(,)?(?:\.(\d+))?(~)?([fdeg%])?$")
#: Hover targets (invisible circles with a tooltip) per series.
HOVER_POINTS = 12
_CHAR_PX = 0.55  # estimated text width per character, in font sizes


def fmt(value: float, spec: str) -> str:
    """Format a number with a d3-style ``spec``: ``,`` thousands, ``.N`` precision (none: up to 6 decimals,
    trimmed), ``~`` trim trailing zeros of the decimals, type ``f``/``d``/``e``/``g``/``%`` (``%``: x 100)."""
    m = _FMT.match(spec)
    if m is None:
        raise ValueError(f"unsupported number format {spec!r}")
    comma, prec, trim, kind = m.groups()
    trim = trim or prec is None
    v = float(value)
    if not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("∞" if v > 0 else "-∞")
    kind, suffix = kind or "f", ""
    if kind == "%":
        v, kind, suffix = v * 100, "f", "%"
    if kind == "d":
        s = format(round(v), comma or "")
    else:
        s = format(v, f"{comma or ''}.{6 if prec is None else int(prec)}{kind}")
    if trim and kind == "f" and "." in s:
        s = s.rstrip("0").rstrip(".")
    if s.startswith("-") and not any(c in "123456789" for c in s.split("e")[0]):
        s = s[1:]  # no "-0"
    return s + suffix


def _plain(v: float) -> str:
    """A tick of a log axis as a plain number (1, 10, 1,000, 0.1); exponent form beyond 1e15 or below 1e-6."""
    return fmt(v, ",.6~f") if 1e-6 <= abs(v) < 1e15 else f"{v:g}"


def _x(s) -> str:
    return html.escape(str(s))


def _text_px(s: str, size: float) -> float:
    return len(s) * size * _CHAR_PX


# ----------------------------------------------------------------- scales and ticks (the tick rules: app/charts.py)
def _nice_domain(lo: float, hi: float) -> tuple[float, float]:
    """``[lo, hi]`` widened outwards to multiples of its tick step (as d3's ``nice``)."""
    lo, hi = _widen(lo, hi)
    for _ in range(4):
        _, s, _ = _nice_ticks(lo, hi)
        a, b = math.floor(lo / s + 1e-9) * s, math.ceil(hi / s - 1e-9) * s
        if not (math.isfinite(a) and math.isfinite(b)) or (a, b) == (lo, hi):
            break
        lo, hi = _widen(a, b)
    return lo, hi


def _px(v, lo: float, hi: float, p0: float, p1: float) -> np.ndarray:
    """Map ``v`` from ``[lo, hi]`` onto ``[p0, p1]`` px, clipped (halved differences: no overflow)."""
    t = np.clip((np.asarray(v, dtype=float) / 2 - lo / 2) / (hi / 2 - lo / 2), 0.0, 1.0)
    return p0 + t * (p1 - p0)


def _num(df: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)


# ------------------------------------------------------------------------- pieces
def _open(width_px: float, height_px: float, label: str, plot: tuple[float, float, float, float]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width_px:g} {height_px:g}" width="100%" '
            f'role="img" aria-label="{_x(label)}" style="max-width:100%;height:auto;font-family:sans-serif" '
            f'font-size="11" data-plot="{",".join(f"{p:.1f}" for p in plot)}">')


def _title(title: str | None) -> str:
    return (f'<text x="8" y="18" font-size="14" font-weight="bold" fill="currentColor">{_x(title)}</text>'
            if title else "")


def _legend_layout(labels: list[str], x0: float, x1: float, y: float) -> tuple[list[tuple[float, float]], float]:
    """Positions of the legend items (swatch 14 px, wrapped to ``[x0, x1]``) and the height they take."""
    pos, cx, cy = [], x0, y
    for s in labels:
        w = 20 + _text_px(s, 12) + 16
        if cx > x0 and cx + w > x1:
            cx, cy = x0, cy + 20
        pos.append((cx, cy))
        cx += w
    return pos, (cy - y + 20 if labels else 0)


def _legend(labels: list[str], colors: list[str], pos: list[tuple[float, float]], line: bool) -> str:
    out = ['<g class="legend" font-size="12" fill="currentColor">']
    for s, c, (lx, ly) in zip(labels, colors, pos):
        sw = (f'<line x1="{lx:.1f}" y1="{ly + 10:.1f}" x2="{lx + 14:.1f}" y2="{ly + 10:.1f}" stroke="{c}" '
              f'stroke-width="3"/>' if line else
              f'<rect x="{lx:.1f}" y="{ly + 3:.1f}" width="14" height="14" fill="{c}"/>')
        out.append(f'{sw}<text x="{lx + 20:.1f}" y="{ly + 14:.1f}">{_x(s)}</text>')
    return "".join(out) + "</g>"


def _axes(xt_px, xt_labels, yt_px, yt_labels, plot, x_title, y_title, height_px) -> str:
    """Grid, axis lines, tick marks and labels, axis titles."""
    x0, y0, x1, y1 = plot
    grid = "".join(f"M{x0:.1f} {p:.1f}H{x1:.1f}" for p in yt_px) + "".join(f"M{p:.1f} {y0:.1f}V{y1:.1f}" for p in xt_px)
    marks = "".join(f"M{p:.1f} {y1:.1f}v4" for p in xt_px) + "".join(f"M{x0:.1f} {p:.1f}h-4" for p in yt_px)
    out = [f'<path class="grid" d="{grid}" stroke="currentColor" stroke-opacity="0.12" fill="none"/>' if grid else "",
           f'<path class="axis" d="M{x0:.1f} {y0:.1f}V{y1:.1f}H{x1:.1f}{marks}" stroke="currentColor" '
           'stroke-opacity="0.6" fill="none"/>',
           '<g class="x-ticks" fill="currentColor" text-anchor="middle">',
           *(f'<text x="{p:.1f}" y="{y1 + 16:.1f}">{_x(s)}</text>' for p, s in zip(xt_px, xt_labels)),
           '</g><g class="y-ticks" fill="currentColor" text-anchor="end">',
           *(f'<text x="{x0 - 7:.1f}" y="{p + 4:.1f}">{_x(s)}</text>' for p, s in zip(yt_px, yt_labels)), "</g>"]
    if x_title:
        out.append(f'<text class="x-title" x="{(x0 + x1) / 2:.1f}" y="{height_px - 8:.1f}" font-size="12" '
                   f'text-anchor="middle" fill="currentColor">{_x(x_title)}</text>')
    if y_title:
        out.append(f'<text class="y-title" transform="rotate(-90)" x="{-(y0 + y1) / 2:.1f}" y="16" font-size="12" '
                   f'text-anchor="middle" fill="currentColor">{_x(y_title)}</text>')
    return "".join(out)


def _no_data(title: str | None, label: str, width_px: float, height_px: float) -> str:
    top = 32.0 if title else 10.0
    plot = (48.0, top, width_px - 16.0, max(height_px - 30.0, top + 20))
    x0, y0, x1, y1 = plot
    return (_open(width_px, height_px, label, plot) + _title(title)
            + f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" fill="none" '
            f'stroke="currentColor" stroke-opacity="0.3"/><text x="{(x0 + x1) / 2:.1f}" y="{(y0 + y1) / 2:.1f}" '
            f'text-anchor="middle" fill="currentColor" font-size="13" opacity="0.7">No data</text></svg>')


# ------------------------------------------------------------------------- builders
def line_svg(df: pd.DataFrame, *, x: str, y: str, series: str, x_title: str, y_title: str | None = None,
             log_x: bool = False, y_domain: tuple[float, float] | None = None, fmt_x: str = ",.1f",
             fmt_y: str = ",.2f", step: bool = False, title: str | None = None, height_px: int = 380,
             width_px: int = 900, legend: bool = True, tip: tuple[str, str, str, str] | None = None) -> str:
    """One line per value of ``series`` (strategy order and colours), rows in their given order.

    Rows with a non-finite x or y (or x <= 0 with ``log_x``) are dropped.  y: ``y_domain``, else
    ``[min(0, ymin), max(0, ymax)]`` rounded out to nice ticks; values outside ``y_domain`` are drawn at
    its edge.  ``step``: step-after lines (2n-1 points for n rows).  ``tip``: (x label, x format, y label,
    y format) of the tooltips, default (``x_title``, ``fmt_x``, ``y_title`` or ``title``, ``fmt_y``).
    Raises ValueError beyond ``charts.MAX_CHART_ROWS`` rows.
    """
    df = _cap(df)
    label = title or y_title or ""
    xs, ys = _num(df, x), _num(df, y)
    names = df[series].to_numpy(dtype=object)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(xs) & np.isfinite(ys) & pd.notna(names) & ((xs > 0) if log_x else True)
    xs, ys, names = xs[ok], ys[ok], names[ok]
    if not len(xs):
        return _no_data(title, label, width_px, height_px)
    order = _sorted_strategies(list(names))
    colors = [strategy_color(s) for s in order]
    # domains and ticks (x in log10 units when log_x)
    if log_x:
        xv = np.log10(xs)
        xlo, xhi = float(xv.min()), float(xv.max())
        if xhi - xlo < 1e-9:  # one value: a decade either side, within the floats
            xlo, xhi = max(xlo - 1, _LOG10_MIN), min(xhi + 1, _LOG10_MAX)
        xt = _log_ticks(xlo, xhi)
        xt_pos, xt_labels = np.log10(xt), [_plain(t) for t in xt]
    else:
        xv = xs
        xlo, xhi = _widen(float(xs.min()), float(xs.max()))
        xt = xt_pos = _nice_ticks(xlo, xhi)[0]
        xt_labels = [fmt(t, fmt_x) for t in xt]
    lo_hi = (float(y_domain[0]), float(y_domain[1])) if y_domain is not None else None
    if lo_hi is not None and all(map(math.isfinite, lo_hi)) and lo_hi[1] > lo_hi[0]:
        ylo, yhi = _widen(*lo_hi)
    else:
        ylo, yhi = _nice_domain(min(0.0, float(ys.min())), max(0.0, float(ys.max())))
    yt = _nice_ticks(ylo, yhi)[0]
    yt_labels = [fmt(t, fmt_y) for t in yt]
    # layout
    x0 = 8 + (20 if y_title else 0) + max(_text_px(s, 11) for s in yt_labels) + 8
    x1 = max(width_px - max(12.0, _text_px(xt_labels[-1], 11) / 2 + 4), x0 + 20)
    top = 30.0 if title else 8.0
    pos, leg_h = _legend_layout([str(s) for s in order], x0, x1, top) if legend else ([], 0)
    y0 = top + leg_h + 8
    y1 = max(height_px - (44.0 if x_title else 26.0), y0 + 20)
    plot = x0, y0, x1, y1 = tuple(round(v, 1) for v in (x0, y0, x1, y1))  # exact in data-plot
    xt_px, yt_px = _px(xt_pos, xlo, xhi, x0, x1), _px(yt, ylo, yhi, y1, y0)
    out = [_open(width_px, height_px, label, plot), _title(title),
           _legend([str(s) for s in order], colors, pos, True) if legend else "",
           _axes(xt_px, xt_labels, yt_px, yt_labels, plot, x_title, y_title, height_px)]
    # lines and hover targets
    px, py = _px(xv, xlo, xhi, x0, x1), _px(ys, ylo, yhi, y1, y0)
    tx, tfx, ty, tfy = tip or (x_title, fmt_x, y_title or title or y, fmt_y)
    lines = ['<g class="lines" fill="none" stroke-width="2" stroke-linejoin="round" stroke-linecap="round">']
    hover = ['<g class="hover" fill="transparent" pointer-events="visible">']
    for s, c in zip(order, colors):
        m = names == s
        sx, sy = px[m], py[m]
        if step:
            sx, sy = np.repeat(sx, 2)[1:], np.repeat(sy, 2)[:-1]
        pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(sx.tolist(), sy.tolist()))
        lines.append(f'<polyline points="{pts}" stroke="{c}"><title>{_x(s)}</title></polyline>')
        idx = np.flatnonzero(m)
        for i in idx[np.unique(np.linspace(0, len(idx) - 1, min(len(idx), HOVER_POINTS)).round().astype(int))]:
            tipt = f"{s} · {tx}: {fmt(xs[i], tfx)} · {ty}: {fmt(ys[i], tfy)}"
            hover.append(f'<circle cx="{px[i]:.1f}" cy="{py[i]:.1f}" r="6"><title>{_x(tipt)}</title></circle>')
    return "".join(out + lines + ["</g>"] + hover + ["</g></svg>"])


def stacked_bar_svg(df: pd.DataFrame, *, category: str, value: str, stack: str, stack_order: list[str],
                    stack_colors: list[str], x_title: str, title: str | None = None, width_px: int = 900,
                    bar_px: int = 28) -> str:
    """Horizontal bars, one per ``category`` (strategy order), stacked left to right in ``stack_order``
    with ``stack_colors``.  Negative, NaN or infinite values count as 0; rows whose ``stack`` is not in
    ``stack_order`` are ignored; repeated (category, stack) rows add up.  Height follows the bar count."""
    df = _cap(df)
    vals = np.nan_to_num(_num(df, value), nan=0.0, posinf=0.0, neginf=0.0).clip(0.0, 1e300)  # sums stay finite
    comp_ix = {c: i for i, c in enumerate(stack_order)}
    cats = df[category].to_numpy(dtype=object)
    keep = pd.notna(cats)
    order = _sorted_strategies(list(cats[keep]))
    table = np.zeros((len(order), len(stack_order)))
    cat_ix = {c: i for i, c in enumerate(order)}
    for c, k, v in zip(cats[keep], df[stack].to_numpy(dtype=object)[keep], vals[keep]):
        if k in comp_ix:
            table[cat_ix[c], comp_ix[k]] += v
    row_px, top = bar_px + 12, (30.0 if title else 8.0)
    labels = [str(s) for s in stack_order]
    if not order:
        return _no_data(title, title or x_title, width_px, top + 20 + row_px + 44)
    total_max = float(table.sum(axis=1).max())
    lo, hi = _nice_domain(0.0, total_max if math.isfinite(total_max) and total_max > 0 else 1.0)
    ticks, _, dec = _nice_ticks(lo, hi)
    t_labels = [fmt(t, f",.{dec}f") for t in ticks]
    x0 = min(8 + max(_text_px(str(c), 12) for c in order) + 8, width_px * 0.4)
    x1 = max(width_px - max(12.0, _text_px(t_labels[-1], 11) / 2 + 4), x0 + 20)
    pos, leg_h = _legend_layout(labels, x0, x1, top)
    y0 = top + leg_h + 8
    y1 = y0 + len(order) * row_px
    height_px = y1 + 44
    plot = x0, y0, x1, y1 = tuple(round(v, 1) for v in (x0, y0, x1, y1))  # exact in data-plot
    edges = np.round(_px(np.cumsum(np.hstack([np.zeros((len(order), 1)), table]), axis=1), lo, hi, x0, x1), 1)
    out = [_open(width_px, height_px, title or x_title, plot), _title(title),
           _legend(labels, list(stack_colors), pos, False),
           _axes(_px(ticks, lo, hi, x0, x1), t_labels, [], [], plot, x_title, None, height_px),
           '<g class="cats" fill="currentColor" text-anchor="end" font-size="12">']
    out += [f'<text x="{x0 - 8:.1f}" y="{y0 + i * row_px + 6 + bar_px / 2 + 4:.1f}">{_x(c)}</text>'
            for i, c in enumerate(order)]
    out.append('</g><g class="bars">')
    for i, c in enumerate(order):
        by = y0 + i * row_px + 6
        for j, (k, col) in enumerate(zip(stack_order, stack_colors)):
            if table[i, j] > 0:
                tipt = f"{c} · {k}: {fmt(table[i, j], ',.2f')} ms"
                out.append(f'<rect x="{edges[i, j]:.1f}" y="{by:.1f}" width="{edges[i, j + 1] - edges[i, j]:.1f}" '
                           f'height="{bar_px}" fill="{col}"><title>{_x(tipt)}</title></rect>')
    return "".join(out) + "</g></svg>"


# -------------------------------------------------------- the frames of app/charts.py
def ttft_cdf_svg(df: pd.DataFrame, log_x: bool = True, title: str = "TTFT distribution (CDF)") -> str:
    """The TTFT CDF of ``charts.cdf_frame`` (strategy, ttft_ms, cdf), one line per strategy."""
    return line_svg(df, x="ttft_ms", y="cdf", series="strategy", log_x=log_x, y_domain=(0.0, 1.0),
                    x_title="Time to first token (ms)" + (", log scale" if log_x else ""),
                    y_title="Share of requests", fmt_x=",.1~f", fmt_y=".0%", title=title,
                    tip=("TTFT (ms)", ",.1f", "Quantile", ".2%"))


def ttft_breakdown_svg(df: pd.DataFrame, title: str = "Where the mean TTFT goes") -> str:
    """Where the mean TTFT goes: ``charts.breakdown_frame`` (strategy, component, ms, order), stacked bars."""
    present = set(df["component"])
    pairs = [(lab, col) for lab, col in zip(BREAKDOWN.values(), _BREAKDOWN_COLORS) if lab in present]
    return stacked_bar_svg(df, category="strategy", value="ms", stack="component",
                           stack_order=[p[0] for p in pairs], stack_colors=[p[1] for p in pairs],
                           x_title="Mean time (ms)", title=title)


def timeseries_svg(df: pd.DataFrame, metric: str, height_px: int = 320, legend: bool = True) -> str:
    """One metric of ``charts.timeseries_frame`` over time, one step-after line per strategy."""
    title, spec = TS_METRICS.get(metric, (metric, ",.2f"))
    d = df.loc[df["metric"].to_numpy(dtype=object) == metric, ["strategy", "t_s", "value"]]
    return line_svg(d, x="t_s", y="value", series="strategy", x_title="Simulated time (s)", fmt_x=",.1~f",
                    fmt_y=spec, step=True, title=title, height_px=height_px, legend=legend,
                    tip=("t (s)", ",.1f", title, spec))
