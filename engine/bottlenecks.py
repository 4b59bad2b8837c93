"""Root causes in plain language: what limits a run, from its own measures.

Each cause is a rule on the summary (8) and the time series (9) of one run, over the measurement
window, with the numbers that triggered it in its sentence.  The rules are deliberately few and
coarse; every rule has a test on a scenario built to show it (tests/test_causes.py).

* ``pcie``: the host-to-GPU link is busy at least ``PCIE_BUSY`` of the time and loads make up a
  real share of TTFT — loads queue behind each other on the link.
* ``loads``: loads make up at least ``LOAD_SHARE`` of TTFT but the link is not saturated: misses
  (the swap rate), not the link, cost the time.
* ``kv``: KV memory is nearly full (time-mean occupancy at least ``KV_FULL``) while requests wait,
  or admissions were refused / requests preempted for lack of KV.
* ``slots``: every adapter slot (``max_loras``, or the policy's cap) is held most of the time while
  requests wait: requests of other adapters cannot start.
* ``compute``: the GPU runs steps back to back (busy at least ``GPU_BUSY``) with a queue: it is
  the bottleneck (memory-bandwidth-bound decode keeps ``gpu_busy_frac`` near 1 even at light load,
  so the queue is required too).
* ``light``: none of the above and queueing at most ``QUEUE_SHARE_LIGHT`` of TTFT — TTFT is mostly
  the step that prefills the request; ``mixed``: none of the above, but queueing is a larger share.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .policies import STRATEGIES

PCIE_BUSY = 0.5
LOAD_SHARE = 0.2
KV_FULL = 0.9
SLOTS_FULL = 0.9
GPU_BUSY = 0.95
QUEUE_MIN = 1.0
QUEUE_SHARE_LIGHT = 0.3


@dataclass(frozen=True)
class Cause:
    key: str        # "pcie", "loads", "kv", "slots", "compute", "light", "mixed"
    message: str


def _window(ts: pd.DataFrame, warmup_s: float, duration_s: float) -> pd.DataFrame:
    w = ts[(ts["t_s"] >= warmup_s) & (ts["t_s"] < duration_s)]
    return w if len(w) else ts


def run_causes(result) -> list[Cause]:
    """The causes of one ``SimResult`` (its summary, time series and scenario)."""
    sc = result.scenario
    return causes(result.summary, result.timeseries, sc.warmup_s, sc.duration_s, effective_slots(sc))


def causes(summary: dict, timeseries: pd.DataFrame, warmup_s: float, duration_s: float,
           slots: int = 0) -> list[Cause]:
    """The causes that apply to one run, strongest first (``light`` alone when none does).

    ``slots``: the run's GPU adapter slots (0: limited by memory only; the slots rule then does not apply).
    """
    w = _window(timeseries, warmup_s, duration_s)
    queue = float(w["queue_len"].mean()) if len(w) else 0.0
    out: list[Cause] = []
    pcie = float(summary.get("pcie_busy_frac", 0.0))
    load_share = float(summary.get("swap_share_of_ttft", 0.0))
    if pcie >= PCIE_BUSY and load_share >= LOAD_SHARE:
        out.append(Cause("pcie", f"PCIe link {pcie:.0%} busy: adapter loads queue behind each other "
                                 f"({load_share:.0%} of TTFT is waiting for loads)"))
    elif load_share >= LOAD_SHARE:
        swap = float(summary.get("swap_rate", 0.0))
        out.append(Cause("loads", f"Adapter loads are {load_share:.0%} of TTFT: {swap:.0%} of requests bring their "
                                  f"adapter to the GPU (the link is busy {pcie:.0%} of the time)"))
    kv = float(w["kv_used_frac"].mean()) if len(w) else 0.0
    refused = int(summary.get("rejections", 0)) + int(summary.get("preemptions", 0))
    if (kv >= KV_FULL and queue >= QUEUE_MIN) or refused > 0:
        extra = []
        if summary.get("rejections"):
            extra.append(f"{summary['rejections']:,} admissions refused for memory")
        if summary.get("preemptions"):
            extra.append(f"{summary['preemptions']:,} preemptions")
        out.append(Cause("kv", f"KV memory full ({kv:.0%} used on average): admissions wait for memory"
                               + (f" ({', '.join(extra)})" if extra else "")))
    if slots > 0 and len(w):
        full = float((w["resident_adapters"] + w["loads_in_flight"] >= SLOTS_FULL * slots - 1e-9).mean())
        if full >= SLOTS_FULL and queue >= QUEUE_MIN:
            out.append(Cause("slots", f"Adapter slots exhausted: all {slots} held {full:.0%} of the time while "
                                      f"{queue:.1f} requests wait on average"))
    gpu = float(summary.get("gpu_busy_frac", 0.0))
    if gpu >= GPU_BUSY and queue >= QUEUE_MIN and not out:
        out.append(Cause("compute", f"GPU compute-bound: busy {gpu:.0%} with {queue:.1f} requests queued on "
                                    f"average"))
    if not out:
        q = summary.get("queue_mean_ms", math.nan)
        t = summary.get("ttft_mean_ms", math.nan)
        share = q / t if t and math.isfinite(q) and math.isfinite(t) and t > 0 else 0.0
        if share <= QUEUE_SHARE_LIGHT:
            out.append(Cause("light", f"No bottleneck: queueing is {share:.0%} of TTFT; the rest is the load and "
                                      f"the prefill step"))
        else:
            out.append(Cause("mixed", f"Queueing is {share:.0%} of TTFT without one dominant resource (GPU busy "
                                      f"{gpu:.0%}, PCIe link busy {pcie:.0%}, {queue:.1f} requests queued on "
                                      f"average)"))
    return out


def effective_slots(scenario) -> int:
    """The run's GPU adapter slots for the ``slots`` rule (``max_loras`` or the policy's cap; 0 if none)."""
    pol = STRATEGIES[scenario.strategy]
    s = scenario.max_loras
    if pol.max_resident:
        s = pol.max_resident if s == 0 else min(s, pol.max_resident)
    return int(s)

