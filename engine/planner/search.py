"""Bracketing searches for the planner: the largest arrival rate, or adapter count, that meets an SLO, or
the fewest replicas that serve the scenario's rate within it.

One search runs for one configuration and one replication seed (common random
numbers: every configuration and every probe of a search use the same seed, so
a probe at a higher rate sees the same adapter choices and lengths).  A probe
*passes* when the run is stable and meets the SLO (``slo.verdict``).  The search
assumes passing is monotone in the searched value (true of the model's mean
behaviour; noise can make single probes non-monotone, and the bisection then
finds one of the crossing points, which the replications' CI reflects).

Bracket: from the start value, double (or halve) until one value passes and the
next fails, then bisect until ``hi / lo - 1 <= rel_tol``.  The result is the
largest passing value probed (``lo``) with the summary of that probe.

``min_replicas`` is the mirror image over the integer ``num_replicas`` (passing is monotone
*increasing* in it): gallop up from the start (1, 2, 4, 8, ...: doubling) until a count passes,
or down from a passing start (N - 1, N - 3, N - 7, ...) until one fails, then bisect until the
failing and the passing counts are adjacent; the answer is that passing count (a crossing: the
count below it was probed and failed).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..scenario import MAX_REPLICA_ADAPTERS, MAX_REPLICAS, MAX_REQUESTS, Scenario
from ..sim import simulate_summary
from .slo import verdict

#: Bounds of a search (multiples of the start value) and of its probes.
MAX_DOUBLINGS = 12
MAX_HALVINGS = 12
MAX_PROBES = 60
#: Seconds of arrivals a probe's queue may hold beyond the running batch (``probe_cap``).
PROBE_QUEUE_S = 10.0
PROBE_QUEUE_MIN = 64
#: Fewest arrivals in the measurement window a rate probe may have.
MIN_WINDOW_REQUESTS = 100
#: Largest adapter count a max_adapters search probes.
MAX_ADAPTERS = 100_000
#: Largest replica count a min_replicas search probes by default (engine.MAX_REPLICAS is the hard limit).
MAX_REPLICAS_SEARCH = 16


@dataclass
class SearchResult:
    value: float            # largest passing value (0 if none passed)
    summary: dict | None    # summary of the probe at ``value`` (None if none passed)
    probes: int             # simulations run
    reason: str             # why the first failing probe above ``value`` failed ("" if capped)
    capped: bool            # the upper end of the search was reached while still passing


def _summary_row(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if isinstance(v, (int, float, bool))}


def probe_cap(sc: Scenario, slo: dict | None = None) -> int:
    """Requests a probe's server may hold before it refuses arrivals (then the probe fails as unstable).

    The running batch plus a queue of ``q`` seconds of arrivals, at least ``PROBE_QUEUE_MIN``:
    ``q = min(PROBE_QUEUE_S, 4 x the tightest TTFT/queue threshold of the SLO)``.  A request that finds
    such a queue waits about ``q`` seconds (near capacity the server drains about the arrival rate), four
    times what the SLO allows; a probe far beyond capacity stops growing its queue there instead of
    simulating (and scanning) an ever longer one.  On a fleet the cap is per replica (every replica is a full
    server of the scenario), sized on its share of the arrivals, ``arrival_rate_rps / num_replicas``.
    """
    q = PROBE_QUEUE_S
    for k, v in (slo or {}).items():
        if k.startswith(("ttft_", "queue_", "load_wait_")):
            q = min(q, 4.0 * v / 1e3)
    rate = sc.arrival_rate_rps / max(1, sc.num_replicas)
    return int(sc.max_batch_size + max(PROBE_QUEUE_MIN, math.ceil(rate * q)))


def probe_scenario(sc: Scenario, field: str, value, probe_requests: int | None, slo: dict | None = None
                   ) -> Scenario:
    """The scenario of one probe: ``field = value``; a cap on requests in the server (``probe_cap``,
    unless the scenario sets ``max_in_system`` itself); and with ``probe_requests`` the measurement
    window shortened so that about that many requests arrive in it (never lengthened)."""
    s = sc.replace(**{field: value})
    if s.trace:  # a replayed trace has its own arrivals: its window and rate are the trace's
        return s
    if s.max_in_system == 0 and s.arrival_process != "closed":
        s = s.replace(max_in_system=probe_cap(s, slo))
    if probe_requests and s.arrival_rate_rps > 0:
        window = max(probe_requests / s.arrival_rate_rps, 1.0)
        if s.warmup_s + window < s.duration_s:
            s = s.replace(duration_s=s.warmup_s + window)
    return s


def _probe(sc: Scenario, slo: dict, field: str, value, probe_requests: int | None = None
           ) -> tuple[bool, dict | None, str]:
    try:
        s = probe_scenario(sc, field, value, probe_requests, slo).validate()
    except ValueError as e:
        return False, None, str(e)
    summ = simulate_summary(s)
    ok, why = verdict(summ, slo, s.arrival_rate_rps, s.duration_s - s.warmup_s)
    return ok, _summary_row(summ), why


def _rate_cap(sc: Scenario) -> float:
    """Largest arrival rate whose expected request count stays within MAX_REQUESTS (with 10 % headroom)."""
    return MAX_REQUESTS / (1.1 * max(sc.duration_s, 1e-9))


def upper_bound_text(sc: Scenario, field: str) -> str:
    """The upper end of a ``max_rate`` (``arrival_rate_rps``) or ``max_adapters`` (``num_adapters``) search of
    ``sc`` in words: a search that still passes there has found a lower bound, not the answer."""
    if field == "num_adapters":
        return f"{MAX_ADAPTERS:,} adapters, the most a search probes"
    return (f"{_rate_cap(sc):.4g} req/s, the engine's cap of {MAX_REQUESTS:,} requests per run over "
            f"{sc.duration_s:g} s")


def search(sc: Scenario, slo: dict, field: str, start: float, rel_tol: float, integer: bool,
           upper: float, lower: float, probe_requests: int | None = None, step: float = 2.0) -> SearchResult:
    """Largest ``field`` value in [lower, upper] that passes (see the module docstring).

    ``step``: the bracketing factor (2: doubling/halving; a start near the answer, such as another
    replication's, brackets faster with a small step).
    """
    conv = (lambda x: int(round(x))) if integer else float
    probes = 0
    best_v, best_s, reason = 0.0, None, ""
    # as far as MAX_DOUBLINGS doublings would reach, whatever the step
    n_steps = MAX_DOUBLINGS if step >= 2 else int(math.ceil(MAX_DOUBLINGS * math.log(2) / math.log(step)))
    x = conv(min(max(start, lower), upper))
    ok, summ, why = _probe(sc, slo, field, x, probe_requests)
    probes += 1
    if ok:
        lo, lo_s, hi = x, summ, None
        for _ in range(n_steps):
            if lo >= upper:
                break
            nxt = conv(min(lo * step, upper))
            if integer and nxt == lo:
                nxt = min(lo + 1, int(upper))
            if nxt == lo:
                break
            ok, summ, why = _probe(sc, slo, field, nxt, probe_requests)
            probes += 1
            if ok:
                lo, lo_s = nxt, summ
            else:
                hi, reason = nxt, why
                break
        if hi is None:
            return SearchResult(float(lo), lo_s, probes, "", True)
    else:
        hi, reason, lo, lo_s = x, why, None, None
        for _ in range(n_steps):
            nxt = conv(hi / step)
            if integer and nxt == hi:
                nxt = hi - 1
            if nxt < lower or nxt == hi or (integer and nxt < 1):
                break
            ok, summ, why = _probe(sc, slo, field, nxt, probe_requests)
            probes += 1
            if ok:
                lo, lo_s = nxt, summ
                break
            hi, reason = nxt, why
        if lo is None:
            return SearchResult(0.0, None, probes, reason, False)
    while probes < MAX_PROBES and hi / lo - 1 > rel_tol:
        mid = conv(math.sqrt(lo * hi)) if not integer else conv((lo + hi) / 2)
        if mid in (lo, hi):
            break
        ok, summ, why = _probe(sc, slo, field, mid, probe_requests)
        probes += 1
        if ok:
            lo, lo_s = mid, summ
        else:
            hi, reason = mid, why
    best_v, best_s = float(lo), lo_s
    return SearchResult(best_v, best_s, probes, reason, False)


def max_rate(sc: Scenario, slo: dict, rel_tol: float = 0.03, probe_requests: int | None = None,
             start: float | None = None) -> SearchResult:
    """Largest arrival rate (req/s) at which ``sc`` is stable and meets ``slo``; ``start`` (e.g. another
    replication's answer) begins the bracket there with a small step instead of at the scenario's rate."""
    cap = _rate_cap(sc)
    # Below MIN_WINDOW_REQUESTS arrivals in the window a probe measures nothing: stop halving there.
    floor = max(sc.arrival_rate_rps / 2 ** MAX_HALVINGS, MIN_WINDOW_REQUESTS / (sc.duration_s - sc.warmup_s))
    x0, step = (sc.arrival_rate_rps, 2.0) if not start else (start, 1.0 + 2 * rel_tol)
    return search(sc, slo, "arrival_rate_rps", x0, rel_tol, False, upper=cap,
                  lower=min(floor, x0), probe_requests=probe_requests, step=step)


def max_adapters(sc: Scenario, slo: dict, rel_tol: float = 0.03, probe_requests: int | None = None,
                 start: float | None = None) -> SearchResult:
    """Largest number of adapters served at the scenario's arrival rate within ``slo`` (``start``: as in
    ``max_rate``)."""
    x0, step = (sc.num_adapters, 2.0) if not start else (start, 1.0 + 2 * rel_tol)
    return search(sc, slo, "num_adapters", x0, rel_tol, True, upper=MAX_ADAPTERS, lower=1,
                  probe_requests=probe_requests, step=step)


def at_rate(sc: Scenario, slo: dict, probe_requests: int | None = None) -> SearchResult:
    """One probe at the scenario's own rate (the min_cost objective)."""
    ok, summ, why = _probe(sc, slo, "arrival_rate_rps", sc.arrival_rate_rps, probe_requests)
    return SearchResult(sc.arrival_rate_rps if ok else 0.0, summ, 1, "" if ok else why, False)


def replicas_cap(sc: Scenario, upper: int = MAX_REPLICAS_SEARCH) -> int:
    """Largest replica count a min_replicas search of ``sc`` may probe: ``upper``, within engine.MAX_REPLICAS
    and the fleet's replica x adapter bound (at least 1)."""
    return max(1, min(int(upper), MAX_REPLICAS, MAX_REPLICA_ADAPTERS // max(1, sc.num_adapters)))


def min_replicas(sc: Scenario, slo: dict, probe_requests: int | None = None, start: int | None = None,
                 upper: int = MAX_REPLICAS_SEARCH) -> SearchResult:
    """Fewest replicas (``num_replicas`` in [1, ``replicas_cap(sc, upper)``]) that serve ``sc``'s arrival rate
    (the fleet's total) stably within ``slo`` (see the module docstring).

    ``start`` (e.g. another replication's answer) begins the gallop there (steps 1, 2, 4, ...) instead of at 1.
    ``value``: the count found (0 if none up to the cap passes); ``reason``: why the largest failing count
    probed failed (the one just below the answer, or the cap's when none passes).  A count the scenario
    refuses (e.g. a state-reading router with the Belady oracle) fails with the validation message, and no
    larger count is probed.
    """
    cap = replicas_cap(sc, upper)
    probes = 0

    def probe(n: int) -> tuple[bool, dict | None, str, bool]:
        nonlocal probes
        try:
            s = probe_scenario(sc, "num_replicas", n, probe_requests, slo).validate()
        except ValueError as e:
            return False, None, f"num_replicas={n} is not allowed: {e}", True
        probes += 1
        summ = simulate_summary(s)
        ok, why = verdict(summ, slo, s.arrival_rate_rps, s.duration_s - s.warmup_s)
        return ok, _summary_row(summ), (f"{n} replica(s): {why}" if why else ""), False

    x = min(max(int(start or 1), 1), cap)
    ok, summ, why, invalid = probe(x)
    lo, lo_why = None, ""        # largest failing count probed, and why it failed
    hi, hi_s = None, None        # smallest passing count probed, and its summary
    step = 1
    if ok:
        hi, hi_s = x, summ
        while hi > 1:
            nxt = max(1, hi - step)
            ok, summ, why, _ = probe(nxt)
            if ok:
                hi, hi_s = nxt, summ
                step *= 2
            else:
                lo, lo_why = nxt, why
                break
        if lo is None:
            return SearchResult(float(hi), hi_s, probes, "", False)
    else:
        lo, lo_why = x, why
        while not invalid and lo < cap and probes < MAX_PROBES:
            nxt = min(cap, lo + step)
            ok, summ, why, invalid = probe(nxt)
            if ok:
                hi, hi_s = nxt, summ
                break
            lo, lo_why = nxt, why
            step *= 2
        if hi is None:
            if not invalid and cap < upper:
                lo_why += (f"; the search stops at {cap} replicas (num_replicas x num_adapters <= "
                           f"{MAX_REPLICA_ADAPTERS:,}, num_replicas <= {MAX_REPLICAS})")
            return SearchResult(0.0, None, probes, lo_why, False)
    while hi - lo > 1 and probes < MAX_PROBES:
        mid = (lo + hi) // 2
        ok, summ, why, _ = probe(mid)
        if ok:
            hi, hi_s = mid, summ
        else:
            lo, lo_why = mid, why
    return SearchResult(float(hi), hi_s, probes, lo_why, False)
