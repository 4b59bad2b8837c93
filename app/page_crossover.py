"""Crossover page: which strategy wins where, over a grid of two controls (noise-aware: ties are ties)."""
from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from app import charts, controls, exports, runner, sweep
from app.page_sweeps import range_slider
from engine import STRATEGIES, contenders_excluded

MAX_GRID = 8
#: Values per axis when the page opens.  It must fit ``runner.MAX_GRID_REQUESTS`` on the default scenario with the
#: default strategies and replications (tests/test_app_defaults.py computes the requests): on the default's 6 req/s
#: over 660 s (about 4,000 requests a run) a 4 x 4 grid of 5 strategies x 3 replications over two axes other than
#: the rate is about 0.95 million requests; the largest grid (8 x 8) asks for 3.2 million, above the cap, and the error names what fits
#: (``what_fits``).
DEFAULT_GRID = 4
#: Paired replications per cell: a verdict needs a confidence interval, so at least 2.
MIN_REPLICATIONS, DEFAULT_REPLICATIONS, MAX_REPLICATIONS = 2, 3, 5
PREFIX = "xo_"
K_REPS, K_GRID = "xo_reps", "xo_n"   # page controls, bound to the URL under these keys
#: URL-bound page controls: key -> (min, max, default).
_INT_PARAMS = {K_REPS: (MIN_REPLICATIONS, MAX_REPLICATIONS, DEFAULT_REPLICATIONS), K_GRID: (2, MAX_GRID, DEFAULT_GRID)}


def sanitize_query(params: Mapping[str, list[str]]) -> tuple[dict, list]:
    """Clean the page's ``xo_`` URL parameters (registered with ``controls.PAGE_PARAMS``)."""
    return controls.url_page_params(params, _INT_PARAMS)


controls.PAGE_PARAMS[PREFIX] = sanitize_query


def _role(s: str) -> str:
    return "an offline bound" if STRATEGIES[s].role == "bound" else "a baseline"


def tally_text(table, excluded: list[str]) -> str:
    """The cells' count in words: wins per strategy, ties (with their tied sets) apart, references named."""
    t = sweep.crossover_tally(table)
    parts = []
    if t["wins"]:
        parts.append("Cells won (the paired 95% CI of the margin excludes zero): "
                     + ", ".join(f"**{s}** {k}" for s, k in t["wins"].items()))
    else:
        parts.append("No cell has a winner outside the noise")
    if t["ties"]:
        sets = "; ".join(f"{' = '.join(f'**{s}**' for s in tied.split(', '))} {k}" for tied, k in t["tied_sets"].items())
        parts.append(f"ties (within the noise) {t['ties']}: {sets}")
    if t["leads"]:
        parts.append(f"leads without a confidence interval {t['leads']}")
    if t["none"]:
        parts.append(f"no result {t['none']}")
    text = "; ".join(parts) + "."
    if excluded:
        text += " " + ", ".join(f"**{s}** ({_role(s)})" for s in excluded) + " ran in every cell but is not a " \
                "contender: it never wins a cell (its values are in the data below)."
    return text


def plan_runs(base, strategies, x_axis: tuple, y_axis: tuple, n: int, reps: int) -> tuple[list, list, list]:
    """(x values, y values, runs) of an ``n`` x ``n`` grid over ``x_axis`` and ``y_axis`` ((control, (lo, hi))):
    every run as ``sweep.plan_grid`` gives it, its scenario capped as the runner will cap it."""
    (x, x_rng), (y, y_rng) = x_axis, y_axis
    xs = sweep.grid_values(*x_rng, n, integer=controls.BY_KEY[x].dtype is int)
    ys = sweep.grid_values(*y_rng, n, integer=controls.BY_KEY[y].dtype is int)
    runs = [(xy, s, k, runner.capped(sc) if sc is not None else None, err)
            for xy, s, k, sc, err in sweep.plan_grid(base, x, xs, y, ys, strategies, reps)]
    return xs, ys, runs


def what_fits(plan, n: int, reps: int) -> str:
    """What to change so that the grid fits ``runner.MAX_GRID_REQUESTS``: the largest smaller grid at ``reps``
    replications and the most replications that fit at ``n`` (else the largest grid at the fewest replications);
    ``plan(n, reps)`` -> (xs, ys, runs) as ``plan_runs`` gives them."""
    fits = lambda n_, r_: sweep.expected_requests(r[3] for r in plan(n_, r_)[2]) <= runner.MAX_GRID_REQUESTS  # noqa: E731
    options = []
    grid = next((m for m in range(n - 1, 1, -1) if fits(m, reps)), None)
    if grid is not None:
        options.append(f"a grid size of {grid} ({grid} x {grid} cells)")
    fewer = next((r for r in range(reps - 1, MIN_REPLICATIONS - 1, -1) if fits(n, r)), None)
    if fewer is not None:
        options.append(f"{fewer} replications")
    if not options and reps > MIN_REPLICATIONS:
        grid = next((m for m in range(n - 1, 1, -1) if fits(m, MIN_REPLICATIONS)), None)
        if grid is not None:
            options.append(f"a grid size of {grid} with {MIN_REPLICATIONS} replications")
    if options:
        return (f"With the other settings kept, {' or '.join(options)} would fit; fewer strategies, a shorter "
                "duration or a lower arrival rate also help.")
    return (f"Even a 2 x 2 grid with {MIN_REPLICATIONS} replications is above the cap: select fewer strategies in "
            "the sidebar, or shorten the duration or lower the arrival rate.")


def render() -> None:
    state = controls.current()
    controls.show_header(state, "Crossover", "Where does each strategy win? Each cell runs every selected strategy "
                         "over paired replications (replication k uses seed + k for every strategy) with the "
                         "sidebar's scenario except for the two controls on the axes. A cell takes the colour of "
                         "the strategy with the lowest mean TTFT p50 only when the paired 95% CI of its margin over "
                         "the runner-up excludes zero; otherwise it is a grey tie. Bounds (oracle) and baselines "
                         "(single_adapter) never win.")
    if state.error:
        st.error(f"This scenario cannot be simulated. {state.error}", icon=":material/error:")
        return
    excluded = contenders_excluded(state.strategies)
    if len(state.strategies) - len(excluded) < 2:
        st.warning("Select at least two strategies in the sidebar to find crossovers"
                   + (f" ({', '.join(excluded)} {'is' if len(excluded) == 1 else 'are'} a reference, not a "
                      "contender)" if excluded else "") + ".", icon=":material/checklist:")
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
        n = r2[2].slider("Grid size", 2, MAX_GRID, DEFAULT_GRID, key=K_GRID, bind="query-params",
                         help=f"Values per axis (at most {MAX_GRID} x {MAX_GRID} cells).")
        reps = r2[3].slider("Replications", MIN_REPLICATIONS, MAX_REPLICATIONS, DEFAULT_REPLICATIONS, key=K_REPS,
                            bind="query-params",
                            help="Paired seeds per cell (replication k uses seed + k for every strategy: common "
                                 "random numbers). A strategy wins a cell only when the paired 95% CI of its "
                                 "margin over the runner-up excludes zero; more replications resolve more ties.")

    xc, yc = controls.BY_KEY[x], controls.BY_KEY[y]
    plan = lambda n, reps: plan_runs(state.scenario, state.strategies, (x, x_rng), (y, y_rng), n, reps)  # noqa: E731
    xs, ys, runs = plan(n, reps)
    n_req = sweep.expected_requests(r[3] for r in runs)
    st.caption(f"{len(xs)} x {len(ys)} cells x {len(state.strategies)} strategies x {reps} paired replications = "
               f"{len(runs)} simulations, about {n_req:,.0f} simulated requests (cap {runner.MAX_GRID_REQUESTS:,}; "
               f"grid at most {MAX_GRID} x {MAX_GRID}).")
    if n_req > runner.MAX_GRID_REQUESTS:
        st.error(f"This grid would simulate about {n_req:,.0f} requests, above the cap of "
                 f"{runner.MAX_GRID_REQUESTS:,}. {what_fits(plan, n, reps)}", icon=":material/block:")
        return

    bar = st.progress(0.0, text="Simulating...")
    rows = sweep.run_grid(runs, runner.summary,
                          progress=lambda i, t: bar.progress(i / t, text=f"Simulating run {i} of {t}..."))
    bar.empty()
    table = sweep.crossover_table(rows, exclude=excluded)

    st.subheader(f"Winner by {xc.label} and {yc.label}")
    st.caption(controls.conditions(state.scenario) + f" · {reps} paired replications per cell")
    st.altair_chart(charts.unvalidated(charts.crossover_chart(table, xc.label, yc.label)), width="stretch")
    st.markdown(tally_text(table, excluded))
    st.caption("A tie means the data cannot tell the tied strategies apart at this number of replications: the "
               "paired 95% CI of the lowest mean's margin over another includes zero. A strategy that leaves more "
               f"than {sweep.COLLAPSE_UNFINISHED:.0%} of a cell's requests unfinished has collapsed there and is not "
               "ranked in that cell (its TTFT covers the finished requests only). Hover a cell for the margin and "
               "its CI.")
    errs = [e for e in sweep.errors(rows.assign(x=list(zip(rows["x"], rows["y"]))))]
    if errs:
        st.warning("Some runs were rejected by the engine:\n\n" + "\n".join(f"- {e}" for e in errs[:8]),
                   icon=":material/warning:")
    with st.expander("Data (verdict, margin and its CI per cell)"):
        st.dataframe(table, hide_index=True, width="stretch")
        st.download_button("Crossover CSV", exports.csv_bytes(table), file_name=f"crossover_{x}_{y}.csv",
                           mime="text/csv", on_click="ignore", key="dl_crossover", icon=":material/download:")
