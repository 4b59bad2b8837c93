"""As many replications as the verdict needs: a sequential rule over paired replications that keeps its error rate.

The strategies are compared as in ``engine.rank``: replication k of every strategy uses the same seed (common
random numbers), so a strategy is compared with the leader through the per-replication differences.  Instead
of a fixed number of replications, the caller runs one more replication at a time and asks ``decide`` after each
one whether the verdict is settled; ``run_until_decided`` is that loop.

The rule (Bonferroni-split t-intervals over a fixed maximum number of looks)
---------------------------------------------------------------------------
Looks happen after n = n0, n0 + 1, ..., N replications (n0 = ``min_reps`` >= 2: a CI needs two values;
N = ``max_reps``), so there are at most K = N - n0 + 1 looks.  With m strategies each look makes C = m - 1
comparisons (the leader against every other strategy).  At a look with n replications:

* the leader L is the strategy with the best mean (exact ties: the first in input order, as ``engine.rank``);
* for every other strategy j, the lead d_k = s * (x[L][k] - x[j][k]) (s = +1 when higher is better, else -1)
  gets the paired Student-t interval

      mean(d) +- t(1 - a/2; n - 1) * sd(d) / sqrt(n),     a = alpha / (K * C)       (``look_alpha``)

  (the interval of ``engine.metrics.mean_ci``, which ``engine.rank`` uses, at level 1 - a);
* the pair is *beaten* when the interval lies above 0 (lo > 0), *tied* when it lies inside [-delta, +delta]
  (delta = ``tie_abs`` if given, else ``tie_rel`` * |mean of L|; the interval is checked against 0 first), else
  *open*;
* the status is "win" when every pair is beaten, "tie" when no pair is open and some are tied, else
  "undecided".  The experiment stops at the first look whose status is not "undecided", or at n = N (the cap)
  with whatever status it has there; an "undecided" at the cap is reported as such (no verdict at the stated
  error rate: the leader leads, but neither a win nor a tie within +-delta is shown).

Why it keeps its error rate.  Let b be a truly best strategy (best expected value mu).  For each of the K looks
and each of the C strategies j != b, the interval for mu_b - mu_j from the first n replications misses its true
value with probability a (exactly when the paired differences are normal; replications are independent because
their seeds differ).  These K * C intervals are fixed in advance, so by the union bound they all cover with
probability >= 1 - K * C * a = 1 - alpha, whatever the dependence between looks and hence whatever the stopping
time (a look not reached does not matter: it is in the union anyway).  On that event:

* no false win: a win for L != b needs the interval for mu_L - mu_b (the mirror of b's interval) above 0 while
  mu_L - mu_b <= 0; a win for b over a j with mu_j = mu_b needs an interval that excludes its true value 0;
* the leader of a stopped "win" or "tie" is within delta of the best: either L = b, or the pair (L, b) was tied,
  its interval inside [-delta, delta] and covering mu_L - mu_b.

So P(declaring a false win) <= alpha and P(a verdict whose leader is worse than the best by more than delta)
<= alpha.  Statements about two strategies that are both not the best (a "tie" between j and L != b) carry no
simultaneous guarantee: that would need C = m(m - 1)/2.  Stopping at the first look whose plain 95 % CI excludes
zero (a = alpha at every look, ``alpha_look=alpha``) has no such bound: with 9 looks it declares false wins
several times as often as alpha (tests/test_sequential.py and bench/false_wins.py measure it).

Why this rule and not another. The union bound needs nothing about how the looks depend on each other, so it is
right with an unknown variance and Student-t intervals; exact group-sequential boundaries (Pocock, O'Brien-Fleming)
need the joint law of the t statistics across looks, and anytime-valid confidence sequences need a known variance
bound or scale and are wider than Bonferroni-t at n <= 10. The price is conservatism (measured false-win rates
below alpha: 2-4 % on normal data, 1.4 % on the simulator, at alpha 5 %) and a wide interval at n = 2 (one degree
of freedom: with alpha = 0.05 and K = 9, t = 114.6, so a decision at the first look needs the two paired
differences to differ by less than 2/114.6 = 1.7 % of their mean; raise ``min_reps`` to spend nothing there). The
t-interval assumes normal paired differences: symmetric heavy tails (the difference of two independent copies of a
lognormal) keep it conservative; strongly skewed differences make it miss more often than a, and then neither this
rule nor a fixed number of replications keeps alpha (no interval for a mean keeps its level for every distribution:
Bahadur and Savage, 1956). Measured (bench/false_wins.py, ``ttft_p99_ms`` of the 60 s default preset, 1,000
experiments each): one strategy on unrelated seeds against itself (symmetric differences), 1.4 % false wins with
this rule, 15.2 % with the naive rule, 3.7 % with today's fixed 3 replications; the strategy against a constant at
its mean (differences as skewed as the metric), 16.4 %, 32.8 % and 12.5 %.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import stats

#: What ``decide`` can conclude.
STATUSES = ("win", "tie", "undecided")
#: Default relative tie precision: a tie is a lead whose interval lies inside +-5 % of the leader's mean.
TIE_REL = 0.05


@lru_cache(maxsize=4096)
def _t_quantile(p: float, df: int) -> float:
    return float(stats.t.ppf(p, df))


@dataclass(frozen=True)
class Pair:
    """The leader's lead over one other strategy (``lead``: mean of the paired differences, positive = better,
    in the metric's unit) and its interval at level 1 - ``alpha_look``; ``status``: beaten, tied or open."""

    other: str
    lead: float
    lead_low: float
    lead_high: float
    status: str


@dataclass(frozen=True)
class Decision:
    """The verdict at one look.  ``status``: one of ``STATUSES``; ``leader``: the strategy with the best mean;
    ``pairs``: its lead over each other strategy (``Pair``); ``tied``: the strategies tied with it within
    ``delta``; ``reps_used``: replications per strategy; ``look`` of ``looks`` (K); ``alpha_look``: the error
    rate of each interval; ``final``: stop now (decided, or the cap); ``capped``: stopped by the cap undecided;
    ``reason``: one sentence saying why."""

    status: str
    leader: str
    pairs: dict[str, Pair]
    tied: list[str]
    means: dict[str, float]
    reps_used: int
    look: int
    looks: int
    max_reps: int
    alpha: float
    alpha_look: float
    delta: float
    higher_is_better: bool
    final: bool
    capped: bool
    reason: str


@dataclass
class SequentialRun:
    """What ``run_until_decided`` did: the last ``decision``, every strategy's per-replication ``values`` (the
    replications actually run) and the ``history`` of decisions, one per look."""

    decision: Decision
    values: dict[str, list[float]]
    history: list[Decision] = field(default_factory=list)


def _check_int(name: str, v, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo:
        raise ValueError(f"{name}: {v!r}; allowed: an integer >= {lo}")
    return int(v)


def _check_settings(max_reps, alpha, tie_rel, tie_abs, min_reps, alpha_look) -> tuple[int, int]:
    max_reps = _check_int("max_reps", max_reps, 2)
    min_reps = _check_int("min_reps", min_reps, 2)
    if min_reps > max_reps:
        raise ValueError(f"min_reps: {min_reps}; allowed: 2 <= min_reps <= max_reps ({max_reps})")
    for name, v in (("alpha", alpha), ("alpha_look", alpha_look)):
        if v is None and name == "alpha_look":
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 < v < 1.0:
            raise ValueError(f"{name}: {v!r}; allowed: a number with 0 < {name} < 1")
    for name, v in (("tie_rel", tie_rel), ("tie_abs", tie_abs)):
        if v is None and name == "tie_abs":
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v >= 0.0):
            raise ValueError(f"{name}: {v!r}; allowed: a finite number >= 0")
    return max_reps, min_reps


def _check_strategies(names: Sequence[str], what: str) -> list[str]:
    names = list(names)
    if not names:
        raise ValueError(f"{what}: empty; allowed: at least two strategies")
    if len(names) < 2:
        raise ValueError(f"{what}: one strategy ({names[0]!r}); allowed: at least two strategies")
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: repeated names ({names!r}); allowed: distinct strategies")
    return names


def look_alpha(alpha: float, max_reps: int, n_strategies: int, min_reps: int = 2) -> float:
    """The error rate of each interval: alpha / (K * C), K = max_reps - min_reps + 1 looks, C = n_strategies - 1
    comparisons per look (Bonferroni over every look and every comparison with the leader)."""
    max_reps, min_reps = _check_settings(max_reps, alpha, TIE_REL, None, min_reps, None)
    n_strategies = _check_int("n_strategies", n_strategies, 2)
    return alpha / ((max_reps - min_reps + 1) * (n_strategies - 1))


def decide(values: Mapping[str, Sequence[float]], higher_is_better: bool, max_reps: int = 10,
           alpha: float = 0.05, tie_rel: float = TIE_REL, tie_abs: float | None = None, min_reps: int = 2,
           *, alpha_look: float | None = None) -> Decision:
    """The verdict after the replications so far (``values[name][k]``: replication k's value, k < n).

    The look is the one after n = len(values[name]) replications (look n - min_reps + 1 of
    K = max_reps - min_reps + 1).  ``alpha_look`` overrides the per-interval error rate (default
    ``look_alpha(alpha, max_reps, len(values), min_reps)``); ``alpha_look=alpha`` is the naive rule "stop at the
    first look whose 1 - alpha CI excludes zero", which does NOT keep alpha (for comparisons only).  Raises
    ValueError naming the field and the value: no or one strategy, counts that differ, a non-finite value, fewer
    than ``min_reps`` or more than ``max_reps`` replications, settings out of range.
    """
    max_reps, min_reps = _check_settings(max_reps, alpha, tie_rel, tie_abs, min_reps, alpha_look)
    if not isinstance(values, Mapping):
        raise ValueError(f"values: {type(values).__name__}; allowed: a mapping of strategy -> per-replication values")
    names = _check_strategies(list(values), "values")
    arr = {}
    for k in names:
        try:
            a = np.asarray(list(values[k]), dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"values[{k!r}]: {values[k]!r}; allowed: a sequence of finite numbers") from None
        bad = np.flatnonzero(~np.isfinite(a))
        if a.ndim != 1 or len(bad):
            where = f"[{int(bad[0])}]: {float(a[bad[0]])!r}" if a.ndim == 1 else f": {values[k]!r}"
            raise ValueError(f"values[{k!r}]{where}; allowed: finite numbers")
        arr[k] = a
    counts = {k: len(a) for k, a in arr.items()}
    n = counts[names[0]]
    if len(set(counts.values())) != 1:
        raise ValueError(f"values: replication counts differ ({counts}); allowed: the same number of paired "
                         f"replications per strategy")
    if not min_reps <= n <= max_reps:
        raise ValueError(f"values: {n} replications per strategy; allowed: min_reps ({min_reps}) <= n <= "
                         f"max_reps ({max_reps})")
    looks = max_reps - min_reps + 1
    look = n - min_reps + 1
    a_look = alpha / (looks * (len(names) - 1)) if alpha_look is None else float(alpha_look)
    sign = 1.0 if higher_is_better else -1.0
    means = {k: float(a.mean()) for k, a in arr.items()}
    leader = sorted(names, key=lambda k: -sign * means[k])[0]  # stable: exact ties go to the first in input order
    delta = float(tie_abs) if tie_abs is not None else float(tie_rel) * abs(means[leader])
    tq = _t_quantile(1.0 - a_look / 2.0, n - 1)
    pairs, tied, open_ = {}, [], []
    for k in names:
        if k == leader:
            continue
        d = sign * (arr[leader] - arr[k])
        m = float(d.mean())
        half = float(tq * d.std(ddof=1) / math.sqrt(n))
        lo, hi = m - half, m + half
        if lo > 0.0:
            status = "beaten"
        elif -delta <= lo and hi <= delta:
            status = "tied"
            tied.append(k)
        else:
            status = "open"
            open_.append(k)
        pairs[k] = Pair(k, m, lo, hi, status)
    status = "undecided" if open_ else ("tie" if tied else "win")
    capped = status == "undecided" and n == max_reps
    final = status != "undecided" or capped
    level = f"each interval at 1 - {a_look:.3g} (alpha {alpha:g} over {looks} looks x {len(names) - 1} comparisons)"
    where = f"look {look} of {looks}, {n} replications"
    if status == "win":
        reason = f"win: {leader}'s lead over every other strategy has a paired CI above 0 ({where}; {level})"
    elif status == "tie":
        rest = [k for k in pairs if k not in tied]
        reason = (f"tie: {leader} and {', '.join(tied)} differ by less than +-{delta:.4g} (paired CI inside it)"
                  + (f"; {leader} leads {', '.join(rest)} (CI above 0)" if rest else "") + f" ({where}; {level})")
    elif capped:
        reason = (f"cap: {max_reps} replications reached; {leader} leads but its lead over {', '.join(open_)} "
                  f"neither excludes 0 nor lies inside +-{delta:.4g}: no verdict at error rate {alpha:g} ({level})")
    else:
        reason = (f"undecided: {leader}'s lead over {', '.join(open_)} neither excludes 0 nor lies inside "
                  f"+-{delta:.4g} ({where}; {level}): one more replication")
    return Decision(status, leader, pairs, tied, means, n, look, looks, max_reps, float(alpha), a_look, delta,
                    bool(higher_is_better), final, capped, reason)


def run_until_decided(run_one: Callable[[int], Mapping[str, float]], strategies: Sequence[str],
                      higher_is_better: bool, max_reps: int = 10, alpha: float = 0.05, tie_rel: float = TIE_REL,
                      tie_abs: float | None = None, min_reps: int = 2, *,
                      alpha_look: float | None = None) -> SequentialRun:
    """Run replications k = 0, 1, ... (``run_one(k)``: each strategy's metric value in replication k, all run on
    the same seed, e.g. seed + k) until ``decide`` stops: a win, a tie within delta, or ``max_reps``.

    The settings are ``decide``'s and are checked before the first replication.  Raises ValueError when
    ``run_one(k)`` lacks a strategy or gives a non-finite value (naming the strategy and k).
    """
    _check_settings(max_reps, alpha, tie_rel, tie_abs, min_reps, alpha_look)
    if isinstance(strategies, str):
        raise ValueError(f"strategies: {strategies!r}; allowed: a sequence of at least two strategy names")
    names = _check_strategies(strategies, "strategies")
    values: dict[str, list[float]] = {s: [] for s in names}
    history: list[Decision] = []
    for k in range(int(max_reps)):
        out = run_one(k)
        missing = [s for s in names if s not in out]
        if missing:
            raise ValueError(f"run_one({k}): no value for {missing}; allowed: a value for each of {names}")
        for s in names:
            v = float(out[s])
            if not math.isfinite(v):
                raise ValueError(f"run_one({k})[{s!r}]: {v!r}; allowed: finite numbers")
            values[s].append(v)
        if k + 1 < min_reps:
            continue
        d = decide(values, higher_is_better, max_reps, alpha, tie_rel, tie_abs, min_reps, alpha_look=alpha_look)
        history.append(d)
        if d.final:
            return SequentialRun(d, values, history)
    raise AssertionError("unreachable: the look at max_reps is final")  # pragma: no cover
