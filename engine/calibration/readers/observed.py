"""An observed run (``engine.live.observe``: a directory with ``run.json``, ``requests.csv``, ``timeseries.csv``)
as a ToolRun, and the engine as a synthetic server that writes the same files (``write_simulated``), so that a fit
can be checked on runs whose parameters are known before it is trusted on a real server.

The run's metrics are vllm bench serve's definitions on the ok requests (TTFT = first token chunk - send, TPOT =
(last chunk - first chunk) / (output tokens - 1), throughput over the span from the run's start to the last end);
the replay sends the ok requests' recorded send times, lengths, shared-prefix tokens and adapter indices, on the
server its ``run.json`` states (``server.spec``: the reference server's flags, ``engine.live.scenario_fields``)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ...limits import write_csv
from ...live import FORMAT, FORMAT_VERSION, REQUEST_COLUMNS, TIMESERIES_COLUMNS, scenario_fields, summarize_requests
from ...presets import model_from_hf_config, register_model
from ...presets.gpus import gpu_from_dict, register_gpu
from ...scenario import Scenario
from .base import ToolRun, stats_from_values

TOOL = FORMAT
#: The most requests one observed run may hold (an upload's bound as well).
MAX_ROWS = 200_000


def is_observed_dir(path) -> bool:
    p = Path(path)
    f = p / "run.json" if p.is_dir() else p
    if not f.is_file() or f.name != "run.json":
        return False
    try:
        return json.loads(f.read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def read_requests(path: Path, where: str) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, keep_default_na=False, na_values=[""], nrows=MAX_ROWS + 1)
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise ValueError(f"{where}: cannot read requests.csv ({' '.join(str(e).split())[:200]})") from None
    if len(df) > MAX_ROWS:
        raise ValueError(f"{where}: requests.csv has more than {MAX_ROWS:,} rows; allowed: at most that many")
    need = ("adapter_index", "send_s", "first_token_s", "end_s", "prompt_tokens", "output_tokens", "status")
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{where}: requests.csv: column {missing[0]!r} missing; allowed: the columns "
                         f"{', '.join(REQUEST_COLUMNS)}")
    for c in ("send_s", "first_token_s", "end_s", "prompt_tokens", "output_tokens", "adapter_index"):
        v = pd.to_numeric(df[c], errors="coerce")
        bad = df.index[(df["status"] == "ok") & (v.isna() | (v < (-1 if c == "adapter_index" else 0)))]
        if len(bad):
            raise ValueError(f"{where}: requests.csv row {int(bad[0]) + 2}: {c}: invalid value "
                             f"{str(df[c].iloc[bad[0]])[:40]!r}; allowed: a number >= 0 on an ok request")
        df[c] = v
    return df


def read_observed(obj: dict, where: str, path: Path) -> ToolRun:
    """The ToolRun of an observed run (``obj``: its run.json; ``path``: that file)."""
    if obj.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{where}: format_version {obj.get('format_version')!r}; allowed: {FORMAT_VERSION}")
    run_dir = path.parent
    df = read_requests(run_dir / "requests.csv", where)
    ok = df[df["status"] == "ok"].sort_values("send_s", kind="stable")
    sc = obj.get("scenario") or {}
    closed = sc.get("arrival_process") == "closed"
    # a closed loop that sent no more requests than it has clients sent them all at once: a burst, replayed at the
    # recorded send times (the engine's closed loop would send more)
    burst = closed and 0 < len(df) <= int(sc.get("concurrency") or 0)
    span = float(ok["end_s"].max()) if len(ok) else math.nan
    out_tok = ok["output_tokens_reported"] if "output_tokens_reported" in ok else ok["output_tokens"]
    out_tok = np.where(out_tok.to_numpy() >= 0, out_tok.to_numpy(), ok["output_tokens"].to_numpy())
    measured = summarize_requests(df)
    m = {k: measured[k] for k in ("request_throughput", "output_throughput") if k in measured}
    ttft = ok["ttft_ms"].to_numpy(float) if "ttft_ms" in ok else ((ok["first_token_s"] - ok["send_s"]) * 1e3).to_numpy()
    tpot = ok["tpot_ms"].dropna().to_numpy(float) if "tpot_ms" in ok else np.array([])
    e2e = ((ok["end_s"] - ok["send_s"]) * 1e3).to_numpy()
    for name, v in (("ttft", ttft), ("tpot", tpot), ("e2el", e2e)):
        m.update(stats_from_values(v, name, percentiles=(50, 90, 99)))
    run = ToolRun(tool=TOOL, version=str(FORMAT_VERSION), source=str(run_dir),
                  arrival="burst" if burst else ("closed" if closed else "poisson"),
                  rate_rps=math.inf if burst else (math.nan if closed else float(sc.get("arrival_rate_rps", math.nan))),
                  num_requests=int(len(ok)), duration_s=span,
                  concurrency=int(sc.get("concurrency", 0)) if closed and not burst else 0,
                  mean_in=float(ok["prompt_tokens"].mean()) if len(ok) else math.nan,
                  mean_out=float(out_tok.mean()) if len(ok) else math.nan, metric_origin="start", measured=m,
                  input_lens=ok["prompt_tokens"].to_numpy(np.int64), output_lens=out_tok.astype(np.int64),
                  ttfts_ms=ttft, start_s=ok["send_s"].to_numpy(float), failed=int(len(df) - len(ok)),
                  model_id=str(obj.get("base_model", "")),
                  adapters=ok["adapter_index"].to_numpy(np.int64) if (ok["adapter_index"] >= 0).all() else None,
                  prefix=ok["prefix_tokens"].to_numpy(np.int64) if "prefix_tokens" in ok else None)
    if len(df) - len(ok):
        run.notes.append(f"{len(df) - len(ok)} of {len(df)} requests failed ({', '.join(f'{k} {v}' for k, v in measured['by_status'].items() if k != 'ok')}); the replay sends the ok ones")
    fields = {k: sc[k] for k in ("num_adapters", "popularity", "zipf_s", "power_alpha", "prefix_tokens", "prefix_share",
                                 "seed") if k in sc}
    spec = (obj.get("server") or {}).get("spec")
    if spec:
        flags = (obj.get("server_reported") or {}).get("metrics", {}).get("cache_config", {})
        bt = flags.get("block_size")
        fields.update(scenario_fields(spec, int(bt) if str(bt).isdigit() else None))
    run.server_fields = fields
    return run


def twin_base(obj: dict, where: str) -> Scenario:
    """The scenario an observed run describes: its traffic scenario with the server's fields, the model the server
    served (its config.json, when the run records it) and the device it ran on (when measured)."""
    sc = dict(obj.get("scenario") or {})
    for k in ("model_definition", "device_definition"):
        sc.pop(k, None)
    server = obj.get("server") or {}
    if server.get("model_config"):
        name = str(server.get("model_name") or "reference-llama")
        m = model_from_hf_config(server["model_config"], name=name, label=f"{name} (the reference server's model)",
                                 source="built by engine.live.assets (random weights)")
        register_model(m)
        sc["model"] = m.name
    dev = obj.get("device")
    if dev:
        g = register_gpu(gpu_from_dict(dev, f"{where}: device"))
        sc["gpu"] = g.name
        sc["pcie_gbps"] = g.pcie_gbps
    if server.get("spec"):
        sc.update(scenario_fields(server["spec"]))
    sc.update(warmup_s=0.0)
    try:
        return Scenario.from_dict(sc).validate()
    except ValueError as e:
        raise ValueError(f"{where}: the scenario it states: {e}") from None


def write_simulated(res, out_dir, info: dict | None = None) -> Path:
    """The engine as a synthetic server: an observed run's files from a simulation ``res`` (``engine.simulate``),
    each simulated request one row as the observer would have recorded it (TPOT exact; token times not listed)."""
    r = res.requests
    sc = res.scenario
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    done = r["completed"].to_numpy()
    arr = r["arrival_s"].to_numpy()
    df = pd.DataFrame({"request_id": np.arange(len(r)), "adapter": [f"a{int(a)}" for a in r["adapter"]],
                       "adapter_index": r["adapter"].to_numpy(), "send_s": arr,
                       "first_token_s": arr + r["ttft_ms"].to_numpy() / 1e3,
                       "end_s": arr + r["e2e_ms"].to_numpy() / 1e3, "prompt_tokens": r["prompt_tokens"].to_numpy(),
                       "prefix_tokens": r["prefix_tokens"].to_numpy() if "prefix_tokens" in r else 0,
                       "output_tokens": r["output_tokens"].to_numpy(),
                       "prompt_tokens_reported": r["prompt_tokens"].to_numpy(),
                       "output_tokens_reported": r["output_tokens"].to_numpy(), "token_chunks": r["output_tokens"].to_numpy(),
                       "ttft_ms": r["ttft_ms"].to_numpy(), "e2e_ms": r["e2e_ms"].to_numpy(),
                       "tpot_ms": np.where(r["output_tokens"].to_numpy() > 1, r["tpot_ms"].to_numpy(), np.nan),
                       "status": np.where(done, "ok", "timeout"), "http_status": np.where(done, 200, 0), "error": "",
                       "token_times_ms": ""}, columns=list(REQUEST_COLUMNS))
    write_csv(df, out / "requests.csv", index=False)
    write_csv(pd.DataFrame(columns=list(TIMESERIES_COLUMNS)), out / "timeseries.csv", index=False)
    body = {"format": FORMAT, "format_version": FORMAT_VERSION, "url": "engine://simulated", "base_model": sc.model,
            "adapters": [f"a{i}" for i in range(sc.num_adapters)], "scenario": sc.to_dict(), "server": {},
            "summary": summarize_requests(df), **(info or {})}
    (out / "run.json").write_text(json.dumps(body, indent=2, default=str) + "\n")
    return out
