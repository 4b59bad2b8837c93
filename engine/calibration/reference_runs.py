"""The reference-server dataset: runs of vLLM's CPU build (``engine.live.ReferenceServer``) observed request by
request (``engine.live.observe``), measured by this project and shipped in ``engine/data/reference/reference_server/``.

Invariants:

* ``DESIGN`` is the whole design: every run's server (``GROUPS``: ReferenceSpec fields over ``SERVER_BASE``), its
  traffic (Scenario fields over ``TRAFFIC_BASE``), its study and its split; ``bench/reference_runs.py`` runs it
  and ``pack`` writes the dataset, so what was run is what this file says;
* the dataset is three CSV files: one row per run (``runs.csv``: the run's ``run.json`` as compact JSON), one
  per request (``requests.csv``), one per /metrics scrape (``timeseries.csv``), joined on ``run_id``;
* ``runs()`` reads them back as the ToolRuns an observed directory gives (``readers.observed.read_observed``), so
  the fit and the replay see exactly what ``calibrate --observed`` sees on the unpacked directories;
* the split is fixed here, before any fit: the validation study trains on the ``TRAIN_GROUPS`` and is checked on
  every other run (other slot counts, adapter counts, KV sizes, prefix caching off, the bursts and the rate
  sweep); the seed study (``study == "seed"``) is never fitted on.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..limits import write_csv
from .refdata import REF_DIR

DATA_DIR = REF_DIR / "reference_server"
RUNS_CSV, REQUESTS_CSV, TIMESERIES_CSV = "runs.csv", "requests.csv", "timeseries.csv"

#: The reference server's fields every run shares (engine.live.ReferenceSpec's defaults otherwise: a 4-layer,
#: 256-wide Llama, rank-8 adapters on q, k, v, o, 32 sequences and 2,048 batched tokens per step).
SERVER_BASE = {"seed": 0}
#: Server groups: the ReferenceSpec fields of each.  One fresh server per run (adapters start on disk, as the
#: twin assumes: ``host_warm`` off), except the seed study's, which share one server per group after a warm-up.
GROUPS = {
    "m1": {"num_adapters": 8, "max_loras": 1},
    "m2": {"num_adapters": 8, "max_loras": 2},
    "m4": {"num_adapters": 8, "max_loras": 4},
    "m8": {"num_adapters": 8, "max_loras": 8},
    "miss32": {"num_adapters": 32, "max_loras": 4, "max_cpu_loras": 8},
    "miss64": {"num_adapters": 64, "max_loras": 8, "max_cpu_loras": 16},
    "kvsmall": {"num_adapters": 8, "max_loras": 4, "kv_blocks": 16},
    "noprefix": {"num_adapters": 8, "max_loras": 4, "prefix_caching": False},
    # the vLLM multi-LoRA benchmark seed's design, scaled to this server: 64 adapters, a max_loras sweep
    **{f"seed-m{m}": {"num_adapters": 64, "max_loras": m} for m in (1, 2, 4, 8, 16, 32)},
}
#: The traffic every validation run shares: lognormal lengths around 64 prompt and 16 output tokens.
TRAFFIC_BASE = {"prompt_tokens": 64, "output_tokens": 16, "length_dist": "lognormal", "length_spread": 1.0,
                "popularity": "zipf", "zipf_s": 0.0, "arrival_process": "poisson", "warmup_s": 0.0, "drain_s": 60.0,
                "seed": 1}
#: The three traffic shapes of every validation group: light uniform, mid Zipf(1) with shared prefixes, heavy uniform.
TRAFFIC = {
    "light": {"arrival_rate_rps": 3.0, "duration_s": 20.0},
    "mid": {"arrival_rate_rps": 8.0, "duration_s": 15.0, "zipf_s": 1.0, "prefix_tokens": 32, "prefix_share": 0.5},
    "heavy": {"arrival_rate_rps": 14.0, "duration_s": 12.0},
}
#: 16 requests at once over 8 adapters (a closed loop of 16 that sends 16): first tokens come in groups of max_loras.
BURST = {"arrival_process": "closed", "concurrency": 16, "duration_s": 60.0}
BURST_REQUESTS = 16
#: The rate sweep (group m4, uniform) that places the knee, with m4's light (3) and heavy (14) runs.
SWEEP_RATES = (6.0, 11.0, 17.0, 20.0)
#: The seed's traffic: a closed loop of 32 clients, one fixed prompt length, 128 output tokens.
SEED_TRAFFIC = {"arrival_process": "closed", "concurrency": 32, "prompt_tokens": 64, "output_tokens": 128,
                "length_dist": "fixed", "duration_s": 120.0, "drain_s": 60.0, "warmup_s": 0.0, "seed": 2,
                "popularity": "zipf"}
SEED_REQUESTS = 160
SEED_WARMUP_REQUESTS = 32
TRAIN_GROUPS = ("m2", "miss32")
#: Held-out targets on the reference server (MAPE over the held-out validation runs; the issue's targets).
REFERENCE_TARGETS = {"request_throughput": 0.05, "median_ttft_ms": 0.15, "p99_ttft_ms": 0.30, "mean_tpot_ms": 0.10}


def _design() -> list[dict]:
    runs = []
    for g in ("m1", "m2", "m4", "m8", "miss32", "miss64", "kvsmall", "noprefix"):
        n = GROUPS[g]["num_adapters"]
        for t, tr in TRAFFIC.items():
            runs.append({"run_id": f"{g}-{t}", "group": g, "study": "validation",
                         "split": "train" if g in TRAIN_GROUPS else "held-out", "max_requests": 2000,
                         "traffic": {**TRAFFIC_BASE, **tr, "num_adapters": n}})
    for g in ("m1", "m2", "m4"):
        runs.append({"run_id": f"{g}-burst16", "group": g, "study": "validation", "split": "held-out",
                     "max_requests": BURST_REQUESTS, "traffic": {**TRAFFIC_BASE, **BURST, "num_adapters": 8}})
    for r in SWEEP_RATES:
        runs.append({"run_id": f"m4-rate{r:g}", "group": "m4", "study": "validation", "split": "held-out",
                     "max_requests": 2000,
                     "traffic": {**TRAFFIC_BASE, **TRAFFIC["heavy"], "arrival_rate_rps": r, "num_adapters": 8}})
    for m in (1, 2, 4, 8, 16, 32):
        shapes = [("uniform", 64), ("zipf", 64)] + ([("uniform", 1), ("uniform", 8), ("zipf", 8)] if m == 32 else [])
        for pop, k in shapes:
            runs.append({"run_id": f"seed-m{m}-{pop}-k{k}", "group": f"seed-m{m}", "study": "seed", "split": "",
                         "max_requests": SEED_REQUESTS,
                         "traffic": {**SEED_TRAFFIC, "num_adapters": k, "zipf_s": 1.0 if pop == "zipf" else 0.0}})
    return runs


DESIGN = _design()


def server_spec(group: str) -> dict:
    """The ReferenceSpec fields of ``group``'s server (``ReferenceSpec.from_dict``)."""
    return {**SERVER_BASE, **GROUPS[group]}


# ---------------------------------------------------------------- the dataset's files

def pack(run_dirs: dict[str, Path], out_dir: Path = DATA_DIR) -> dict[str, Path]:
    """Write the dataset from observed directories (``run_id -> observe --out directory``), in ``DESIGN``'s order."""
    known = {r["run_id"]: r for r in DESIGN}
    bad = sorted(set(run_dirs) - set(known))
    if bad:
        raise ValueError(f"run_id: {bad[0]!r} is not in the design; allowed: {', '.join(known)}")
    rows, reqs, ts = [], [], []
    for rid in (r["run_id"] for r in DESIGN if r["run_id"] in run_dirs):
        d = Path(run_dirs[rid])
        info = json.loads((d / "run.json").read_text())
        r = known[rid]
        rows.append({"run_id": rid, "group": r["group"], "study": r["study"], "split": r["split"],
                     "run_json": json.dumps(info, separators=(",", ":"), default=str)})
        reqs.append(pd.read_csv(d / "requests.csv", keep_default_na=False, na_values=[""]).assign(run_id=rid))
        ts.append(pd.read_csv(d / "timeseries.csv").assign(run_id=rid))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {RUNS_CSV: out_dir / RUNS_CSV, REQUESTS_CSV: out_dir / REQUESTS_CSV, TIMESERIES_CSV: out_dir / TIMESERIES_CSV}
    write_csv(pd.DataFrame(rows), paths[RUNS_CSV], index=False)
    for name, frames in ((REQUESTS_CSV, reqs), (TIMESERIES_CSV, ts)):
        df = pd.concat(frames, ignore_index=True)
        write_csv(df[["run_id"] + [c for c in df.columns if c != "run_id"]], paths[name], index=False)
    return paths


def unpack(out_dir: Path, data_dir: Path = DATA_DIR, run_ids=None) -> dict[str, Path]:
    """The dataset's runs as observed directories under ``out_dir`` (``run_id -> directory``): what
    ``calibrate --observed`` and ``replay --observed`` read."""
    runs = pd.read_csv(data_dir / RUNS_CSV, keep_default_na=False)
    reqs = pd.read_csv(data_dir / REQUESTS_CSV, keep_default_na=False, na_values=[""])
    ts = pd.read_csv(data_dir / TIMESERIES_CSV)
    out = {}
    for _, r in runs.iterrows():
        rid = r["run_id"]
        if run_ids is not None and rid not in run_ids:
            continue
        d = Path(out_dir) / rid
        d.mkdir(parents=True, exist_ok=True)
        (d / "run.json").write_text(json.dumps(json.loads(r["run_json"]), indent=2) + "\n")
        write_csv(reqs[reqs["run_id"] == rid].drop(columns="run_id"), d / "requests.csv", index=False)
        write_csv(ts[ts["run_id"] == rid].drop(columns="run_id"), d / "timeseries.csv", index=False)
        out[rid] = d
    return out


def run_table(data_dir: Path = DATA_DIR) -> pd.DataFrame:
    """One row per shipped run: its design fields and its server's flags (``runs.csv`` without the JSON)."""
    runs = pd.read_csv(data_dir / RUNS_CSV, keep_default_na=False)
    rows = []
    for _, r in runs.iterrows():
        info = json.loads(r["run_json"])
        spec = (info.get("server") or {}).get("spec") or {}
        sc = info.get("scenario") or {}
        rows.append({"run_id": r["run_id"], "group": r["group"], "study": r["study"], "split": r["split"],
                     **{k: spec.get(k) for k in ("num_adapters", "max_loras", "max_cpu_loras", "kv_blocks",
                                                 "prefix_caching")},
                     "arrival": sc.get("arrival_process"), "rate_rps": sc.get("arrival_rate_rps"),
                     "concurrency": sc.get("concurrency"), "traffic_adapters": sc.get("num_adapters"),
                     "zipf_s": sc.get("zipf_s"), "requests": (info.get("summary") or {}).get("requests")})
    return pd.DataFrame(rows)
