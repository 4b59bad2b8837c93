"""What-if page: every chosen strategy on the sidebar's scenario, side by side."""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from app import charts, controls, exports, runner
from engine import STRATEGIES

#: KPI tiles: summary key, label, value format, better ("lower"/"higher"), help.
KPIS = [
    ("ttft_p50_ms", "TTFT p50", "ms", "lower",
     "Median time to first token (ms or s): from arrival to the first output token."),
    ("ttft_p99_ms", "TTFT p99", "ms", "lower", "99th-percentile time to first token (ms or s)."),
    ("throughput_tok_s", "Tokens / s", "tok/s", "higher",
     "Throughput: output tokens finished per second in the measurement window (after warm-up)."),
    ("swap_rate", "Swap rate", "share", "lower",
     "Adapter loads per completed request: the share of requests that had to bring their adapter to the GPU."),
    ("swap_share_of_ttft", "Swap share", "share", "lower",
     "Swap share of TTFT: the part of all time-to-first-token spent waiting for adapter loads (PCIe/disk)."),
    ("slo_attainment", "SLO met", "share", "higher",
     "SLO attainment: share of requests whose TTFT is at or under the TTFT SLO set in the sidebar."),
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


def fmt_delta(v: float, ref: float, unit: str) -> str | None:
    if v is None or ref is None or not (math.isfinite(v) and math.isfinite(ref)):
        return None
    d = v - ref
    if unit == "share":
        return f"{d * 100:+.1f} pp"
    if unit == "ms":
        return fmt_ms(d, sign=True)
    return f"{d / ref:+.1%}" if ref else f"{d:+,.0f}"


def verdict(summaries: dict[str, dict], baseline: str) -> str:
    """Plain-language winner on median TTFT, with margins (from the summaries)."""
    vals = {s: m["ttft_p50_ms"] for s, m in summaries.items() if math.isfinite(m.get("ttft_p50_ms", math.nan))}
    if not vals:
        return "No strategy completed any request in the measurement window."
    order = sorted(vals, key=vals.get)
    best = order[0]
    if len(order) == 1:
        text = f"Only **{best}** ran: median TTFT **{fmt_ms(vals[best])}**. Add strategies in the sidebar to compare."
    else:
        second = order[1]
        gap = vals[second] - vals[best]
        rel = gap / vals[second] if vals[second] > 0 else 0.0
        if rel < 0.01:
            text = (f"**{best}** and **{second}** are practically tied on median TTFT here "
                    f"({fmt_ms(vals[best])} vs {fmt_ms(vals[second])}, {rel:.1%} apart)")
        else:
            text = (f"**{best}** wins on median TTFT here: **{fmt_ms(vals[best])}**, {fmt_ms(gap)} ({rel:.1%}) "
                    f"lower than the runner-up **{second}** ({fmt_ms(vals[second])})")
        if baseline in vals and baseline not in (best, second) and vals[baseline] > 0:
            b = vals[baseline]
            text += (f"; against the baseline **{baseline}** ({fmt_ms(b)}), **{best}** is {fmt_ms(b - vals[best])} "
                     f"({(b - vals[best]) / b:.0%}) lower")
        worst = order[-1]
        if worst not in (best, second, baseline):
            text += f"; **{worst}** is slowest ({fmt_ms(vals[worst])})"
        text += "."
    unfinished = max((m.get("not_completed", 0) / m["requests"] for m in summaries.values() if m.get("requests")),
                     default=0.0)
    if unfinished > 0.05:
        text += (f" Careful: the GPU is overloaded here, up to {unfinished:.0%} of the requests never finish, and "
                 "TTFT is measured on the finished ones only.")
    return text


def _on_trace_upload() -> None:
    ss = st.session_state
    f = ss.get("trace_upload")
    ss.pop("_trace_error", None)
    if f is None:
        return
    try:
        ss["_trace"] = runner.trace_record(f.name, f.getvalue())
    except ValueError as e:
        ss["_trace_error"] = str(e)


def render() -> None:
    state = controls.current()
    controls.show_header(state, "What-if", help="Every selected strategy serves the same simulated request "
                         "stream (same seed) on the scenario set in the sidebar; the tiles compare them with the "
                         "baseline you pin on the right.")
    if not controls.runnable(state):
        return

    sc = state.scenario
    trace = st.session_state.get("_trace")
    if trace is not None:
        st.info(f"Replaying the uploaded trace **{trace['name']}** ({trace['size'] / 1e6:.1f} MB): the sidebar's arrival "
                "process, rate, lengths and popularity are replaced by the trace; requests arriving after the "
                "duration are dropped.", icon=":material/replay:")

    results: dict[str, dict] = {}
    failed: dict[str, str] = {}
    with st.spinner("Simulating..."):
        for s in state.strategies:
            try:
                results[s] = runner.run(sc.replace(strategy=s), trace)
            except ValueError as e:
                failed[s] = str(e)
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
    if st.session_state.get(controls.BASELINE_KEY) not in names:
        st.session_state[controls.BASELINE_KEY] = "naive" if "naive" in names else names[0]

    head_l, head_r = st.columns([4, 1], vertical_alignment="bottom")
    with head_r:
        baseline = st.selectbox("Baseline for the deltas", names, key=controls.BASELINE_KEY, bind="query-params",
                                help="Strategy the other tiles are compared with (deltas = strategy - baseline).")
    with head_l:
        st.info(verdict(summaries, baseline), icon=":material/emoji_events:")

    # ------------------------------------------------------------------ KPI tiles
    ref = summaries[baseline]
    for s in names:
        m = summaries[s]
        with st.container(border=True):
            cols = st.columns([1.1, 1, 1, 1, 1, 1, 1], vertical_alignment="center")
            with cols[0]:
                st.markdown(f"{charts.strategy_dot(s)}**{s}**", unsafe_allow_html=True, help=STRATEGIES[s].description)
                st.caption("baseline" if s == baseline else f"vs {baseline}")
                if m.get("not_completed"):
                    st.caption(f":orange[{m['not_completed']:,} of {m['requests']:,} requests unfinished]")
            for col, (key, label, unit, better, help_) in zip(cols[1:], KPIS):
                v = m.get(key, math.nan)
                delta = None if s == baseline else fmt_delta(v, ref.get(key, math.nan), unit)
                color, arrow = ("inverse" if better == "lower" else "normal"), "auto"
                if delta is not None and not any(ch in "123456789" for ch in delta):
                    delta, color, arrow = delta.lstrip("+-"), "off", "off"  # rounds to zero: no direction
                col.metric(label, fmt_value(v, unit), delta, delta_color=color, delta_arrow=arrow, help=help_)

    # ---------------------------------------------------------------------- charts
    show = lambda chart: st.altair_chart(charts.unvalidated(chart), width="stretch")  # noqa: E731
    st.subheader("Time to first token")
    st.caption(controls.conditions(sc) + f" · measured on arrivals in [{sc.warmup_s:g} s, {sc.duration_s:g} s)")
    c1, c2 = st.columns([3, 2], gap="large")
    with c1:
        log_x = st.toggle("Log-scale TTFT axis", value=True, key="cdf_log")
        show(charts.ttft_cdf_chart(pd.concat([r["cdf"] for r in results.values()], ignore_index=True),
                                   log_x=log_x))
    with c2:
        show(charts.ttft_breakdown_chart(charts.breakdown_frame(summaries)))
        st.caption("Mean TTFT = queueing (waiting for a batch slot) + adapter load wait (PCIe/disk transfer) "
                   "+ prefill (prompt compute).")

    st.subheader("Inside the server over time")
    st.caption(controls.conditions(sc))
    st.markdown(charts.legend_html(names), unsafe_allow_html=True)
    ts = pd.concat([r["ts"] for r in results.values()], ignore_index=True)
    row1 = st.columns(2, gap="large")
    row2 = st.columns(2, gap="large")
    for col, metric in zip([*row1, *row2], charts.TS_METRICS):
        with col:
            show(charts.timeseries_chart(ts, metric))

    # ------------------------------------------------------------- export / import
    st.subheader("Export and import")
    e = st.columns(4)
    req_frames = {s: r["requests"] for s, r in results.items()}
    e[0].download_button("Per-request CSV", data=lambda: exports.requests_csv(req_frames), file_name="requests.csv",
                         mime="text/csv", key="dl_requests", icon=":material/download:", width="stretch",
                         help="Every simulated request of every strategy (one row per request, built on click).")
    e[1].download_button("Summary CSV", data=exports.summary_csv(summaries), file_name="summary.csv",
                         mime="text/csv", key="dl_summary", icon=":material/download:", width="stretch",
                         help="One row per strategy with every summary metric.")
    e[2].download_button("Time-series CSV", data=exports.timeseries_csv({s: r["timeseries"] for s, r in results.items()}),
                         file_name="timeseries.csv", mime="text/csv", key="dl_timeseries",
                         icon=":material/download:", width="stretch",
                         help="Queue, batch, residency, loads and memory over time, per strategy.")
    e[3].download_button("scenario.json", data=exports.scenario_json(sc.replace(strategy=baseline)),
                         file_name="scenario.json", mime="application/json", key="dl_scenario",
                         icon=":material/download:", width="stretch",
                         help="Every field of this scenario; upload it below (or pass it to the engine CLI) to restore it.")

    u1, u2 = st.columns(2, gap="large")
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
                         help=f"Columns arrival_s, adapter_id, prompt_tokens, output_tokens; at most "
                              f"{runner.MAX_UPLOAD_MB} MB. Replayed instead of the generated workload.")
        if st.session_state.get("_trace_error"):
            st.error(st.session_state["_trace_error"], icon=":material/error:")
        if trace is not None and st.button("Stop replaying the trace", key="stop_trace"):
            st.session_state.pop("_trace", None)
            st.rerun()
