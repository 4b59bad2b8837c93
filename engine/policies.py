"""Scheduling and caching policies.

A strategy is a point in a small space of policy parameters (``Policy``): how the
waiting queue is ordered (FCFS or grouped by adapter), whether requests are held
for a batch window, which resident adapter is evicted (LRU, LRU preferring
adapters nobody waits for, Belady), which adapters are pinned, and how loads
interact with compute.  The loop reads these parameters; the two decisions that
differ in code (victim choice, group order) are the jitted functions below.
Adding a strategy is one entry in ``STRATEGIES``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .popularity import popularity

# queue order
ORDER_FCFS, ORDER_GROUPED = 0, 1
# eviction
EVICT_LRU, EVICT_BELADY, EVICT_LRU_IDLE_FIRST = 0, 1, 2


@dataclass(frozen=True)
class Policy:
    name: str
    description: str
    order: int = ORDER_FCFS
    evict: int = EVICT_LRU
    strict_fcfs: bool = False        # stop at the first waiting request that cannot start now
    window: bool = False             # hold arrivals until the next batch-window boundary
    threshold: int = 1               # min waiting requests before loading a non-resident adapter
    pins_hot_set: bool = False       # pin the most popular adapters before t = 0
    preload_all: bool = False        # fill the adapter budget with the most popular, unpinned
    hot_set_mb: float = 0.0          # pin within this many MiB (0: use hot_set_k)
    load_mode: str | None = None     # force "sync"/"async"; None: the scenario's
    memory_mode: str | None = None   # force "static"/"unified"; None: the scenario's
    prefetch: bool = False           # issue loads for queued requests beyond the batch
    cluster: int = 0                 # once the batch holds this many adapters, prefer them
    max_resident: int = 0            # cap on resident adapters (0: memory / max_loras only)
    single_adapter: bool = False     # map all traffic onto adapter 0 (baseline)
    chunked_prefill: bool = False    # the server's default for Scenario.chunked_prefill "auto" (vLLM V1: on)
    #: check a waiting request's adapter before the token and KV budget: one whose adapter cannot join the batch
    #: is passed over even where the budget would have stopped admission (SGLang, docs/model.md 6.5)
    lora_first: bool = False
    #: the default for Scenario.lora_rank_padding "auto" (docs/model.md 5.5): "none" for every strategy, so every
    #: result (and the calibrated vLLM fit, made at "none") stays as it was; vLLM's kernels behave as "max_rank"
    #: (stacked LoRA buffers at --max-lora-rank) and Punica's SGMV takes one rank per batch ("batch_max" when
    #: ranks mix), S-LoRA's MBGMV and LoRAX run each adapter at its own rank ("none")
    lora_rank_padding: str = "none"
    #: the default for Scenario.prefix_caching "auto" (docs/model.md 3.7): the server caches prompt prefixes keyed
    #: by adapter (vLLM V1's prefix caching, SGLang's radix cache: both on by default)
    prefix_caching: bool = False
    #: "policy" (a contender), "bound" (an offline optimum: reported, never a winner) or "baseline"
    #: (a reference point, e.g. a single adapter: reported, never a winner).  Read by engine.rank's callers.
    role: str = "policy"


STRATEGIES: dict[str, Policy] = {p.name: p for p in [
    Policy("naive", "strict FCFS as soon as possible: on a miss load the adapter and evict the least "
           "recently used; the queue head waits for its adapter and blocks those behind it; no grouping "
           "by adapter, no preloading", strict_fcfs=True),
    Policy("hot_set", "pin the hot_set_k most popular adapters before t = 0; the rest swap (LRU) "
           "through the remaining space; FCFS, a request whose adapter cannot get room now is passed "
           "over", pins_hot_set=True),
    Policy("batch", "batch-by-adapter: hold arrivals for batch_window_ms, group them by adapter, "
           "admit whole groups (resident groups first, then oldest; groups older than max_wait_ms "
           "first); evict adapters nobody waits for", order=ORDER_GROUPED, window=True,
           evict=EVICT_LRU_IDLE_FIRST),
    Policy("vllm", "vLLM: FCFS, at most max_loras adapters in the batch, a request whose adapter "
           "cannot get a slot is skipped without blocking others; LRU GPU slots behind an LRU host "
           "cache; loads stall the step; chunked prefill (V1: decodes first, prompts split to fill the "
           "token budget); prompt prefixes cached per adapter (V1 prefix caching)", load_mode="sync",
           chunked_prefill=True, prefix_caching=True),
    Policy("oracle", "Belady's offline-optimal eviction (evict the adapter needed furthest in the "
           "future) on the FCFS order, budget prefilled with the most popular adapters: a lower "
           "bound on loads", evict=EVICT_BELADY, preload_all=True, strict_fcfs=True, role="bound"),
    Policy("slora", "S-LoRA: one unified pool for adapters and KV, asynchronous prefetch of the "
           "adapters of queued requests, FCFS with skip, adapter clustering (prefer adapters "
           "already in the batch once it holds 8)", load_mode="async", memory_mode="unified",
           prefetch=True, cluster=8, evict=EVICT_LRU_IDLE_FIRST),
    Policy("preload_lru", "the budget filled before t = 0 with the most popular adapters, not pinned; "
           "then LRU swaps, FCFS with pass-over (the seed simulator's hot-set, as it most likely worked)",
           preload_all=True),
    # --- the policies of the LoRA/KV interference benchmark (shared/seeds/lora-kv-interference-bench.txt)
    Policy("single_adapter", "baseline: all traffic on one adapter (adapter 0), FCFS, no swaps",
           single_adapter=True, role="baseline"),
    Policy("round_robin_k1", "one resident adapter; strict FCFS, so each change of adapter between "
           "consecutive requests is a swap", max_resident=1, strict_fcfs=True),
    Policy("batch_t4_k2", "switch adapters only when at least 4 requests wait for another one (or its "
           "oldest waited max_wait_ms), two resident; grouped by adapter, no window",
           order=ORDER_GROUPED, threshold=4, max_resident=2, evict=EVICT_LRU_IDLE_FIRST),
    Policy("hotset_32mb", "the most popular adapters pinned within 32 MiB taken from the KV budget; "
           "the rest swap (LRU); FCFS", hot_set_mb=32.0),
    Policy("hotset_64mb", "as hotset_32mb within 64 MiB", hot_set_mb=64.0),
    Policy("hotset_batch_t4", "hotset_32mb plus batch_t4 grouping (threshold 4) for the others",
           hot_set_mb=32.0, order=ORDER_GROUPED, threshold=4, evict=EVICT_LRU_IDLE_FIRST),
    Policy("sglang", "SGLang: FCFS; a request whose adapter would take the batch (running and new requests) "
           "past max_loras distinct adapters (--max-loras-per-batch) is passed over, checked before the token "
           "and KV budget; a GPU pool of max_loras slots, the least recently used adapter outside the batch "
           "evicted (--lora-eviction-policy lru), behind an LRU host cache (max_cpu_loras: --max-loaded-loras); "
           "loads stall the step; no chunked prefill by default (each prompt prefilled whole); prompt prefixes "
           "cached per adapter (radix cache)", load_mode="sync", memory_mode="static", lora_first=True,
           prefix_caching=True),
]}


def contenders_excluded(strategies) -> list[str]:
    """The strategies among ``strategies`` that never win a comparison: bounds and baselines."""
    return [s for s in strategies if STRATEGIES[s].role != "policy"]


def hot_set_pins(sc, auto: bool = False) -> list[int]:
    """Adapter ids to pin, most popular first.

    Auto: as many as fit in the adapter budget while leaving room for one more
    adapter of the largest size (the swap slot), and under max_loras - 1 slots.
    """
    pol = STRATEGIES[sc.strategy]
    sizes = sc.adapter_sizes()
    order = np.argsort(-popularity(sc), kind="stable")
    if pol.hot_set_mb > 0:
        cap = pol.hot_set_mb * 1024 ** 2
        spare = 0
    else:
        cap = sc.vram_budget_gb * 1024 ** 3
        spare = sc.max_adapter_bytes()
    slot_cap = sc.max_loras - 1 if sc.max_loras > 0 else len(sizes)
    pins, used = [], 0
    for a in order:
        if len(pins) >= slot_cap or used + sizes[a] + spare > cap:
            break
        pins.append(int(a))
        used += sizes[a]
    if not auto and sc.hot_set_k >= 0 and pol.hot_set_mb == 0:
        pins = pins[: sc.hot_set_k]
    return pins


def belady_lists(adapter: np.ndarray, num_adapters: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each adapter's requests in stream order, as Belady's ``next_use`` reads them (CSR): (request indices grouped
    by adapter, each adapter's start, its end).  Only EVICT_BELADY reads them (a sort of the whole stream)."""
    order = np.argsort(adapter, kind="stable").astype(np.int64)
    counts = np.bincount(adapter, minlength=num_adapters)
    ptr = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return order, ptr, ptr + counts


@njit(cache=True, nogil=True, _nrt=False)
def next_use(a, a_cur, a_ptr, a_end, a_list, status):
    """Index of the next request for adapter ``a`` that has not started (Belady)."""
    c = a_cur[a]
    while c < a_end[a] and status[a_list[c]] >= 2:
        c += 1
    a_cur[a] = c
    if c < a_end[a]:
        return a_list[c]
    return 1 << 62


@njit(cache=True, nogil=True, _nrt=False)
def pick_victim(evict, need_idle, res_list, n_res, state, pinned, ref, wait, last,
                a_cur, a_ptr, a_end, a_list, status, exclude):
    """Resident adapter to evict, or -1.  Never one in use, loading, pinned or ``exclude``.

    need_idle: only adapters no waiting request asks for.
    """
    best = -1
    best_key = 0.0
    best_idle = -1
    best_idle_key = 0.0
    for j in range(n_res):
        a = res_list[j]
        if state[a] != 2 or pinned[a] != 0 or ref[a] != 0 or a == exclude:
            continue
        idle = wait[a] == 0
        if need_idle and not idle:
            continue
        if evict == EVICT_BELADY:
            key = -float(next_use(a, a_cur, a_ptr, a_end, a_list, status))
        else:
            key = float(last[a])
        if best < 0 or key < best_key:
            best = a
            best_key = key
        if idle and (best_idle < 0 or key < best_idle_key):
            best_idle = a
            best_idle_key = key
    if evict == EVICT_LRU_IDLE_FIRST and best_idle >= 0:
        return best_idle
    return best


@njit(cache=True, nogil=True, _nrt=False)
def group_class(starving, resident):
    """Class of an adapter group for ORDER_GROUPED: 0 starving, 1 resident, 2 the others (oldest first in each)."""
    if starving:
        return 0
    if resident:
        return 1
    return 2


#: ``group_key``'s weight of a group's class: far above any arrival time in seconds, so the class is read back off
#: the key (``loop._partition_groups``).
GROUP_CLASS_SCALE = 1e12


@njit(cache=True, nogil=True, _nrt=False)
def group_key(starving, resident, oldest_arrival_s):
    """Order of adapter groups for ORDER_GROUPED: starving, then resident, then oldest."""
    return float(group_class(starving, resident)) * GROUP_CLASS_SCALE + oldest_arrival_s
