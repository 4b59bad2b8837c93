"""Crossover page: which strategy wins where, over a grid of two controls."""
from __future__ import annotations

import streamlit as st

from app import charts, controls, runner, sweep
from app.page_sweeps import range_slider

MAX_GRID = 8
MAX_REPLICATIONS = 3


def render() -> None:
    state = controls.current()
    controls.show_header(state, "Crossover", "Where does each strategy win? Each cell runs every selected strategy "
                         "with the sidebar's scenario except for the two controls on the axes; the colour is the "
                         "strategy with the lowest mean TTFT p50, the label and opacity its margin over the "
                         "runner-up.")
    if state.error:
        st.error(f"This scenario cannot be simulated. {state.error}", icon=":material/error:")
        return
    if len(state.strategies) < 2:
        st.warning("Select at least two strategies in the sidebar to find crossovers.", icon=":material/checklist:")
        return
    values = state.values

    with st.container(border=True):
        r1 = st.columns(2, gap="large")
        r2 = st.columns([2, 2, 1, 1], gap="medium")
        label = lambda k: controls.BY_KEY[k].label  # noqa: E731
        x = r1[0].selectbox("x-axis", controls.SWEEPABLE, index=controls.SWEEPABLE.index("arrival_rate_rps"),
                            key="xo_x", format_func=label, help="Control on the horizontal axis.")
        y_opts = [k for k in controls.SWEEPABLE if k != x]
        if st.session_state.get("xo_y") not in y_opts:
            st.session_state["xo_y"] = "zipf_s" if "zipf_s" in y_opts else y_opts[0]
        y = r1[1].selectbox("y-axis", y_opts, key="xo_y", format_func=label, help="Control on the vertical axis.")
        with r2[0]:
            x_rng = range_slider(x, values, f"xo_range_x_{x}", f"{label(x)} range", rate_span=(0.2, 1.5))
        with r2[1]:
            y_rng = range_slider(y, values, f"xo_range_y_{y}", f"{label(y)} range", rate_span=(0.2, 1.5))
        n = r2[2].slider("Grid size", 2, MAX_GRID, 5, key="xo_n",
                         help=f"Values per axis (at most {MAX_GRID} x {MAX_GRID} cells).")
        reps = r2[3].slider("Seeds", 1, MAX_REPLICATIONS, 1, key="xo_reps",
                            help="Replications per cell; the winner is decided on the mean TTFT p50.")

    xc, yc = controls.BY_KEY[x], controls.BY_KEY[y]
    xs = sweep.grid_values(*x_rng, n, integer=xc.dtype is int)
    ys = sweep.grid_values(*y_rng, n, integer=yc.dtype is int)
    runs = [(xy, s, k, runner.capped(sc) if sc is not None else None, err)
            for xy, s, k, sc, err in sweep.plan_grid(state.scenario, x, xs, y, ys, state.strategies, reps)]
    n_req = sweep.expected_requests(r[3] for r in runs)
    st.caption(f"{len(xs)} x {len(ys)} cells x {len(state.strategies)} strategies x {reps} seeds = {len(runs)} "
               f"simulations, about {n_req:,.0f} simulated requests (cap {runner.MAX_GRID_REQUESTS:,}; grid at "
               f"most {MAX_GRID} x {MAX_GRID}).")
    if n_req > runner.MAX_GRID_REQUESTS:
        st.error(f"This grid would simulate about {n_req:,.0f} requests, above the cap of "
                 f"{runner.MAX_GRID_REQUESTS:,}. Use a smaller grid, fewer strategies or seeds, a shorter duration "
                 "or a lower arrival rate.", icon=":material/block:")
        return

    bar = st.progress(0.0, text="Simulating...")
    rows = sweep.run_grid(runs, runner.summary,
                          progress=lambda i, t: bar.progress(i / t, text=f"Simulating run {i} of {t}..."))
    bar.empty()
    table = sweep.crossover_table(rows)

    st.subheader(f"Winner by {xc.label} and {yc.label}")
    st.caption(controls.conditions(state.scenario))
    st.altair_chart(charts.unvalidated(charts.crossover_chart(table, xc.label, yc.label)), width="stretch")
    wins = table["winner"].value_counts()
    if len(wins):
        st.markdown("Cells won: " + ", ".join(f"**{s}** {k}" for s, k in wins.items()) + ".")
    errs = [e for e in sweep.errors(rows.assign(x=list(zip(rows["x"], rows["y"]))))]
    if errs:
        st.warning("Some runs were rejected by the engine:\n\n" + "\n".join(f"- {e}" for e in errs[:8]),
                   icon=":material/warning:")
    with st.expander("Data (winner and margin per cell)"):
        st.dataframe(table, hide_index=True, width="stretch")
        st.download_button("Crossover CSV", table.to_csv(index=False).encode(), file_name=f"crossover_{x}_{y}.csv",
                           mime="text/csv", key="dl_crossover", icon=":material/download:")
