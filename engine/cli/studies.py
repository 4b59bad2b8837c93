"""CLI commands of the studies: ``reproduce`` and ``findings``.

``python -m engine reproduce seed1|seed3|kv-interference [--quick] --out DIR`` re-runs a source
study's experiments (engine.studies: multilora_sim, vllm_multilora, kv_interference);
``python -m engine findings [--quick] [--out docs/findings.md]`` checks every published claim
and writes the Markdown report (engine.studies.findings).  Both take ``--workers`` and
``--backend process|thread|ray`` / ``--ray-address`` (engine/backends.py): the same files for the
same seeds whatever the backend.
"""
from __future__ import annotations

import time
from pathlib import Path

from ..backends import BackendError
from ..studies import Mode, generate, mode, reproduce_seed1, reproduce_seed3, run_kv_interference
from .common import add_backend_args, backend_args, end_backend, fail, positive_int, progress_default


def default_workers(workers: int | None, m: Mode, backend: str | None = None) -> int | None:
    """Quick mode runs in-process by default: its few seconds of simulation do not pay for
    starting worker processes (measured: 8.6 s in-process vs 14 s with 2 workers, warm cache);
    unless a backend is asked for (``--backend`` / ``--ray-address``): then one worker per core
    (Ray: per CPU of the cluster), since workers=1 would run in this process whatever the backend."""
    if workers is not None:
        return workers
    return 1 if m.quick and backend is None else None


def _backend_flags(a) -> list[str]:
    return ([f"--backend {a.backend}"] if a.backend else []) + ([f"--ray-address {a.ray_address}"]
                                                                 if a.ray_address else [])


def _cmdline(argv_tail: str) -> str:
    return f"python -m engine {argv_tail}"


def cmd_reproduce(a) -> int:
    t0 = time.perf_counter()
    out = Path(a.out)
    m = mode(a.quick, a.replications)
    if m.replications < 2:
        return fail("--replications: invalid value 1; allowed: at least 2 (a CI needs two replications)")
    try:
        kw = backend_args(a)
    except ValueError as e:
        return fail(str(e))
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
        cmd = _cmdline(" ".join(parts + _backend_flags(a)))
        workers = default_workers(a.workers, m, kw["backend"])
        if a.which == "kv-interference":
            # one process unless --workers or a backend is given (its runs used to go one after the other)
            run_kv_interference(out, quick=a.quick, replications=a.replications, progress=progress_default(),
                                workers=workers if a.workers or kw["backend"] else 1, **kw)
        else:
            fn = reproduce_seed1 if a.which == "seed1" else reproduce_seed3
            fn(out, m, workers=workers, progress=progress_default(), cmd=cmd, **kw)
    except (ValueError, BackendError) as e:
        return fail(str(e))
    except OSError as e:
        return fail(f"--out: cannot write to {a.out!r} ({e.strerror})")
    finally:
        end_backend(kw)
    where = (f"{out}/summary.csv, replications.csv, timeseries.csv, events.csv and {out}/plots"
             if a.which == "kv-interference" else f"{out}/results and {out}/plots")
    print(f"reproduce {a.which} ({m.name}): wrote {where} in {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_findings(a) -> int:
    t0 = time.perf_counter()
    kw = {}
    try:
        kw = backend_args(a)
        m = mode(a.quick, a.replications or (3 if a.quick else None))
        if m.replications < 2:
            return fail("--replications: invalid value 1; allowed: at least 2 (a CI needs two replications)")
        parts = ["findings"] + (["--quick"] if a.quick else []) + [f"--out {a.out}"]
        if a.replications:
            parts.append(f"--replications {a.replications}")
        text = generate(m, workers=default_workers(a.workers, m, kw["backend"]), progress=progress_default(),
                        cmd=_cmdline(" ".join(parts + _backend_flags(a))), **kw)
    except (ValueError, BackendError) as e:
        return fail(str(e))
    finally:
        end_backend(kw)
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
    r.add_argument("--workers", type=positive_int("--workers"),
                   help="workers (default: one per core; --quick, and kv-interference without --backend: 1, "
                        "in this process)")
    r.add_argument("--replications", type=positive_int("--replications"),
                   help="replications per point (default: 10, quick: 2)")
    add_backend_args(r, "process; the same files whatever the backend")
    r.set_defaults(func=cmd_reproduce)
    f = sub.add_parser("findings", help="check the published claims of the source studies; write a Markdown report")
    f.add_argument("--out", default="docs/findings.md", help="report path (default: docs/findings.md)")
    f.add_argument("--quick", action="store_true", help="fewer points, fewer replications, shorter runs")
    f.add_argument("--workers", type=positive_int("--workers"),
                   help="workers (default: one per core; --quick without --backend: 1, in this process)")
    f.add_argument("--replications", type=positive_int("--replications"),
                   help="replications per point (default: 10, quick: 3)")
    add_backend_args(f, "process; the same verdicts and numbers whatever the backend")
    f.set_defaults(func=cmd_findings)
