"""Sweeps page: one control on the x-axis, every strategy, mean and 95% CI over seeds."""
from __future__ import annotations

import streamlit as st

from app import charts, controls, exports, runner, sweep
from engine import Scenario

#: The six figures of the source simulator (multi-lora-serving-sim): x control and metrics
#: (the range is the control's DEFAULT_RANGES entry).
FIGURES: dict[str, dict] = {
    "Latency vs arrival rate": dict(x="arrival_rate_rps",
                                    metrics=["ttft_p50_ms", "ttft_p99_ms", "swap_rate"]),
    "Swap overhead (vs output length)": dict(x="output_tokens",
                                             metrics=["swap_share_of_ttft", "swap_rate", "ttft_p50_ms"]),
    "Distribution effect (Zipf skew)": dict(x="zipf_s",
                                            metrics=["ttft_p50_ms", "ttft_p99_ms", "swap_rate"]),
    "Batch-window effect": dict(x="batch_window_ms",
                                metrics=["ttft_p50_ms", "ttft_p99_ms", "swap_rate"]),
    "VRAM capacity effect (adapter budget)": dict(x="vram_budget_gb",
                                                  metrics=["ttft_p50_ms", "ttft_p99_ms", "swap_rate"]),
    "VRAM pressure effect (number of adapters)": dict(x="num_adapters",
                                                      metrics=["ttft_p50_ms", "ttft_p99_ms", "swap_rate"]),
}
CUSTOM = "Custom"
#: Default sweep range per control (clamped to the control's current range).
DEFAULT_RANGES = {
    "arrival_rate_rps": (4.0, 40.0), "zipf_s": (0.0, 2.0), "batch_window_ms": (5.0, 100.0),
    "vram_budget_gb": (2.0, 16.0), "num_adapters": (50, 1000), "pcie_gbps": (4.0, 64.0),
    "output_tokens": (8, 128), "prompt_tokens": (64, 2048), "adapter_rank": (8, 128), "max_loras": (8, 128),
}
MAX_POINTS = 12
MAX_REPLICATIONS = 5


def axis_range(key: str, values: dict, rate_span: tuple[float, float] = (0.2, 2.0)
               ) -> tuple[float, float, float, tuple]:
    """(min, max, step, default range) of a sweepable control for the current scenario.

    The arrival rate's default range is relative to the sidebar's rate (``rate_span``).
    """
    c = controls.BY_KEY[key]
    lo, hi, step = (c.dtype(b) for b in c.bounds(values))
    dlo, dhi = DEFAULT_RANGES.get(key, (lo, hi))
    if key == "arrival_rate_rps" and "arrival_rate_rps" in values:
        r = float(values["arrival_rate_rps"])
        dlo, dhi = round(r * rate_span[0] * 2) / 2, round(r * rate_span[1] * 2) / 2
    dlo, dhi = c.dtype(min(max(dlo, lo), hi)), c.dtype(min(max(dhi, lo), hi))
    if dlo >= dhi:
        dlo, dhi = lo, hi
    return lo, hi, step, (dlo, dhi)


def range_slider(key: str, values: dict, widget_key: str, label: str,
                 rate_span: tuple[float, float] = (0.2, 2.0)) -> tuple:
    """A range slider for one sweepable control (one widget key per control)."""
    c = controls.BY_KEY[key]
    lo, hi, step, default = axis_range(key, values, rate_span)
    cur = st.session_state.get(widget_key)
    if cur is not None:
        a, b = (min(max(c.dtype(v), lo), hi) for v in cur)
        if (a, b) != tuple(cur) or a >= b:
            st.session_state[widget_key] = default if a >= b else (a, b)
    return st.slider(label, min_value=lo, max_value=hi, value=default, step=step, format=c.fmt,
                     key=widget_key, help=f"Range of '{c.label}' to sweep. {c.help}")


def _on_figure() -> None:
    fig = FIGURES.get(st.session_state["sweep_figure"])
    if fig is None:
        return
    st.session_state["sweep_x"] = fig["x"]
    st.session_state.pop(f"sweep_range_{fig['x']}", None)


def run_with_progress(runs, metrics):
    """Run the planned sweep with a progress bar (removed when done); one row per run."""
    bar = st.progress(0.0, text="Simulating...")

    def tick(i: int, n: int) -> None:
        bar.progress(i / n, text=f"Simulating run {i} of {n}...")

    rows = sweep.run_plan(runs, runner.summary, metrics=metrics, progress=tick)
    bar.empty()
    return rows


def render() -> None:
    state = controls.current()
    controls.show_header(state, "Sweeps", "Vary one control, keep the rest of the sidebar's scenario, and see how "
                         "each strategy responds. Curves are means over seeds with 95% confidence bands.")
    if not controls.runnable(state):
        return
    values = state.values
    names = list(FIGURES) + [CUSTOM]

    with st.container(border=True):
        a, b, c, d, e = st.columns([1.6, 1.3, 2.2, 1, 1], gap="medium")
        fig_name = a.selectbox("Figure", names, key="sweep_figure", on_change=_on_figure,
                               help="Presets for the six figures of the source simulator; 'Custom' keeps your "
                                    "own choice of x-axis.")
        fig = FIGURES.get(fig_name)
        if "sweep_x" not in st.session_state:
            st.session_state["sweep_x"] = (fig or FIGURES[names[0]])["x"]
        x = b.selectbox("x-axis", controls.SWEEPABLE, key="sweep_x",
                        format_func=lambda k: controls.BY_KEY[k].label,
                        help="The scenario control to vary; every other control keeps its sidebar value.")
        with c:
            lo_hi = range_slider(x, values, f"sweep_range_{x}", "Range")
        points = d.slider("Points", 2, MAX_POINTS, 6, key="sweep_points", help="Number of x values (evenly spaced).")
        reps = e.slider("Seeds", 1, MAX_REPLICATIONS, 3, key="sweep_reps",
                        help="Replications per point (seeds seed, seed+1, ...); the band is the 95% confidence "
                             "interval of the mean (Student t). One seed: no band.")
    metrics = (fig["metrics"] if fig and fig["x"] == x else ["ttft_p50_ms", "ttft_p99_ms", "swap_rate"])

    xc = controls.BY_KEY[x]
    xs = sweep.grid_values(lo_hi[0], lo_hi[1], points, integer=xc.dtype is int)
    base: Scenario = state.scenario
    runs = [(xv, s, k, runner.capped(sc) if sc is not None else None, err)
            for xv, s, k, sc, err in sweep.plan(base, x, xs, state.strategies, reps)]
    n_req = sweep.expected_requests(r[3] for r in runs)
    st.caption(f"{len(xs)} points x {reps} seeds x {len(state.strategies)} strategies = {len(runs)} simulations, "
               f"about {n_req:,.0f} simulated requests (cap {runner.MAX_GRID_REQUESTS:,} per sweep; each run is "
               f"also capped at {controls.MAX_REQUESTS_PER_RUN:,} requests).")
    if n_req > runner.MAX_GRID_REQUESTS:
        st.error(f"This sweep would simulate about {n_req:,.0f} requests, above the cap of "
                 f"{runner.MAX_GRID_REQUESTS:,}. Use fewer points or seeds, fewer strategies, a shorter duration or "
                 "a lower arrival rate.", icon=":material/block:")
        return

    rows = run_with_progress(runs, list(sweep.SWEEP_METRICS))
    agg = sweep.aggregate(rows, list(sweep.SWEEP_METRICS))

    head, tog = st.columns([4, 1], vertical_alignment="bottom")
    head.subheader(fig_name if fig and fig["x"] == x else f"Sweep over {xc.label}")
    log_y = tog.toggle("Log-scale latency", value=True, key="sweep_log",
                       help="Log scale on the TTFT axes (latency explodes once the GPU saturates).")
    st.caption(controls.conditions(base) + f" · x-axis: {xc.label}; the sidebar value of that control is ignored")
    st.markdown(charts.legend_html(state.strategies, "line: mean over seeds · band: 95% CI"),
                unsafe_allow_html=True)
    cols = st.columns(len(metrics), gap="large")
    for col, m in zip(cols, metrics):
        title, fmt = sweep.SWEEP_METRICS[m]
        chart = charts.sweep_chart(agg, m, xc.label, title, fmt, log_y=log_y and m.endswith("_ms"))
        with col:
            st.altair_chart(charts.unvalidated(chart), width="stretch")
    errs = sweep.errors(rows)
    if errs:
        st.warning("Some runs were rejected by the engine (no point drawn):\n\n" +
                   "\n".join(f"- {e}" for e in errs[:8]), icon=":material/warning:")
    with st.expander("Data (mean and 95% CI per point)"):
        table = agg.pivot_table(index=["x", "strategy"], columns="metric", values="mean").reset_index()
        st.dataframe(table, hide_index=True, width="stretch")
        st.download_button("Sweep CSV", exports.csv_bytes(agg), file_name=f"sweep_{x}.csv",
                           mime="text/csv", on_click="ignore", key="dl_sweep", icon=":material/download:")
