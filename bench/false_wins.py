"""False wins of the sequential replication rule (engine.sequential) on the real simulator.

    python bench/false_wins.py [--experiments 1000] [--pair-experiments 200] [--max-reps 10] [--alpha 0.05]
                               [--strategy vllm] [--metric ttft_p99_ms] [--duration 60]

Scenario: preset ``default`` cut to ``--duration`` seconds (about 1,200 requests, a few ms per run); metric
``--metric`` (lower is better unless ``--higher-is-better``).  Each sequential experiment runs up to
``--max-reps`` replications and asks ``engine.decide`` after each one (looks at n = 2..max_reps).

Nulls (every win is false):

* ``unpaired``: the same strategy twice, one name on seeds s + k, the other on seeds s + k + 1,000,000.  With
  common random numbers two copies of one strategy give identical values (a trivial tie); on unrelated seeds they
  are identical in distribution but not in realization, and their paired differences carry the simulator's whole
  seed-to-seed noise (symmetric, since the two arms are exchangeable): the hardest case for false wins with
  symmetric differences.  Also with three copies (two comparisons per look).
* ``vs-mean`` (stress): the strategy against a constant equal to its mean, estimated from ``--pool`` separate
  runs.  The paired differences are then as skewed as the metric itself, the weak spot of t-intervals (the
  estimated mean is off by about sd/sqrt(pool), so this null is approximate).

Each null is decided three ways on the same experiments: the rule as the app would run it (tie precision
``tie_rel`` 5 % of the leader's mean), the rule never stopping for a tie (delta = 0: the worst case for false
wins), the naive rule (delta = 0, every look at the plain 1 - alpha CI: stop at the first CI that excludes 0), and
for reference today's fixed rule (3 replications, one look at the 1 - alpha CI: ``engine.rank``'s winner).

Pairs with a real difference (common random numbers, seeds s + k): the share of experiments ending in a win,
a tie or the cap, the winners and the mean replications used.

Target: the rule's false-win rate on the unpaired null <= alpha (PASS/MISS); the rest is for information.
Prints every rate with its exact (Clopper-Pearson) 95 % binomial CI.  Exits 0.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEED0 = 10_000          # experiment e uses seeds SEED0 + e * max_reps + k
ARM_OFFSET = 1_000_000  # copy i of the strategy in a null adds i * ARM_OFFSET
POOL0 = 5_000_000       # the vs-mean null's pool of runs
PAIRS = (("naive", "hot_set"), ("batch", "vllm"), ("slora", "naive"))


def _ci(k: int, n: int) -> str:
    from scipy.stats import binomtest
    lo, hi = binomtest(k, n).proportion_ci(0.95, method="exact")
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}] ({k}/{n})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", type=int, default=1000, help="sequential experiments per null")
    ap.add_argument("--pair-experiments", type=int, default=200, help="sequential experiments per real pair")
    ap.add_argument("--max-reps", type=int, default=10)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--strategy", default="vllm")
    ap.add_argument("--metric", default="ttft_p99_ms")
    ap.add_argument("--higher-is-better", action="store_true")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--pool", type=int, default=1000, help="runs estimating the mean of the vs-mean null")
    args = ap.parse_args()

    import numpy as np

    import engine
    from engine import Scenario, look_alpha, run_until_decided, simulate

    base = Scenario.from_preset("default", duration_s=args.duration)
    cache: dict[tuple[str, int], float] = {}

    def metric(strategy: str, seed: int) -> float:
        key = (strategy, seed)
        if key not in cache:
            cache[key] = float(simulate(base.replace(strategy=strategy, seed=seed)).summary[args.metric])
        return cache[key]

    hib, reps, alpha = args.higher_is_better, args.max_reps, args.alpha
    rules = {"rule (tie_rel 0.05)": {},
             "rule, no ties (delta 0)": {"tie_abs": 0.0},
             "naive (alpha per look)": {"tie_abs": 0.0, "alpha_look": alpha},
             "fixed 3 reps, 95 % CI": {"tie_abs": 0.0, "alpha_look": alpha, "max_reps": 3, "min_reps": 3}}
    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    metric(args.strategy, 0)  # compile / load the kernels
    print(f"false wins of engine.sequential on the simulator: preset default, duration_s {args.duration:g} "
          f"(warm-up {base.warmup_s:g} s), metric {args.metric} ({'higher' if hib else 'lower'} is better), "
          f"max_reps {reps} (looks at n = 2..{reps}), alpha {alpha:g}, per-interval alpha "
          f"{look_alpha(alpha, reps, 2):.4g} (2 arms) / {look_alpha(alpha, reps, 3):.4g} (3 arms); "
          f"engine {engine.ENGINE_VERSION}, Python {platform.python_version()}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs, {datetime.datetime.now():%Y-%m-%d %H:%M}, load average {load0:.2f}")

    def sequential(run_one, names, n_exp):
        """{rule: (status counts, winners, mean replications)} over n_exp experiments."""
        out = {}
        for label, kw in rules.items():
            status, winners, used = collections.Counter(), collections.Counter(), []
            for e in range(n_exp):
                d = run_until_decided(lambda k, e=e: run_one(e, k), names, hib, **{"max_reps": reps, "alpha": alpha, **kw}
                                      ).decision
                status["cap" if d.capped else d.status] += 1
                if d.status == "win":
                    winners[d.leader] += 1
                used.append(d.reps_used)
            out[label] = (status, winners, float(np.mean(used)))
        return out

    def seed(e: int, k: int) -> int:
        return SEED0 + e * reps + k

    s, n_exp = args.strategy, args.experiments
    nulls = {}
    for arms in (2, 3):
        names = [f"{s}#{i}" for i in range(arms)]
        nulls[f"unpaired, {arms} copies of {s}"] = sequential(
            lambda e, k, names=names: {nm: metric(s, seed(e, k) + i * ARM_OFFSET) for i, nm in enumerate(names)},
            names, n_exp)
    pool = np.array([metric(s, POOL0 + i) for i in range(args.pool)])
    mean = float(pool.mean())
    nulls[f"vs-mean: {s} against {mean:.1f} (pool of {args.pool}, sd {pool.std(ddof=1):.1f})"] = sequential(
        lambda e, k: {s: metric(s, seed(e, k)), "mean": mean}, [s, "mean"], n_exp)

    verdict = None
    for title, res in nulls.items():
        print(f"\nnull {title}: {n_exp} experiments")
        for label, (status, winners, used) in res.items():
            print(f"  {label:26s} false wins {_ci(status['win'], n_exp)}; ties {status['tie']}, undecided at "
                  f"the cap {status['cap']}; mean replications {used:.2f}; winners {dict(winners)}")
        if verdict is None:
            rate = res["rule (tie_rel 0.05)"][0]["win"] / n_exp
            verdict = (f"target: the rule's false-win rate on the unpaired null <= alpha {alpha:g}: {rate:.3f} -> "
                       f"{'PASS' if rate <= alpha else 'MISS'}")

    p_exp = args.pair_experiments
    for a, b in PAIRS:
        res = sequential(lambda e, k, a=a, b=b: {a: metric(a, seed(e, k)), b: metric(b, seed(e, k))}, [a, b], p_exp)
        both = [seed(e, k) for e in range(p_exp) for k in range(reps) if (a, seed(e, k)) in cache and (b, seed(e, k)) in cache]
        va, vb = (np.array([cache[(x, sd)] for sd in both]) for x in (a, b))
        print(f"\npair {a} vs {b} (common random numbers): {p_exp} experiments; means over the {len(both)} paired "
              f"runs made {a} {va.mean():.1f}, {b} {vb.mean():.1f}")
        for label, (status, winners, used) in res.items():
            print(f"  {label:26s} win {status['win']}, tie {status['tie']}, undecided at the cap {status['cap']}; "
                  f"winners {dict(winners)}; mean replications {used:.2f}")

    print(f"\n{verdict}; {len(cache)} simulations, {time.perf_counter() - t0:.0f} s, "
          f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
