"""Fleet page: the sidebar's scenario on ``num_replicas`` GPUs, every router side by side, and how many
GPUs the traffic needs.

Everything simulated comes from the engine (``Scenario.num_replicas`` / ``router``, ``engine.ROUTERS``,
``SimResult.replicas``); the verdict is ``engine.rank`` over paired replications (common random numbers:
every router sees the same request stream).  The page's own controls are bound to the URL under ``fl_``
keys (registered with ``controls.PAGE_PARAMS``).  The sweep over the number of replicas runs on a button,
bounded to ``MAX_SWEEP_REQUESTS`` simulated requests.
"""
from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import streamlit as st

from app import charts, controls, runner, verdicts
from engine import ROUTERS, STRATEGIES, mean_ci

PREFIX = "fl_"
K_REPS, K_MAX, K_STRATEGY = "fl_reps", "fl_max", "fl_strategy"
K_RUN, K_TRY = "fl_run", "fl_try"  # buttons: not in the URL
SWEEP_KEY = "_fleet_sweep"
DEFAULT_REPS, MAX_REPS = 2, 5
DEFAULT_MAX, SWEEP_COUNTS = 8, (1, 2, 3, 4, 6, 8, 12, 16)
#: Work cap of one replica sweep (all its runs together).
MAX_SWEEP_REQUESTS = 1_500_000
_INT_PARAMS = {K_REPS: (1, MAX_REPS, DEFAULT_REPS), K_MAX: (2, controls.MAX_UI_REPLICAS, DEFAULT_MAX)}
#: The router table's columns: summary key, label (number formats: ``verdicts.column_formats``, by unit).
KPIS = [("ttft_p50_ms", "TTFT p50 (ms)"), ("ttft_p99_ms", "TTFT p99 (ms)"), ("throughput_tok_s", "Tokens/s"),
        ("slo_attainment", "SLO met"), ("swap_rate", "Swap rate"), ("load_imbalance", "Load imbalance (max/mean)"),
        ("adapter_duplication", "Replicas per adapter")]


def sanitize_query(params: Mapping[str, list[str]]) -> tuple[dict, list]:
    """Clean the page's ``fl_`` URL parameters (registered with ``controls.PAGE_PARAMS``)."""
    return controls.url_page_params(params, _INT_PARAMS, {K_STRATEGY: list(STRATEGIES)})


controls.PAGE_PARAMS[PREFIX] = sanitize_query


#: The verdict's sentences (``verdicts.verdict_text``), by kind.
VERDICT_TEXTS = {
    "none": "No router has a {label} in the measurement window.",
    "single": "Only {best} has a {label} in the measurement window: no other router to compare it with.",
    "lead": "{best} leads on {label} in one replication: no confidence interval, so no verdict "
            "(set Replications to 2 or more).",
    "tie": "Tie on {label}: {best} and {tied} are within the noise (paired 95 % CI over {n} replications).",
    "win": "{best} wins on {label}, ahead of {second} (the paired 95 % CI of every difference excludes zero over "
           "{n} replications; every router sees the same requests).",
}


def router_table(reps: Mapping[str, list[dict]]) -> pd.DataFrame:
    """One row per router: mean and 95 % CI half-width of each KPI over the replications."""
    return verdicts.ci_table(reps, KPIS, "router")


def verdict(reps: Mapping[str, list[dict]], metric: str = "ttft_p99_ms") -> tuple[str, str]:
    """Noise-aware verdict on ``metric`` (lower is better) over paired replications: (text, kind)."""
    return verdicts.verdict(reps, metric, False, VERDICT_TEXTS, lambda k, s: f"**{k}** ({s['mean']:,.0f} ms)",
                            label="p99 TTFT")


def replica_frame(results: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Long frame (router, replica, metric, value) of each router's per-replica rows."""
    parts = []
    for r, df in results.items():
        for m in ("requests", "swap_rate", "gpu_busy_frac", "ttft_p99_ms"):
            parts.append(pd.DataFrame({"router": r, "replica": df["replica"], "metric": m, "value": df[m]}))
    return pd.concat(parts, ignore_index=True)


def sweep_counts(max_replicas: int) -> list[int]:
    return [n for n in SWEEP_COUNTS if n <= max_replicas]


def gpus_needed(df: pd.DataFrame, slo_ms: float) -> dict[str, int | None]:
    """Per router, the fewest replicas whose p99 TTFT CI lies under ``slo_ms`` (None: none swept does)."""
    out = {}
    for r, g in df.groupby("router", sort=False):
        ok = g[g["ci_high"] <= slo_ms].sort_values("replicas")
        out[r] = int(ok["replicas"].iloc[0]) if len(ok) else None
    return out


def _try_fleet(rate: float) -> None:
    ss = st.session_state
    ss["num_replicas"] = 4
    ss["arrival_rate_rps"] = min(controls.BY_KEY["arrival_rate_rps"].bounds({})[1], rate * 4)


def render() -> None:
    state = controls.current()
    controls.show_header(state, "Fleet", help="The sidebar's scenario on several identical GPUs behind a router: "
                         "every router serves the same request stream (common random numbers).")
    if not controls.runnable(state):
        return
    sc = state.scenario
    n = sc.num_replicas
    c1, c2, c3 = st.columns([1, 1, 2], vertical_alignment="bottom")
    n_reps = int(c1.number_input("Replications", 1, MAX_REPS, DEFAULT_REPS, step=1, key=K_REPS,
                                 bind="query-params", help="Seeds per router (seed + k for every router)."))
    strategies = list(state.strategies)
    if st.session_state.get(K_STRATEGY) not in strategies:
        st.session_state.pop(K_STRATEGY, None)
    strategy = c2.selectbox("Strategy on every GPU", strategies, key=K_STRATEGY, bind="query-params",
                            help="One of the sidebar's strategies, run on every replica.")
    base = sc.replace(strategy=strategy)
    if n == 1:
        st.info(f"One replica: every router sends every request to it. Set **Replicas** in the sidebar (Fleet) to "
                f"2 or more; the arrival rate there is the fleet's total ({sc.arrival_rate_rps:g} req/s now).",
                icon=":material/dns:")
        st.button("Try 4 replicas at 4x the arrival rate", key=K_TRY, on_click=_try_fleet,
                  args=(sc.arrival_rate_rps,), icon=":material/add:")
    else:
        c3.caption(f"{n} replicas · {sc.arrival_rate_rps:g} req/s in total (about {sc.arrival_rate_rps / n:.3g} "
                   f"per GPU) · the sidebar's router is **{sc.router}**")
        reps: dict[str, list[dict]] = {}
        full: dict[str, dict] = {}
        failed: dict[str, str] = {}
        with st.spinner("Simulating the fleet..."):
            for r in ROUTERS:
                res, rr, bad = runner.run_replications(base.replace(router=r), [strategy], n_reps)
                if bad:
                    failed[r] = bad[strategy]
                else:
                    full[r], reps[r] = res[strategy], rr[strategy]
        for r, msg in failed.items():
            st.error(f"Router **{r}** cannot run this scenario: {msg}", icon=":material/error:")
        if reps:
            text, kind = verdict(reps)
            st.info(text, icon={"win": ":material/emoji_events:", "tie": ":material/balance:"}.get(
                kind, ":material/info:"))
            table = router_table(reps)
            fmt = {c: st.column_config.NumberColumn(c, format=f) for c, f in verdicts.column_formats(KPIS).items()}
            st.dataframe(table, hide_index=True, width="stretch", column_config=fmt)
            st.caption("Mean over the replications and the half-width of its 95 % CI (±). Load imbalance: the "
                       "busiest replica's requests over the mean; replicas per adapter: how many GPUs hold an "
                       "adapter on average (docs/model.md, Fleet).")
            frame = replica_frame({r: v["replicas"] for r, v in full.items()})
            b1, b2 = st.columns(2, gap="large")
            with b1:
                st.altair_chart(charts.unvalidated(charts.replica_bars_chart(frame, "requests", "Requests per replica")),
                                width="stretch")
            with b2:
                st.altair_chart(charts.unvalidated(charts.replica_bars_chart(frame, "swap_rate", "Swap rate per "
                                                                             "replica", fmt=".0%")), width="stretch")
            st.caption("Replication 1 of each router.")

    # ------------------------------------------------------------------ how many GPUs
    st.subheader("How many GPUs?")
    max_n = int(st.number_input("Most replicas to try", 2, controls.MAX_UI_REPLICAS, DEFAULT_MAX, step=1, key=K_MAX,
                                bind="query-params"))
    counts = sweep_counts(max_n)
    work = int((len(ROUTERS) * (len(counts) - 1) + 1) * n_reps * sc.arrival_rate_rps * sc.duration_s)
    st.caption(f"p99 TTFT against the number of replicas ({', '.join(map(str, counts))}) at the sidebar's total "
               f"arrival rate ({sc.arrival_rate_rps:g} req/s), {strategy} on every GPU, every router, {n_reps} "
               "replications; the dashed line is the TTFT SLO.")
    key = (base.to_json(), tuple(counts), n_reps)
    if st.button("Run the sweep", key=K_RUN, icon=":material/play_arrow:"):
        if work > MAX_SWEEP_REQUESTS:
            st.error(f"This sweep would simulate about {work:,} requests; allowed: at most {MAX_SWEEP_REQUESTS:,}. "
                     "Lower the duration, the replications or the most replicas.", icon=":material/error:")
        else:
            rows = []
            bar = st.progress(0.0, text="Sweeping...")
            # one GPU: every router sends everything to it, so one run stands for all of them
            jobs = [(r, k) for k in counts for r in (ROUTERS if k > 1 else [next(iter(ROUTERS))])]
            for i, (r, k) in enumerate(jobs):
                _, rr, bad = runner.run_replications(base.replace(num_replicas=k, router=r), [strategy], n_reps,
                                                     summaries_only=True)
                if not bad:
                    m, lo, hi = mean_ci([s["ttft_p99_ms"] for s in rr[strategy]])
                    for rt in (ROUTERS if k == 1 else [r]):
                        rows.append({"replicas": k, "router": rt, "mean": m, "ci_low": lo, "ci_high": hi,
                                     "n": n_reps})
                bar.progress((i + 1) / len(jobs), text=f"Sweeping... {i + 1}/{len(jobs)}")
            bar.empty()
            st.session_state[SWEEP_KEY] = (key, pd.DataFrame(rows))
    last = st.session_state.get(SWEEP_KEY)
    if last is not None and last[0] == key and len(last[1]):
        df = last[1]
        st.altair_chart(charts.unvalidated(charts.fleet_sweep_chart(df, "p99 TTFT (ms)", slo=sc.slo_ttft_ms)),
                        width="stretch")
        need = gpus_needed(df, sc.slo_ttft_ms)
        st.markdown("**GPUs needed** for p99 TTFT under the SLO (the CI's upper end under it): " + "; ".join(
            f"{r}: {k if k is not None else f'more than {max(counts)}'}" for r, k in need.items()) + ".")
    elif last is not None:
        st.caption("The scenario changed since the last sweep: run it again.")
