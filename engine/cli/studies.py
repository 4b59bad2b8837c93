"""CLI commands of the studies: ``reproduce`` and ``findings``.

``python -m engine reproduce seed1|seed3|kv-interference [--quick] --out DIR`` re-runs a source
study's experiments (engine.studies: multilora_sim, vllm_multilora, kv_interference);
``python -m engine findings [--quick] [--out docs/findings.md]`` checks every published claim
and writes the Markdown report (engine.studies.findings).
"""
from __future__ import annotations

import time
from pathlib import Path

from ..studies import Mode, generate, mode, reproduce_seed1, reproduce_seed3, run_kv_interference
from .common import fail, positive_int, progress_default


def default_workers(workers: int | None, m: Mode) -> int | None:
    """Quick mode runs in-process by default: its few seconds of simulation do not pay for
    starting worker processes (measured: 8.6 s in-process vs 14 s with 2 workers, warm cache)."""
    if workers is not None:
        return workers
    return 1 if m.quick else None


def _cmdline(argv_tail: str) -> str:
    return f"python -m engine {argv_tail}"


def cmd_reproduce(a) -> int:
    t0 = time.perf_counter()
    out = Path(a.out)
    m = mode(a.quick, a.replications)
    if m.replications < 2:
        return fail("--replications: invalid value 1; allowed: at least 2 (a CI needs two replications)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return fail(f"--out: cannot create {a.out!r} ({e.strerror})")
    try:
        parts = [f"reproduce {a.which}"] + (["--quick"] if a.quick else []) + [f"--out {a.out}"]
        if a.replications:
            parts.append(f"--replications {a.replications}")
        if a.workers:
            parts.append(f"--workers {a.workers}")
        cmd = _cmdline(" ".join(parts))
        if a.which == "kv-interference":
            run_kv_interference(out, quick=a.quick, replications=a.replications,
                                progress=progress_default())
        else:
            fn = reproduce_seed1 if a.which == "seed1" else reproduce_seed3
            fn(out, m, workers=default_workers(a.workers, m), progress=progress_default(), cmd=cmd)
    except ValueError as e:
        return fail(str(e))
    except OSError as e:
        return fail(f"--out: cannot write to {a.out!r} ({e.strerror})")
    where = (f"{out}/summary.csv, replications.csv, timeseries.csv, events.csv and {out}/plots"
             if a.which == "kv-interference" else f"{out}/results and {out}/plots")
    print(f"reproduce {a.which} ({m.name}): wrote {where} in {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_findings(a) -> int:
    t0 = time.perf_counter()
    try:
        m = mode(a.quick, a.replications or (3 if a.quick else None))
        if m.replications < 2:
            return fail("--replications: invalid value 1; allowed: at least 2 (a CI needs two replications)")
        parts = ["findings"] + (["--quick"] if a.quick else []) + [f"--out {a.out}"]
        if a.replications:
            parts.append(f"--replications {a.replications}")
        text = generate(m, workers=default_workers(a.workers, m), progress=progress_default(),
                                 cmd=_cmdline(" ".join(parts)))
    except ValueError as e:
        return fail(str(e))
    try:
        p = Path(a.out)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    except OSError as e:
        return fail(f"--out: cannot write {a.out!r} ({e.strerror})")
    print(f"findings ({m.name}, {m.replications} replications): wrote {a.out} in {time.perf_counter() - t0:.1f} s")
    return 0


def add_commands(sub) -> None:
    r = sub.add_parser("reproduce", help="re-run a source study's experiments (figures, tables, summary)")
    r.add_argument("which", choices=("seed1", "seed3", "kv-interference"),
                   help="seed1: the multi-LoRA serving simulator's six figures; seed3: the vLLM multi-LoRA "
                        "benchmark design on vLLM's LoRA defaults and the vLLM-fitted costs, with its predictions "
                        "for the held-out results; kv-interference: the LoRA/KV interference benchmark")
    r.add_argument("--quick", action="store_true", help="fewer points, 2 replications, 20 s runs (< 1 min)")
    r.add_argument("--out", required=True, help="output directory (results/ and plots/ are written in it)")
    r.add_argument("--workers", type=positive_int("--workers"), help="worker processes (default: one per core)")
    r.add_argument("--replications", type=positive_int("--replications"),
                   help="replications per point (default: 10, quick: 2)")
    r.set_defaults(func=cmd_reproduce)
    f = sub.add_parser("findings", help="check the published claims of the source studies; write a Markdown report")
    f.add_argument("--out", default="docs/findings.md", help="report path (default: docs/findings.md)")
    f.add_argument("--quick", action="store_true", help="fewer points, fewer replications, shorter runs")
    f.add_argument("--workers", type=positive_int("--workers"), help="worker processes (default: one per core)")
    f.add_argument("--replications", type=positive_int("--replications"),
                   help="replications per point (default: 10, quick: 3)")
    f.set_defaults(func=cmd_findings)
