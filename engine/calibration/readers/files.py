"""Reading tool result files: the format each file is in (``measurements.tool_format``), the
reader for it, directories of files, and the measurement-table rows ``load_measurements`` builds
from a tool file."""
from __future__ import annotations

import math
from pathlib import Path

from ..measurements import METRIC_COLUMNS, TOOL_FORMATS, tool_format
from .aiperf import read_aiperf
from .base import ToolRun, load_json_objects
from .guidellm import read_guidellm
from .observed import is_observed_dir, read_observed
from .vllm_bench import read_vllm_bench

#: Suffixes of the files a directory given as --data contributes.
SUFFIXES = (".json", ".jsonl")


def formats_understood() -> str:
    return "; ".join(f"{k}: {v}" for k, v in TOOL_FORMATS.items())


def read_tool_file(path) -> list[ToolRun]:
    """Every run in one tool result file (a JSON Lines file of ``--append-result`` holds several).
    ValueError naming the file and key for a malformed file, or listing the formats understood."""
    p = Path(path)
    if p.is_dir() and is_observed_dir(p):
        p = p / "run.json"
    if not p.is_file():
        raise ValueError(f"data: no such file {str(path)!r}")
    objs = load_json_objects(p)
    if isinstance(objs[0], dict) and objs[0].get("format") == "lora-whatif-observed":
        return [read_observed(objs[0], str(p.parent), p)]
    fmt = tool_format(objs[0])
    if fmt is None:
        raise ValueError(f"{p}: unknown format (not a result file of a tool we read); understood: "
                         f"{formats_understood()}; or a measurement table (CSV/JSON of vllm metric columns + "
                         "Scenario fields)")
    runs: list[ToolRun] = []
    for i, o in enumerate(objs):
        where = str(p) if len(objs) == 1 else f"{p}#{i}"
        f = tool_format(o)
        if f != fmt:
            raise ValueError(f"{where}: {f or 'unknown format'}, but the file's first run is {fmt}; one format per file")
        if fmt == "vllm-bench-serve":
            runs.append(read_vllm_bench(o, where))
        elif fmt == "guidellm":
            runs.extend(read_guidellm(o, where))
        else:
            runs.append(read_aiperf(o, where))
    return runs


def is_tool_file(path) -> bool:
    """Is ``path`` a result file of one of the tools (``TOOL_FORMATS``)?  False for anything else
    (a CSV measurement table, a JSON table of rows, an unreadable file)."""
    p = Path(path)
    if is_observed_dir(p):
        return True
    if not p.is_file():
        return False
    try:
        objs = load_json_objects(p)
    except ValueError:
        return False
    return tool_format(objs[0]) is not None


def tool_paths(paths) -> list[Path]:
    """Files of ``paths`` (a directory contributes its *.json / *.jsonl files, sorted)."""
    out: list[Path] = []
    for s in [paths] if isinstance(paths, (str, Path)) else paths:
        p = Path(s)
        if p.is_dir() and is_observed_dir(p):
            out.append(p)
        elif p.is_dir():
            subs = sorted(d for d in p.iterdir() if d.is_dir() and is_observed_dir(d))
            if subs:  # a directory of observed runs
                out.extend(subs)
                continue
            found = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in SUFFIXES)
            if not found:
                raise ValueError(f"data: directory {str(s)!r} holds no {' / '.join(SUFFIXES)} file")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise ValueError(f"data: no such file {str(s)!r}")
    return out


def read_tool_files(paths) -> list[ToolRun]:
    """Every run of every file (directories expanded), in order; the runs' sources are unique."""
    runs = [r for p in tool_paths(paths) for r in read_tool_file(p)]
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.source] = seen.get(r.source, 0) + 1
        if seen[r.source] > 1:
            raise ValueError(f"data: {r.source} given twice")
    return runs


def measurement_rows(src) -> list[dict]:
    """The measurement-table rows of a tool file (``load_measurements``' route for tool files): the
    metric columns, and the run's traffic as Scenario fields (``arrival_process``,
    ``arrival_rate_rps``, ``arrival_cv``, ``concurrency``, ``prompt_tokens``, ``output_tokens``,
    ``duration_s``, ``warmup_s``).  Those rows are simulated by the engine's own generator over a
    window (``engine_metrics``): an approximation of the tool's run; ``python -m engine calibrate``
    and ``tool_cases`` replay the run itself.  A burst (rate inf) has no such row: ValueError."""
    rows = []
    for run in read_tool_file(src):
        if run.arrival == "burst":
            raise ValueError(f"{run.source}: request_rate inf (every request at t = 0) cannot be a measurement-table "
                             "row; replay it with python -m engine calibrate (engine.calibration.tool_cases)")
        row = {k: v for k, v in run.measured.items() if k in METRIC_COLUMNS}
        row.update(prompt_tokens=max(1, round(run.mean_in)), output_tokens=max(1, round(run.mean_out)), warmup_s=0.0)
        if run.arrival == "closed":
            row.update(arrival_process="closed", concurrency=run.concurrency, duration_s=run.duration_s)
        else:
            cv = 1.0 if run.arrival == "poisson" else (0.01 if run.arrival == "constant" else 1 / math.sqrt(run.burstiness))
            row.update(arrival_process="poisson" if run.arrival == "poisson" else "gamma", arrival_rate_rps=run.rate_rps,
                       arrival_cv=cv, duration_s=max(run.num_requests / run.rate_rps, 1.0))
        rows.append(row)
    return rows
