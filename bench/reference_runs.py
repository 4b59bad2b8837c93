"""``python bench/reference_runs.py [--study validation|seed|all] [--only RUN_ID ...] [--work DIR] [--pack]``: run the
reference-server design (``engine.calibration.reference_runs.DESIGN``) on vLLM's CPU build and write the dataset.

Each validation run gets a fresh server (its adapters start on disk, as the twin assumes); the seed study's runs
share one server per ``max_loras`` value, each after a warm-up of ``SEED_WARMUP_REQUESTS`` requests over the same
adapters (not recorded).  This machine is measured once, before the first server starts (``engine.live.device``),
and every run records it.  Each run's directory goes to ``--work`` (default ``bench/results/reference-server/runs``);
a run already there is kept, so an interrupted collection resumes.  ``--pack`` then writes the dataset
(``engine/data/reference/reference_server/``) from every design run found in ``--work``.

Needs ``.venv-live`` (README: "Your own server, and the reference server").  About 45 minutes on 2 cores; run it
with nothing else on the machine: the server's speed is what is measured (each run records the load average).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.calibration import reference_runs as rr  # noqa: E402
from engine.live import ReferenceServer, ReferenceSpec, observe  # noqa: E402
from engine.live.device import cpu_device  # noqa: E402
from engine.presets import gpu_to_dict  # noqa: E402
from engine.scenario import Scenario  # noqa: E402

WORK = ROOT / "bench" / "results" / "reference-server" / "runs"


def _scenario(traffic: dict) -> Scenario:
    return Scenario.from_dict({**Scenario().to_dict(), **traffic}).validate()


def _observe(srv: ReferenceServer, run: dict, out: Path | None, device: dict, max_requests: int | None = None):
    sc = _scenario(run["traffic"])
    return observe(srv.url, sc, out_dir=out, max_requests=max_requests or run["max_requests"], request_timeout_s=300.0,
                   drain_timeout_s=300.0, metrics_period_s=0.25, vocab_size=srv.spec.vocab_size,
                   server=srv.description(), device=device)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", choices=("validation", "seed", "all"), default="all")
    ap.add_argument("--only", nargs="+", default=None, metavar="RUN_ID")
    ap.add_argument("--work", default=str(WORK))
    ap.add_argument("--pack", action="store_true", help="write the dataset from the runs in --work afterwards")
    ap.add_argument("--no-run", action="store_true", help="run nothing (with --pack: pack what --work holds)")
    a = ap.parse_args(argv)
    work = Path(a.work)
    todo = [r for r in rr.DESIGN if (a.study == "all" or r["study"] == a.study) and (not a.only or r["run_id"] in a.only)
            and not (work / r["run_id"] / "run.json").is_file()]
    if a.no_run:
        todo = []
    device = None
    t_all = time.monotonic()
    groups: dict[str, list[dict]] = {}
    for r in todo:
        groups.setdefault(r["group"], []).append(r)
    for g, runs in groups.items():
        if device is None:
            device = gpu_to_dict(cpu_device())
            print(f"device: {device['label']} ({device.get('source', '')})", flush=True)
        spec = ReferenceSpec.from_dict(rr.server_spec(g))
        shared = runs[0]["study"] == "seed"
        batches = [runs] if shared else [[r] for r in runs]
        for batch in batches:
            with ReferenceServer(spec, log_path=work / f"server-{g}.log") as srv:
                print(f"[{time.monotonic() - t_all:6.0f} s] {g}: server ready in {srv.startup_s:.1f} s", flush=True)
                for r in batch:
                    if shared:
                        _observe(srv, r, None, device, max_requests=rr.SEED_WARMUP_REQUESTS)
                    t0 = time.monotonic()
                    obs = _observe(srv, r, work / r["run_id"], device)
                    s = obs.info["summary"]
                    print(f"[{time.monotonic() - t_all:6.0f} s]   {r['run_id']}: {len(obs.requests)} requests in "
                          f"{time.monotonic() - t0:.1f} s, TTFT p50 {s.get('median_ttft_ms', float('nan')):.0f} ms, "
                          f"p99 {s.get('p99_ttft_ms', float('nan')):.0f} ms, {s.get('request_throughput', 0):.2f} req/s, "
                          f"load {obs.info['client']['loadavg_before'][0]:.2f}", flush=True)
    if a.pack:
        dirs = {r["run_id"]: work / r["run_id"] for r in rr.DESIGN if (work / r["run_id"] / "run.json").is_file()}
        paths = rr.pack(dirs)
        print(f"packed {len(dirs)} runs: " + ", ".join(str(p.relative_to(ROOT)) for p in paths.values()))
        missing = [r["run_id"] for r in rr.DESIGN if r["run_id"] not in dirs]
        if missing:
            print(f"not run yet: {', '.join(missing)}")
    print(json.dumps({"runs": len(todo), "wall_s": round(time.monotonic() - t_all)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
