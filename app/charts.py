"""Chart builders for the dashboard: pure functions, DataFrame in, ``alt.Chart`` out.

No Streamlit here (tests build every chart without a running app).  Two kinds of
functions:

* ``*_frame``: reshape engine output (``SimResult.requests`` / ``.timeseries`` /
  ``.summary``) into small tidy frames, downsampled so that no chart ships more
  than a few thousand points to the browser;
* ``*_chart``: build the Altair chart from such a frame.  Specs are
  deterministic (no selections or auto-named parameters), so an unchanged
  frame gives an identical spec on every rerun.
"""
from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence

import altair as alt
import numpy as np
import pandas as pd

from engine import STRATEGIES

#: Points per strategy on the TTFT CDF.
CDF_POINTS = 200
#: Upper bound on points per (strategy, metric) line in time-series charts: a half-width panel is about
#: 600 px wide, so 300 points is one per two pixels (600 doubled the bytes sent for no visible detail).
TS_MAX_POINTS = 300
#: Hard cap on the rows any chart in this module embeds.
MAX_CHART_ROWS = 5000

#: One fixed colour per strategy, in ``engine.STRATEGIES`` order; extra strategies cycle.
_PALETTE = ["#6B7280", "#D97706", "#6D28D9", "#2563EB", "#059669", "#DC2626",
            "#DB2777", "#0891B2", "#65A30D", "#92400E", "#4338CA", "#0F766E",
            "#A21CAF", "#B45309", "#1E3A8A", "#BE123C", "#3F6212", "#475569"]

#: Components of the TTFT breakdown: summary key -> label (stacking order).
BREAKDOWN = {
    "frontend_mean_ms": "API server",
    "queue_mean_ms": "Queueing",
    "load_wait_mean_ms": "Adapter load wait",
    "prefill_mean_ms": "Prefill",
}
_BREAKDOWN_COLORS = ["#94A3B8", "#A5B4FC", "#F59E0B", "#6D28D9"]

#: Time-series metrics shown on the What-if page: column -> (title, axis format).
TS_METRICS = {
    "queue_len": ("Queue length (requests)", ",.2~f"),
    "resident_adapters": ("Resident adapters", ",.0f"),
    "loads_in_flight": ("Adapter loads in flight", ",.2~f"),
    "kv_used_frac": ("KV cache in use", ".0%"),
    "gpu_busy_frac": ("GPU busy (a step running)", ".0%"),
    "pcie_busy_frac": ("PCIe link busy (adapter transfers)", ".0%"),
}


# --------------------------------------------------------------------- helpers
def strategy_domain(extra: Iterable[str] = ()) -> list[str]:
    dom = list(STRATEGIES)
    for s in extra:
        if s not in dom:
            dom.append(s)
    return dom


def strategy_scale(strategies: Iterable[str]) -> alt.Scale:
    """Colour scale over the strategies shown, each with its fixed colour (``strategy_color``)."""
    dom = _sorted_strategies(strategies)
    return alt.Scale(domain=dom, range=[strategy_color(s) for s in dom])


def _legend(title: str | None = None) -> alt.Legend:
    return alt.Legend(orient="top", title=title, direction="horizontal")


def strategy_color(name: str) -> str:
    dom = strategy_domain([name])
    return _PALETTE[dom.index(name) % len(_PALETTE)]


def strategy_dot(name: str) -> str:
    """HTML colour dot for a strategy (same colour as in the charts), for st.markdown."""
    return (f"<span style='display:inline-block;width:.7em;height:.7em;border-radius:50%;"
            f"background:{strategy_color(name)};margin-right:.4em'></span>")


def legend_html(strategies: Iterable[str], note: str = "") -> str:
    """One-line legend of coloured dots shared by a group of charts."""
    items = " ".join(f"{strategy_dot(s)}{s}&emsp;" for s in strategies)
    return items + (f"&emsp;<span style='opacity:.65'>{note}</span>" if note else "")


def downsample(df: pd.DataFrame, max_rows: int) -> pd.DataFrame:
    """Every k-th row (first and last kept) so that at most ``max_rows`` remain."""
    n = len(df)
    if n <= max_rows:
        return df
    idx = np.unique(np.linspace(0, n - 1, max_rows).round().astype(int))
    return df.iloc[idx]


def unvalidated(chart):
    """The same chart, with ``to_dict()`` skipping Altair's JSON-schema validation.

    ``st.altair_chart`` calls ``chart.to_dict()``; validation costs about 10 ms per
    chart on every rerun.  Every builder in this module is validated by
    tests/test_charts.py, so the app renders them unvalidated.
    """
    to_dict = chart.to_dict

    def _to_dict(*args, **kwargs):
        kwargs["validate"] = False
        return to_dict(*args, **kwargs)

    object.__setattr__(chart, "to_dict", _to_dict)
    return chart


def _cap(df: pd.DataFrame) -> pd.DataFrame:
    if len(df) > MAX_CHART_ROWS:
        raise ValueError(f"chart data has {len(df)} rows; at most {MAX_CHART_ROWS} allowed (downsample first)")
    return df


def _sorted_strategies(names: Iterable[str]) -> list[str]:
    names = list(dict.fromkeys(pd.unique(names) if isinstance(names, pd.Series) else names))  # a column: once each
    dom = strategy_domain(names)
    return sorted(names, key=dom.index)


# ------------------------------------------------------------------- TTFT CDF
def cdf_probabilities(n_points: int = CDF_POINTS) -> np.ndarray:
    """Quantile levels for the CDF: dense in the body, geometric in the tail (to p99.99)."""
    n_tail = max(2, n_points // 4)
    body = np.linspace(0.0, 0.97, n_points - n_tail, endpoint=False)
    tail = 1.0 - np.geomspace(0.03, 1e-4, n_tail)
    return np.concatenate([body, tail])


def cdf_frame(requests: Mapping[str, pd.DataFrame], window: tuple[float, float] | None = None,
              n_points: int = CDF_POINTS) -> pd.DataFrame:
    """TTFT quantiles per strategy: columns strategy, ttft_ms, cdf (``n_points`` rows each).

    ``requests`` maps strategy -> ``SimResult.requests``; only completed requests
    that arrived inside ``window = (warmup_s, duration_s)`` count (the same window
    as the engine's summary).
    """
    p = cdf_probabilities(n_points)
    names, qs = [], []
    for s, req in requests.items():  # (the three columns it reads, as arrays: no copy of the frame's rows)
        keep = req["completed"].to_numpy(dtype=bool)
        if window is not None:
            arr = req["arrival_s"].to_numpy(dtype=float)
            keep = keep & (arr >= window[0]) & (arr < window[1])
        x = req["ttft_ms"].to_numpy(dtype=float)[keep]
        x = x[np.isfinite(x)]
        if len(x) == 0:
            continue
        names.append(s)
        qs.append(np.quantile(x, p))
    if not names:
        return pd.DataFrame({"strategy": pd.Series(dtype=str), "ttft_ms": pd.Series(dtype=float),
                             "cdf": pd.Series(dtype=float)})
    return pd.DataFrame({"strategy": np.repeat(np.array(names, dtype=object), len(p)),
                         "ttft_ms": np.concatenate(qs), "cdf": np.tile(p, len(names))})


# ------------------------------------------------------------- TTFT breakdown
#: Components shown only when some strategy has a non-zero value (the API-server latency is 0 unless calibrated).
_OPTIONAL_BREAKDOWN = ("frontend_mean_ms",)


def breakdown_frame(summaries: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """Mean TTFT split per strategy: columns strategy, component, ms, order."""
    rows = []
    keep = [k for k in BREAKDOWN if k not in _OPTIONAL_BREAKDOWN
            or any((summ.get(k) or 0.0) > 0 for summ in summaries.values())]
    for s, summ in summaries.items():
        for i, (key, label) in enumerate((k, BREAKDOWN[k]) for k in keep):
            v = summ.get(key, np.nan)
            rows.append({"strategy": s, "component": label, "ms": float(v) if v is not None else np.nan,
                         "order": i})
    return pd.DataFrame(rows, columns=["strategy", "component", "ms", "order"])


# ---------------------------------------------------------------- time series
def timeseries_frame(timeseries: Mapping[str, pd.DataFrame], metrics: Sequence[str] = tuple(TS_METRICS),
                     max_points: int = TS_MAX_POINTS, t_max: float | None = None) -> pd.DataFrame:
    """Long frame (strategy, t_s, metric, value), at most ``max_points`` per strategy and metric."""
    cols: dict[str, list] = {"strategy": [], "t_s": [], "metric": [], "value": []}
    for s, ts in timeseries.items():  # (one frame built at the end, from arrays)
        t_s = ts["t_s"].to_numpy(dtype=float)
        rows = np.arange(len(t_s)) if t_max is None else np.flatnonzero(t_s <= t_max)
        if len(rows) > max_points:  # (downsample's rows)
            rows = rows[np.unique(np.linspace(0, len(rows) - 1, max_points).round().astype(int))]
        for m in metrics:
            cols["strategy"].append(np.full(len(rows), s, dtype=object))
            cols["t_s"].append(t_s[rows])
            cols["metric"].append(np.full(len(rows), m, dtype=object))
            cols["value"].append(ts[m].to_numpy(dtype=float)[rows])
    if not cols["t_s"]:
        return pd.DataFrame(columns=["strategy", "t_s", "metric", "value"])
    return pd.DataFrame({k: np.concatenate(v) for k, v in cols.items()})


# --------------------------------------------------------------------- sweeps
def sweep_chart(df: pd.DataFrame, metric: str, x_title: str, y_title: str, y_format: str = ",.1~f",
                height: int = 320, log_y: bool = False, legend: bool = False) -> alt.Chart:
    """Mean and 95% CI band vs the swept value, one colour per strategy.

    ``df``: columns x, strategy, metric, mean, ci_low, ci_high, n (``app.sweep.aggregate``).
    No legend by default: the page shows its charts under one shared legend.
    """
    d = _cap(df[df["metric"] == metric][["x", "strategy", "mean", "ci_low", "ci_high", "n"]])
    if log_y:
        d = d[d["mean"] > 0]
    strategies = _sorted_strategies(d["strategy"])
    scale = strategy_scale(strategies)
    y_scale = alt.Scale(type="log", nice=False) if log_y else alt.Scale(zero=False)
    base = alt.Chart(d, title=y_title).encode(x=alt.X("x:Q", title=x_title, scale=alt.Scale(zero=False)))
    y_label = y_title + (" (log scale)" if log_y else "")
    band = base.mark_area(opacity=0.18).encode(
        y=alt.Y("ci_low:Q", title=y_label, scale=y_scale), y2=alt.Y2("ci_high:Q"),
        color=alt.Color("strategy:N", scale=scale, sort=strategies, legend=None))
    tooltip = [alt.Tooltip("strategy:N", title="Strategy"),
               alt.Tooltip("x:Q", title=x_title, format=",.4~f"),
               alt.Tooltip("mean:Q", title="Mean", format=y_format),
               alt.Tooltip("ci_low:Q", title="95% CI low", format=y_format),
               alt.Tooltip("ci_high:Q", title="95% CI high", format=y_format),
               alt.Tooltip("n:Q", title="Replications")]
    line = base.mark_line(strokeWidth=2.2, point=alt.OverlayMarkDef(size=40, filled=True)).encode(
        y=alt.Y("mean:Q", title=y_label, scale=y_scale,
                axis=alt.Axis(format=y_format)),
        color=alt.Color("strategy:N", title="Strategy", scale=scale, sort=strategies,
                        legend=_legend() if legend else None),
        tooltip=tooltip)
    return alt.layer(band, line).properties(height=height)


# ------------------------------------------------------------------ crossover
#: Neutral colours of crossover cells without a winner: a tie inside the noise, a lead without a CI
#: (one replication), no result (every run failed).
TIE_COLOR = "#F1F5F9"
NO_CI_COLOR = "#F8FAFC"
_NEUTRAL = {"tie": TIE_COLOR, "no CI": NO_CI_COLOR, "no result": "#FFFFFF"}


def _margin_label(status, pct) -> str:
    if status == "tie":
        return "tie"
    if status == "lead":
        return "?"
    if status != "win" or not np.isfinite(pct):
        return ""
    return f"+{pct:.1%}" if pct < 0.1 else f"+{pct:.0%}"


def crossover_chart(df: pd.DataFrame, x_title: str, y_title: str, height: int = 460) -> alt.Chart:
    """Heat map of noise-aware verdicts: a cell is coloured by its winner only when the paired 95 % CI of
    the winner's margin over the runner-up excludes zero; otherwise in the neutral "tie" colour (or "no CI"
    with one replication, "no result" where every run failed).  Text: the winner's margin (or "tie");
    opacity: the margin of a win.

    ``df``: ``app.sweep.crossover_table`` (columns x, y, status, verdict, winner, best, best_ms, runner_up,
    runner_up_ms, margin_ms, margin_ci_low_ms, margin_ci_high_ms, margin_pct, tied, n, not_ranked).
    """
    d = _cap(df.copy())
    d["verdict"] = d["verdict"].astype(object).where(d["verdict"].notna(), "no result")
    d["x_label"] = d["x"].map(lambda v: f"{v:g}")
    d["y_label"] = d["y"].map(lambda v: f"{v:g}")
    pct = d["margin_pct"].to_numpy(dtype=float)
    d["margin_label"] = [_margin_label(s, v) for s, v in zip(d["status"], pct)]
    win = (d["status"] == "win").to_numpy()
    # a win's opacity follows its margin (0 -> 0.55, 25 % or more -> 1: never as pale as a tie); neutral cells
    # are opaque, their text grey
    d["shade"] = np.where(win, 0.55 + 0.45 * np.clip(np.nan_to_num(pct) / 0.25, 0, 1), 1.0)
    d["text_color"] = np.where(win, "#1F2330", "#6B7280")
    x_sort = [f"{v:g}" for v in sorted(d["x"].unique())]
    y_sort = [f"{v:g}" for v in sorted(d["y"].unique(), reverse=True)]
    winners = _sorted_strategies(d.loc[win, "winner"].dropna())
    neutral = [k for k in _NEUTRAL if (d["verdict"] == k).any()]
    domain = winners + neutral
    base = alt.Chart(d, title="Winning strategy (lowest mean TTFT p50; tie when the paired 95% CI of the margin "
                              "includes zero)").encode(
        x=alt.X("x_label:O", title=x_title, sort=x_sort, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("y_label:O", title=y_title, sort=y_sort),
    )
    tooltip = [alt.Tooltip("x:Q", title=x_title, format=",.3~f"),
               alt.Tooltip("y:Q", title=y_title, format=",.3~f"),
               alt.Tooltip("verdict:N", title="Verdict"),
               alt.Tooltip("tied:N", title="Tied (within the noise)"),
               alt.Tooltip("best:N", title="Lowest mean"),
               alt.Tooltip("best_ms:Q", title="Its TTFT p50 (ms)", format=",.1f"),
               alt.Tooltip("runner_up:N", title="Runner-up"),
               alt.Tooltip("runner_up_ms:Q", title="Runner-up TTFT p50 (ms)", format=",.1f"),
               alt.Tooltip("margin_ms:Q", title="Margin (ms)", format=",.2f"),
               alt.Tooltip("margin_ci_low_ms:Q", title="Margin 95% CI low (ms)", format=",.2f"),
               alt.Tooltip("margin_ci_high_ms:Q", title="Margin 95% CI high (ms)", format=",.2f"),
               alt.Tooltip("margin_pct:Q", title="Margin (% of lowest)", format=".1%"),
               alt.Tooltip("n:Q", title="Paired replications"),
               alt.Tooltip("not_ranked:N", title="Not ranked")]
    rect = base.mark_rect(stroke="white", strokeWidth=1.5).encode(
        color=alt.Color("verdict:N", title="Winner", sort=domain, legend=_legend(),
                        scale=alt.Scale(domain=domain, range=[strategy_color(s) for s in winners]
                                        + [_NEUTRAL[k] for k in neutral])),
        opacity=alt.Opacity("shade:Q", scale=None, legend=None),
        tooltip=tooltip,
    )
    text = base.mark_text(fontSize=12).encode(
        text=alt.Text("margin_label:N"), color=alt.Color("text_color:N", scale=None, legend=None), tooltip=tooltip)
    return alt.layer(rect, text).properties(height=height)


# ------------------------------------------------------------ KV interference
#: Fragmentation time-series column of ``SimResult.timeseries`` (docs/model.md section 3.4).
KV_FRAG = "kv_frag"


def _in_order(names: Iterable[str]) -> list[str]:
    """Distinct names in order of appearance."""
    return list(dict.fromkeys(str(n) for n in names))


def _ordered_scale(names: Sequence[str]) -> alt.Scale:
    """Colour scale with the domain in the given order, each strategy in its fixed colour."""
    return alt.Scale(domain=list(names), range=[strategy_color(s) for s in names])


def kv_frag_frame(timeseries: Mapping[str, pd.DataFrame], t_max: float | None = None, smooth_s: float = 0.0,
                  max_points: int = TS_MAX_POINTS) -> pd.DataFrame:
    """``kv_frag`` per strategy as a long frame (strategy, t_s, metric, value), for ``kv_frag_chart``.

    ``smooth_s`` > 0: trailing moving average over that many seconds of time buckets (the raw
    series jumps between 0 and large values from one bucket to the next).  Then cut at ``t_max``
    and downsampled to at most ``max_points`` per strategy.
    """
    parts = []
    for s, ts in timeseries.items():
        t = ts[["t_s", KV_FRAG]].sort_values("t_s")
        v = t[KV_FRAG].astype(float)
        if smooth_s > 0 and len(t) > 1:
            dt = float(np.median(np.diff(t["t_s"].to_numpy(dtype=float))))
            k = max(1, int(round(smooth_s / dt))) if dt > 0 else 1
            v = v.rolling(k, min_periods=1).mean()
        d = pd.DataFrame({"strategy": s, "t_s": t["t_s"].to_numpy(dtype=float), "metric": KV_FRAG,
                          "value": v.to_numpy(dtype=float)})
        if t_max is not None:
            d = d[d["t_s"] <= t_max]
        parts.append(downsample(d, max_points))
    if not parts:
        return pd.DataFrame(columns=["strategy", "t_s", "metric", "value"])
    return pd.concat(parts, ignore_index=True)


def kv_frag_chart(df: pd.DataFrame, warmup_s: float | None = None, height: int = 380,
                  title: str = "KV fragmentation over time") -> alt.Chart:
    """``kv_frag`` over time, one line per strategy (legend on top, in the frame's order).

    ``df``: ``kv_frag_frame`` or ``timeseries_frame(..., metrics=[KV_FRAG])`` (columns strategy,
    t_s, metric, value).  ``warmup_s``: a dashed rule where the measurement window starts.
    """
    d = _cap(df.loc[df["metric"].to_numpy(dtype=object) == KV_FRAG, ["strategy", "t_s", "value"]])
    strategies = _in_order(d["strategy"])
    line = (
        alt.Chart(d)
        .mark_line(strokeWidth=1.8, interpolate="linear", opacity=0.9)
        .encode(
            x=alt.X("t_s:Q", title="Simulated time (s)"),
            y=alt.Y("value:Q", title="Fragmentation", axis=alt.Axis(format=".0%")),
            color=alt.Color("strategy:N", title="Policy", scale=_ordered_scale(strategies), sort=strategies,
                            legend=_legend()),
            tooltip=[alt.Tooltip("strategy:N", title="Policy"),
                     alt.Tooltip("t_s:Q", title="t (s)", format=",.1f"),
                     alt.Tooltip("value:Q", title="Fragmentation", format=".1%")],
        )
    )
    if warmup_s is None or warmup_s <= 0:
        return line.properties(title=title, height=height)
    rule_df = pd.DataFrame({"t_s": [float(warmup_s)], "label": ["measurement starts"]})
    rule = alt.Chart(rule_df).mark_rule(strokeDash=[4, 4], color="#6B7280").encode(x="t_s:Q")
    text = alt.Chart(rule_df).mark_text(align="left", baseline="top", dx=4, dy=4, color="#6B7280",
                                         fontSize=11).encode(x="t_s:Q", y=alt.value(0), text="label:N")
    return alt.layer(line, rule, text).properties(title=title, height=height)


def kv_throughput_chart(df: pd.DataFrame, title: str = "Throughput (completed requests / s)",
                        height: int | None = None) -> alt.Chart:
    """Horizontal bars of mean throughput per strategy (in the frame's order), with 95% CI whiskers
    where known (cut at 0: throughput is not negative).

    ``df``: columns strategy, mean, half_width (NaN: no CI, e.g. one replication).
    """
    d = _cap(df[["strategy", "mean", "half_width"]].copy())
    d["ci_low"] = (d["mean"] - d["half_width"]).clip(lower=0.0)  # throughput is not negative
    d["ci_high"] = d["mean"] + d["half_width"]
    d["label_x"] = d["ci_high"].where(np.isfinite(d["ci_high"].to_numpy(dtype=float)), d["mean"])
    strategies = _in_order(d["strategy"])
    y = alt.Y("strategy:N", title=None, sort=strategies)
    tooltip = [alt.Tooltip("strategy:N", title="Policy"),
               alt.Tooltip("mean:Q", title="Throughput (req/s)", format=",.1f"),
               alt.Tooltip("ci_low:Q", title="95% CI low", format=",.1f"),
               alt.Tooltip("ci_high:Q", title="95% CI high", format=",.1f")]
    bars = alt.Chart(d).mark_bar(opacity=0.9).encode(
        y=y, x=alt.X("mean:Q", title="Requests / s"),
        color=alt.Color("strategy:N", scale=_ordered_scale(strategies), sort=strategies, legend=None),
        tooltip=tooltip)
    ci = d[np.isfinite(d["half_width"].to_numpy(dtype=float))]
    whiskers = alt.Chart(ci).mark_rule(color="#1F2330", strokeWidth=1.5).encode(
        y=y, x="ci_low:Q", x2="ci_high:Q", tooltip=tooltip)
    labels = alt.Chart(d).mark_text(align="left", dx=6, color="#1F2330", fontSize=11).encode(
        y=y, x=alt.X("label_x:Q"), text=alt.Text("mean:Q", format=",.1f"))
    return alt.layer(bars, whiskers, labels).properties(title=title, height=height or 60 + 36 * len(strategies))


def pareto_front(df: pd.DataFrame, x: str = "avg_frag", y: str = "throughput_req_s") -> pd.Series:
    """True for rows no other row dominates (lower or equal ``x`` and higher or equal ``y``, one strictly).

    Rows with a non-finite ``x`` or ``y`` are never on the front.
    """
    xs, ys = df[x].to_numpy(dtype=float), df[y].to_numpy(dtype=float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    out = []
    for i in range(len(df)):
        if not ok[i]:
            out.append(False)
            continue
        dom = ok & (xs <= xs[i]) & (ys >= ys[i]) & ((xs < xs[i]) | (ys > ys[i]))
        out.append(not dom.any())
    return pd.Series(out, index=df.index, name="on_frontier", dtype=bool)


#: Status of a point on the frontier chart, from the frontier down: opacity, outline width, shape.
FRONTIER_STATUS = {
    "on the frontier": (1.0, 1.5, "circle"),
    "not distinguishable": (0.75, 0.8, "circle"),   # dominated on the means, but inside the noise
    "dominated": (0.4, 0.0, "circle"),              # the paired differences exclude zero
    "reference": (0.9, 1.0, "diamond"),             # a baseline or a bound: shown, never ranked
}


def kv_frontier_frame(df: pd.DataFrame, x: str = "avg_frag", y: str = "throughput_req_s",
                      exclude: Sequence[str] = (), status: Mapping[str, tuple[str, str]] | None = None
                      ) -> pd.DataFrame:
    """Columns strategy, avg_frag, throughput_req_s, on_frontier, status, label, note from a per-strategy table.

    ``exclude``: references (baselines, bounds): never on the front, status "reference", labelled with
    their role.  ``status``: strategy -> (status, note) for the contenders off the front, from a
    noise-aware dominance check ("dominated" or "not distinguishable"); without it they are "dominated"
    on the means.
    """
    names = df["strategy"].astype(str).to_numpy()
    d = pd.DataFrame({"strategy": names, "avg_frag": df[x].to_numpy(dtype=float),
                      "throughput_req_s": df[y].to_numpy(dtype=float)})
    ref = np.isin(names, list(exclude))
    front = pareto_front(d[~ref])
    d["on_frontier"] = False
    d.loc[front.index, "on_frontier"] = front.to_numpy()
    d["on_frontier"] = d["on_frontier"].astype(bool)
    status = dict(status or {})
    st_, note, label = [], [], []
    for name, is_ref, on in zip(names, ref, d["on_frontier"]):
        role = STRATEGIES[name].role if name in STRATEGIES else "reference"
        if is_ref:
            st_.append("reference")
            note.append(f"{role}: a reference point, not ranked")
            label.append(f"{name} ({role})")
            continue
        label.append(name)
        if on:
            st_.append("on the frontier")
            note.append("")
        else:
            s, n = status.get(name, ("dominated", "dominated on the means"))
            st_.append(s)
            note.append(n)
    d["status"], d["label"], d["note"] = st_, label, note
    return d


def _label_offsets(x: np.ndarray, y: np.ndarray, names: Sequence[str], width: float, height: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Pixel y-offsets and right-alignment flags so that point labels do not overlap (greedy, approximate).

    Positions are estimated on a plot of ``width`` x ``height`` pixels with both axes from 0 to
    their maximum; labels are about 6.2 px per character and 13 px high, right of the point
    (left of it near the right edge).
    """
    def span(v):
        m = float(np.nanmax(v)) if len(v) else 0.0
        return m if m > 0 else 1.0

    px, py = x / span(x) * width, height - y / span(y) * height
    right = px > 0.72 * width
    placed: list[tuple[float, float, float, float]] = []
    dy = np.zeros(len(x))
    for i in np.argsort(-y, kind="stable"):
        w = 6.2 * len(names[i]) + 4
        x0 = px[i] - 9 - w if right[i] else px[i] + 9
        for off in (0, 14, -14, 28, -28, 42, -42):
            y0 = py[i] + off - 6.5
            box = (x0, y0, x0 + w, y0 + 13)
            if not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                break
        placed.append(box)
        dy[i] = off
    return dy, right


def kv_frontier_chart(df: pd.DataFrame, title: str = "No free lunch: throughput against fragmentation",
                      height: int = 380, width_hint: float = 430) -> alt.Chart:
    """One labelled point per strategy (x = avg_frag, y = throughput); the Pareto front of the contenders is
    joined by a dashed line and drawn opaque with an outline; points dominated on the means but inside the
    noise ("not distinguishable") less faded than those dominated outside it; references (the baseline,
    bounds) drawn as diamonds, labelled with their role, never on the front.

    ``df``: ``kv_frontier_frame`` (columns strategy, avg_frag, throughput_req_s, on_frontier; status, label and
    note if given, else derived from on_frontier).  ``width_hint``: the expected plot width in pixels, for
    placing labels apart.
    """
    d = _cap(df.copy())
    d = d[np.isfinite(d["avg_frag"].to_numpy(dtype=float)) & np.isfinite(d["throughput_req_s"].to_numpy(dtype=float))]
    d = d.reset_index(drop=True)
    d["on_frontier"] = d["on_frontier"].astype(bool)
    if "status" not in d:
        d["status"] = np.where(d["on_frontier"], "on the frontier", "dominated")
    if "label" not in d:
        d["label"] = d["strategy"].astype(str)
    if "note" not in d:
        d["note"] = ""
    d = d[["strategy", "avg_frag", "throughput_req_s", "on_frontier", "status", "label", "note"]]
    dy, right = _label_offsets(d["avg_frag"].to_numpy(dtype=float), d["throughput_req_s"].to_numpy(dtype=float),
                               list(d["label"]), width_hint, height - 130)
    d["label_dy"], d["label_right"] = dy, right
    strategies = _in_order(d["strategy"])
    all_zero = len(d) > 0 and float(d["avg_frag"].max()) <= 0
    x = alt.X("avg_frag:Q", title="Mean KV fragmentation (avg_frag)", axis=alt.Axis(format=".0%"),
              # all zero (paged KV): a small positive range instead of a collapsed axis
              scale=alt.Scale(domain=[0, 0.1]) if all_zero else alt.Scale(zero=True, nice=True))
    y = alt.Y("throughput_req_s:Q", title="Throughput (req/s)", scale=alt.Scale(zero=True))
    tooltip = [alt.Tooltip("strategy:N", title="Policy"),
               alt.Tooltip("avg_frag:Q", title="Mean fragmentation", format=".1%"),
               alt.Tooltip("throughput_req_s:Q", title="Throughput (req/s)", format=",.1f"),
               alt.Tooltip("status:N", title="Pareto"),
               alt.Tooltip("note:N", title="Why")]
    front = d[d["on_frontier"].astype(bool)].sort_values("avg_frag")
    line = alt.Chart(front).mark_line(strokeDash=[5, 4], color="#6B7280", strokeWidth=1.5).encode(
        x=x, y=y, order=alt.Order("avg_frag:Q"))
    status_scale = list(FRONTIER_STATUS)
    look = list(FRONTIER_STATUS.values())
    points = alt.Chart(d).mark_point(filled=True, size=140, stroke="#1F2330").encode(
        x=x, y=y,
        color=alt.Color("strategy:N", title="Policy", scale=_ordered_scale(strategies), sort=strategies,
                        legend=None),
        opacity=alt.Opacity("status:N", scale=alt.Scale(domain=status_scale, range=[v[0] for v in look]),
                            legend=None),
        strokeWidth=alt.StrokeWidth("status:N", scale=alt.Scale(domain=status_scale, range=[v[1] for v in look]),
                                    legend=None),
        shape=alt.Shape("status:N", scale=alt.Scale(domain=status_scale, range=[v[2] for v in look]), legend=None),
        tooltip=tooltip)
    layers = [line, points]
    # one text layer per (side, offset): dx/dy are mark properties, not encodings
    for (is_right, off), sub in d.groupby(["label_right", "label_dy"], sort=True):
        layers.append(alt.Chart(sub).mark_text(align="right" if is_right else "left", dx=-9 if is_right else 9,
                                               dy=float(off), fontSize=11, color="#1F2330").encode(
            x=x, y=y, text="label:N", tooltip=tooltip))
    return alt.layer(*layers).properties(title=title, height=height)


# ----------------------------------------------------------------- validation
#: Colour and point shape per split of the validation charts (train / held-out runs of the reference
#: datasets; fitted / other metrics of an uploaded benchmark).  Other values get a palette colour.
SPLIT_STYLE = {
    "train": ("#2563EB", "circle"),
    "held-out": ("#D97706", "triangle-up"),
    "fitted": ("#2563EB", "circle"),
    "not fitted": ("#6B7280", "diamond"),
}
#: Relative-error bands drawn around y = x on the measured-vs-simulated scatter (narrow first).
ERROR_BANDS = (0.10, 0.25)
_BAND_FILLS = ["#B8BEC8", "#DCDFE5", "#EEF0F3"]  # darkest first
#: Log axes when all values are > 0 and span more than this factor (max / min).
LOG_SPAN = 30.0
#: Line style per source of the validation curves.
_SOURCES = ["measured", "simulated"]


def use_log_scale(values, span: float = LOG_SPAN) -> bool:
    """True if the finite ``values`` are all > 0 and span more than ``span`` (max / min)."""
    v = np.asarray(list(values), dtype=float)
    v = v[np.isfinite(v)]
    return bool(len(v) and (v > 0).all() and v.max() / v.min() > span)


def split_legend_html(splits: Iterable[str], note: str = "") -> str:
    """One-line legend of the split markers (colour and shape as in ``validation_scatter_chart``)."""
    glyph = {"circle": "&#9679;", "triangle-up": "&#9650;", "diamond": "&#9670;", "square": "&#9632;"}
    dom, colors, shapes = _split_scales(list(splits))
    items = " ".join(f"<span style='color:{c};font-size:1.1em'>{glyph.get(sh, '&#9632;')}</span>&nbsp;{s}&emsp;"
                     for s, c, sh in zip(dom, colors.to_dict()["range"], shapes.to_dict()["range"]))
    return items + (f"&emsp;<span style='opacity:.65'>{note}</span>" if note else "")


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values for a log axis over [lo, hi] (values, > 0): ``_log_ticks``' rule (the SVG charts' axis too), each
    to 12 significant digits; [] for an empty or invalid range."""
    if not (lo > 0 and hi > lo and np.isfinite(lo) and np.isfinite(hi)):
        return []
    return [float(f"{v:.12g}") for v in _log_ticks(math.log10(lo), math.log10(hi))]


#: log10 of the smallest and largest positive floats.
_LOG10_MIN, _LOG10_MAX = math.log10(5e-324), math.log10(sys.float_info.max)


def _widen(lo: float, hi: float) -> tuple[float, float]:
    """``[lo, hi]``, widened around its centre when it is a single value (or too narrow to divide by)."""
    half = hi / 2 - lo / 2
    if half > 1e-300 and half > 1e-9 * max(abs(lo), abs(hi)):
        return lo, hi
    c = lo / 2 + hi / 2
    h = abs(c) * 0.1 if abs(c) > 1e-200 else 1.0
    a, b = c - h, c + h
    return (a if math.isfinite(a) else c), (b if math.isfinite(b) else c)


def _nice_ticks(lo: float, hi: float) -> tuple[np.ndarray, float, int]:
    """Ticks at multiples of a 1, 2 or 5 x 10^k step, 4-8 of them inside ``[lo, hi]`` (a 2.5 x 10^k step
    when no 1-2-5 step gives 4-8); returns (ticks, step, decimals the step needs)."""
    e = math.floor(math.log10(hi / 2 - lo / 2) + math.log10(2))
    best = None
    for k in (e, e - 1, e - 2):
        for m in (5.0, 2.5, 2.0, 1.0):
            s = m * 10.0**k
            if not math.isfinite(s) or s <= 0:
                continue
            i0, i1 = math.ceil(lo / s - 1e-9), math.floor(hi / s + 1e-9)
            n = i1 - i0 + 1
            if 4 <= n <= 8:
                key = (m == 2.5, abs(n - 6), n)
                if best is None or key < best[0]:
                    best = (key, i0, i1, m, k)
    if best is None:  # unreachable in exact arithmetic; keep the domain's ends
        return np.array([lo, hi]), hi - lo, 2
    _, i0, i1, m, k = best
    i = np.arange(i0, i1 + 1, dtype=float) * m
    ticks = i * 10.0**k if k >= 0 else i / 10.0**-k  # dividing keeps 0.1, 0.3 exact-looking
    return ticks, m * 10.0**k, max(0, -k + (m == 2.5))


def _log_ticks(lo: float, hi: float) -> np.ndarray:
    """Ticks for a log axis whose domain is ``[lo, hi]`` in log10 units: the powers of 10 inside (every
    k-th beyond 10 decades), plus their 2 and 5 multiples under 3 decades (a TTFT CDF from 20 ms to 3 s reads
    20, 50, 100, ..., 2,000); at least 2 ticks."""
    k = np.arange(math.ceil(lo - 1e-9), math.floor(hi + 1e-9) + 1)
    if len(k) > 10:
        k = k[k % math.ceil(len(k) / 8) == 0]
    ticks = 10.0 ** k.astype(float)
    if hi - lo < 3:
        more = [m * 10.0**j for j in range(math.floor(lo) - 1, min(math.ceil(hi), 307) + 1) for m in (2.0, 5.0)]
        more = [t for t in more if t > 0 and lo - 1e-9 <= math.log10(t) <= hi + 1e-9]
        ticks = np.sort(np.concatenate([ticks, more]))
    if len(ticks) < 2:  # under a decade with no 1, 2 or 5 inside: linear nice ticks, else the two ends
        a, b = max(10.0**lo, 5e-324), 10.0 ** min(hi, _LOG10_MAX - 1e-9)
        ticks = _nice_ticks(*_widen(a, b))[0]
        if (ticks <= 0).any() or len(ticks) < 2:
            ticks = np.array([a, b])
    return ticks


def _split_scales(splits: Iterable[str]) -> tuple[list[str], alt.Scale, alt.Scale]:
    known = [s for s in SPLIT_STYLE if s in set(splits)]
    dom = known + [s for s in _in_order(splits) if s not in SPLIT_STYLE]
    colors = [SPLIT_STYLE[s][0] if s in SPLIT_STYLE else _PALETTE[(i + 3) % len(_PALETTE)]
              for i, s in enumerate(dom)]
    shapes = [SPLIT_STYLE[s][1] if s in SPLIT_STYLE else "square" for s in dom]
    return dom, alt.Scale(domain=dom, range=colors), alt.Scale(domain=dom, range=shapes)


def validation_scatter_frame(table: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Runs of one metric with a finite measured and simulated value, from a per-run error table.

    ``table``: long error table (``engine.calibration.error_table`` / docs/validation/*_errors.csv):
    columns case, metric, measured, simulated, rel_error, and optionally split, sim_overloaded.
    Returns columns case, split, measured, simulated, rel_error, sim_overloaded.
    """
    t = table.loc[table["metric"].to_numpy(dtype=object) == metric]
    meas = t["measured"].to_numpy(dtype=float)
    sim = t["simulated"].to_numpy(dtype=float)
    ok = np.isfinite(meas) & np.isfinite(sim)
    n = int(ok.sum())
    split = t["split"].astype(str).to_numpy()[ok] if "split" in t else np.full(n, "all")
    over = t["sim_overloaded"].astype(bool).to_numpy()[ok] if "sim_overloaded" in t else np.zeros(n, bool)
    return pd.DataFrame({"case": t["case"].astype(str).to_numpy()[ok], "split": split,
                         "measured": meas[ok], "simulated": sim[ok],
                         "rel_error": t["rel_error"].to_numpy(dtype=float)[ok], "sim_overloaded": over})


def validation_scatter_chart(df: pd.DataFrame, title: str, log: bool | None = None,
                             bands: Sequence[float] = ERROR_BANDS, value_format: str = ",.4~r",
                             height: int = 400, legend: bool = True) -> alt.Chart:
    """Measured (x) against simulated (y), one point per run coloured and shaped by split, with the
    y = x line and shaded +-``bands`` relative-error wedges (narrow band darker).

    ``df``: ``validation_scatter_frame``.  ``log``: log-log axes; None = when the values span more
    than ``LOG_SPAN`` (points <= 0 are dropped on log axes).  Both axes share one domain.  The bands
    have no legend (say what they are next to the chart); ``legend=False`` drops the split legend too
    (for a grid of charts under one ``split_legend_html``).
    """
    d = _cap(df[["case", "split", "measured", "simulated", "rel_error", "sim_overloaded"]].copy())
    d = d[np.isfinite(d["measured"].to_numpy(dtype=float)) & np.isfinite(d["simulated"].to_numpy(dtype=float))]
    vals = np.concatenate([d["measured"].to_numpy(dtype=float), d["simulated"].to_numpy(dtype=float)])
    if log is None:
        log = use_log_scale(vals)
    if log:
        d = d[(d["measured"] > 0) & (d["simulated"] > 0)]
        vals = vals[vals > 0]
    if len(vals):
        lo, hi = float(vals.min()), float(vals.max())
    else:
        lo, hi = (1.0, 10.0) if log else (0.0, 1.0)
    if log:
        lo, hi = (lo / 1.3, hi * 1.3) if hi > lo else (lo / 2, hi * 2)
    else:
        pad = 0.06 * (hi - lo) if hi > lo else (0.1 * abs(hi) or 1.0)
        lo, hi = (max(lo - pad, 0.0) if lo >= 0 else lo - pad), hi + pad
    scale = alt.Scale(type="log" if log else "linear", domain=[lo, hi], nice=False, zero=False)
    suffix = " (log scale)" if log else ""
    axis = alt.Axis(format=value_format, values=log_ticks(lo, hi) or alt.Undefined) if log else \
        alt.Axis(format=value_format)
    x = alt.X("x:Q", title="Measured" + suffix, scale=scale, axis=axis)
    band_rows = []
    for i, b in enumerate(sorted(bands, reverse=True)):
        for xv in (lo, hi):
            band_rows.append({"band": f"±{b:.0%}", "x": xv, "y_lo": xv * (1 - b), "y_hi": xv * (1 + b), "order": i})
    band_df = pd.DataFrame(band_rows, columns=["band", "x", "y_lo", "y_hi", "order"])
    band_labels = _in_order(band_df["band"])
    band = alt.Chart(band_df).mark_area(opacity=0.55, clip=True).encode(
        x=x, y=alt.Y("y_lo:Q", title="Simulated" + suffix, scale=scale, axis=axis),
        y2="y_hi:Q", detail="band:N",
        fill=alt.Fill("band:N", title="Relative error", sort=band_labels,
                      # widest band lightest, narrowest darkest (drawn on top)
                      scale=alt.Scale(domain=band_labels, range=_BAND_FILLS[:len(band_labels)][::-1]),
                      legend=None),
        order=alt.Order("order:Q"))
    diag = alt.Chart(pd.DataFrame({"x": [lo, hi], "y": [lo, hi]})).mark_line(
        color="#1F2330", strokeDash=[5, 4], strokeWidth=1.2, clip=True).encode(
        x=x, y=alt.Y("y:Q", scale=scale))
    splits, color_scale, shape_scale = _split_scales(d["split"])
    pts = d.rename(columns={"measured": "x", "simulated": "y"})
    tooltip = [alt.Tooltip("case:N", title="Run"), alt.Tooltip("split:N", title="Split"),
               alt.Tooltip("x:Q", title="Measured", format=value_format),
               alt.Tooltip("y:Q", title="Simulated", format=value_format),
               alt.Tooltip("rel_error:Q", title="Error (sim / meas - 1)", format="+.1%")]
    if pts["sim_overloaded"].any():
        tooltip.append(alt.Tooltip("sim_overloaded:N", title="Simulated overloaded"))
    points = alt.Chart(pts).mark_point(filled=True, size=70, opacity=0.85, stroke="#1F2330", strokeWidth=0.4,
                                       clip=True).encode(
        x=x, y=alt.Y("y:Q", scale=scale),
        color=alt.Color("split:N", title="Split", scale=color_scale, sort=splits,
                        legend=_legend("Split") if legend else None),
        shape=alt.Shape("split:N", title="Split", scale=shape_scale, sort=splits,
                        legend=_legend("Split") if legend else None),
        tooltip=tooltip)
    return alt.layer(band, diag, points).properties(title=title, height=height)


def validation_curve_frame(table: pd.DataFrame, metric: str, x: str, series: str | None = None) -> pd.DataFrame:
    """Measured and simulated ``metric`` against the column ``x``, long: columns x, value, source
    (measured / simulated), series, case, split; non-finite values dropped.

    ``series``: column whose values get one line each (numbers sorted numerically); None: one series.
    Rows are ordered by series, then x.
    """
    t = table.loc[table["metric"].to_numpy(dtype=object) == metric].copy()
    if series is None:
        t["_series"] = "all"
        order = ["all"]
    else:
        vals = t[series]
        if pd.api.types.is_numeric_dtype(vals):
            uniq = sorted(pd.unique(vals.to_numpy(dtype=float)))
            t["_series"] = vals.map(lambda v: f"{float(v):g}")
            order = [f"{v:g}" for v in uniq]
        else:
            t["_series"] = vals.astype(str)
            order = sorted(pd.unique(t["_series"]))
    parts = []
    for src in _SOURCES:
        parts.append(pd.DataFrame({"x": t[x].to_numpy(dtype=float), "value": t[src].to_numpy(dtype=float),
                                   "source": src, "series": t["_series"].to_numpy(dtype=object),
                                   "case": t["case"].astype(str).to_numpy(),
                                   "split": t["split"].astype(str).to_numpy() if "split" in t else "all"}))
    cols = ["x", "value", "source", "series", "case", "split"]
    if not parts or not len(t):
        return pd.DataFrame({c: pd.Series(dtype=float if c in ("x", "value") else object) for c in cols})
    d = pd.concat(parts, ignore_index=True)
    d = d[np.isfinite(d["x"].to_numpy(dtype=float)) & np.isfinite(d["value"].to_numpy(dtype=float))]
    d["_o"] = d["series"].map({s: i for i, s in enumerate(order)})
    return d.sort_values(["_o", "source", "x"], kind="stable").drop(columns="_o").reset_index(drop=True)[cols]


def validation_curve_chart(df: pd.DataFrame, x_title: str, y_title: str, series_title: str | None = None,
                           log_x: bool = False, log_y: bool = False, title: str | None = None,
                           value_format: str = ",.4~r", height: int = 340) -> alt.Chart:
    """Measured (solid line, filled points) and simulated (dashed line, open points) against ``x``,
    one colour per series (legend only with several series).

    ``df``: ``validation_curve_frame``.  Log axes drop values <= 0.
    """
    d = _cap(df[["x", "value", "source", "series", "case", "split"]].copy())
    if log_x:
        d = d[d["x"] > 0]
    if log_y:
        d = d[d["value"] > 0]
    series = _in_order(d["series"])
    many = len(series) > 1
    def _ticks(col):
        v = d[col].to_numpy(dtype=float)
        return (log_ticks(float(v.min()), float(v.max())) if len(v) else []) or alt.Undefined

    x = alt.X("x:Q", title=x_title + (" (log scale)" if log_x else ""),
              scale=alt.Scale(type="log", nice=False) if log_x else alt.Scale(zero=False),
              axis=alt.Axis(format=",.4~r", values=_ticks("x")) if log_x else alt.Axis(format=",.4~r"))
    y = alt.Y("value:Q", title=y_title + (" (log scale)" if log_y else ""),
              scale=alt.Scale(type="log", nice=False) if log_y else alt.Scale(zero=False),
              axis=alt.Axis(format=value_format, values=_ticks("value")) if log_y else alt.Axis(format=value_format))
    color = (alt.Color("series:N", title=series_title, sort=series,
                       scale=alt.Scale(domain=series, scheme="tableau10"), legend=_legend(series_title))
             if many else alt.value("#2563EB"))
    dash = alt.StrokeDash("source:N", title=None, sort=_SOURCES,
                          scale=alt.Scale(domain=_SOURCES, range=[[1, 0], [5, 4]]), legend=_legend())
    tooltip = [alt.Tooltip("case:N", title="Run"), alt.Tooltip("split:N", title="Split"),
               alt.Tooltip("source:N", title="Source"),
               alt.Tooltip("x:Q", title=x_title, format=",.4~g"),
               alt.Tooltip("value:Q", title=y_title, format=value_format)]
    line = alt.Chart(d).mark_line(strokeWidth=1.8).encode(
        x=x, y=y, color=color, strokeDash=dash, detail="series:N", order=alt.Order("x:Q"))
    points = alt.Chart(d).mark_point(size=45, strokeWidth=1.5).encode(
        x=x, y=y, color=color,
        fill=alt.condition(alt.datum.source == "measured", color if many else alt.value("#2563EB"),
                           alt.value("white")),
        tooltip=tooltip)
    return alt.layer(line, points).properties(title=title or "", height=height)


# -------------------------------------------------------------------- planner
#: Goodput of a plan per objective (``engine.planner.OBJECTIVES``): table column and axis title.  min_cost
#: checks the base rate only, so its goodput is the throughput there.
PLAN_GOODPUT = {
    "max_rate": ("max_rate_rps", "Largest SLO-meeting rate (req/s)"),
    "max_adapters": ("max_adapters", "Most adapters within the SLO"),
    "min_cost": ("throughput_tok_s", "Throughput at the base rate (tokens/s)"),
}
#: Cost axes of the plan chart: table column -> (axis title, number format).
PLAN_COST = {
    "price_usd_per_hour": ("GPU price (US$/h, indicative)", "$,.2f"),
    "cost_per_mtok_usd": ("US$ per million output tokens", "$,.3f"),
}
#: Status of a candidate on the plan chart, in legend order, with its colour and point shape.
PLAN_STATUS = {
    "recommended": ("#6D28D9", "diamond"),
    "tie with the best": ("#2563EB", "circle"),
    "on the frontier": ("#059669", "circle"),
    "dominated": ("#9CA3AF", "circle"),
    "fails the SLO": ("#DC2626", "cross"),
}


def plan_label(row: Mapping, fields: Sequence[str]) -> str:
    """A configuration's short name from its grid values, e.g. 'h100-80gb · 8 · vllm'."""
    return " · ".join(str(row[f]) for f in fields) if fields else f"config {row.get('config', '')}"


def plan_frontier_frame(table: pd.DataFrame, objective: str, cost: str = "price_usd_per_hour",
                        fields: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per feasible candidate of ``engine.planner.plan(...).table`` with a finite cost and goodput.

    Columns config, label, cost, goodput, ci_low, ci_high, meets_slo, on_frontier, recommended, tie, status,
    reason.  The Pareto frontier (``pareto_front``: no other SLO-meeting candidate is both cheaper or as cheap
    and better or as good) is taken over the candidates that meet the SLO; the planner's ``recommended`` and
    ``tie_with_best`` flags are kept as they are (the ranking is the planner's).
    ``fields``: the grid's fields, for the labels (default: the planner's usual ones present in the table).
    """
    y, _ = PLAN_GOODPUT[objective]
    cols = ["config", "label", "cost", "goodput", "ci_low", "ci_high", "meets_slo", "on_frontier", "recommended",
            "tie", "status", "reason"]
    if fields is None:
        fields = [f for f in ("gpu", "max_loras", "max_cpu_loras", "strategy") if f in table.columns]
    if not len(table) or cost not in table.columns or y not in table.columns:
        return pd.DataFrame(columns=cols)
    t = table[table["feasible"].astype(bool)]
    c = t[cost].to_numpy(dtype=float)
    g = t[y].to_numpy(dtype=float)
    t = t[np.isfinite(c) & np.isfinite(g)]
    has_ci = objective != "min_cost" and f"{y}_ci_low" in t.columns
    d = pd.DataFrame({
        "config": t["config"].to_numpy() if "config" in t.columns else t.index.to_numpy(),
        "label": [plan_label(r, fields) for _, r in t.iterrows()],
        "cost": t[cost].to_numpy(dtype=float),
        "goodput": t[y].to_numpy(dtype=float),
        "ci_low": t[f"{y}_ci_low"].to_numpy(dtype=float) if has_ci else np.full(len(t), np.nan),
        "ci_high": t[f"{y}_ci_high"].to_numpy(dtype=float) if has_ci else np.full(len(t), np.nan),
        "meets_slo": t["meets_slo"].astype(bool).to_numpy(),
        "recommended": t["recommended"].astype(bool).to_numpy(),
        "tie": t["tie_with_best"].astype(bool).to_numpy(),
        "reason": t["reason"].fillna("").astype(str).to_numpy() if "reason" in t.columns else "",
    })
    front = pd.Series(False, index=d.index)
    ok = d["meets_slo"]
    if ok.any():
        front[ok] = pareto_front(d[ok], "cost", "goodput")
    d["on_frontier"] = front.to_numpy(dtype=bool)
    d["status"] = np.select(
        [d["recommended"], d["tie"], d["on_frontier"], d["meets_slo"]],
        ["recommended", "tie with the best", "on the frontier", "dominated"], default="fails the SLO")
    return d[cols].reset_index(drop=True)


def _note_chart(text: str, title: str, height: int) -> alt.Chart:
    """A chart that only says ``text`` (nothing to plot)."""
    return alt.Chart(pd.DataFrame({"note": [text]})).mark_text(fontSize=14, color="#6B7280").encode(
        text="note:N").properties(title=title, height=height)


def plan_frontier(table: pd.DataFrame, objective: str, cost: str = "price_usd_per_hour",
                  fields: Sequence[str] | None = None, height: int = 380) -> alt.Chart:
    """Goodput (``PLAN_GOODPUT[objective]``) against cost (``PLAN_COST[cost]``) for every feasible candidate
    of a plan: the SLO-meeting Pareto frontier joined by a dashed line and labelled, the 95% CI of each
    candidate's goodput as a vertical bar, the recommended configuration ringed, candidates that fail the SLO
    as crosses.  An empty or all-infeasible table gives a chart that says so.
    """
    y_col, y_title = PLAN_GOODPUT[objective]
    x_title, x_fmt = PLAN_COST[cost]
    title = f"{y_title.split(' (')[0]} against {x_title.split(' (')[0].lower()}"
    d = _cap(plan_frontier_frame(table, objective, cost, fields))
    if not len(d):
        why = ("No candidate to plot." if not len(table) else
               "No feasible candidate to plot: see the reasons in the table." if not table["feasible"].any() else
               f"No candidate has a {x_title.split(' (')[0].lower()} to plot (no completed run at its optimum).")
        return _note_chart(why, title, height)
    status = [s for s in PLAN_STATUS if s in set(d["status"])]
    x = alt.X("cost:Q", title=x_title, axis=alt.Axis(format=x_fmt), scale=alt.Scale(zero=False, nice=True,
                                                                                    padding=24))
    y = alt.Y("goodput:Q", title=y_title, scale=alt.Scale(zero=True, nice=True))
    fmt = ",.0f" if objective == "max_adapters" else ",.3~g"
    tooltip = [alt.Tooltip("label:N", title="Configuration"), alt.Tooltip("status:N", title="Status"),
               alt.Tooltip("cost:Q", title=x_title, format=x_fmt),
               alt.Tooltip("goodput:Q", title=y_title, format=fmt),
               alt.Tooltip("ci_low:Q", title="95% CI low", format=fmt),
               alt.Tooltip("ci_high:Q", title="95% CI high", format=fmt),
               alt.Tooltip("reason:N", title="Why not")]
    ci = d[np.isfinite(d["ci_low"]) & np.isfinite(d["ci_high"])]
    bars = alt.Chart(ci).mark_rule(color="#9CA3AF", strokeWidth=2).encode(
        x=x, y=alt.Y("ci_low:Q", title=y_title), y2="ci_high:Q", tooltip=tooltip)
    front = d[d["on_frontier"]].sort_values(["cost", "goodput"])
    line = alt.Chart(front).mark_line(strokeDash=[5, 4], color="#059669", strokeWidth=1.5).encode(
        x=x, y=y, order=alt.Order("cost:Q"))
    points = alt.Chart(d).mark_point(filled=True, size=110, opacity=0.9).encode(
        x=x, y=y,
        color=alt.Color("status:N", title=None, sort=status, legend=_legend(),
                        scale=alt.Scale(domain=status, range=[PLAN_STATUS[s][0] for s in status])),
        shape=alt.Shape("status:N", sort=status, legend=None,
                        scale=alt.Scale(domain=status, range=[PLAN_STATUS[s][1] for s in status])),
        tooltip=tooltip)
    best = d[d["recommended"]]
    ring = alt.Chart(best).mark_point(filled=False, size=520, color="#1F2330", strokeWidth=2).encode(
        x=x, y=y, tooltip=tooltip)
    labelled = d[d["on_frontier"] | d["recommended"]]
    labels = alt.Chart(labelled).mark_text(align="left", dx=12, dy=-10, fontSize=11, color="#1F2330").encode(
        x=x, y=y, text="label:N", tooltip=tooltip)
    return alt.layer(bars, line, points, ring, labels).properties(title=title, height=height)


#: Status of a candidate on the min_replicas chart (``plan_replicas_chart``), in legend order, with its colour
#: (the plan chart's colours for the same statuses).
REPLICAS_STATUS = {
    "recommended": PLAN_STATUS["recommended"][0],
    "tie with the best": PLAN_STATUS["tie with the best"][0],
    "ranked lower": PLAN_STATUS["dominated"][0],
}
#: Fleet-cost panel of the min_replicas chart, per cost axis of the page (``PLAN_COST``'s keys): the table
#: column, the axis title, its number format and the panel's title.
REPLICAS_COST = {
    "price_usd_per_hour": ("fleet_price_usd_per_hour", "Fleet price (US$/h, indicative)", "$,.2f",
                           "The fleet's price per hour"),
    "cost_per_mtok_usd": ("cost_per_mtok_usd", "US$ per million output tokens", "$,.3f",
                          "The fleet's cost per million tokens"),
}


def _replication_values(table: pd.DataFrame, runs: pd.DataFrame | None) -> dict[int, list[float]]:
    """Replicas each replication needed, per configuration: from ``runs`` (``plan(...).runs``: config,
    replication, value), else from the table's ``replicas_by_replication`` ("2,3,2"; ">16" is not a count)."""
    if runs is not None and len(runs) and {"config", "replication", "value"} <= set(runs.columns):
        r = runs.sort_values(["config", "replication"], kind="stable")
        return {int(c): [float(v) for v in g["value"]] for c, g in r.groupby("config", sort=False)}
    out = {}
    if "replicas_by_replication" not in table.columns:
        return out
    for c, txt in zip(table["config"], table["replicas_by_replication"].fillna("").astype(str)):
        vals = []
        for x in txt.split(","):
            x = x.strip()
            vals.append(float(x) if x.isdigit() else 0.0)
        out[int(c)] = vals
    return out


def plan_replicas_frame(table: pd.DataFrame, runs: pd.DataFrame | None = None, cost: str = "price_usd_per_hour",
                        fields: Sequence[str] | None = None) -> pd.DataFrame:
    """The min_replicas plan per candidate that meets the SLO, in the planner's order: one row per (candidate,
    replication).

    Columns config, label, order (0 = the planner's best), status (``REPLICAS_STATUS``), replication, replicas
    (what that replication needed), deploy (``replicas_needed_max``: the most any replication needed, the count
    to deploy), mean (``replicas_needed``), low / high (fewest / most over the replications), cost (the fleet's,
    ``REPLICAS_COST[cost]``), per_replication (the table's text), n (replications).  Candidates that fail the
    SLO (none up to the search's cap in some replication) or are infeasible have no count: they are left out.
    ``runs``: ``plan(...).runs`` for the per-replication counts (default: read from the table's text).
    """
    cols = ["config", "label", "order", "status", "replication", "replicas", "deploy", "mean", "low", "high",
            "cost", "per_replication", "n"]
    cost_col = REPLICAS_COST[cost][0]
    if fields is None:
        fields = [f for f in ("gpu", "max_loras", "max_cpu_loras", "strategy", "router") if f in table.columns]
    need = {"replicas_needed", "replicas_needed_max", "meets_slo", "recommended", "tie_with_best", cost_col}
    if not len(table) or not need <= set(table.columns):
        return pd.DataFrame(columns=cols)
    per = _replication_values(table, runs)
    rows = []
    for order, (_, r) in enumerate(table.iterrows()):
        deploy = float(r["replicas_needed_max"])
        if not (bool(r["meets_slo"]) and math.isfinite(deploy) and deploy > 0):
            continue
        vals = [v for v in per.get(int(r["config"]), []) if v > 0] or [deploy]
        status = ("recommended" if bool(r["recommended"]) else
                  "tie with the best" if bool(r["tie_with_best"]) else "ranked lower")
        base = {"config": int(r["config"]), "label": plan_label(r, fields), "order": order, "status": status,
                "deploy": deploy, "mean": float(r["replicas_needed"]), "low": min(vals), "high": max(vals),
                "cost": float(r[cost_col]), "per_replication": str(r.get("replicas_by_replication", "")),
                "n": len(vals)}
        rows += [{**base, "replication": k, "replicas": v} for k, v in enumerate(vals)]
    return pd.DataFrame(rows, columns=cols)


def plan_replicas_chart(table: pd.DataFrame, runs: pd.DataFrame | None = None, cost: str = "price_usd_per_hour",
                        fields: Sequence[str] | None = None, width: int = 340, cost_width: int = 220,
                        step: int = 26) -> alt.Chart:
    """min_replicas: the replicas each candidate needs, and what its fleet costs, side by side.

    One row per candidate that meets the SLO, in the planner's order (best on top).  Left: a bar to the count
    to deploy (the most any replication needed), a black rule over the replications' range (fewest to most)
    and one dot per replication; right: the fleet's US$/h or US$/Mtok (``cost``, ``REPLICAS_COST``), labelled.
    Colours: the recommendation, its ties and the others (``REPLICAS_STATUS``).  ``runs``: ``plan(...).runs``
    (default: the counts read from the table).  Nothing to plot gives a chart that says so.
    """
    _, cost_title, cost_fmt, cost_panel = REPLICAS_COST[cost]
    title = "Replicas needed, and what the fleet costs"
    d = _cap(plan_replicas_frame(table, runs, cost, fields))
    if not len(d):
        why = ("No candidate to plot." if not len(table) else
               "No candidate meets the SLO within the replicas searched: see the reasons in the table.")
        return _note_chart(why, title, 120)
    one = d.drop_duplicates("config")
    labels = list(one.sort_values("order")["label"])
    status = [s for s in REPLICAS_STATUS if s in set(d["status"])]
    color = alt.Color("status:N", title=None, sort=status, legend=_legend(),
                      scale=alt.Scale(domain=status, range=[REPLICAS_STATUS[s] for s in status]))
    y = alt.Y("label:N", title=None, sort=labels, axis=alt.Axis(labelLimit=320))
    tooltip = [alt.Tooltip("label:N", title="Configuration"), alt.Tooltip("status:N", title="Status"),
               alt.Tooltip("deploy:Q", title="Replicas to deploy", format=",.0f"),
               alt.Tooltip("mean:Q", title="Replicas needed (mean)", format=",.2f"),
               alt.Tooltip("per_replication:N", title="Per replication"),
               alt.Tooltip("cost:Q", title=cost_title, format=cost_fmt)]
    top = float(d["high"].max())
    x = alt.X("deploy:Q", title="Replicas (GPUs) needed", scale=alt.Scale(domain=[0, max(top, 1.0) * 1.12]),
              axis=alt.Axis(tickMinStep=1, format=",.0f"))
    bars = alt.Chart(one).mark_bar(opacity=0.55, height={"band": 0.7}).encode(x=x, y=y, color=color, tooltip=tooltip)
    spread = alt.Chart(one).mark_rule(color="#1F2330", strokeWidth=2).encode(
        x=alt.X("low:Q", title="Replicas (GPUs) needed"), x2="high:Q", y=y, tooltip=tooltip)
    dots = alt.Chart(d).mark_circle(size=55, color="#1F2330", opacity=0.85).encode(
        x=alt.X("replicas:Q", title="Replicas (GPUs) needed"), y=y,
        tooltip=[alt.Tooltip("label:N", title="Configuration"), alt.Tooltip("replication:O", title="Replication"),
                 alt.Tooltip("replicas:Q", title="Replicas needed", format=",.0f")])
    counts = alt.Chart(one).mark_text(align="left", dx=6, fontSize=11, color="#1F2330").encode(
        x="high:Q", y=y, text=alt.Text("deploy:Q", format=",.0f"), tooltip=tooltip)
    left = alt.layer(bars, spread, dots, counts).properties(width=width, height=alt.Step(step),
                                                            title="Replicas to deploy (dots: each replication)")
    c = one[np.isfinite(one["cost"])]
    cmax = float(c["cost"].max()) if len(c) else 1.0
    cx = alt.X("cost:Q", title=cost_title, axis=alt.Axis(format=cost_fmt, tickCount=4),
               scale=alt.Scale(domain=[0, (cmax if cmax > 0 else 1.0) * 1.3]))
    cy = alt.Y("label:N", title=None, sort=labels, axis=None)
    cbars = alt.Chart(c).mark_bar(opacity=0.55, height={"band": 0.7}).encode(x=cx, y=cy, color=color, tooltip=tooltip)
    ctext = alt.Chart(c).mark_text(align="left", dx=4, fontSize=11, color="#1F2330").encode(
        x="cost:Q", y=cy, text=alt.Text("cost:Q", format=cost_fmt), tooltip=tooltip)
    right = alt.layer(cbars, ctext).properties(width=cost_width, height=alt.Step(step), title=cost_panel)
    return alt.hconcat(left, right, spacing=12).resolve_scale(y="shared").properties(title=title)


# ---------------------------------------------------------------------- fleet
#: One fixed colour per router, in ``engine.ROUTERS`` order.
ROUTER_COLORS = ["#64748B", "#0EA5E9", "#F59E0B", "#10B981", "#8B5CF6"]


def router_scale(routers: Sequence[str]) -> alt.Scale:
    return alt.Scale(domain=list(routers), range=[ROUTER_COLORS[i % len(ROUTER_COLORS)] for i in range(len(routers))])


def replica_bars_chart(df: pd.DataFrame, metric: str, title: str, fmt: str = ",.0f", height: int = 200) -> alt.Chart:
    """Per-replica bars of one metric, grouped by router. ``df``: columns router, replica, metric, value."""
    d = _cap(df.loc[df["metric"] == metric, ["router", "replica", "value"]])
    routers = list(dict.fromkeys(d["router"]))
    return (
        alt.Chart(d, title=title)
        .mark_bar()
        .encode(
            x=alt.X("replica:O", title="Replica"),
            xOffset=alt.XOffset("router:N", sort=routers),
            y=alt.Y("value:Q", title=None, axis=alt.Axis(format=fmt)),
            color=alt.Color("router:N", title="Router", scale=router_scale(routers), sort=routers,
                            legend=_legend()),
            tooltip=[alt.Tooltip("router:N", title="Router"), alt.Tooltip("replica:O", title="Replica"),
                     alt.Tooltip("value:Q", title=title, format=fmt)],
        )
        .properties(height=height)
    )


def fleet_sweep_chart(df: pd.DataFrame, y_title: str, slo: float | None = None, y_format: str = ",.0f",
                      height: int = 320) -> alt.Chart:
    """Mean and 95 % CI of a metric against the number of replicas, one line per router, log y; a dashed
    rule at ``slo``.  ``df``: columns replicas, router, mean, ci_low, ci_high, n."""
    d = _cap(df[df["mean"] > 0][["replicas", "router", "mean", "ci_low", "ci_high", "n"]].copy())
    d["ci_low"] = d["ci_low"].clip(lower=d["mean"] * 1e-3)
    routers = list(dict.fromkeys(d["router"]))
    scale = router_scale(routers)
    y = alt.Scale(type="log", nice=False)
    base = alt.Chart(d).encode(x=alt.X("replicas:Q", title="Replicas (GPUs)", axis=alt.Axis(tickMinStep=1)))
    band = base.mark_area(opacity=0.15).encode(y=alt.Y("ci_low:Q", scale=y, title=y_title + " (log scale)"),
                                                y2="ci_high:Q",
                                                color=alt.Color("router:N", scale=scale, sort=routers, legend=None))
    line = base.mark_line(strokeWidth=2.2, point=alt.OverlayMarkDef(size=40, filled=True)).encode(
        y=alt.Y("mean:Q", scale=y, title=y_title + " (log scale)", axis=alt.Axis(format=y_format)),
        color=alt.Color("router:N", title="Router", scale=scale, sort=routers, legend=_legend()),
        tooltip=[alt.Tooltip("router:N", title="Router"), alt.Tooltip("replicas:Q", title="Replicas"),
                 alt.Tooltip("mean:Q", title="Mean", format=y_format),
                 alt.Tooltip("ci_low:Q", title="95% CI low", format=y_format),
                 alt.Tooltip("ci_high:Q", title="95% CI high", format=y_format),
                 alt.Tooltip("n:Q", title="Replications")])
    layers = [band, line]
    if slo is not None and math.isfinite(slo):
        layers.append(alt.Chart(pd.DataFrame({"slo": [slo]})).mark_rule(strokeDash=[6, 4], color="#DC2626")
                      .encode(y="slo:Q"))
    return alt.layer(*layers).properties(height=height)


# -------------------------------------------------------------------- observed vs twin
#: The two sources of an observed run's charts, in legend order, with their colours.
OBSERVED_SOURCES = {"measured": "#111827", "twin": "#2563EB"}


def observed_cdf_frame(requests: pd.DataFrame, n_points: int = CDF_POINTS) -> pd.DataFrame:
    """The TTFT CDF of an observed run, measured and simulated (``replay_observed``'s ``requests``): columns
    ``ttft_ms``, ``prob``, ``source``; at most ``n_points`` quantiles per source."""
    rows = []
    for src, col in (("measured", "measured_ttft_ms"), ("twin", "simulated_ttft_ms")):
        if col not in requests:
            continue
        v = np.sort(requests[col].to_numpy(dtype=float))
        v = v[np.isfinite(v)]
        if not len(v):
            continue
        p = cdf_probabilities(min(n_points, len(v)))
        rows.append(pd.DataFrame({"ttft_ms": np.quantile(v, p), "prob": p, "source": src}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["ttft_ms", "prob", "source"])


def _source_color() -> alt.Color:
    dom = list(OBSERVED_SOURCES)
    return alt.Color("source:N", title=None, sort=dom, scale=alt.Scale(domain=dom, range=list(OBSERVED_SOURCES.values())),
                     legend=_legend())


def observed_cdf_chart(df: pd.DataFrame, height: int = 320) -> alt.Chart:
    """Measured and simulated TTFT CDFs on one chart (``observed_cdf_frame``); log x when the values span decades."""
    d = _cap(df)
    v = d["ttft_ms"].to_numpy(dtype=float)
    log = bool(len(v)) and use_log_scale(v[v > 0])
    if log:
        d = d[d["ttft_ms"] > 0]
    lo, hi = (float(v[v > 0].min()), float(v.max())) if len(v) and (v > 0).any() else (1.0, 10.0)
    x = alt.X("ttft_ms:Q", title="TTFT (ms)" + (" (log scale)" if log else ""),
              scale=alt.Scale(type="log", nice=False) if log else alt.Scale(zero=True),
              axis=alt.Axis(format=",.4~r", values=log_ticks(lo, hi) or alt.Undefined) if log else alt.Axis(format=",.4~r"))
    return alt.Chart(d).mark_line(strokeWidth=2, interpolate="step-after").encode(
        x=x, y=alt.Y("prob:Q", title="Share of requests", axis=alt.Axis(format=".0%"), scale=alt.Scale(domain=[0, 1])),
        color=_source_color(),
        tooltip=[alt.Tooltip("source:N", title="Source"), alt.Tooltip("ttft_ms:Q", title="TTFT (ms)", format=",.1f"),
                 alt.Tooltip("prob:Q", title="Share", format=".1%")]).properties(
        title="First-token latency: measured and the twin's replay", height=height)


#: Quantities of the observed time series: replay_observed's timeseries columns (measured, simulated) -> title.
OBSERVED_TS = {"running": ("measured_running", "simulated_running", "Running requests"),
               "waiting": ("measured_waiting", "simulated_waiting", "Waiting requests")}


def observed_timeseries_frame(tab: pd.DataFrame, max_points: int = TS_MAX_POINTS) -> pd.DataFrame:
    """Scraped running / waiting requests against the twin's batch / queue (``replay_observed``'s ``timeseries``):
    columns ``t_s``, ``value``, ``quantity``, ``source``; at most ``max_points`` per line."""
    rows = []
    t = downsample(tab, max_points) if len(tab) > max_points else tab
    for m, s, title in OBSERVED_TS.values():
        for src, col in (("measured", m), ("twin", s)):
            if col in t:
                rows.append(pd.DataFrame({"t_s": t["t_s"].to_numpy(float), "value": t[col].to_numpy(float),
                                          "quantity": title, "source": src}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["t_s", "value", "quantity", "source"])


def observed_timeseries_chart(df: pd.DataFrame, quantity: str, height: int = 200) -> alt.Chart:
    """One quantity of ``observed_timeseries_frame`` (its title, e.g. "Running requests"): measured and the twin."""
    d = _cap(df[df["quantity"] == quantity])
    return alt.Chart(d).mark_line(strokeWidth=1.6, interpolate="step-after").encode(
        x=alt.X("t_s:Q", title="Time since the run's start (s)", axis=alt.Axis(format=",.4~r")),
        y=alt.Y("value:Q", title=quantity, axis=alt.Axis(format=",.0f")),
        color=_source_color(),
        tooltip=[alt.Tooltip("source:N", title="Source"), alt.Tooltip("t_s:Q", title="t (s)", format=",.2f"),
                 alt.Tooltip("value:Q", title=quantity)]).properties(title=quantity, height=height)
