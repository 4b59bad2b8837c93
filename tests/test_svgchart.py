"""app/svgchart.py: well-formed SVG, one line per strategy in order and colour, exact mapping and ticks."""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from app import charts, svgchart
from app.svgchart import fmt, line_svg, stacked_bar_svg, timeseries_svg, ttft_breakdown_svg, ttft_cdf_svg

NS = "{http://www.w3.org/2000/svg}"
RNG = np.random.default_rng(1)
TOL = 0.051  # coordinates are rounded to 0.1 px


# ------------------------------------------------------------------ helpers
def _parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == NS + "svg"
    return root


def _plot(root) -> tuple[float, float, float, float]:
    return tuple(float(v) for v in root.get("data-plot").split(","))


def _lines(root) -> list[tuple[str, np.ndarray, str]]:
    """(stroke, points as an (n, 2) array, tooltip) of each polyline."""
    out = []
    for pl in root.iter(NS + "polyline"):
        pts = np.array([[float(v) for v in p.split(",")] for p in pl.get("points").split()]).reshape(-1, 2)
        out.append((pl.get("stroke"), pts, pl.find(NS + "title").text))
    return out


def _ticks(root, axis: str) -> list[tuple[float, float, str]]:
    g = root.find(f".//{NS}g[@class='{axis}-ticks']")
    return [(float(t.get("x")), float(t.get("y")), t.text) for t in g]


def _legend(root) -> list[str]:
    return [t.text for t in root.find(f".//{NS}g[@class='legend']").iter(NS + "text")]


def _hover(root) -> list[tuple[float, float, str]]:
    return [(float(c.get("cx")), float(c.get("cy")), c.find(NS + "title").text) for c in root.iter(NS + "circle")]


def _rects(root) -> list[tuple[float, float, float, str, str]]:
    """(x, y, width, fill, tooltip) of each bar segment."""
    g = root.find(f".//{NS}g[@class='bars']")
    return [(float(r.get("x")), float(r.get("y")), float(r.get("width")), r.get("fill"), r.find(NS + "title").text)
            for r in g.iter(NS + "rect")]


def _inside(root, svg: str) -> None:
    """Every number in the SVG is finite; lines, hover targets and bars lie inside the plot area."""
    nums = re.findall(r"-?[0-9.]+(?:e[-+]?\d+)?|nan|inf", re.sub(r"<title>.*?</title>|>[^<]*<", "><", svg))
    assert all(math.isfinite(float(v)) for v in nums if v not in ("-", "."))
    x0, y0, x1, y1 = _plot(root)
    assert x0 < x1 and y0 < y1
    for _, pts, _ in _lines(root):
        assert np.isfinite(pts).all()
        assert (pts[:, 0] >= x0 - TOL).all() and (pts[:, 0] <= x1 + TOL).all()
        assert (pts[:, 1] >= y0 - TOL).all() and (pts[:, 1] <= y1 + TOL).all()
    for cx, cy, _ in _hover(root):
        assert x0 - TOL <= cx <= x1 + TOL and y0 - TOL <= cy <= y1 + TOL


def _requests(n: int, scale: float) -> pd.DataFrame:
    return pd.DataFrame({"arrival_s": np.sort(RNG.uniform(0, 65, n)), "ttft_ms": RNG.lognormal(np.log(scale), 0.7, n),
                         "completed": True})


def _cdf(strategies=("slora", "naive", "custom"), n_points: int = 200) -> pd.DataFrame:
    return charts.cdf_frame({s: _requests(2000, 20 + 10 * i) for i, s in enumerate(strategies)}, n_points=n_points)


def _frame(**cols) -> pd.DataFrame:
    return pd.DataFrame(cols)


# ---------------------------------------------------------------------- fmt
@pytest.mark.parametrize("value, spec, out", [
    (1.50, ",.2~f", "1.5"), (2.0, ",.2~f", "2"), (100.0, ",.2~f", "100"), (1234.5678, ",.2~f", "1,234.57"),
    (0.25, ".0%", "25%"), (0.0123, ".2%", "1.23%"), (1.0, ".0%", "100%"), (12345.6, ",.0f", "12,346"),
    (12345.6, ",.1f", "12,345.6"), (-0.001, ",.1f", "0.0"), (-2.5, ",.1f", "-2.5"), (3.0, ",.4~f", "3"),
    (float("nan"), ",.1f", "NaN"), (float("inf"), ".0%", "∞"), (1234.0, ",d", "1,234"), (0.125, "%", "12.5%"),
    (2.0, ",f", "2"),
])
def test_fmt_maps_d3_specs(value, spec, out):
    assert fmt(value, spec) == out


def test_fmt_rejects_unknown_specs():
    with pytest.raises(ValueError, match="format"):
        fmt(1.0, "$,.2f")


# ------------------------------------------------------------------- lines
def test_cdf_one_polyline_per_strategy_in_order_and_colour():
    df = _cdf()
    root = _parse(ttft_cdf_svg(df))
    assert root.get("viewBox") == "0 0 900 380" and root.get("width") == "100%"
    assert root.get("role") == "img" and root.get("aria-label") == "TTFT distribution (CDF)"
    order = charts._sorted_strategies(df["strategy"])
    assert order == ["naive", "slora", "custom"]
    lines = _lines(root)
    assert [t for _, _, t in lines] == order == _legend(root)
    assert [c for c, _, _ in lines] == [charts.strategy_color(s) for s in order]
    assert [len(p) for _, p, _ in lines] == [200, 200, 200]
    # hover targets: 12 per strategy, tooltips with the quantile and the TTFT
    hov = _hover(root)
    first = df.loc[df["strategy"] == "naive", "ttft_ms"].iloc[0]
    assert len(hov) == 36 and hov[0][2] == f"naive · TTFT (ms): {fmt(first, ',.1f')} · Quantile: 0.00%"
    _inside(root, ttft_cdf_svg(df))


@pytest.mark.parametrize("log_x", [True, False])
def test_cdf_lines_are_monotone_and_inside(log_x):
    svg = ttft_cdf_svg(_cdf(), log_x=log_x)
    root = _parse(svg)
    _inside(root, svg)
    x0, y0, x1, y1 = _plot(root)
    for _, p, _ in _lines(root):
        assert (np.diff(p[:, 0]) >= 0).all() and (np.diff(p[:, 1]) <= 0).all()
        assert p[0, 1] == pytest.approx(y1, abs=TOL)  # cdf 0 on the bottom edge
    xs = np.concatenate([p[:, 0] for _, p, _ in _lines(root)])
    assert xs.min() == pytest.approx(x0, abs=TOL) and xs.max() == pytest.approx(x1, abs=TOL)
    assert [s for _, _, s in _ticks(root, "y")] == ["0%", "20%", "40%", "60%", "80%", "100%"]
    title = root.find(f"{NS}text[@class='x-title']").text
    assert title == "Time to first token (ms)" + (", log scale" if log_x else "")


def test_mapping_oracle_linear():
    df = _frame(s=["a", "a", "a"], x=[3.0, 250.0, 126.5], y=[0.0, 1.0, 0.25])
    root = _parse(line_svg(df, x="x", y="y", series="s", x_title="X", y_domain=(0, 1)))
    x0, y0, x1, y1 = _plot(root)
    (_, p, _), = _lines(root)
    assert p[0] == pytest.approx([x0, y1], abs=TOL)
    assert p[1] == pytest.approx([x1, y0], abs=TOL)
    assert p[2] == pytest.approx([(x0 + x1) / 2, y1 - 0.25 * (y1 - y0)], abs=TOL)
    # x ticks: nice numbers inside the domain, placed by the same linear map
    ticks = _ticks(root, "x")
    vals = np.array([float(s.replace(",", "")) for _, _, s in ticks])
    assert 4 <= len(vals) <= 8 and vals.min() >= 3 and vals.max() <= 250
    step = np.diff(vals)
    assert np.allclose(step, step[0]) and step[0] in (10, 20, 25, 50, 100)
    assert vals.min() - step[0] < 3 and vals.max() + step[0] > 250  # the ticks cover the data
    for (px, _, _), v in zip(ticks, vals):
        assert px == pytest.approx(x0 + (v - 3) / 247 * (x1 - x0), abs=TOL)


def test_y_domain_is_zero_based_and_rounded_up_to_a_tick():
    df = _frame(s=["a"] * 4, x=[0.0, 1.0, 2.0, 3.0], y=[2.0, 7.3, 5.0, 1.0])
    root = _parse(line_svg(df, x="x", y="y", series="s", x_title="X", fmt_y=",.2~f"))
    x0, y0, x1, y1 = _plot(root)
    ticks = _ticks(root, "y")
    assert [s for _, _, s in ticks] == ["0", "2", "4", "6", "8"]
    assert ticks[0][1] - 4 == pytest.approx(y1, abs=TOL) and ticks[-1][1] - 4 == pytest.approx(y0, abs=TOL)
    (_, p, _), = _lines(root)
    assert p[1, 1] == pytest.approx(y1 - 7.3 / 8 * (y1 - y0), abs=TOL)


def test_log_axis_drops_non_positive_rows_and_ticks_at_powers_of_ten():
    x = [-1.0, 0.0, 0.5, 3.0, 40.0, 5000.0, np.nan, np.inf]
    df = _frame(s=["a"] * 8, x=x, y=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    root = _parse(line_svg(df, x="x", y="y", series="s", x_title="X", log_x=True, y_domain=(0, 1)))
    (_, p, _), = _lines(root)
    assert len(p) == 4
    x0, _, x1, _ = _plot(root)
    ticks = _ticks(root, "x")
    assert [s for _, _, s in ticks] == ["1", "10", "100", "1,000"]
    lo, hi = math.log10(0.5), math.log10(5000)
    for (px, _, _), k in zip(ticks, range(4)):
        assert px == pytest.approx(x0 + (k - lo) / (hi - lo) * (x1 - x0), abs=TOL)
    assert p[:, 0] == pytest.approx([x0 + (math.log10(v) - lo) / (hi - lo) * (x1 - x0) for v in (0.5, 3, 40, 5000)],
                                    abs=TOL)


@pytest.mark.parametrize("xs, labels", [([3.0, 40.0], ["5", "10", "20"]), ([0.03, 0.4], ["0.05", "0.1", "0.2"]),
                                        ([0.5, 20.0], ["0.5", "1", "2", "5", "10", "20"]),
                                        ([20.0, 3000.0], ["20", "50", "100", "200", "500", "1,000", "2,000"])])
def test_log_axis_adds_2_and_5_multiples_under_three_decades(xs, labels):
    df = _frame(s=["a", "a"], x=xs, y=[0.0, 1.0])
    root = _parse(line_svg(df, x="x", y="y", series="s", x_title="X", log_x=True))
    assert [s for _, _, s in _ticks(root, "x")] == labels


def test_log_axis_keeps_two_ticks_on_a_narrow_or_single_value_domain():
    for xs in ([3.0, 4.0], [7.0, 7.0]):
        df = _frame(s=["a", "a"], x=xs, y=[0.0, 1.0])
        svg = line_svg(df, x="x", y="y", series="s", x_title="X", log_x=True)
        assert len(_ticks(_parse(svg), "x")) >= 2
        _inside(_parse(svg), svg)


def test_step_lines_hold_each_value_until_the_next_x():
    df = _frame(s=["a"] * 5 + ["b"] * 3, x=[0, 1, 2, 3, 4, 0, 2, np.nan], y=[1, 3, 2, 2, 0, 1, 1, 5])
    root = _parse(line_svg(df, x="x", y="y", series="s", x_title="t", step=True))
    (_, a, _), (_, b, _) = _lines(root)
    assert len(a) == 2 * 5 - 1 and len(b) == 2 * 2 - 1
    assert (a[1::2, 1] == a[0:-1:2, 1]).all()  # horizontal first ...
    assert (a[1::2, 0] == a[2::2, 0]).all()  # ... then vertical at the next x


def test_names_are_escaped_and_the_svg_stays_well_formed():
    name = 'a<&>"b'
    df = _frame(s=[name, name], x=[1.0, 2.0], y=[1.0, 2.0])
    svg = line_svg(df, x="x", y="y", series="s", x_title='x <ms> & "more"', title="T<", y_title="Y&")
    root = _parse(svg)
    assert _lines(root)[0][2] == name and _legend(root) == [name]
    assert "a&lt;&amp;&gt;&quot;b" in svg and name not in svg
    assert root.get("aria-label") == "T<"


@pytest.mark.parametrize("df", [
    _frame(s=pd.Series(dtype=object), x=pd.Series(dtype=float), y=pd.Series(dtype=float)),
    _frame(s=["a", "b"], x=[np.nan, 1.0], y=[1.0, np.inf]),
    _frame(s=[None, None], x=[1.0, 2.0], y=[1.0, 2.0]),
])
def test_nothing_finite_says_no_data(df):
    for log_x in (False, True):
        svg = line_svg(df, x="x", y="y", series="s", x_title="X", title="T", log_x=log_x)
        root = _parse(svg)
        assert "No data" in svg and not _lines(root) and root.get("viewBox") == "0 0 900 380"
    assert "No data" in ttft_cdf_svg(charts.cdf_frame({}))


def test_too_many_rows_raise():
    n = charts.MAX_CHART_ROWS + 1
    big = _frame(strategy="naive", ttft_ms=np.arange(1.0, n + 1), cdf=np.linspace(0, 1, n))
    with pytest.raises(ValueError, match=str(n)):
        ttft_cdf_svg(big)
    with pytest.raises(ValueError, match=str(n)):
        stacked_bar_svg(big, category="strategy", value="cdf", stack="ttft_ms", stack_order=[], stack_colors=[],
                        x_title="X")


def test_single_values_do_not_divide_by_zero():
    for xs, ys in (([5.0], [2.0]), ([5.0, 5.0], [0.0, 0.0]), ([0.0, 0.0], [-3.0, -3.0]), ([1e308, 1e308], [1e308, 0.0]),
                   ([-1e308, 1e308], [-1e308, 1e308]), ([0.0, 5e-324], [5e-324, 0.0])):
        df = _frame(s=["a"] * len(xs), x=xs, y=ys)
        for kw in ({}, {"step": True}, {"y_domain": (0.0, 0.0)}, {"y_domain": (1.0, 0.0)}):
            svg = line_svg(df, x="x", y="y", series="s", x_title="X", **kw)
            root = _parse(svg)
            _inside(root, svg)
            assert len(_ticks(root, "y")) >= 2


def test_same_frame_gives_the_same_svg():
    df = _cdf()
    assert ttft_cdf_svg(df) == ttft_cdf_svg(df.copy())


def test_no_legend_and_no_title():
    df = _frame(s=["naive"], x=[1.0], y=[1.0])
    svg = line_svg(df, x="x", y="y", series="s", x_title="X", legend=False)
    assert 'class="legend"' not in svg and "font-weight" not in svg


# -------------------------------------------------------------- ticks alone
@given(st.floats(-1e12, 1e12), st.floats(1e-6, 1e12))
@settings(max_examples=300, deadline=None)
def test_nice_ticks_are_4_to_8_nice_steps_inside_the_domain(lo, span):
    lo, hi = svgchart._widen(lo, lo + span)
    ticks, step, _ = svgchart._nice_ticks(lo, hi)
    assert 4 <= len(ticks) <= 8
    mant = step / 10 ** math.floor(math.log10(step) + 1e-12)
    assert any(math.isclose(mant, m, rel_tol=1e-9) for m in (1, 2, 2.5, 5))
    assert np.allclose(np.diff(ticks), step, rtol=1e-4)
    assert ticks[0] >= lo - step * 1e-6 and ticks[-1] <= hi + step * 1e-6


# -------------------------------------------------------------------- bars
def test_stacked_bars_proportional_contiguous_and_nan_as_zero():
    df = _frame(strategy=["vllm", "vllm", "vllm", "naive", "naive", "naive"],
                component=["A", "B", "C", "A", "B", "C"], ms=[10.0, 30.0, 20.0, 5.0, np.nan, -4.0])
    svg = stacked_bar_svg(df, category="strategy", value="ms", stack="component", stack_order=["A", "B", "C"],
                          stack_colors=["#111111", "#222222", "#333333"], x_title="ms", title="Bars")
    root = _parse(svg)
    _inside(root, svg)
    x0, y0, x1, y1 = _plot(root)
    rects = _rects(root)
    assert [r[4] for r in rects] == ["naive · A: 5.00 ms", "vllm · A: 10.00 ms", "vllm · B: 30.00 ms",
                                     "vllm · C: 20.00 ms"]  # NaN and negative: no segment
    assert [r[3] for r in rects] == ["#111111", "#111111", "#222222", "#333333"]
    assert _legend(root) == ["A", "B", "C"]
    naive, vllm = rects[:1], rects[1:]
    assert naive[0][0] == pytest.approx(x0) and vllm[0][0] == pytest.approx(x0)
    for a, b in zip(vllm, vllm[1:]):
        assert b[0] == pytest.approx(a[0] + a[2], abs=TOL)  # stacked left to right, touching
    # widths proportional to the values: px per ms from the axis ticks
    ticks = _ticks(root, "x")
    px_per_ms = (ticks[-1][0] - ticks[0][0]) / (float(ticks[-1][2]) - float(ticks[0][2]))
    for (_, _, w, _, _), v in zip(rects, [5, 10, 30, 20]):
        assert w == pytest.approx(v * px_per_ms, abs=0.11)
    assert sum(r[2] for r in vllm) == pytest.approx(60 * px_per_ms, abs=TOL)
    assert vllm[0][1] > naive[0][1]  # engine order: naive on top
    assert float(root.get("viewBox").split()[3]) == pytest.approx(y1 + 44)


def test_stacked_bars_height_grows_with_the_bars():
    def h(n):
        df = _frame(strategy=[f"s{i}" for i in range(n)], component="A", ms=1.0)
        svg = stacked_bar_svg(df, category="strategy", value="ms", stack="component", stack_order=["A"],
                              stack_colors=["#000000"], x_title="ms", bar_px=20)
        return float(_parse(svg).get("viewBox").split()[3])
    assert h(3) - h(2) == pytest.approx(32) and h(5) - h(2) == pytest.approx(96)


def test_stacked_bars_empty_or_all_zero():
    empty = _frame(strategy=pd.Series(dtype=object), component=pd.Series(dtype=object), ms=pd.Series(dtype=float))
    svg = stacked_bar_svg(empty, category="strategy", value="ms", stack="component", stack_order=["A"],
                          stack_colors=["#000000"], x_title="ms")
    assert "No data" in svg and _parse(svg) is not None
    zero = _frame(strategy=["naive"], component=["A"], ms=[np.nan])
    root = _parse(stacked_bar_svg(zero, category="strategy", value="ms", stack="component", stack_order=["A"],
                                  stack_colors=["#000000"], x_title="ms"))
    assert not _rects(root) and len(_ticks(root, "x")) >= 4


def test_breakdown_components_and_colours_as_the_altair_chart():
    summ = {"batch": {"frontend_mean_ms": 0.0, "queue_mean_ms": 15.0, "load_wait_mean_ms": 0.5, "prefill_mean_ms": 20.0},
            "naive": {"frontend_mean_ms": 0.0, "queue_mean_ms": 5.0, "load_wait_mean_ms": 2.0, "prefill_mean_ms": 20.0}}
    root = _parse(ttft_breakdown_svg(charts.breakdown_frame(summ)))
    assert _legend(root) == ["Queueing", "Adapter load wait", "Prefill"]
    colors = dict(zip(charts.BREAKDOWN.values(), charts._BREAKDOWN_COLORS))
    rects = _rects(root)
    assert [r[3] for r in rects] == [colors[r[4].split(" · ")[1].split(":")[0]] for r in rects]
    assert rects[0][4].startswith("naive · Queueing") and len(rects) == 6
    assert root.find(f"{NS}text").text == "Where the mean TTFT goes"
    with_fe = {k: {**v, "frontend_mean_ms": 1.0} for k, v in summ.items()}
    assert _legend(_parse(ttft_breakdown_svg(charts.breakdown_frame(with_fe))))[0] == "API server"


# -------------------------------------------------------------- time series
def test_timeseries_one_metric_step_lines_title_and_format():
    n = 50
    ts = {s: pd.DataFrame({"t_s": np.arange(n) * 0.5, "queue_len": RNG.poisson(2, n).astype(float),
                           "kv_used_frac": RNG.random(n) * 0.3}) for s in ("vllm", "naive")}
    df = charts.timeseries_frame(ts, metrics=["queue_len", "kv_used_frac"])
    svg = timeseries_svg(df, "kv_used_frac")
    root = _parse(svg)
    _inside(root, svg)
    assert root.get("viewBox") == "0 0 900 320" and root.find(f"{NS}text").text == "KV cache in use"
    assert [t for _, _, t in _lines(root)] == ["naive", "vllm"]
    assert [len(p) for _, p, _ in _lines(root)] == [2 * n - 1] * 2
    assert all(s.endswith("%") for _, _, s in _ticks(root, "y"))
    assert root.find(f"{NS}text[@class='x-title']").text == "Simulated time (s)"
    assert _hover(root)[1][2].startswith("naive · t (s): ") and " · KV cache in use: " in _hover(root)[1][2]
    assert 'class="legend"' not in timeseries_svg(df, "queue_len", legend=False)


# -------------------------------------------------------------- properties
_NAMES = ["naive", "vllm", "slora", "sglang", "custom <&>", "ünï"]
_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0.0, -1.0, 1e308, -1e308, 5e-324, 1e-300]))


@st.composite
def _frames(draw):
    n = draw(st.integers(0, 300))
    names = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=6, unique=True))
    s = draw(arrays(object, n, elements=st.sampled_from(names)))
    x = draw(arrays(float, n, elements=_VALUES))
    y = draw(arrays(float, n, elements=_VALUES))
    return pd.DataFrame({"s": s, "x": x, "y": y})


@given(_frames(), st.booleans(), st.booleans(), st.sampled_from([None, (0.0, 1.0), (-5.0, 1e6), (3.0, 3.0)]),
       st.booleans())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
def test_random_frames_give_well_formed_svg_with_finite_coordinates(df, log_x, step, y_domain, legend):
    svg = line_svg(df, x="x", y="y", series="s", x_title="X", y_title="Y", log_x=log_x, step=step,
                   y_domain=y_domain, legend=legend, title="T", fmt_y=",.2~f")
    root = _parse(svg)
    _inside(root, svg)
    assert "\n" not in svg  # (the page draws it as Markdown: a blank line would end the HTML block)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(df["x"]) & np.isfinite(df["y"]) & ((df["x"] > 0) if log_x else True)
    counts = df[ok].groupby("s", sort=False).size()
    lines = _lines(root)
    assert [t for _, _, t in lines] == charts._sorted_strategies(list(df.loc[ok, "s"]))
    assert [len(p) for _, p, _ in lines] == [2 * counts[t] - 1 if step else counts[t] for _, _, t in lines]
    assert ("No data" in svg) == (not ok.any())
    if ok.any():
        assert (2 if log_x else 4) <= len(_ticks(root, "x")) <= (10 if log_x else 8)
        assert 4 <= len(_ticks(root, "y")) <= 8


@given(st.lists(st.tuples(st.sampled_from(_NAMES), st.sampled_from(["A", "B", "C", "D"]), _VALUES), max_size=40))
@settings(max_examples=150, deadline=None)
def test_random_bars_are_well_formed_and_sum_to_their_totals(rows):
    df = pd.DataFrame(rows, columns=["strategy", "component", "ms"])
    svg = stacked_bar_svg(df, category="strategy", value="ms", stack="component", stack_order=["A", "B", "C"],
                          stack_colors=["#111111", "#222222", "#333333"], x_title="ms")
    root = _parse(svg)
    _inside(root, svg)
    if not len(df):
        assert "No data" in svg
        return
    x0, _, x1, _ = _plot(root)
    for x, _, w, _, _ in _rects(root):
        assert w > -TOL and x0 - TOL <= x and x + w <= x1 + TOL
