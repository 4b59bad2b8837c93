"""An observed run (``engine.live.observe``'s directory) against the twin: the replay of its exact requests on the
server its ``run.json`` states (or a fitted scenario), as tables: per metric, per adapter, the TTFT distribution and
the scraped running / waiting requests against the simulated batch and queue (``replay --observed``, the
dashboard's observed-vs-twin section)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..scenario import Scenario
from ..sim import simulate
from .cases import typed_values
from .readers.files import read_tool_files
from .readers.observed import twin_base
from .readers.replay import run_case, ttft_distribution


def replay_observed(run_dir, scenario: Scenario | None = None, values: dict | None = None) -> dict[str, pd.DataFrame]:
    """An observed run against the twin (``scenario``: a fitted scenario; default: the run's own twin_base;
    ``values``: fitted parameters set on it, e.g. ``reference_fit()``'s):
    ``metrics`` (measured, simulated, relative error per metric), ``adapters`` (TTFT p50/p99 per adapter, both),
    ``ttft`` (the TTFT percentiles and KS distance), ``timeseries`` (scraped running / waiting against the
    simulated queue and batch, on the scrape times), ``requests`` (per request in send order: adapter, measured and
    simulated TTFT)."""
    runs = read_tool_files([run_dir])
    run = runs[0]
    obj = json.loads((Path(run.source) / "run.json").read_text())
    server = scenario or twin_base(obj, run.source)
    case = run_case(run, server)
    sc = case.scenario.replace(**typed_values(case.scenario, values)) if values else case.scenario
    res = simulate(sc, trace=case.trace)
    sim = case.metric_fn(res, sc)
    rows = [{"metric": k, "measured": v, "simulated": sim.get(k, math.nan),
             "rel_error": sim.get(k, math.nan) / v - 1 if v else math.nan} for k, v in sorted(case.measured.items())]
    rq = res.requests
    meas = pd.DataFrame({"adapter": run.adapters if run.adapters is not None else -1,
                         "ttft_ms": run.ttfts_ms})
    adapters = []
    for ad, g in meas.groupby("adapter"):
        s = rq[rq["adapter"] == ad]["ttft_ms"].to_numpy()
        adapters.append({"adapter": int(ad), "requests": len(g), "measured_p50_ms": float(np.median(g["ttft_ms"])),
                         "simulated_p50_ms": float(np.median(s)) if len(s) else math.nan,
                         "measured_p99_ms": float(np.percentile(g["ttft_ms"], 99)),
                         "simulated_p99_ms": float(np.percentile(s, 99)) if len(s) else math.nan})
    ts = pd.read_csv(Path(run.source) / "timeseries.csv")
    sts = res.timeseries
    tab = pd.DataFrame({"t_s": ts["t_s"], "measured_running": ts["running"], "measured_waiting": ts["waiting"],
                        "measured_running_adapters": ts["n_running_adapters"]})
    if len(ts) and len(sts):
        idx = np.clip(np.searchsorted(sts["t_s"].to_numpy(), ts["t_s"].to_numpy()), 0, len(sts) - 1)
        tab["simulated_running"] = sts["batch_size"].to_numpy()[idx]
        tab["simulated_waiting"] = sts["queue_len"].to_numpy()[idx]
        tab["simulated_resident_adapters"] = sts["resident_adapters"].to_numpy()[idx]
    srt = rq.sort_values("arrival_s", kind="stable")  # the replay's requests in send order, as the run's arrays
    reqs = pd.DataFrame({"send_s": run.start_s if run.start_s is not None else np.nan,
                         "adapter": meas["adapter"].to_numpy(), "measured_ttft_ms": run.ttfts_ms})
    if len(srt) == len(reqs):
        reqs["simulated_ttft_ms"] = srt["ttft_ms"].to_numpy()
    return {"metrics": pd.DataFrame(rows), "adapters": pd.DataFrame(adapters),
            "ttft": pd.DataFrame([ttft_distribution(run, res)]), "timeseries": tab, "requests": reqs}
