"""What every tool reader produces: a ``ToolRun`` (one measured benchmark run, in the tool's own
terms: its traffic, its measurement window, its metrics under our ``vllm bench serve`` names), and
the checks that turn a malformed file into a ValueError naming the key (and the index).

Metric names (all readers): ``request_throughput`` (req/s), ``output_throughput`` (tok/s),
``{mean,median,std,pNN}_{ttft,tpot,itl,e2el}_ms``.  TPOT is per request, (latency - TTFT) /
(output tokens - 1), averaged over requests; ITL is token-weighted (every inter-token gap counts
once), as ``vllm bench serve`` defines them.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...limits import loads_json

#: Arrival kinds a ToolRun may state.
ARRIVALS = ("poisson", "gamma", "constant", "burst", "closed")


@dataclass
class ToolRun:
    """One benchmark run as the tool's file states it (times in seconds from the run's start)."""

    tool: str                      # "vllm-bench-serve", "guidellm", "aiperf"
    version: str                   # tool / schema version the file states ("" when it states none)
    source: str                    # file (and "#k" for the k-th run of a file holding several)
    arrival: str                   # one of ARRIVALS; "burst" = every request at t = 0 (rate inf)
    rate_rps: float                # offered rate (inf for a burst, nan for a closed loop)
    num_requests: int              # requests the tool sent (replayed)
    duration_s: float              # the tool's measured duration (its throughput denominator)
    burstiness: float = 1.0        # Gamma shape of the inter-arrival gaps (1 = Poisson)
    concurrency: int = 0           # closed loop: clients (0 = open loop)
    cap: int = 0                   # open loop: the tool's cap on requests in flight (not modelled)
    mean_in: float = math.nan      # mean prompt tokens of the successful requests
    mean_out: float = math.nan     # mean output tokens of the successful requests
    #: how the tool's metrics select requests and time: "start" (every request; duration from
    #: the benchmark start to the last finish), "first_arrival" (from the first send to the last
    #: finish), "window" (requests overlapping [window_s[0], window_s[1]); rates over the window)
    metric_origin: str = "start"
    window_s: tuple[float, float] = (0.0, math.inf)
    measured: dict[str, float] = field(default_factory=dict)
    input_lens: np.ndarray | None = None     # per successful request, when the file lists them
    output_lens: np.ndarray | None = None
    ttfts_ms: np.ndarray | None = None
    start_s: np.ndarray | None = None        # per-request send times from the run's start
    failed: int = 0
    model_id: str = ""
    #: per-request adapter indices (in start_s order), when the file records which adapter each request named
    adapters: np.ndarray | None = None
    prefix: np.ndarray | None = None         # per-request shared-prefix tokens (in start_s order), when recorded
    #: Scenario fields of the server that ran, when the file states them (an observed reference server's flags)
    server_fields: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def detailed(self) -> bool:
        return self.input_lens is not None


class Keys:
    """Typed access to one JSON object, with errors naming the file and the key path."""

    def __init__(self, obj, where: str, prefix: str = ""):
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: {prefix.rstrip('.') or 'file'}: expected a JSON object, got {_kind(obj)}")
        self.obj, self.where, self.prefix = obj, where, prefix

    def err(self, key: str, msg: str) -> ValueError:
        return ValueError(f"{self.where}: {self.prefix}{key}: {msg}")

    def has(self, key: str) -> bool:
        return key in self.obj and self.obj[key] is not None

    def sub(self, key: str, required: bool = True) -> Keys | None:
        if not self.has(key):
            if required:
                raise self.err(key, "missing")
            return None
        return Keys(self.obj[key], self.where, f"{self.prefix}{key}.")

    def raw(self, key: str, default=None):
        return self.obj.get(key, default)

    def num(self, key: str, required: bool = True, default: float = math.nan, lo: float = 0.0,
            allow_inf: bool = False, positive: bool = False) -> float:
        if not self.has(key):
            if required:
                raise self.err(key, "missing")
            return default
        v = self.obj[key]
        x = _number(v)
        if x is None:
            raise self.err(key, f"invalid value {v!r}; allowed: a number")
        if math.isnan(x):
            raise self.err(key, "NaN; allowed: a finite number")
        if math.isinf(x) and not allow_inf:
            raise self.err(key, f"{v!r} (infinite) is not allowed here; allowed: a finite number")
        if x < lo or (positive and x <= lo):
            raise self.err(key, f"invalid value {v!r}; allowed: a number {'>' if positive else '>='} {lo:g}")
        return x

    def integer(self, key: str, required: bool = True, default: int = 0, lo: int = 0) -> int:
        if not self.has(key):
            if required:
                raise self.err(key, "missing")
            return default
        v = self.obj[key]
        x = _number(v)
        if x is None or isinstance(v, str) or not math.isfinite(x) or x != int(x) or x < lo:
            raise self.err(key, f"invalid value {v!r}; allowed: an integer >= {lo}")
        return int(x)

    def text(self, key: str, required: bool = False, default: str = "") -> str:
        if not self.has(key):
            if required:
                raise self.err(key, "missing")
            return default
        v = self.obj[key]
        if not isinstance(v, str):
            raise self.err(key, f"invalid value {v!r}; allowed: a string")
        return v

    def array(self, key: str, kind: str = "number", scale: float = 1.0) -> np.ndarray:
        """A per-request list: numbers >= 0 (``kind`` "number"), integers >= 0 ("int")."""
        v = self.obj.get(key)
        if not isinstance(v, list):
            raise self.err(key, f"expected a list (one entry per request), got {_kind(v)}")
        out = np.empty(len(v), np.float64)
        for i, e in enumerate(v):
            x = _number(e)
            bad = x is None or not math.isfinite(x) or x < 0 or (kind == "int" and x != int(x))
            if bad:
                what = "an integer >= 0" if kind == "int" else "a finite number >= 0"
                raise ValueError(f"{self.where}: {self.prefix}{key}[{i}]: invalid value {e!r}; allowed: {what}")
            out[i] = x * scale
        return out


def same_length(where: str, arrays: dict[str, list | np.ndarray]) -> int:
    """The common length of per-request arrays, or a ValueError naming the first one that differs."""
    items = [(k, len(v)) for k, v in arrays.items() if v is not None]
    if not items:
        return 0
    k0, n0 = items[0]
    for k, n in items[1:]:
        if n != n0:
            raise ValueError(f"{where}: {k}: {n} entries but {k0} has {n0}; the per-request arrays must "
                             "hold one entry per request")
    return n0


def stats_from_values(values_ms: np.ndarray, name: str, percentiles=(10, 25, 50, 75, 90, 99)) -> dict[str, float]:
    """mean / median / pNN of per-request values (numpy's linear percentiles, as vLLM computes them)."""
    if len(values_ms) == 0:
        return {}
    out = {f"mean_{name}_ms": float(np.mean(values_ms)), f"median_{name}_ms": float(np.median(values_ms))}
    for p in percentiles:
        out[f"p{p:g}_{name}_ms"] = float(np.percentile(values_ms, p))
    return out


def load_json_objects(path: Path) -> list:
    """The JSON value(s) of a file: one JSON document, or JSON Lines (``--append-result`` writes one
    object per line)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ValueError(f"data: cannot read {str(path)!r} ({e.strerror})") from None
    s = text.strip()
    if not s:
        raise ValueError(f"{path}: empty file")
    try:
        return [json.loads(s, parse_constant=_constant)]
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply; allowed: at most a few hundred levels") from None
    out = []
    for i, ln in enumerate(s.splitlines()):
        if ln.strip():
            out.append(loads_json(ln, f"{path}: line {i + 1}", parse_constant=_constant))
    return out


def _constant(name: str) -> float:
    # JSON has no NaN/Infinity; Python's json writes them, so the tools' files may hold them
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[name]


def _number(v) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            return None
    return None


def _kind(v) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null"}.get(type(v), type(v).__name__)
