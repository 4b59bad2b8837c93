"""Verdicts: how a claim's published statement is compared with our numbers.

``Claim`` and ``Result`` hold a claim and its per-view outcome; the verdict rules
(``magnitude_verdict``, ``direction_verdict``, ``range_verdict``) turn a paired mean and its
95% CI into HOLDS / PARTLY / NO with a reason; ``RULES`` states them for the report.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..metrics import mean_ci
from .common import cell, fmt_ci

HOLDS, PARTLY, NO = "holds", "partly", "does not hold"
#: Magnitude rule: a claimed effect size is matched if ours is within this factor of it.
FACTOR = 2.0
#: "Barely changes": relative change within this band.
FLAT = 0.10


@dataclass
class Result:
    view: str
    ours: str
    verdict: str
    reason: str


@dataclass
class Claim:
    id: str
    source: str
    text: str
    published: str
    conditions: str
    rule: str
    results: list[Result] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    why: str = ""          # modelling explanation when it does not (fully) hold
    short: str = ""        # one-line reason for the summary list

    def verdict(self, view: str) -> str:
        for r in self.results:
            if r.view == view:
                return r.verdict
        return "-"


# ---------------------------------------------------------------------------- rules
def magnitude_verdict(mu: float, lo: float, hi: float, claimed: float) -> tuple[str, str]:
    """Claimed effect ``claimed`` (signed; 0 = no effect).  See RULES."""
    if not all(map(math.isfinite, (mu, lo, hi))):
        return NO, "too few finite replications for a confidence interval"
    sign = 1 if claimed > 0 else -1
    excludes = (lo > 0) if sign > 0 else (hi < 0)
    if not excludes:
        if (sign > 0 and hi < 0) or (sign < 0 and lo > 0):
            return NO, "the effect goes the other way (CI excludes no-effect on the wrong side)"
        return NO, "the CI includes no effect"
    r = mu / claimed
    if 1 / FACTOR <= r <= FACTOR:
        return HOLDS, f"right direction, CI excludes no effect, size {r:.2f}x the published one"
    if 1 / FACTOR ** 2 <= r <= FACTOR ** 2:
        return PARTLY, f"right direction and CI excludes no effect, but the size is {r:.2f}x the published one"
    return NO, f"right direction, but the size is {r:.2f}x the published one (off by more than {FACTOR ** 2:g}x)"


def direction_verdict(mu: float, lo: float, hi: float, sign: int) -> tuple[str, str]:
    """Direction-only claims: the CI must exclude no effect on the claimed side."""
    if not all(map(math.isfinite, (mu, lo, hi))):
        return NO, "too few finite replications for a confidence interval"
    if (sign > 0 and lo > 0) or (sign < 0 and hi < 0):
        return HOLDS, "right direction, CI excludes no effect"
    if (sign > 0 and hi < 0) or (sign < 0 and lo > 0):
        return NO, "the effect goes the other way"
    return NO, "the CI includes no effect"


def range_verdict(mu: float, lo: float, hi: float, a: float, b: float) -> tuple[str, str]:
    """A claimed range [a, b] (same sign): as magnitude_verdict, with ratio 1 inside the range and
    the ratio to the nearer end outside it."""
    if not all(map(math.isfinite, (mu, lo, hi))):
        return NO, "too few finite replications for a confidence interval"
    sign = 1 if b > 0 else -1
    if not ((lo > 0) if sign > 0 else (hi < 0)):
        if (sign > 0 and hi < 0) or (sign < 0 and lo > 0):
            return NO, "the effect goes the other way"
        return NO, "the CI includes no effect"
    lo_c, hi_c = sorted((abs(a), abs(b)))
    x = abs(mu)
    r = 1.0 if lo_c <= x <= hi_c else (x / lo_c if x < lo_c else x / hi_c)
    if 1 / FACTOR <= r <= FACTOR:
        return HOLDS, f"right direction, size {r:.2f}x the published range"
    if 1 / FACTOR ** 2 <= r <= FACTOR ** 2:
        return PARTLY, f"right direction, but the size is {r:.2f}x the published range"
    return NO, f"right direction, but the size is {r:.2f}x the published range (off by more than {FACTOR ** 2:g}x)"


RULES = f"""\
* **Effect claims with a size** (e.g. "cuts TTFT by 20%"): we compute the paired per-replication
  relative change (common random numbers) and its 95% Student-t CI. **holds** if the CI excludes
  no-effect on the claimed side and our mean is within a factor {FACTOR:g} of the published size;
  **partly** if the CI excludes no-effect on the claimed side and the size is within a factor
  {FACTOR ** 2:g} but not {FACTOR:g}; **does not hold** if the CI includes no-effect, lies on the other side, or
  the size is off by more than a factor {FACTOR ** 2:g}.
* **Direction-only claims** (e.g. "throughput falls as adapters grow"): **holds** if the paired CI
  excludes no-effect on the claimed side; **does not hold** otherwise.
* **Level claims** (e.g. "swap is 29% of TTFT"): as above, with no-effect = 0.
* **"Barely changes" claims**: **holds** if every paired relative change has its 95% CI inside
  +-{100 * FLAT:.0f}%; **partly** if every mean is inside +-{100 * FLAT:.0f}% but some CI is not; **does not hold**
  otherwise.
* **"X wins" claims** (lowest mean TTFT): **holds** if X has the lowest mean and the paired CI of the
  runner-up's minus X's TTFT excludes 0; **partly** if X is lowest but that CI includes 0 (a tie), or X
  wins in some but not all of the stated conditions; **does not hold** if X does not have the lowest mean.
* Compound claims hold if every part holds, do not hold if no part holds, and hold partly otherwise.
* Each seed-1 claim is evaluated in two views of the service model (see "Modelling differences"):
  the preset as specified (decode contention) and with decode_ms_per_token = 0. Each seed-1 claim about
  the hot set is also evaluated, in both views, with a half-budget pinned hot set and with `preload_lru`
  (the seed's hot-set as it most likely worked: preload, then LRU), by the same rule on the same streams.
* Seed-2 claims are evaluated at the presets' heavy load; each states its rule. K-1 is also evaluated at
  moderate load as a sensitivity check.
"""


def combine(parts: list[str]) -> str:
    if all(p == HOLDS for p in parts):
        return HOLDS
    if all(p == NO for p in parts):
        return NO
    return PARTLY


def rel(df, metric, a, b, **where) -> tuple[float, float, float]:
    """Paired relative change of strategy a vs b: mean and CI of a/b - 1."""
    x, y = cell(df, metric, a, **where), cell(df, metric, b, **where)
    with np.errstate(divide="ignore", invalid="ignore"):
        return mean_ci(x / y - 1)


def pct(t, digits=1) -> str:
    return fmt_ci(*t, digits=digits, pct=True)


def tally(verdicts: list[tuple[str, str]]) -> str:
    """'3 of 8 cells hold; 5 go the other way' style summary of per-cell verdicts."""
    n = len(verdicts)
    cnt = Counter(v for v, _ in verdicts)
    other = sum(1 for v, r in verdicts if v == NO and "other way" in r)
    parts = [f"{v} in {cnt[v]} of {n} cells" + (f" ({other} going the other way)" if v == NO and other else "")
             for v in (HOLDS, PARTLY, NO) if cnt[v]]
    return "; ".join(parts)


def significant(t, sign) -> bool:
    """Whether a (mean, lo, hi) CI excludes 0 on the side of ``sign``."""
    return (math.isfinite(t[1]) and t[1] > 0) if sign > 0 else (math.isfinite(t[2]) and t[2] < 0)
