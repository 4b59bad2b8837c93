"""Observed vs twin page: a run observed on a real server (``engine.live.observe``: every request, a /metrics time
series) against the twin's replay of exactly those requests (``engine.calibration.replay_observed``).

Three sources, one view: a run of the shipped reference-server dataset (vLLM's CPU build,
``engine/data/reference/reference_server/``), an observed run a visitor uploads (its ``run.json``,
``requests.csv`` and ``timeseries.csv``, bounded like every upload), or a server observed from here, which is off
unless the operator names the servers allowed (``engine.live.OBSERVE_URLS_ENV``): a visitor picks one of those,
never types an address.  The shared scenario is not used (a run states its own server and traffic).
"""
from __future__ import annotations

import hashlib
import math
import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from app import charts, controls, exports, runner
from engine import Scenario, live
from engine import calibration as C

#: Requests one uploaded run may hold (the replay simulates each).
MAX_UPLOAD_REQUESTS = 20_000
#: The files of an observed run, by name (``engine.live.write_observation``).
RUN_FILES = ("run.json", "requests.csv", "timeseries.csv")
SOURCES = ("A reference-server run (shipped)", "Upload an observed run", "Observe a server")
_KEY = "obs_"
METRIC_LABELS = {"request_throughput": "Request throughput (req/s)", "output_throughput": "Output throughput (tok/s)",
                 "mean_ttft_ms": "Mean TTFT (ms)", "median_ttft_ms": "Median TTFT (ms)", "p90_ttft_ms": "P90 TTFT (ms)",
                 "p99_ttft_ms": "P99 TTFT (ms)", "mean_tpot_ms": "Mean TPOT (ms)", "median_tpot_ms": "Median TPOT (ms)",
                 "p99_tpot_ms": "P99 TPOT (ms)", "mean_e2el_ms": "Mean end-to-end (ms)"}


# ------------------------------------------------------------------ pure part
def metrics_view(t: pd.DataFrame) -> pd.DataFrame:
    """replay_observed's ``metrics`` with labels, the metrics people read first, first."""
    order = {m: i for i, m in enumerate(METRIC_LABELS)}
    d = t.assign(_o=t["metric"].map(order).fillna(len(order))).sort_values(["_o", "metric"], kind="stable")
    return pd.DataFrame({"metric": [METRIC_LABELS.get(m, m) for m in d["metric"]], "measured": d["measured"].to_numpy(),
                         "twin": d["simulated"].to_numpy(), "error": d["rel_error"].to_numpy()})


def upload_files(files: list[tuple[str, bytes]]) -> dict[str, bytes]:
    """The uploaded files of one observed run by name; ValueError naming what is missing or extra."""
    by = {}
    for name, raw in files:
        base = Path(name).name
        if base not in RUN_FILES:
            raise ValueError(f"upload: {base!r} is not a file of an observed run; allowed: {', '.join(RUN_FILES)}")
        if base in by:
            raise ValueError(f"upload: {base!r} given twice; allowed: one of each")
        by[base] = raw
    for need in RUN_FILES[:2]:
        if need not in by:
            raise ValueError(f"upload: {need} missing; allowed: {', '.join(RUN_FILES)} (timeseries.csv optional)")
    n = by["requests.csv"].count(b"\n") - 1
    if n > MAX_UPLOAD_REQUESTS:
        raise ValueError(f"requests.csv: {n:,} rows; allowed: at most {MAX_UPLOAD_REQUESTS:,} requests per uploaded run")
    by.setdefault("timeseries.csv", (",".join(live.TIMESERIES_COLUMNS) + "\n").encode())
    return by


def write_run(files: dict[str, bytes], root: Path) -> Path:
    """The files of one observed run written to ``root/run`` (what ``replay_observed`` reads)."""
    d = root / "run"
    d.mkdir(parents=True, exist_ok=True)
    for k, v in files.items():
        (d / k).write_bytes(v)
    return d


@st.cache_data(max_entries=16, show_spinner=False)
def _replay_files(digest: str, _files: dict[str, bytes]) -> dict[str, pd.DataFrame]:
    """The replay of an uploaded or observed run (cached on the files' digest)."""
    with tempfile.TemporaryDirectory(prefix="lora-whatif-obs-") as tmp:
        return C.replay_observed(write_run(_files, Path(tmp)))


@st.cache_data(max_entries=1, show_spinner=False)
def _reference_fit() -> dict[str, float]:
    """The reference server's fitted costs (the Validation page's fit), computed once per server process."""
    return C.reference_fit()


@st.cache_data(max_entries=64, show_spinner=False)
def _replay_shipped(run_id: str) -> dict[str, pd.DataFrame]:
    values = _reference_fit()
    with tempfile.TemporaryDirectory(prefix="lora-whatif-ref-") as tmp:
        dirs = C.unpack_reference_runs(Path(tmp), run_ids={run_id})
        return {**C.replay_observed(dirs[run_id], values=values), "_values": values}


@st.cache_data(max_entries=1, show_spinner=False)
def _shipped_table() -> pd.DataFrame:
    return C.reference_run_table()


def run_label(r) -> str:
    """One shipped run in words."""
    cache = f", CPU cache {int(r['max_cpu_loras'])}" if r.get("max_cpu_loras") else ""
    kv = f", {int(r['kv_blocks'])} KV blocks" if r.get("kv_blocks") else ""
    pfx = "" if r.get("prefix_caching", True) else ", prefix caching off"
    if r["arrival"] == "closed":
        traffic = f"closed loop of {int(r['concurrency'])}"
    else:
        traffic = f"{r['rate_rps']:g} req/s Poisson"
    pop = "uniform" if not r.get("zipf_s") else f"Zipf {r['zipf_s']:g}"
    return (f"{r['run_id']}: max_loras {int(r['max_loras'])}, {int(r['num_adapters'])} adapters{cache}{kv}{pfx}; "
            f"{traffic} over {int(r['traffic_adapters'])} adapters, {pop} ({r['split'] or r['study']})")


# ------------------------------------------------------------------ page
def _shipped() -> dict | None:
    try:
        tab = _shipped_table()
    except (OSError, ValueError) as e:
        st.error(f"The reference-server dataset cannot be read: {e}", icon=":material/error:")
        return None
    labels = {r["run_id"]: run_label(r) for _, r in tab.iterrows()}
    rid = st.selectbox("Run", list(labels), format_func=labels.get, key=_KEY + "run",
                       help="The reference server's runs (engine/data/reference/reference_server/): vLLM 0.32.0's CPU "
                            "build over a small random-weight Llama with peft adapters, observed by this project.")
    with st.spinner("Fitting the reference server's costs and replaying the run…"):
        t = _replay_shipped(rid)
    v = t["_values"]
    st.caption("The twin at the reference server's fitted costs (fitted on the runs of groups "
               f"{', '.join(C.REFERENCE_TRAIN_GROUPS)}; this run is "
               f"{'one of them' if tab.set_index('run_id').loc[rid, 'split'] == 'train' else 'held out'}): "
               + ", ".join(f"{k} {x:.3g}" for k, x in v.items()) + ".")
    return t


def _uploaded() -> dict | None:
    ups = st.file_uploader("The run's files: run.json, requests.csv, timeseries.csv (from `python -m engine observe "
                           "--out DIR`)", type=["json", "csv"], accept_multiple_files=True, key=_KEY + "upload",
                           max_upload_size=runner.MAX_UPLOAD_MB)
    if not ups:
        st.caption(f"At most {runner.MAX_UPLOAD_MB} MB per file and {MAX_UPLOAD_REQUESTS:,} requests per run.")
        return None
    try:
        files = upload_files([(f.name, f.getvalue()) for f in ups])
        digest = hashlib.sha256(b"".join(files[k] for k in sorted(files))).hexdigest()
        with st.spinner("Replaying the run in the twin…"):
            return _replay_files(digest, files)
    except ValueError as e:
        st.error(str(e), icon=":material/error:")
        return None


def _observe() -> dict | None:
    try:
        allowed = live.allowed_urls()
    except ValueError as e:
        st.error(str(e), icon=":material/error:")
        return None
    if not allowed:
        st.info(f"Observing a server from this dashboard is off: a shared link must never make this server send "
                f"traffic to an address a visitor types.  The operator turns it on by naming the servers allowed in "
                f"the environment variable `{live.OBSERVE_URLS_ENV}` (base URLs, comma-separated).  The same "
                "observation from a terminal: `python -m engine observe --url URL --out DIR`; upload its files "
                "here.", icon=":material/lock:")
        return None
    lim = live.HOSTED_LIMITS
    with st.form(_KEY + "form"):
        url = st.selectbox("Server (the operator's list)", allowed, key=_KEY + "url")
        c = st.columns(4)
        rate = c[0].number_input("Arrival rate (req/s)", 0.1, 100.0, 4.0, 0.5, key=_KEY + "rate")
        dur = c[1].number_input("Duration (s)", 1.0, lim["duration_s"], 15.0, 1.0, key=_KEY + "dur")
        prompt = c[2].number_input("Prompt tokens (mean)", 1, 4096, 64, key=_KEY + "prompt")
        out = c[3].number_input("Output tokens (mean)", 1, 2048, 16, key=_KEY + "out")
        c2 = st.columns(3)
        n_ad = c2[0].number_input("Adapters to draw from", 1, 512, 8, key=_KEY + "adapters")
        zipf = c2[1].number_input("Zipf exponent (0: uniform)", 0.0, 5.0, 1.0, 0.1, key=_KEY + "zipf")
        cap = c2[2].number_input("Most requests", 1, lim["max_requests"], min(200, lim["max_requests"]), key=_KEY + "cap")
        go = st.form_submit_button("Observe", icon=":material/sensors:")
    if not go:
        return st.session_state.get(_KEY + "last")
    try:
        url = live.check_allowed(url, allowed)
        sc = Scenario.from_dict({**Scenario().to_dict(), "arrival_rate_rps": float(rate), "duration_s": float(dur),
                                 "prompt_tokens": int(prompt), "output_tokens": int(out), "num_adapters": int(n_ad),
                                 "popularity": "zipf", "zipf_s": float(zipf), "warmup_s": 0.0}).validate()
        with tempfile.TemporaryDirectory(prefix="lora-whatif-obs-") as tmp:
            with st.spinner(f"Observing {url} (at most {float(dur) + lim['drain_timeout_s']:.0f} s)…"):
                live.observe(url, sc, out_dir=Path(tmp) / "run", max_requests=int(cap),
                             request_timeout_s=lim["request_timeout_s"], drain_timeout_s=lim["drain_timeout_s"])
            files = {k: (Path(tmp) / "run" / k).read_bytes() for k in RUN_FILES}
        digest = hashlib.sha256(b"".join(files[k] for k in sorted(files))).hexdigest()
        res = _replay_files(digest, files)
        res = {**res, "_files": files}
        st.session_state[_KEY + "last"] = res
        return res
    except ValueError as e:
        st.error(str(e), icon=":material/error:")
        return None


def _show(t: dict) -> None:
    m = metrics_view(t["metrics"])
    st.markdown("##### Measured against the twin")
    st.dataframe(m, hide_index=True, width="stretch", key=_KEY + "metrics", column_config={
        "measured": st.column_config.NumberColumn(format="%.4g"), "twin": st.column_config.NumberColumn(format="%.4g"),
        "error": st.column_config.NumberColumn("twin / measured − 1", format="percent")})
    d = t["ttft"].iloc[0] if len(t["ttft"]) else None
    if d is not None and "ks" in d and math.isfinite(float(d["ks"])):
        st.caption(f"Largest gap between the two TTFT CDFs (Kolmogorov–Smirnov): {float(d['ks']):.2f}.")
    reqs = t.get("requests")
    if reqs is not None and len(reqs):
        st.altair_chart(charts.observed_cdf_chart(charts.observed_cdf_frame(reqs)), width="stretch")
    ts = charts.observed_timeseries_frame(t["timeseries"])
    if len(ts):
        cols = st.columns(2)
        for col, q in zip(cols, (v[2] for v in charts.OBSERVED_TS.values())):
            with col:
                st.altair_chart(charts.observed_timeseries_chart(ts, q), width="stretch")
        st.caption("Measured: the server's /metrics (vllm:num_requests_running / waiting), scraped every 0.25 s.  "
                   "Twin: the simulated batch and queue at the same instants.")
    if len(t["adapters"]):
        st.markdown("##### Per adapter")
        st.dataframe(t["adapters"], hide_index=True, width="stretch", key=_KEY + "adapters")
    b = st.columns(3)
    b[0].download_button("Metrics CSV", data=exports.csv_bytes(t["metrics"]), file_name="replay_metrics.csv",
                         mime="text/csv", on_click="ignore", key=_KEY + "dl_m", icon=":material/download:")
    if reqs is not None:
        b[1].download_button("Requests CSV", data=exports.csv_bytes(reqs), file_name="replay_requests.csv",
                             mime="text/csv", on_click="ignore", key=_KEY + "dl_r", icon=":material/download:")
    files = t.get("_files")
    if files:
        b[2].download_button("Observed run.json", data=files["run.json"], file_name="run.json",
                             mime="application/json", on_click="ignore", key=_KEY + "dl_j", icon=":material/download:")


def render() -> None:
    st.title("Observed vs twin", anchor=False,
             help="A run on a real server, request by request, against the simulator's replay of exactly those "
                  "requests on the server the run states.")
    st.markdown("What a real server did, and what the twin says it would do with **the same requests**: the exact "
                "send times, lengths, shared prefixes and adapters are replayed on the server the run states "
                "(its `--max-loras`, CPU cache, KV space, batch limits).  A shipped run is replayed at the reference "
                "server's fitted costs; an uploaded or observed run at the twin's default costs for its device "
                "(`python -m engine calibrate --observed DIR` fits them; the Validation page shows the fit on the "
                "reference server).  The shared scenario is not used here.")
    controls.show_url_issues()
    src = st.radio("Source", SOURCES, horizontal=True, key=_KEY + "source")
    try:
        t = _shipped() if src == SOURCES[0] else (_uploaded() if src == SOURCES[1] else _observe())
    except ValueError as e:
        st.error(str(e), icon=":material/error:")
        return
    if t:
        _show(t)

