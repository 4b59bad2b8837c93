"""Workload: the request stream, drawn with one random stream per activity.

Common random numbers: the stream depends only on the scenario's workload fields
and seed, never on the strategy, so policy comparisons are paired.  Every draw is
sequential, so the first n requests of a longer draw equal a shorter draw.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .limits import clip, short_repr
from .popularity import popularity
from .prefix import draw_prefix, has_prefix
from .presets.scenarios import TRACES
from .scenario import TRACE_FILE_COLUMNS, Scenario, _check_time_scale, shipped_trace_file

# Order of the spawned child streams: one per activity (a SeedSequence's first four children do not depend on how
# many it spawns: adding STREAM_PREFIX left the other draws as they were).
STREAM_ARRIVALS, STREAM_ADAPTERS, STREAM_PROMPT, STREAM_OUTPUT, STREAM_PREFIX = range(5)


@dataclass
class Workload:
    """Struct of arrays, one entry per request, in arrival order."""

    arrival_s: np.ndarray      # float64; NaN for closed-loop requests (set in the loop)
    adapter: np.ndarray        # int64
    prompt_tokens: np.ndarray  # int64
    output_tokens: np.ndarray  # int64
    closed: bool = False
    #: int64 tokens of the shared prefix each prompt starts with (included in prompt_tokens; docs/model.md 3.7);
    #: None: no prefix
    prefix: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.adapter)


def streams(seed: int) -> list[np.random.Generator]:
    ss = np.random.SeedSequence(seed)
    return [np.random.Generator(np.random.PCG64(s)) for s in ss.spawn(5)]


def draw_adapters(sc: Scenario, rng: np.random.Generator, n: int) -> np.ndarray:
    u = rng.random(n)
    if sc.popularity == "power":
        return np.minimum((sc.num_adapters * u ** (1.0 / sc.power_alpha)).astype(np.int64), sc.num_adapters - 1)
    cdf = np.cumsum(popularity(sc))
    cdf[-1] = 1.0
    return np.searchsorted(cdf, u, side="right").astype(np.int64)


def draw_lengths(sc: Scenario, mean: int, rng: np.random.Generator, n: int) -> np.ndarray:
    lo, hi = sc.length_bounds(mean)
    if sc.length_dist == "fixed":
        return np.full(n, mean, dtype=np.int64)
    if sc.length_dist == "uniform":
        return rng.integers(lo, hi + 1, size=n, dtype=np.int64)
    cv = sc.length_spread
    if cv == 0:
        return np.full(n, mean, dtype=np.int64)
    sigma2 = math.log1p(cv * cv)
    mu = math.log(mean) - sigma2 / 2
    x = rng.lognormal(mu, math.sqrt(sigma2), size=n)
    return np.clip(np.rint(x), lo, hi).astype(np.int64)


#: Chunks of gaps ``draw_arrivals`` draws at most (each is expected to cover duration_s on its own).
MAX_ARRIVAL_CHUNKS = 64


def draw_arrivals(sc: Scenario, rng: np.random.Generator) -> np.ndarray:
    """Arrival times in [0, duration_s), open loop."""
    lam = sc.arrival_rate_rps
    est = lam * sc.duration_s
    chunk = int(est + 6 * math.sqrt(est) + 64)
    gaps_parts = []
    total = 0.0
    while True:
        if sc.arrival_process == "poisson":
            g = rng.exponential(1.0 / lam, size=chunk)
        else:  # gamma, cv given
            k = 1.0 / (sc.arrival_cv ** 2)
            g = rng.gamma(k, 1.0 / (lam * k), size=chunk)
        gaps_parts.append(g)
        total += g.sum()
        if total >= sc.duration_s:
            break
        if len(gaps_parts) >= MAX_ARRIVAL_CHUNKS:  # (cannot happen in arrival_cv's range: a guard, not a rule)
            raise ValueError(f"arrival_cv: invalid value {sc.arrival_cv!r}; the gaps drawn did not cover "
                             f"duration_s in {MAX_ARRIVAL_CHUNKS} chunks of {chunk}")
    t = np.cumsum(np.concatenate(gaps_parts))
    return t[t < sc.duration_s]


def generate(sc: Scenario, n_closed: int = 0) -> Workload:
    """Draw the request stream. Closed loop: ``n_closed`` requests, times set by the loop.

    With ``sc.trace`` set: the shipped trace's requests (``replay_trace``) instead.
    """
    if sc.trace:
        return replay_trace(sc)
    rs = streams(sc.seed)
    if sc.arrival_process == "closed":
        n = n_closed
        arr = np.full(n, np.nan)
    else:
        arr = draw_arrivals(sc, rs[STREAM_ARRIVALS])
        n = len(arr)
    pfx = draw_prefix(sc, rs[STREAM_PREFIX], n) if has_prefix(sc) else None
    prompt = draw_lengths(sc, sc.prompt_tokens, rs[STREAM_PROMPT], n)
    return Workload(
        arrival_s=arr,
        adapter=draw_adapters(sc, rs[STREAM_ADAPTERS], n),
        prompt_tokens=prompt if pfx is None else prompt + pfx,
        output_tokens=draw_lengths(sc, sc.output_tokens, rs[STREAM_OUTPUT], n),
        closed=sc.arrival_process == "closed",
        prefix=pfx,
    )


def replay_trace(sc: Scenario) -> Workload:
    """The shipped trace ``sc.trace`` as this scenario replays it (open loop): the file's arrival times divided
    by ``trace_time_scale`` while < ``duration_s``, its token lengths, and adapters drawn from the scenario's
    popularity model on the adapter stream of ``sc.seed`` (the draws ``generate`` would make: independent of
    the strategy, so every strategy sees the same adapters; a prefix of a longer replay's)."""
    arr, pt, ot = sc.trace_requests()
    ad = draw_adapters(sc, streams(sc.seed)[STREAM_ADAPTERS], len(arr))
    return Workload(arr.copy(), ad, pt.copy(), ot.copy())


_DOWNLOAD_FIELDS = ("num_adapters", "popularity", "zipf_s", "power_alpha", "seed", "trace_time_scale", "duration_s",
                    "warmup_s")


def shipped_trace(name: str, scenario: Scenario | None = None, window: bool = True) -> pd.DataFrame:
    """A shipped trace (``TRACES``) as a DataFrame, e.g. for download (``.to_csv(index=False)``).

    Without ``scenario``: the file as shipped (columns ``arrived_at, num_prefill_tokens, num_decode_tokens``,
    every row).  With one: the trace CSV format ``read_trace`` reads (``arrival_s, adapter_id,
    prompt_tokens, output_tokens``): arrival times divided by the scenario's ``trace_time_scale``, adapters
    drawn as ``simulate`` draws them (the scenario's popularity model and seed); ``window=True`` keeps the
    requests the scenario replays (arrival < ``duration_s``), so that replaying the file with
    ``simulate(scenario.replace(trace=""), trace=read_trace(csv, ...))`` repeats ``simulate(scenario)`` when
    ``scenario.trace == name``; ``window=False`` keeps every row (the adapters of the window's rows unchanged).
    """
    if name not in TRACES:
        raise ValueError(f"trace: invalid value {name!r}; allowed: {', '.join(TRACES)}")
    arr, pt, ot = shipped_trace_file(name)
    if scenario is None:
        return pd.DataFrame(dict(zip(TRACE_FILE_COLUMNS, (arr.copy(), pt.copy(), ot.copy()))))
    if not isinstance(scenario, Scenario):
        raise ValueError(f"scenario: expected engine.Scenario, got {type(scenario).__name__}")
    # only the fields the replay reads (popularity model, seed, time scale, window) need to be valid here
    sc = Scenario(**{k: getattr(scenario, k) for k in _DOWNLOAD_FIELDS}).validate()
    t = arr / sc.trace_time_scale
    n = int(np.searchsorted(t, sc.duration_s, side="left")) if window else len(t)
    ad = draw_adapters(sc, streams(sc.seed)[STREAM_ADAPTERS], n)
    return pd.DataFrame({"arrival_s": t[:n], "adapter_id": ad, "prompt_tokens": pt[:n], "output_tokens": ot[:n]})


TRACE_COLUMNS = ("arrival_s", "adapter_id", "prompt_tokens", "output_tokens")
#: The other format ``read_trace`` reads: the public Azure LLM inference traces as processed by Vidur (the
#: shipped files' columns, ``TRACE_FILE_COLUMNS``); an ``adapter_id`` column may come with them.
AZURE_TRACE_COLUMNS = TRACE_FILE_COLUMNS
MAX_TRACE_ROWS = 1_000_000
_ACCEPTED = (f"{', '.join(TRACE_COLUMNS)} (the upload format), or {', '.join(AZURE_TRACE_COLUMNS)} and optionally "
             "adapter_id (an Azure LLM inference trace as processed by Vidur)")


def _trace_format(columns) -> bool:
    """True for the Azure/Vidur format, False for ours; ValueError for a header of neither or of both."""
    cols = set(columns)
    ours = [c for c in TRACE_COLUMNS if c in cols and c != "adapter_id"]
    azure = [c for c in AZURE_TRACE_COLUMNS if c in cols]
    if ours and azure:
        raise ValueError(f"trace: columns of both formats ({', '.join(ours)}; {', '.join(azure)}); allowed: "
                         f"one of {_ACCEPTED}")
    if azure:
        missing = [c for c in AZURE_TRACE_COLUMNS if c not in cols]
        if missing:
            raise ValueError(f"trace: missing column(s) {', '.join(missing)}; required: "
                             f"{', '.join(AZURE_TRACE_COLUMNS)} (adapter_id optional)")
        return True
    if not ours:
        raise ValueError(f"trace: missing column(s): the header ({', '.join(map(str, columns))}) matches neither "
                         f"format; required: {_ACCEPTED}")
    missing = [c for c in TRACE_COLUMNS if c not in cols]
    if missing:
        raise ValueError(f"trace: missing column(s) {', '.join(missing)}; required: {', '.join(TRACE_COLUMNS)}")
    return False


def read_trace(src, sc: Scenario) -> Workload:
    """Read a trace CSV in either of two formats, told apart by the header (other columns are ignored):

    * ``arrival_s, adapter_id, prompt_tokens, output_tokens`` (the upload format, as ``shipped_trace(name,
      scenario)`` writes it): every row, as in the file; ``simulate`` replays the rows arriving before
      ``duration_s``.
    * ``arrived_at, num_prefill_tokens, num_decode_tokens`` (the public Azure LLM inference traces as processed
      by Vidur: the shipped files' format), optionally with ``adapter_id``: read as a shipped trace is replayed
      (``replay_trace``): arrival times ``arrived_at / sc.trace_time_scale``; only the rows arriving before
      ``sc.duration_s`` (a prefix) are returned; without ``adapter_id`` their adapters are drawn from the
      scenario's popularity model on the adapter stream of ``sc.seed`` (the draws ``replay_trace`` and
      ``shipped_trace`` make: the same for every strategy, deterministic).  So the raw shipped file read with a
      preset that replays it, ``simulate(preset.replace(trace=""), trace=read_trace(file, preset))``, repeats
      ``simulate(preset)``.  Every row must be well formed (numbers, token counts >= 1, non-decreasing
      arrivals, ``adapter_id`` below ``num_adapters``), but the scenario's token limits (``max_batched_tokens``,
      the KV bound) apply only to the rows replayed, as ``Scenario.validate`` applies them to a shipped trace;
      no row replayed (the first arrival at or after ``duration_s``) is an error.

    Either way at most ``MAX_TRACE_ROWS`` rows.  ``src`` is a path, a file-like object or CSV text.  Raises
    ValueError naming the first bad row (1-based, counting the header as row 1) and column (as named in the
    file), or the columns missing when the header is of neither format (or mixes both).
    """
    if isinstance(src, str) and "\n" in src:
        src = io.StringIO(src)
    try:
        df = pd.read_csv(src, dtype=str, keep_default_na=False, nrows=MAX_TRACE_ROWS + 1)
    except Exception as e:  # pandas raises many types for malformed CSV
        raise ValueError(f"trace: not a readable CSV ({clip(str(e))})") from None
    azure = _trace_format(df.columns)
    if len(df) == 0:
        raise ValueError("trace: no rows")
    if len(df) > MAX_TRACE_ROWS:
        raise ValueError(f"trace: more than {MAX_TRACE_ROWS} rows; allowed: at most {MAX_TRACE_ROWS}")
    a_col, p_col, o_col = AZURE_TRACE_COLUMNS if azure else (TRACE_COLUMNS[0], *TRACE_COLUMNS[2:])
    has_ad = "adapter_id" in df.columns
    arr = pd.to_numeric(df[a_col], errors="coerce").to_numpy(np.float64)
    ad = pd.to_numeric(df["adapter_id"], errors="coerce").to_numpy(np.float64) if has_ad else None
    pt = pd.to_numeric(df[p_col], errors="coerce").to_numpy(np.float64)
    ot = pd.to_numeric(df[o_col], errors="coerce").to_numpy(np.float64)
    if azure:
        _check_time_scale(sc.trace_time_scale)
        arr = arr / sc.trace_time_scale
        replayed = arr < sc.duration_s  # the scenario's limits apply to these rows (NaN: no)
    else:
        replayed = True  # every row
    kv_cap = max(sc.max_request_tokens(), sc.max_fitting_request_tokens())
    chunked = sc.chunked_prefill_on()  # a prompt longer than the token budget spans steps
    pmax = kv_cap if chunked else sc.max_batched_tokens
    checks = [
        (a_col, ~np.isfinite(arr) | (arr < 0), "a number >= 0"),
        ("adapter_id", ~np.isfinite(ad) | (ad < 0) | (ad >= sc.num_adapters) | (ad != np.floor(ad)),
         f"an integer in [0, {sc.num_adapters - 1}] (num_adapters)") if has_ad else None,
        (p_col, ~np.isfinite(pt) | (pt < 1) | (pt != np.floor(pt)) | (replayed & (pt > pmax)),
         f"an integer in [1, {pmax}]" + ("" if chunked else " (max_batched_tokens; chunked prefill would split longer prompts)")),
        (o_col, ~np.isfinite(ot) | (ot < 1) | (ot != np.floor(ot)),
         "an integer >= 1"),
    ]
    first = None
    for col, mask, allowed in filter(None, checks):
        idx = np.flatnonzero(mask)
        if len(idx) and (first is None or idx[0] < first[0]):
            first = (idx[0], col, allowed)
    too_long = np.flatnonzero(replayed & (np.nan_to_num(pt) + np.nan_to_num(ot) > kv_cap))
    if len(too_long) and (first is None or too_long[0] < first[0]):
        first = (too_long[0], p_col, f"{p_col} + {o_col} <= {kv_cap} (the longest request "
                 "whose KV cache fits in the scenario's memory next to its adapter budget)")
    if first is None:
        dec = np.flatnonzero(np.diff(arr) < 0)
        if len(dec):
            first = (dec[0] + 1, a_col, "non-decreasing arrival times")
    if first is None and azure and not replayed[0]:
        first = (0, a_col, f"at least one request replayed: {a_col} / trace_time_scale "
                 f"({sc.trace_time_scale:g}) < duration_s ({sc.duration_s:g} s)")
    if first is not None:
        i, col, allowed = first
        raise ValueError(f"trace: row {i + 2}: {col}={short_repr(df[col].iloc[i])}; allowed: {allowed}")
    if not azure:
        return Workload(arr, ad.astype(np.int64), pt.astype(np.int64), ot.astype(np.int64))
    n = int(np.searchsorted(arr, sc.duration_s, side="left"))  # the rows replayed: a prefix, as replay_trace's
    ad = ad[:n].astype(np.int64) if has_ad else draw_adapters(sc, streams(sc.seed)[STREAM_ADAPTERS], n)
    return Workload(arr[:n].copy(), ad, pt[:n].astype(np.int64), ot[:n].astype(np.int64))


def max_request_blocks(wl: Workload, block_tokens: int) -> int:
    """The most KV blocks any request of ``wl`` can ask for when admitted (on demand: its tokens so far and the
    next, at most prompt + output; reserved in full: ceil((prompt + output) / block)): (prompt + output + block) //
    block at most (0 for no requests)."""
    if len(wl) == 0:
        return 0
    return int(((wl.prompt_tokens + wl.output_tokens + block_tokens) // block_tokens).max())
