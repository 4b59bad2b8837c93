"""The event loop: iteration-level continuous batching on one GPU, one jitted function.

State lives in preallocated arrays laid out as struct of arrays: ``R_i[field, r]``
(per request), ``A_i[field, a]`` (per adapter), ``S_i``/``S_f`` (scalars), an
array-backed min-heap of asynchronous load completions, and time-series
accumulators.  Each iteration: ingest arrivals and finished loads, schedule
(admit waiting requests whose adapter and KV fit, issuing loads and evictions),
run one step (prefill of the admitted, one decode token for the others), retire
finished requests.  See docs/model.md for the equations.

Every function here is compiled without Numba's reference counting (``_nrt=False``): nothing in the loop
allocates (scratch comes in ``wf`` / ``wi``), and with it on, the atomic increments and decrements of the
array arguments of every helper call took about a third of the loop's time (perf, engine 0.5).
tests/test_fast_paths.py checks that every jitted function of the loop, the fleet and their callees is declared
so (Numba then refuses to compile an allocation in any of them).

The helpers run on every iteration (``_decode_run``, ``_grow_kv``, ``_fill_row``, ``_step_dt``) are declared
``inline="always"``: Numba passes each array argument of a call as its seven to nine fields (``_decode_run`` took
17 arrays, about 130 words a call) and LLVM did not inline them; inlined, the default scenario's loop took about a
third less time (bench/README.md).  ``_try_admit`` stays a call (inlined at its three sites the loop was slower).

Constant arguments of jitted callees are passed as ``np.int64(...)`` / ``np.bool_(...)`` where the callee is
also called with other values: Numba compiles one specialization per literal value (bench/cold_start.py counts
them), and those copies of ``_try_admit``, ``accum``, ``pick_victim`` and ``_event`` were compile time only.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .costs import kernel_step_seconds, step_seconds
from .kernels import DENSE_OPS, PARAM_NAMES
from .memory import ext_alloc, ext_free, fragmentation
from .policies import EVICT_LRU_IDLE_FIRST, GROUP_CLASS_SCALE, ORDER_GROUPED, group_key, pick_victim

# ---- integer parameters (ip)
(IP_N, IP_A, IP_MAX_BATCH, IP_MAX_TOKENS, IP_SLOTS, IP_HOST_CAP, IP_KV_BLOCKS,
 IP_ORDER, IP_EVICT, IP_STRICT, IP_WINDOW, IP_THRESHOLD, IP_ASYNC, IP_UNIFIED, IP_PREFETCH,
 IP_CLUSTER, IP_CLOSED, IP_CONC, IP_FIXED, IP_SCAN, IP_NBUCKETS, IP_MAX_EVENTS, IP_PAD_SLOTS,
 IP_CONTIG, IP_ARENA, IP_MEAN_BLOCKS, IP_FASTSKIP, IP_ONDEMAND, IP_BLOCK_TOK, IP_MAX_INSYS,
 IP_CHUNKED,  # chunked prefill (vLLM V1): decode tokens count against the budget, long prompts are split
 IP_DECODE_RUN,  # advance runs of pure-decode steps in _decode_run (0: one iteration per step, the reference)
 IP_LORA_PAD,  # LoRA rank padding (LORA_PAD_*; Scenario.lora_rank_padding, docs/model.md 5.5)
 IP_QUIET,  # fleet: leave a replica behind while the router's view of it cannot change (fleet.py; 0: never)
 IP_MAX_STEPS,  # the step budget (sim.step_budget): a run past it stops with FLAG_BUDGET (a guard, never reached)
 IP_LORA_FIRST,  # Policy.lora_first (SGLang): the adapter's slot is checked before the token and KV budget (0: after)
 IP_PCACHE,  # prefix caching keyed by adapter runs (engine/prefix.py, docs/model.md 3.7; 0: off, the loop as before)
 IP_RUN_GROW,  # on-demand KV: decode runs add the blocks _grow_kv would (0: a run stops at the first one needed)
 IP_BLOCKED_RUN,  # decode runs while requests wait that the last pass could not start (SI_BLOCKED; 0: never, the reference)
 IP_MAXBLK,  # the most KV blocks any request can ask for at admission: (prompt + output + block) // block
 IP_QCOMPACT,  # drop finished requests from the wait queue once the scan walks more of them than it scans (0: never)
 IP_GPART,  # grouped scan: groups in arrival order are ordered by a stable partition by class (0: the merge sort)
 IP_LEN) = range(43)
# ---- float parameters (fp)
(FP_DURATION, FP_HORIZON, FP_WINDOW, FP_MAX_WAIT, FP_PCIE_BPS, FP_DISK_BPS, FP_LOAD_LAT,
 FP_DISK_LAT, FP_ADAPTER_CAP, FP_POOL, FP_BLOCK_BYTES, FP_WEIGHT_BYTES, FP_PARAMS, FP_FLOPS,
 FP_BW, FP_ATTN, FP_KV_TOK, FP_OVERHEAD, FP_LORA_ADAPTER, FP_LORA_SLOT, FP_PREFILL_TOK,
 FP_DECODE_STEP, FP_BUCKET, FP_WARMUP, FP_LORA_TOKSLOT,
 # lora_rank_padding "max_rank": the bytes of the largest adapter configured (every request's LoRA cost pads to it)
 FP_LORA_PAD_BYTES,
 # the smallest adapter's GPU bytes (static memory: once no room can be made for it, none can for any adapter)
 FP_MIN_ADAPTER,
 # Scenario.cost_scale: every step's seconds times it (1.0: unchanged, bit for bit)
 FP_COST_SCALE,
 # cost_model "kernel" (docs/model.md 5.4): on/off, layers, the spec sheet's peak FLOP/s and HBM bytes/s (no
 # compute_eff / bw_eff), vocabulary and hidden size (the LM head), then FP_KPARAMS: kernels.param_array()
 # (len(PARAM_NAMES) slots) and FP_DENSE_N / FP_DENSE_K: kernels.dense_dims(model, 1) (len(DENSE_OPS) slots each)
 FP_KERNEL, FP_N_LAYERS, FP_PEAK_FLOPS, FP_PEAK_BW, FP_VOCAB, FP_HIDDEN, FP_KPARAMS) = range(35)
FP_DENSE_N = FP_KPARAMS + len(PARAM_NAMES)
FP_DENSE_K = FP_DENSE_N + len(DENSE_OPS)
# tensor parallelism (docs/model.md 5.7): the all-reduces of one step, seconds per step and per token in it (0 at tp 1)
FP_DENSE_END = FP_DENSE_K + len(DENSE_OPS)
FP_AR_STEP = FP_DENSE_END
FP_AR_TOK = FP_AR_STEP + 1
FP_LEN = FP_AR_TOK + 1
# ---- per-request ints / floats
(RI_ADAPTER, RI_PROMPT, RI_OUTPUT, RI_STATUS, RI_GEN, RI_LOADED, RI_TIER, RI_BLOCKS, RI_NEXT, RI_KVSTART,
 RI_REJECTED, RI_PF, RI_WQPOS, RI_ADMSEQ, RI_PREEMPTED,
 # chunked prefill: tokens of its current prefill (prompt, + generated when recomputed) done in earlier
 # steps; > 0 only while that prefill is unfinished (0 again once its first/next token is emitted)
 RI_PFDONE,
 # prefix cache (IP_PCACHE): tokens of the shared prefix its prompt starts with (0: none); blocks it shares from its
 # adapter's cached entry (not in RI_BLOCKS); tokens of its current prefill served from the cache; those of its
 # first admission (the summary's cached prompt tokens)
 RI_PFX, RI_SHARED, RI_CACHED, RI_PCHIT, RI_LEN) = range(21)
# RF_C0: cumulative sync load stall when the request arrived; RF_QSTALL: the stall it spent queued
RF_ARR, RF_ADMIT, RF_FIRST, RF_FINISH, RF_LOADWAIT, RF_C0, RF_QSTALL, RF_LEN = range(8)
# ---- per-adapter ints / floats
(AI_BYTES, AI_STATE, AI_PINNED, AI_REF, AI_WAIT, AI_HOST, AI_HOSTLAST, AI_LAST, AI_RESPOS,
 AI_CUR, AI_PTR, AI_END, AI_GMARK, AI_GHEAD, AI_GTAIL, AI_GCOUNT, AI_MEMBYTES, AI_EXTSTART,
 # prefix cache: blocks of the adapter's cached prefix entry (0: none), running requests sharing it, its last use
 AI_PCBLOCKS, AI_PCUSERS, AI_PCLAST, AI_LEN) = range(22)
AF_READY, AF_LOADSTART, AF_GOLDEST, AF_LEN = range(4)
# ---- scalar state
# Resumable loop (engine/fleet.py): SI_WQHEAD, SI_NEXTARR, SF_T hold the loop's position between calls;
# SI_PHASE how the last call ended (PH_*); with SI_FLEET set, only the first SI_NKNOWN requests have
# arrived (more are injected between calls, in time order) and a call stops before any iteration at
# t >= SF_TLIMIT (SF_WAKE: the next known event of a replica paused idle).  SI_FLEET = 0 (what
# sim._build gives) is the single-GPU run: every request known, no time limit.
(SI_NRUN, SI_NWAIT, SI_KV_BLOCKS, SI_NRES, SI_NLOADING, SI_TICK, SI_HOSTCOUNT, SI_NDISTINCT,
 SI_LOADS, SI_DISK_LOADS, SI_EVICTS, SI_NEV, SI_STEPS, SI_FLAGS, SI_NISSUED, SI_REJECTS, SI_HEAPN,
 SI_WQTAIL, SI_NFREE, SI_COMPACTS, SI_PREEMPTS, SI_DROPS, SI_LASTDONE,
 SI_WQHEAD, SI_NEXTARR, SI_NKNOWN, SI_PHASE, SI_FLEET,
 # prefill tokens processed, prefill pieces (a request's prefill in one step), most tokens (prefill + decode) in a step;
 # running requests whose prefill is unfinished (RI_PFDONE > 0; chunked prefill)
 SI_PFTOKENS, SI_PFCHUNKS, SI_PEAKTOK, SI_NPART,
 # prefix cache: blocks held by cached entries (in SI_KV_BLOCKS), of those the idle ones (nobody running uses them:
 # evictable), tokens served from the cache (every admission), hit admissions, entries evicted, entries made
 SI_PCBLOCKS, SI_PCIDLE, SI_PCTOK, SI_PCHITS, SI_PCEVICTS, SI_PCMADE,
 # the last scheduling pass admitted nobody and changed nothing, while requests waited (_decode_run may go on past it);
 # scheduling passes made (the other steps were decode runs': bench and tests read it)
 SI_BLOCKED, SI_PASSES, SI_LEN) = range(41)
(SF_PCIE_FREE, SF_DISK_FREE, SF_ADAPTER_BYTES, SF_BUSY, SF_END_T, SF_PEAK_ADAPTER, SF_PEAK_KV,
 SF_PEAK_TOTAL, SF_STALL, SF_FRAG_INT, SF_COMPACT_BYTES, SF_TOKENS_WIN, SF_LORA_BYTES,
 # PCIe link busy seconds in the window; cumulative sync load stall; the last stall [SF_STALLB, SF_STALLE)
 SF_PCIE_BUSY, SF_QSTALL, SF_STALLB, SF_STALLE,
 SF_T, SF_TLIMIT, SF_WAKE,
 # static memory, within one scheduling pass: the smallest adapter for which no room could be made (nothing
 # was evictable), so no adapter that large can get room until the pass ends (_try_admit skips the search)
 SF_NOROOM,
 # SI_BLOCKED: the arrival of the first request that pass's window cutoff held back (_INF: none it could reach), and
 # the oldest group's arrival among the groups not starving (_INF: none)
 SF_QNEXT, SF_QGOLD, SF_LEN) = range(24)
# ---- how a call of run_loop ended: not started yet, paused before an iteration at t >= the limit,
# paused idle (its next known event is after the limit), finished
PH_FRESH, PH_TOP, PH_IDLE, PH_DONE = 0, 1, 2, 3
# ---- LoRA rank padding (IP_LORA_PAD): each request's own adapter; the largest adapter in the step's batch;
# the largest adapter configured (FP_LORA_PAD_BYTES)
LORA_PAD_NONE, LORA_PAD_BATCH_MAX, LORA_PAD_MAX_RANK = 0, 1, 2
# ---- request status
ST_FUTURE, ST_WAITING, ST_RUNNING, ST_DONE, ST_DROPPED = 0, 1, 2, 3, 4
# ---- adapter GPU state
AS_ABSENT, AS_LOADING, AS_RESIDENT = 0, 1, 2
# ---- tiers
TIER_GPU, TIER_CPU, TIER_DISK = 0, 1, 2
# ---- flags
FLAG_HORIZON, FLAG_DEADLOCK, FLAG_EXHAUSTED, FLAG_EVENTS_FULL, FLAG_BUDGET = 1, 2, 4, 8, 16
# ---- time series columns
(TS_QUEUE, TS_BATCH, TS_RESIDENT, TS_LOADS, TS_KV_FRAC, TS_BUSY, TS_IN_SYSTEM, TS_ADAPTER_BYTES,
 TS_KV_BYTES, TS_FRAG, TS_PCIE,
 TS_PCBLOCKS,  # KV blocks held by cached prefix entries (in use or idle)
 TS_LEN) = range(13)
# ---- events
EV_LOAD, EV_EVICT, EV_COMPACT, EV_REJECT = 0, 1, 2, 3

_INF = 1e300


def scratch_sizes(max_batch_size: int, num_adapters: int, scan: int) -> tuple[int, int]:
    """Lengths of run_loop's scratch ``wf`` (the time-series row, then sort keys) and ``wi`` (compaction:
    five stretches of max_batch_size + num_adapters; sorting: three of ``scan`` = IP_SCAN, the most groups)."""
    return TS_LEN + scan, max(5 * (max_batch_size + num_adapters), 3 * scan)


@njit(cache=True, nogil=True, _nrt=False)
def heap_push(ht, ha, n, t, a):
    i = n
    ht[i] = t
    ha[i] = a
    while i > 0:
        p = (i - 1) >> 1
        if ht[p] <= ht[i]:
            break
        ht[p], ht[i] = ht[i], ht[p]
        ha[p], ha[i] = ha[i], ha[p]
        i = p
    return n + 1


@njit(cache=True, nogil=True, _nrt=False)
def heap_pop(ht, ha, n):
    """Remove the minimum; returns the new size (min is at index 0 before the call)."""
    n -= 1
    ht[0] = ht[n]
    ha[0] = ha[n]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        c = left
        if left + 1 < n and ht[left + 1] < ht[left]:
            c = left + 1
        if ht[i] <= ht[c]:
            break
        ht[c], ht[i] = ht[i], ht[c]
        ha[c], ha[i] = ha[i], ha[c]
        i = c
    return n


@njit(cache=True, nogil=True, _nrt=False)
def accum(ts, bucket_s, nb, t0, t1, col, value):
    """Add value * overlap of [t0, t1) with each bucket to ts[b, col]."""
    if t1 <= t0 or value == 0.0 or t0 >= nb * bucket_s:  # (past the last bucket: no int overflow below)
        return
    b = int(t0 / bucket_s)
    while b < nb:
        lo = b * bucket_s
        hi = lo + bucket_s
        s = t0 if t0 > lo else lo
        e = t1 if t1 < hi else hi
        if e > s:
            ts[b, col] += value * (e - s)
        if t1 <= hi:
            break
        b += 1


@njit(cache=True, nogil=True, _nrt=False)
def accum_row(ts, bucket_s, nb, t0, t1, vals):
    """Add vals[c] * overlap of [t0, t1) with each bucket to ts[b, c], for every column at once."""
    if t1 <= t0 or t0 >= nb * bucket_s:  # (past the last bucket: no int overflow below)
        return
    b = int(t0 / bucket_s)
    nc = vals.shape[0]
    while b < nb:
        lo = b * bucket_s
        hi = lo + bucket_s
        s = t0 if t0 > lo else lo
        e = t1 if t1 < hi else hi
        if e > s:
            w = e - s
            for c in range(nc):
                if vals[c] != 0.0:
                    ts[b, c] += vals[c] * w
        if t1 <= hi:
            break
        b += 1


@njit(cache=True, nogil=True, _nrt=False)
def _argsort(key, n, order, tmp):
    """order[:n] = the stable argsort of key[:n] (bottom-up merge sort; tmp[:n]: scratch): what
    ``np.argsort(key[:n], kind="stable")`` returns, without allocating."""
    for i in range(n):
        order[i] = i
    src_is_order = True
    width = 1
    while width < n:
        src = order if src_is_order else tmp
        dst = tmp if src_is_order else order
        lo = 0
        while lo < n:
            mid = lo + width if lo + width < n else n
            hi = lo + 2 * width if lo + 2 * width < n else n
            a = lo
            b = mid
            o = lo
            while a < mid and b < hi:
                if key[src[b]] < key[src[a]]:
                    dst[o] = src[b]
                    b += 1
                else:
                    dst[o] = src[a]
                    a += 1
                o += 1
            while a < mid:
                dst[o] = src[a]
                a += 1
                o += 1
            while b < hi:
                dst[o] = src[b]
                b += 1
                o += 1
            lo += 2 * width
        src_is_order = not src_is_order
        width *= 2
    if not src_is_order:
        for i in range(n):
            order[i] = tmp[i]


@njit(cache=True, nogil=True, _nrt=False)
def _sort_groups(key, items, n, wf, wi):
    """Sort items[:n] by key[:n] in place (stable): insertion sort for the usual few groups, else a merge
    sort in the scratch arrays (``wf`` / ``wi`` past the time-series row: loop scratch, see run_loop)."""
    if n > 48:
        order = wi[:n]
        _argsort(key, n, order, wi[n:2 * n])
        k2 = wf[TS_LEN:TS_LEN + n]
        i2 = wi[2 * n:3 * n]
        for j in range(n):
            k2[j] = key[order[j]]
            i2[j] = items[order[j]]
        for j in range(n):
            key[j] = k2[j]
            items[j] = i2[j]
        return
    for i in range(1, n):
        k = key[i]
        v = items[i]
        j = i - 1
        while j >= 0 and key[j] > k:
            key[j + 1] = key[j]
            items[j + 1] = items[j]
            j -= 1
        key[j + 1] = k
        items[j + 1] = v


@njit(cache=True, nogil=True, _nrt=False)
def _partition_groups(key, items, n, tmp):
    """Reorder items[:n] by the class in key[:n] (``group_key``: class x GROUP_CLASS_SCALE + oldest arrival, the
    arrival far below it), keeping their order within a class (``tmp[:n]``: scratch): the stable sort by
    ``group_key`` when the items are already ordered by its second part, their oldest arrival."""
    n0 = 0
    n1 = 0
    for j in range(n):
        if key[j] < GROUP_CLASS_SCALE:
            n0 += 1
        elif key[j] < 2.0 * GROUP_CLASS_SCALE:
            n1 += 1
    p0 = 0
    p1 = n0
    p2 = n0 + n1
    for j in range(n):
        c = 0 if key[j] < GROUP_CLASS_SCALE else (1 if key[j] < 2.0 * GROUP_CLASS_SCALE else 2)
        if c == 0:
            tmp[p0] = items[j]
            p0 += 1
        elif c == 1:
            tmp[p1] = items[j]
            p1 += 1
        else:
            tmp[p2] = items[j]
            p2 += 1
    for j in range(n):
        items[j] = tmp[j]


@njit(cache=True, nogil=True, _nrt=False)
def _window_add(S_f, k, t0, t1, w0, w1, value):
    """S_f[k] += value x overlap of [t0, t1) with the measurement window [w0, w1)."""
    lo = t0 if t0 > w0 else w0
    hi = t1 if t1 < w1 else w1
    if hi > lo:
        S_f[k] += value * (hi - lo)


@njit(cache=True, nogil=True, _nrt=False)
def _event(S_i, ev_t, ev_i, max_ev, t, kind, a, nbytes):
    k = S_i[SI_NEV]
    if k < max_ev:
        ev_t[k] = t
        ev_i[0, k] = kind
        ev_i[1, k] = a
        ev_i[2, k] = nbytes
        S_i[SI_NEV] = k + 1
    else:
        S_i[SI_FLAGS] |= FLAG_EVENTS_FULL


@njit(cache=True, nogil=True, _nrt=False)
def _res_add(A_i, res_list, S_i, a):
    n = S_i[SI_NRES]
    res_list[n] = a
    A_i[AI_RESPOS, a] = n
    S_i[SI_NRES] = n + 1


@njit(cache=True, nogil=True, _nrt=False)
def _res_remove(A_i, res_list, S_i, a):
    n = S_i[SI_NRES] - 1
    p = A_i[AI_RESPOS, a]
    last = res_list[n]
    res_list[p] = last
    A_i[AI_RESPOS, last] = p
    A_i[AI_RESPOS, a] = -1
    S_i[SI_NRES] = n


@njit(cache=True, nogil=True, _nrt=False)
def _evict(ip, fp, A_i, S_i, S_f, res_list, fl, ev_t, ev_i, t, a):
    _res_remove(A_i, res_list, S_i, a)
    A_i[AI_STATE, a] = AS_ABSENT
    S_f[SF_ADAPTER_BYTES] -= A_i[AI_MEMBYTES, a]
    if ip[IP_CONTIG] and ip[IP_UNIFIED]:
        S_i[SI_NFREE] = ext_free(fl, S_i[SI_NFREE], A_i[AI_EXTSTART, a],
                                 A_i[AI_MEMBYTES, a] // int(fp[FP_BLOCK_BYTES]))
        A_i[AI_EXTSTART, a] = -1
    S_i[SI_EVICTS] += 1
    _event(S_i, ev_t, ev_i, ip[IP_MAX_EVENTS], t, np.int64(EV_EVICT), a, A_i[AI_BYTES, a])


@njit(cache=True, nogil=True, _nrt=False)
def _adapter_room(ip, fp, A_i, S_i, S_f, a, extra):
    """Does adapter a fit now (slots and bytes), with ``extra`` bytes of KV still to come (unified)?"""
    if ip[IP_SLOTS] > 0 and S_i[SI_NRES] >= ip[IP_SLOTS]:
        return False
    used = S_f[SF_ADAPTER_BYTES] + A_i[AI_MEMBYTES, a]
    if ip[IP_UNIFIED]:
        return used + S_i[SI_KV_BLOCKS] * fp[FP_BLOCK_BYTES] + extra <= fp[FP_POOL]
    return used <= fp[FP_ADAPTER_CAP]


@njit(cache=True, nogil=True, _nrt=False)
def _make_room(ip, fp, R_i, A_i, S_i, S_f, res_list, a_list, fl, ev_t, ev_i, t, a, need_idle, extra):
    """Evict until adapter a (plus ``extra`` KV bytes in unified memory) fits; False if it cannot."""
    while not _adapter_room(ip, fp, A_i, S_i, S_f, a, extra):
        v = pick_victim(ip[IP_EVICT], need_idle, res_list, S_i[SI_NRES], A_i[AI_STATE], A_i[AI_PINNED],
                        A_i[AI_REF], A_i[AI_WAIT], A_i[AI_LAST], A_i[AI_CUR], A_i[AI_PTR], A_i[AI_END],
                        a_list, R_i[RI_STATUS], a)
        if v < 0:
            return False
        _evict(ip, fp, A_i, S_i, S_f, res_list, fl, ev_t, ev_i, t, v)
    return True


@njit(cache=True, nogil=True, _nrt=False)
def _host_touch(ip, A_i, S_i, a):
    """Bring adapter a into the LRU host cache (evicting the LRU host entry)."""
    S_i[SI_TICK] += 1
    if A_i[AI_HOST, a] == 0:
        cap = ip[IP_HOST_CAP]
        if cap > 0 and S_i[SI_HOSTCOUNT] >= cap:
            victim = -1
            best = 0
            for b in range(ip[IP_A]):
                if A_i[AI_HOST, b] == 1 and (victim < 0 or A_i[AI_HOSTLAST, b] < best):
                    victim = b
                    best = A_i[AI_HOSTLAST, b]
            A_i[AI_HOST, victim] = 0
            S_i[SI_HOSTCOUNT] -= 1
        A_i[AI_HOST, a] = 1
        S_i[SI_HOSTCOUNT] += 1
    A_i[AI_HOSTLAST, a] = S_i[SI_TICK]


@njit(cache=True, nogil=True, _nrt=False)
def _issue_load(ip, fp, R_i, A_i, S_i, S_f, A_f, res_list, running, fl, heap_t, heap_a, ev_t, ev_i, ts, t, a, wi):
    """Start loading adapter a (room already made). Returns its completion time."""
    nbytes = A_i[AI_BYTES, a]
    ready = t
    if A_i[AI_HOST, a] == 0:  # disk -> host first
        s = S_f[SF_DISK_FREE] if S_f[SF_DISK_FREE] > t else t
        ready = s + fp[FP_DISK_LAT] + nbytes / fp[FP_DISK_BPS]
        S_f[SF_DISK_FREE] = ready
        S_i[SI_DISK_LOADS] += 1
    _host_touch(ip, A_i, S_i, a)
    s = S_f[SF_PCIE_FREE] if S_f[SF_PCIE_FREE] > ready else ready
    done = s + fp[FP_LOAD_LAT] + nbytes / fp[FP_PCIE_BPS]
    S_f[SF_PCIE_FREE] = done
    # the link is busy over [s, done) (FIFO: transfers never overlap)
    accum(ts, fp[FP_BUCKET], ip[IP_NBUCKETS], s, done, np.int64(TS_PCIE), 1.0)
    lo = s if s > fp[FP_WARMUP] else fp[FP_WARMUP]
    hi = done if done < fp[FP_DURATION] else fp[FP_DURATION]
    if hi > lo:
        S_f[SF_PCIE_BUSY] += hi - lo
    _res_add(A_i, res_list, S_i, a)
    S_f[SF_ADAPTER_BYTES] += A_i[AI_MEMBYTES, a]
    if ip[IP_CONTIG] and ip[IP_UNIFIED]:
        A_i[AI_EXTSTART, a] = -1  # not placed yet: a compaction inside _ext_take must skip it
        A_i[AI_EXTSTART, a] = _ext_take(ip, fp, R_i, A_i, S_i, S_f, running, res_list, fl, ev_t, ev_i, t,
                                        A_i[AI_MEMBYTES, a] // int(fp[FP_BLOCK_BYTES]), wi)
    A_f[AF_LOADSTART, a] = t
    A_f[AF_READY, a] = done
    S_i[SI_LOADS] += 1
    _event(S_i, ev_t, ev_i, ip[IP_MAX_EVENTS], t, np.int64(EV_LOAD), a, nbytes)
    if ip[IP_ASYNC]:
        A_i[AI_STATE, a] = AS_LOADING
        S_i[SI_NLOADING] += 1
        S_i[SI_HEAPN] = heap_push(heap_t, heap_a, S_i[SI_HEAPN], done, a)
    else:
        A_i[AI_STATE, a] = AS_RESIDENT
    return done


@njit(cache=True, nogil=True, _nrt=False)
def _reject(ip, fp, R_i, S_i, ev_t, ev_i, t, r):
    """Count a request refused admission for lack of KV memory (once per request)."""
    if R_i[RI_REJECTED, r] == 0:
        R_i[RI_REJECTED, r] = 1
        S_i[SI_REJECTS] += 1
        _event(S_i, ev_t, ev_i, ip[IP_MAX_EVENTS], t, np.int64(EV_REJECT), R_i[RI_ADAPTER, r],
               R_i[RI_BLOCKS, r] * int(fp[FP_BLOCK_BYTES]))


@njit(cache=True, nogil=True, _nrt=False)
def _compact(ip, fp, R_i, A_i, S_i, S_f, running, res_list, fl, ev_t, ev_i, t, wi):
    """Slide every live extent to the front of the arena; the GPU pays 2 x moved bytes / bandwidth.
    ``wi``: the loop's int scratch (five stretches of max_batch_size + adapters)."""
    nr = S_i[SI_NRUN]
    na = S_i[SI_NRES] if ip[IP_UNIFIED] else 0
    w = ip[IP_MAX_BATCH] + ip[IP_A]
    starts = wi[0:w]
    lens = wi[w:2 * w]
    kind = wi[2 * w:3 * w]   # >= 0: request index, < 0: -(adapter + 1)
    k = 0
    bb = int(fp[FP_BLOCK_BYTES])
    for j in range(nr):
        r = running[j]
        if R_i[RI_KVSTART, r] >= 0:
            starts[k] = R_i[RI_KVSTART, r]
            lens[k] = R_i[RI_BLOCKS, r]
            kind[k] = r
            k += 1
    for j in range(na):
        a = res_list[j]
        if A_i[AI_EXTSTART, a] >= 0:
            starts[k] = A_i[AI_EXTSTART, a]
            lens[k] = A_i[AI_MEMBYTES, a] // bb
            kind[k] = -(a + 1)
            k += 1
    order = wi[3 * w:4 * w]
    _argsort(starts, k, order, wi[4 * w:5 * w])  # (starts are distinct: any sort gives this order)
    pos = 0
    moved = 0
    for jj in range(k):
        j = order[jj]
        if starts[j] != pos:
            moved += lens[j]
            if kind[j] >= 0:
                R_i[RI_KVSTART, kind[j]] = pos
            else:
                A_i[AI_EXTSTART, -kind[j] - 1] = pos
        pos += lens[j]
    fl[0, 0] = pos
    fl[1, 0] = ip[IP_ARENA] - pos
    S_i[SI_NFREE] = 1 if ip[IP_ARENA] > pos else 0
    nbytes = moved * fp[FP_BLOCK_BYTES]
    S_f[SF_STALL] += 2.0 * nbytes / fp[FP_BW]
    S_f[SF_COMPACT_BYTES] += nbytes
    S_i[SI_COMPACTS] += 1
    _event(S_i, ev_t, ev_i, ip[IP_MAX_EVENTS], t, np.int64(EV_COMPACT), np.int64(-1), int(nbytes))


@njit(cache=True, nogil=True, _nrt=False)
def _ext_take(ip, fp, R_i, A_i, S_i, S_f, running, res_list, fl, ev_t, ev_i, t, need, wi):
    """Allocate `need` contiguous blocks, compacting first if no extent is large enough.
    The caller has checked that enough memory is free in total."""
    s, nf = ext_alloc(fl, S_i[SI_NFREE], need)
    S_i[SI_NFREE] = nf
    if s < 0:
        _compact(ip, fp, R_i, A_i, S_i, S_f, running, res_list, fl, ev_t, ev_i, t, wi)
        s, nf = ext_alloc(fl, S_i[SI_NFREE], need)
        S_i[SI_NFREE] = nf
    return s


@njit(cache=True, nogil=True, _nrt=False)
def _frag_now(ip, R_i, wq, wq_head, wq_tail, fl, S_i):
    """Fragmentation against the next waiting request (or the mean request) right now."""
    if not ip[IP_CONTIG]:
        return 0.0
    need = ip[IP_MEAN_BLOCKS]
    i = wq_head
    while i < wq_tail:
        r = wq[i]
        if R_i[RI_STATUS, r] == ST_WAITING:
            need = R_i[RI_BLOCKS, r]
            break
        i += 1
    return fragmentation(fl, S_i[SI_NFREE], need)


# admission outcomes
ADM_OK, ADM_STOP, ADM_WAIT, ADM_NOSLOT = 0, 1, 2, 3


@njit(cache=True, nogil=True, _nrt=False)
def _no_room_known(ip, A_i, S_f, a, threshold_ok):
    """Absent adapter a gets no slot in this pass without a search: below the loading threshold, or (static
    memory) at least as large as one for which no room could be made (SF_NOROOM: in a pass victims only become
    fewer and the adapter bytes only grow, so none could be made for a; IP_FASTSKIP 0 searches anyway)."""
    if not threshold_ok:
        return True
    return not ip[IP_UNIFIED] and ip[IP_FASTSKIP] != 0 and A_i[AI_MEMBYTES, a] >= S_f[SF_NOROOM]


@njit(cache=True, nogil=True, _nrt=False)
def _note_no_room(ip, A_i, S_f, a):
    """No room could be made for absent adapter a (static memory): remember the smallest such size (SF_NOROOM)."""
    if not ip[IP_UNIFIED] and A_i[AI_MEMBYTES, a] < S_f[SF_NOROOM]:
        S_f[SF_NOROOM] = A_i[AI_MEMBYTES, a]


@njit(cache=True, nogil=True, _nrt=False)
def _room_possible(ip, fp, A_i, S_i, res_list, a):
    """Could room be made for absent adapter a now, without evicting anything (IP_LORA_FIRST)?  True when the
    resident adapters ``_make_room`` could not evict (loading, pinned or in use) leave a slot and, in static
    memory, the bytes for a: exactly when ``_make_room`` would succeed (in unified memory only the slots are
    checked here; the bytes, which depend on the KV, are left to ``_make_room``)."""
    held = 0
    held_bytes = 0.0
    for j in range(S_i[SI_NRES]):
        b = res_list[j]
        if A_i[AI_STATE, b] != AS_RESIDENT or A_i[AI_PINNED, b] != 0 or A_i[AI_REF, b] != 0:
            held += 1
            held_bytes += A_i[AI_MEMBYTES, b]
    if ip[IP_SLOTS] > 0 and held >= ip[IP_SLOTS]:
        return False
    return ip[IP_UNIFIED] != 0 or held_bytes + A_i[AI_MEMBYTES, a] <= fp[FP_ADAPTER_CAP]


@njit(cache=True, nogil=True, _nrt=False, inline='always')
def _cutoff(t, window_s):
    """The batch window's cutoff at t: requests that arrived after it wait for the next window (the scheduling
    pass and a blocked decode run compare the same float)."""
    return np.floor(t / window_s + 1e-9) * window_s


@njit(cache=True, nogil=True, _nrt=False, inline='always')
def _starving(t, oldest_arrival_s, max_wait_s):
    """A group whose oldest request arrived at ``oldest_arrival_s`` starts whatever its count (grouped orders)."""
    return t - oldest_arrival_s >= max_wait_s - 1e-9


@njit(cache=True, nogil=True, _nrt=False, inline='always')
def _surely_noslot(ip, R_i, A_i, S_i, S_f, r, tokens_used, threshold_ok):
    """Whether ``_try_admit`` would answer ADM_NOSLOT changing nothing, told without calling it (a call passes its
    19 arrays field by field; under a standing queue the grouped scan asked it once per group and step): static
    memory, no prefix cache, SGLang's order off, the request's adapter absent with no room known
    (``_no_room_known``), and its tokens and KV within the budgets ``_try_admit`` checks first.  False: ask it."""
    if ip[IP_UNIFIED] or ip[IP_PCACHE] or ip[IP_LORA_FIRST]:
        return False
    a = R_i[RI_ADAPTER, r]
    if A_i[AI_STATE, a] != AS_ABSENT or not _no_room_known(ip, A_i, S_f, a, threshold_ok):
        return False
    if ip[IP_CHUNKED]:
        if ip[IP_MAX_TOKENS] - tokens_used <= 0:
            return False
    elif tokens_used + R_i[RI_PROMPT, r] + R_i[RI_GEN, r] > ip[IP_MAX_TOKENS] and tokens_used > 0:
        return False
    blocks = _kv_need(R_i, r, ip[IP_BLOCK_TOK]) if ip[IP_ONDEMAND] else R_i[RI_BLOCKS, r]
    return S_i[SI_KV_BLOCKS] + blocks <= ip[IP_KV_BLOCKS]


@njit(cache=True, nogil=True, _nrt=False)
def _try_admit(ip, fp, R_i, R_f, A_i, A_f, S_i, S_f, res_list, a_list, fl, heap_t, heap_a, ev_t, ev_i,
               ts, running, t, r, tokens_used, threshold_ok, wi):
    """Try to start request r in this step.

    ADM_OK: admitted; ADM_STOP: KV or token budget full (FCFS stops);
    ADM_WAIT: its adapter is loading; ADM_NOSLOT: no room for its adapter now.
    IP_LORA_FIRST (SGLang's get_new_batch_prefill): a spent budget (no token or no free KV block left) stops
    first, then the adapter is checked (loading: wait; absent and no room possible: no slot, nothing evicted),
    then this request's tokens and KV as below.
    """
    a = R_i[RI_ADAPTER, r]
    if ip[IP_LORA_FIRST]:
        if tokens_used >= ip[IP_MAX_TOKENS] or (not ip[IP_UNIFIED]
                                                and S_i[SI_KV_BLOCKS] - S_i[SI_PCIDLE] >= ip[IP_KV_BLOCKS]):
            return ADM_STOP
        st = A_i[AI_STATE, a]
        if st == AS_LOADING:
            return ADM_WAIT
        if st == AS_ABSENT:
            if _no_room_known(ip, A_i, S_f, a, threshold_ok):
                return ADM_NOSLOT
            if not _room_possible(ip, fp, A_i, S_i, res_list, a):
                _note_no_room(ip, A_i, S_f, a)
                return ADM_NOSLOT
    hit = 0  # blocks shared from its adapter's cached prefix entry: their tokens are not computed
    if ip[IP_PCACHE]:
        hit = _pc_hit(ip, R_i, A_i, r)
    # a preempted request recomputes its generated tokens too
    pf = R_i[RI_PROMPT, r] + R_i[RI_GEN, r] - hit * ip[IP_BLOCK_TOK]
    if ip[IP_CHUNKED]:
        # chunked prefill: ``tokens_used`` counts the running requests' tokens too; the prefill takes what
        # is left of the budget and continues in later steps (docs/model.md 6.4)
        room = ip[IP_MAX_TOKENS] - tokens_used
        if room <= 0:
            return ADM_STOP
        if pf > room:
            pf = room
    elif tokens_used + pf > ip[IP_MAX_TOKENS] and tokens_used > 0:
        # (alone, a recomputed prompt + output may exceed the budget: it runs in a step of its own)
        return ADM_STOP
    blocks = R_i[RI_BLOCKS, r]
    if ip[IP_ONDEMAND]:
        # on demand (vLLM): blocks for the tokens so far and the one this step emits
        blocks = _kv_need(R_i, r, ip[IP_BLOCK_TOK])
    blocks -= hit
    # KV
    if ip[IP_UNIFIED]:
        need = (S_i[SI_KV_BLOCKS] + blocks) * fp[FP_BLOCK_BYTES]
        while S_f[SF_ADAPTER_BYTES] + need > fp[FP_POOL]:
            # KV reclaims any unused adapter, those nobody waits for first
            v = pick_victim(np.int64(EVICT_LRU_IDLE_FIRST), np.bool_(False), res_list, S_i[SI_NRES], A_i[AI_STATE], A_i[AI_PINNED],
                            A_i[AI_REF], A_i[AI_WAIT], A_i[AI_LAST], A_i[AI_CUR], A_i[AI_PTR],
                            A_i[AI_END], a_list, R_i[RI_STATUS], a)
            if v < 0:
                _reject(ip, fp, R_i, S_i, ev_t, ev_i, t, r)
                return ADM_STOP
            _evict(ip, fp, A_i, S_i, S_f, res_list, fl, ev_t, ev_i, t, v)
    elif S_i[SI_KV_BLOCKS] + blocks > ip[IP_KV_BLOCKS]:
        # (prefix cache: idle entries are evicted first, never the one this request shares)
        if not (ip[IP_PCACHE] and _pc_reclaim(ip, A_i, S_i, blocks, a if hit > 0 else np.int64(-1))):
            _reject(ip, fp, R_i, S_i, ev_t, ev_i, t, r)
            return ADM_STOP
    st = A_i[AI_STATE, a]
    if st == AS_LOADING:
        return ADM_WAIT
    if st == AS_ABSENT:
        if _no_room_known(ip, A_i, S_f, a, threshold_ok):
            return ADM_NOSLOT
        if not _make_room(ip, fp, R_i, A_i, S_i, S_f, res_list, a_list, fl, ev_t, ev_i, t, a, np.bool_(False),
                          blocks * fp[FP_BLOCK_BYTES]):
            _note_no_room(ip, A_i, S_f, a)
            return ADM_NOSLOT
        if ip[IP_UNIFIED] and S_f[SF_ADAPTER_BYTES] + A_i[AI_MEMBYTES, a] + (S_i[SI_KV_BLOCKS] + blocks) * fp[FP_BLOCK_BYTES] > fp[FP_POOL]:
            _reject(ip, fp, R_i, S_i, ev_t, ev_i, t, r)
            return ADM_STOP
        _issue_load(ip, fp, R_i, A_i, S_i, S_f, A_f, res_list, running, fl, heap_t, heap_a, ev_t, ev_i, ts, t, a, wi)
        R_i[RI_LOADED, r] = 1
        if ip[IP_ASYNC]:
            return ADM_WAIT
    # admit
    R_i[RI_STATUS, r] = ST_RUNNING
    if R_i[RI_PREEMPTED, r] == 0:
        R_f[RF_ADMIT, r] = t
        if not ip[IP_ASYNC]:  # the GPU stalled on loads while it waited: adapter-load wait, not queueing
            R_f[RF_QSTALL, r] = S_f[SF_QSTALL] - R_f[RF_C0, r]
            R_f[RF_LOADWAIT, r] = R_f[RF_QSTALL, r]
    elif ip[IP_CHUNKED] and not ip[IP_ASYNC] and np.isnan(R_f[RF_FIRST, r]):
        # preempted mid-prefill, before its first token: the load stalls it waited out back in the queue
        # (RF_C0: the cumulative stall when it was preempted) are adapter-load wait too
        R_f[RF_LOADWAIT, r] += S_f[SF_QSTALL] - R_f[RF_C0, r]
    R_i[RI_PF, r] = pf
    R_i[RI_BLOCKS, r] = blocks
    if ip[IP_PCACHE]:
        R_i[RI_CACHED, r] = hit * ip[IP_BLOCK_TOK]
        if R_i[RI_PREEMPTED, r] == 0:
            R_i[RI_PCHIT, r] = hit * ip[IP_BLOCK_TOK]
        if hit > 0:
            if A_i[AI_PCUSERS, a] == 0:
                S_i[SI_PCIDLE] -= A_i[AI_PCBLOCKS, a]
            A_i[AI_PCUSERS, a] += 1
            A_i[AI_PCLAST, a] = S_i[SI_TICK]
            R_i[RI_SHARED, r] = hit
            S_i[SI_PCTOK] += hit * ip[IP_BLOCK_TOK]
            S_i[SI_PCHITS] += 1
    if ip[IP_ASYNC] and R_i[RI_PREEMPTED, r] == 0:  # (a readmitted request's TTFT parts are settled)
        ready = A_f[AF_READY, a]
        if ready > R_f[RF_ARR, r]:
            s = A_f[AF_LOADSTART, a]
            if R_f[RF_ARR, r] > s:
                s = R_f[RF_ARR, r]
            R_f[RF_LOADWAIT, r] = ready - s
    S_i[SI_KV_BLOCKS] += blocks
    if ip[IP_CONTIG]:
        R_i[RI_KVSTART, r] = -1  # not placed yet: a compaction inside _ext_take must skip it
        R_i[RI_KVSTART, r] = _ext_take(ip, fp, R_i, A_i, S_i, S_f, running, res_list, fl, ev_t, ev_i, t, blocks,
                                       wi)
    if A_i[AI_REF, a] == 0:
        S_i[SI_NDISTINCT] += 1
        S_f[SF_LORA_BYTES] += A_i[AI_BYTES, a]
    A_i[AI_REF, a] += 1
    A_i[AI_WAIT, a] -= 1
    S_i[SI_NWAIT] -= 1
    S_i[SI_TICK] += 1
    A_i[AI_LAST, a] = S_i[SI_TICK]
    R_i[RI_ADMSEQ, r] = S_i[SI_TICK]  # admission order (on-demand KV preempts the latest)
    n = S_i[SI_NRUN]
    running[n] = r
    S_i[SI_NRUN] = n + 1
    return ADM_OK


@njit(cache=True, nogil=True, _nrt=False, inline='always')
def _admit(ip, fp, R_i, R_f, A_i, A_f, S_i, S_f, res_list, a_list, fl, heap_t, heap_a, ev_t, ev_i, ts, running, t, r,
           tokens_used, threshold_ok, wi):
    """``_try_admit``, or its sure ADM_NOSLOT told without the call (``_surely_noslot``, under IP_FASTSKIP)."""
    if ip[IP_FASTSKIP] and _surely_noslot(ip, R_i, A_i, S_i, S_f, r, tokens_used, threshold_ok):
        return ADM_NOSLOT
    return _try_admit(ip, fp, R_i, R_f, A_i, A_f, S_i, S_f, res_list, a_list, fl, heap_t, heap_a, ev_t, ev_i, ts,
                      running, t, r, tokens_used, threshold_ok, wi)


@njit(cache=True, nogil=True, _nrt=False)
def _prefetch(ip, fp, R_i, A_i, A_f, S_i, S_f, res_list, a_list, running, fl, heap_t, heap_a, ev_t, ev_i, ts, t,
              r, wi):
    """Async prefetch for a queued request: load its adapter if room can be made by
    evicting only adapters nobody waits for."""
    a = R_i[RI_ADAPTER, r]
    if A_i[AI_STATE, a] != AS_ABSENT:
        return
    if not _make_room(ip, fp, R_i, A_i, S_i, S_f, res_list, a_list, fl, ev_t, ev_i, t, a, np.bool_(True), 0.0):
        return
    _issue_load(ip, fp, R_i, A_i, S_i, S_f, A_f, res_list, running, fl, heap_t, heap_a, ev_t, ev_i, ts, t, a, wi)
    R_i[RI_LOADED, r] = 1


@njit(cache=True, nogil=True, _nrt=False)
def _compact_queue(R_i, S_i, wq, head):
    """Drop the finished requests from the wait queue's stretch [head, tail), keeping the order of the
    others (waiting, and running ones, whose place a preempted request takes again: RI_WQPOS): the same requests in
    the same order for every scan, fewer entries to walk past.  Requests admitted out of order (a grouped or a
    skipping scan) leave their entries behind them; under a standing queue the scan walked three entries for every
    waiting one it looked at."""
    k = head
    for i in range(head, S_i[SI_WQTAIL]):
        r = wq[i]
        st = R_i[RI_STATUS, r]
        if st == ST_WAITING or st == ST_RUNNING:
            wq[k] = r
            R_i[RI_WQPOS, r] = k
            k += 1
    S_i[SI_WQTAIL] = k


@njit(cache=True, nogil=True, _nrt=False)
def _arrive(R_i, R_f, A_i, S_i, wq, r, t):
    a = R_i[RI_ADAPTER, r]
    R_i[RI_STATUS, r] = ST_WAITING
    st = A_i[AI_STATE, a]
    if st != AS_ABSENT:
        R_i[RI_TIER, r] = TIER_GPU
    elif A_i[AI_HOST, a] == 1:
        R_i[RI_TIER, r] = TIER_CPU
    else:
        R_i[RI_TIER, r] = TIER_DISK
    A_i[AI_WAIT, a] += 1
    S_i[SI_NWAIT] += 1
    k = S_i[SI_WQTAIL]
    wq[k] = r
    R_i[RI_WQPOS, r] = k
    S_i[SI_WQTAIL] = k + 1


@njit(cache=True, nogil=True, _nrt=False)
def _kv_need(R_i, r, bt):
    """On-demand KV blocks of request r: its tokens so far and the one the next step emits (but the blocks it shares
    from its adapter's cached prefix entry, RI_SHARED: 0 without prefix caching)."""
    return (R_i[RI_PROMPT, r] + R_i[RI_GEN, r] + bt) // bt - R_i[RI_SHARED, r]


# ---- prefix cache keyed by adapter (IP_PCACHE; docs/model.md 3.7).  Adapter a's entry holds AI_PCBLOCKS[a] full KV
# blocks of the shared prefix (0: none), counted in SI_KV_BLOCKS; AI_PCUSERS[a] running requests share it (pinned
# while > 0); idle entries (SI_PCIDLE blocks) are evicted least recently used (AI_PCLAST) when KV blocks are needed.


@njit(cache=True, nogil=True, _nrt=False)
def _pc_hit(ip, R_i, A_i, r):
    """The blocks request r would share from its adapter's cached entry if admitted now (0: a miss, or a prefix
    shorter than one block: servers cache full blocks only)."""
    b = R_i[RI_PFX, r] // ip[IP_BLOCK_TOK]
    e = A_i[AI_PCBLOCKS, R_i[RI_ADAPTER, r]]
    return b if b <= e else e


@njit(cache=True, nogil=True, _nrt=False)
def _pc_evict_one(A_i, S_i, n_a, keep):
    """Evict the least recently used idle entry (never adapter ``keep``'s; ties: the lowest adapter); False if none."""
    v = -1
    for a in range(n_a):
        if A_i[AI_PCBLOCKS, a] > 0 and A_i[AI_PCUSERS, a] == 0 and a != keep and (
                v < 0 or A_i[AI_PCLAST, a] < A_i[AI_PCLAST, v]):
            v = a
    if v < 0:
        return False
    b = A_i[AI_PCBLOCKS, v]
    A_i[AI_PCBLOCKS, v] = 0
    S_i[SI_PCBLOCKS] -= b
    S_i[SI_PCIDLE] -= b
    S_i[SI_KV_BLOCKS] -= b
    S_i[SI_PCEVICTS] += 1
    return True


@njit(cache=True, nogil=True, _nrt=False)
def _pc_reclaim(ip, A_i, S_i, blocks, keep):
    """Static KV: make room for ``blocks`` more blocks by evicting idle entries (LRU, never ``keep``'s).  False,
    evicting nothing, when even every idle entry would not make enough room (the request is refused)."""
    idle = S_i[SI_PCIDLE]
    if keep >= 0 and A_i[AI_PCUSERS, keep] == 0:
        idle -= A_i[AI_PCBLOCKS, keep]
    if S_i[SI_KV_BLOCKS] - idle + blocks > ip[IP_KV_BLOCKS]:
        return False
    while S_i[SI_KV_BLOCKS] + blocks > ip[IP_KV_BLOCKS]:
        _pc_evict_one(A_i, S_i, ip[IP_A], keep)
    return True


@njit(cache=True, nogil=True, _nrt=False)
def _pc_release(R_i, A_i, S_i, r):
    """Request r leaves the batch (finished or preempted): it no longer shares its adapter's entry."""
    b = R_i[RI_SHARED, r]
    if b > 0:
        a = R_i[RI_ADAPTER, r]
        A_i[AI_PCUSERS, a] -= 1
        if A_i[AI_PCUSERS, a] == 0:
            S_i[SI_PCIDLE] += A_i[AI_PCBLOCKS, a]
        A_i[AI_PCLAST, a] = S_i[SI_TICK]
        R_i[RI_SHARED, r] = 0


@njit(cache=True, nogil=True, _nrt=False)
def _pc_insert(ip, R_i, A_i, S_i, r):
    """Request r's prefill completed: if it computed its prefix itself and its adapter has no entry, the full
    blocks of its prefix become the adapter's entry (moved from its own blocks, shared by it from now on)."""
    if R_i[RI_SHARED, r] > 0:
        return
    b = R_i[RI_PFX, r] // ip[IP_BLOCK_TOK]
    a = R_i[RI_ADAPTER, r]
    if b == 0 or A_i[AI_PCBLOCKS, a] > 0:
        return
    R_i[RI_BLOCKS, r] -= b
    R_i[RI_SHARED, r] = b
    A_i[AI_PCBLOCKS, a] = b
    A_i[AI_PCUSERS, a] = 1
    A_i[AI_PCLAST, a] = S_i[SI_TICK]
    S_i[SI_PCBLOCKS] += b
    S_i[SI_PCMADE] += 1


@njit(cache=True, nogil=True, _nrt=False)
def _leave_batch(R_i, A_i, S_i, S_f, running, k):
    """Take running[k] out of the batch (finished or preempted): free its KV block count, drop
    its adapter reference, swap-remove it from ``running``.  Returns its adapter."""
    r = running[k]
    S_i[SI_KV_BLOCKS] -= R_i[RI_BLOCKS, r]
    a = R_i[RI_ADAPTER, r]
    A_i[AI_REF, a] -= 1
    if A_i[AI_REF, a] == 0:
        S_i[SI_NDISTINCT] -= 1
        S_f[SF_LORA_BYTES] -= A_i[AI_BYTES, a]
    last = S_i[SI_NRUN] - 1
    running[k] = running[last]
    S_i[SI_NRUN] = last
    return a


@njit(cache=True, nogil=True, _nrt=False, inline='always')
def _grow_kv(ip, fp, R_i, R_f, A_i, S_i, S_f, res_list, a_list, fl, ev_t, ev_i, t, running):
    """On-demand KV (vLLM): before a step every running request needs blocks for its
    tokens so far plus the one it emits.  If they do not fit, preempt the most recently
    admitted request (vLLM's recompute preemption: its blocks are freed, it goes back to
    the waiting queue and later re-prefills prompt + generated tokens) until they do.
    In unified memory, adapters nobody uses are evicted first (as for admission).
    Returns the lowest queue position of a preempted request (or a large number)."""
    bt = ip[IP_BLOCK_TOK]
    need_total = 0
    for k in range(S_i[SI_NRUN]):
        rr = running[k]
        extra = _kv_need(R_i, rr, bt) - R_i[RI_BLOCKS, rr]
        if extra > 0:
            need_total += extra
    first_pos = 1 << 62
    while S_i[SI_NRUN] > 0:
        if ip[IP_UNIFIED]:
            if (S_i[SI_KV_BLOCKS] + need_total) * fp[FP_BLOCK_BYTES] + S_f[SF_ADAPTER_BYTES] <= fp[FP_POOL]:
                break
            v = pick_victim(np.int64(EVICT_LRU_IDLE_FIRST), np.bool_(False), res_list, S_i[SI_NRES], A_i[AI_STATE], A_i[AI_PINNED],
                            A_i[AI_REF], A_i[AI_WAIT], A_i[AI_LAST], A_i[AI_CUR], A_i[AI_PTR],
                            A_i[AI_END], a_list, R_i[RI_STATUS], np.int64(-1))
            if v >= 0:
                _evict(ip, fp, A_i, S_i, S_f, res_list, fl, ev_t, ev_i, t, v)
                continue
        elif S_i[SI_KV_BLOCKS] + need_total <= ip[IP_KV_BLOCKS]:
            break
        elif ip[IP_PCACHE] and S_i[SI_PCIDLE] > 0:  # idle cached prefixes go before any running request
            _pc_evict_one(A_i, S_i, ip[IP_A], np.int64(-1))
            continue
        j = 0
        for k in range(1, S_i[SI_NRUN]):
            if R_i[RI_ADMSEQ, running[k]] > R_i[RI_ADMSEQ, running[j]]:
                j = k
        v = running[j]
        extra = _kv_need(R_i, v, bt) - R_i[RI_BLOCKS, v]
        if extra > 0:
            need_total -= extra
        a = _leave_batch(R_i, A_i, S_i, S_f, running, j)
        if ip[IP_PCACHE]:
            _pc_release(R_i, A_i, S_i, v)
        R_i[RI_BLOCKS, v] = 0
        R_i[RI_STATUS, v] = ST_WAITING
        R_i[RI_PREEMPTED, v] += 1
        if R_i[RI_PFDONE, v] > 0:  # chunked prefill: a preempted prefill restarts from scratch
            R_i[RI_PFDONE, v] = 0
            S_i[SI_NPART] -= 1
        if ip[IP_CHUNKED] and np.isnan(R_f[RF_FIRST, v]):
            R_f[RF_C0, v] = S_f[SF_QSTALL]  # (load stalls from here on, until readmitted: its load wait)
        A_i[AI_WAIT, a] += 1
        S_i[SI_NWAIT] += 1
        S_i[SI_PREEMPTS] += 1
        if R_i[RI_WQPOS, v] < first_pos:
            first_pos = R_i[RI_WQPOS, v]
    for k in range(S_i[SI_NRUN]):
        rr = running[k]
        need = _kv_need(R_i, rr, bt)
        if need > R_i[RI_BLOCKS, rr]:
            S_i[SI_KV_BLOCKS] += need - R_i[RI_BLOCKS, rr]
            R_i[RI_BLOCKS, rr] = need
    return first_pos


@njit(cache=True, nogil=True, _nrt=False)
def _schedule_running(ip, R_i, S_i, running):
    """Chunked prefill (vLLM V1), when a running request's prefill is unfinished (SI_NPART > 0; else the
    running requests take one token each): one token per decoding request, then the rest of the unfinished
    prefill (RI_PFDONE > 0; at most one, the last admitted) up to what is left; sets RI_PF to its chunk.
    Returns the tokens taken.  (``validate`` makes max_batched_tokens >= max_batch_size, so the decodes
    always fit and leave the prefill >= 1.)"""
    n = S_i[SI_NRUN]
    tokens = n - S_i[SI_NPART]
    for k in range(n):
        rr = running[k]
        done = R_i[RI_PFDONE, rr]
        if done > 0:
            c = R_i[RI_PROMPT, rr] + R_i[RI_GEN, rr] - R_i[RI_CACHED, rr] - done
            room = ip[IP_MAX_TOKENS] - tokens
            if c > room:
                c = room if room > 1 else 1
            R_i[RI_PF, rr] = c
            tokens += c
    return tokens


@njit(cache=True, nogil=True, _nrt=False)
def _pad_bytes(lora_pad, fp, R_i, A_i, running, n_run):
    """The adapter size every request of the batch ``running[:n_run]`` is charged at with ``lora_rank_padding`` on:
    the largest in the batch ("batch_max": a pass over the batch, made only then), or the largest configured."""
    if lora_pad != LORA_PAD_BATCH_MAX:
        return fp[FP_LORA_PAD_BYTES]
    a_max = 0.0
    for k in range(n_run):
        ab = float(A_i[AI_BYTES, R_i[RI_ADAPTER, running[k]]])
        if ab > a_max:
            a_max = ab
    return a_max


@njit(cache=True, nogil=True, _nrt=False)
def _padded_lora(tokens, distinct, pad_bytes):
    """(LoRA FLOPs, LoRA bytes) of a step with ``lora_rank_padding`` on (docs/model.md 5.5): every one of its
    ``tokens`` (prefill + decode) runs its LoRA matmuls at the padded adapter size ``pad_bytes`` (2 FLOP per
    parameter = its bytes at 2 bytes/parameter, as the unpadded sum), and each of its ``distinct`` adapters is read
    at that size."""
    return tokens * pad_bytes, distinct * pad_bytes


@njit(cache=True, nogil=True, _nrt=False, inline='always')
def _step_dt(ip, fp, kernel_cost, k_n, k_k, k_params, p_tokens, attn_prefill, n_dec, n_sample, ctx, lora_flops,
             lora_bytes, distinct):
    """Seconds of one step: the roofline (or fixed) step cost, or the kernel model's (cost_model "kernel"), plus a
    tensor-parallel group's all-reduces; ``n_sample``: prefills that end in the step (their sequences sample a
    token, as every decode does)."""
    ar = 0.0  # (tp 1: 0.0 + t is t, bit for bit)
    if fp[FP_AR_STEP] > 0.0:
        ar = fp[FP_AR_STEP] + fp[FP_AR_TOK] * (p_tokens + n_dec)
    if kernel_cost:
        return (ar + kernel_step_seconds(p_tokens, attn_prefill, n_dec, n_sample + n_dec, ctx, lora_flops,
                                         lora_bytes, distinct, float(ip[IP_PAD_SLOTS]), fp[FP_FLOPS], fp[FP_BW],
                                         fp[FP_ATTN], fp[FP_KV_TOK], fp[FP_OVERHEAD], fp[FP_LORA_ADAPTER],
                                         fp[FP_LORA_SLOT], fp[FP_LORA_TOKSLOT], fp[FP_N_LAYERS], k_n, k_k, k_params,
                                         fp[FP_PEAK_FLOPS], fp[FP_PEAK_BW], fp[FP_VOCAB],
                                         fp[FP_HIDDEN])) * fp[FP_COST_SCALE]
    return (ar + step_seconds(ip[IP_FIXED] != 0, p_tokens, attn_prefill, n_dec, ctx, lora_flops, lora_bytes, distinct,
                              float(ip[IP_PAD_SLOTS]), fp[FP_PARAMS], fp[FP_WEIGHT_BYTES], fp[FP_FLOPS], fp[FP_BW],
                              fp[FP_ATTN], fp[FP_KV_TOK], fp[FP_OVERHEAD], fp[FP_LORA_ADAPTER], fp[FP_LORA_SLOT],
                              fp[FP_PREFILL_TOK], fp[FP_DECODE_STEP], fp[FP_LORA_TOKSLOT])) * fp[FP_COST_SCALE]


@njit(cache=True, nogil=True, _nrt=False, inline='always')
def _fill_row(ip, fp, R_i, S_i, S_f, wq, wq_head, fl, row, waiting, n_run):
    """Write one step's time-series row (queue, batch, residency, KV, fragmentation, async loads) into
    ``row``; returns the fragmentation it holds."""
    kv_bytes = S_i[SI_KV_BLOCKS] * fp[FP_BLOCK_BYTES]
    if ip[IP_UNIFIED]:
        kv_frac = kv_bytes / (fp[FP_POOL] - S_f[SF_ADAPTER_BYTES]) if fp[FP_POOL] > S_f[SF_ADAPTER_BYTES] else 1.0
    else:
        kv_frac = S_i[SI_KV_BLOCKS] / ip[IP_KV_BLOCKS]
    frag = _frag_now(ip, R_i, wq, wq_head, S_i[SI_WQTAIL], fl, S_i)
    row[:] = 0.0
    row[TS_QUEUE] = waiting
    row[TS_BATCH] = n_run
    row[TS_IN_SYSTEM] = waiting + n_run
    row[TS_RESIDENT] = S_i[SI_NRES] - S_i[SI_NLOADING]
    row[TS_KV_FRAC] = kv_frac
    row[TS_KV_BYTES] = kv_bytes
    row[TS_ADAPTER_BYTES] = S_f[SF_ADAPTER_BYTES]
    row[TS_FRAG] = frag
    row[TS_PCBLOCKS] = S_i[SI_PCBLOCKS]
    if ip[IP_ASYNC]:
        row[TS_LOADS] = S_i[SI_NLOADING]
    return frag


@njit(cache=True, nogil=True, _nrt=False, inline='always')
def _emit(ip, fp, R_i, R_f, A_i, S_i, S_f, wq, fl, running, t_end, pieces):
    """The end of a step at ``t_end``: every running request emits its token (but a prefill chunk that is not its
    prefill's last, when ``pieces``); those that emitted their last one leave the batch (a closed loop's client
    sends its next request).  One code for the scheduler's steps and a decode run's (``_decode_run``)."""
    pc = ip[IP_PCACHE] != 0
    n = ip[IP_N]
    k = 0
    while k < S_i[SI_NRUN]:
        rr = running[k]
        pf_end = pc and R_i[RI_PF, rr] > 0  # (prefix cache: its prefill ends here unless it is a chunk)
        if pieces and R_i[RI_PF, rr] > 0:
            d = R_i[RI_PFDONE, rr] + R_i[RI_PF, rr]
            R_i[RI_PF, rr] = 0
            if d < R_i[RI_PROMPT, rr] + R_i[RI_GEN, rr] - R_i[RI_CACHED, rr]:
                if R_i[RI_PFDONE, rr] == 0:
                    S_i[SI_NPART] += 1
                R_i[RI_PFDONE, rr] = d  # its prefill continues in the next step
                k += 1
                continue
            if R_i[RI_PFDONE, rr] > 0:
                R_i[RI_PFDONE, rr] = 0
                S_i[SI_NPART] -= 1
        g = R_i[RI_GEN, rr] + 1
        R_i[RI_GEN, rr] = g
        R_i[RI_PF, rr] = 0
        if pf_end:
            _pc_insert(ip, R_i, A_i, S_i, rr)
        if g == 1:
            R_f[RF_FIRST, rr] = t_end
        if g >= R_i[RI_OUTPUT, rr]:
            R_i[RI_STATUS, rr] = ST_DONE
            R_f[RF_FINISH, rr] = t_end
            if ip[IP_CONTIG]:
                S_i[SI_NFREE] = ext_free(fl, S_i[SI_NFREE], R_i[RI_KVSTART, rr], R_i[RI_BLOCKS, rr])
            a = _leave_batch(R_i, A_i, S_i, S_f, running, k)
            if pc:
                _pc_release(R_i, A_i, S_i, rr)
            S_i[SI_TICK] += 1
            A_i[AI_LAST, a] = S_i[SI_TICK]
            if ip[IP_CLOSED] and t_end < fp[FP_DURATION]:
                q = S_i[SI_NISSUED]
                if q < n:
                    R_f[RF_ARR, q] = t_end
                    R_f[RF_C0, q] = S_f[SF_QSTALL]
                    _arrive(R_i, R_f, A_i, S_i, wq, q, t_end)
                    S_i[SI_NISSUED] = q + 1
                else:
                    S_i[SI_FLAGS] |= FLAG_EXHAUSTED
            continue
        k += 1


@njit(cache=True, nogil=True, _nrt=False, inline='always')
def _decode_run(ip, fp, R_i, R_f, A_i, S_i, S_f, wq, fl, running, heap_t, ts, row, t, wq_head, next_arr, n_known,
                t_limit, closed, kernel_cost, k_n, k_k, k_params, wi):
    """Steps in which nothing but decoding happens, without the scheduler: the same steps, times, counters and
    time series as one iteration each (IP_DECODE_RUN = 0, the reference it is tested against), bit for bit.

    Called at the top of an iteration.  It runs nothing unless every running request decodes (no prefill or
    unfinished chunk, no stall) and nobody waits, or those who wait could not start in the last pass, which changed
    nothing (SI_BLOCKED: a *blocked* run, docs/model.md 6.1); it stops before any iteration in which something else
    could happen: an arrival, a finished load, the time limit or horizon, (on-demand KV) a step whose new blocks
    would not fit (``_grow_kv`` would preempt or evict), and for a blocked run a new window cutoff, a group that
    starts starving, or KV blocks that leave less room than the largest request could ask for (IP_MAXBLK).

    A run is made of segments over a fixed batch: within one, each step's context grows by the batch size, so the
    step cost needs no pass over the batch, and the generated-token counts are written once at its end.  A segment ends with the first step that emits some request's last token: that step
    ends as the scheduler's would (``_emit``: the finished requests leave the batch, a closed loop's client sends its
    next request), and the run goes on with the smaller batch in a new segment, as the reference's next iteration
    would (a scheduler pass finds nobody waiting and admits nobody: nothing but the step happens in it).
    On-demand KV (IP_RUN_GROW; 0: a run stops at the first block any request needs): a request needs its next block
    ``kv`` steps from now and then every block-size steps, so the blocks the reference's ``_grow_kv`` adds before
    step j are the requests whose ``kv`` is j modulo the block size (counted by phase in ``wi[:bt]``); the
    per-request counts are written at a segment's end too.  Returns (t, wq_head)."""
    while True:  # one segment per pass
        n_run = S_i[SI_NRUN]
        blocked = S_i[SI_NWAIT] > 0
        if (not ip[IP_DECODE_RUN] or n_run == 0 or (blocked and S_i[SI_BLOCKED] == 0) or S_i[SI_NPART] > 0
                or S_f[SF_STALL] != 0.0):
            return t, wq_head
        bt = ip[IP_BLOCK_TOK]
        ondemand = ip[IP_ONDEMAND] != 0
        unified = ip[IP_UNIFIED] != 0
        if ondemand and unified and (S_i[SI_KV_BLOCKS] * fp[FP_BLOCK_BYTES] + S_f[SF_ADAPTER_BYTES] > fp[FP_POOL]):
            return t, wq_head  # (_grow_kv would evict)
        # (a block size past 64 tokens: new blocks are rare enough to stop at; the contiguous allocator never grows)
        grow = ondemand and ip[IP_RUN_GROW] != 0 and not ip[IP_CONTIG] and bt <= 64
        ph = wi[:bt]
        if grow:
            for m in range(bt):
                ph[m] = 0
        fin = 1 << 62  # the first step that emits some request's last token
        kv_lim = 1 << 62  # (on demand, not growing) steps before the first one that needs a new KV block
        ctx0 = 0.0
        lora_flops = 0.0
        for k in range(n_run):
            rr = running[k]
            g = R_i[RI_GEN, rr]
            if R_i[RI_PF, rr] > 0:
                return t, wq_head
            f = R_i[RI_OUTPUT, rr] - g - 1  # its last token comes in step f
            if f < fin:
                fin = f
            if ondemand:  # _kv_need = (prompt + gen + bt) // bt <= blocks while gen < blocks * bt - prompt
                kv = (R_i[RI_BLOCKS, rr] + R_i[RI_SHARED, rr]) * bt - R_i[RI_PROMPT, rr] - g
                if grow and 0 <= kv < bt:
                    ph[kv] += 1  # its next blocks: before steps kv, kv + bt, kv + 2 bt, ...
                elif kv < kv_lim:
                    kv_lim = kv
            ctx0 += float(R_i[RI_PROMPT, rr] + g)
            lora_flops += float(A_i[AI_BYTES, R_i[RI_ADAPTER, rr]])
        j_max = fin + 1  # steps allowed; the last one finishes a request unless a KV block is needed first
        finishing = True
        if kv_lim < j_max:
            j_max = kv_lim
            finishing = False
        if j_max <= 0:
            return t, wq_head
        if not blocked:  # the scheduler would find nobody waiting: its scan start ends at the queue's tail
            wq_head = S_i[SI_WQTAIL]
        # a constant batch: one time-series row for every step of the segment (but its KV columns, when blocks are
        # added); the step's busy time goes in with it (TS_BUSY: 1.0 over [t, t_end), as accum adds it in the
        # reference)
        waiting = S_i[SI_NWAIT]
        frag = _fill_row(ip, fp, R_i, S_i, S_f, wq, wq_head, fl, row, waiting, n_run)
        # blocked: the pass would admit nobody again while its window cutoff and the groups' starvation are the same
        # and the KV left still fits the largest request (static memory: SI_BLOCKED is never set in unified)
        maxblk = ip[IP_MAXBLK] if blocked else 0
        win = blocked and ip[IP_WINDOW] != 0
        grp = blocked and ip[IP_ORDER] == ORDER_GROUPED
        W = fp[FP_WINDOW]
        qnext = S_f[SF_QNEXT]
        qgold = S_f[SF_QGOLD]
        max_wait = fp[FP_MAX_WAIT]
        bucket = fp[FP_BUCKET]
        nb = ip[IP_NBUCKETS]
        warm = fp[FP_WARMUP]
        dur = fp[FP_DURATION]
        n_dec = float(n_run)
        lora_bytes = S_f[SF_LORA_BYTES]
        distinct = float(S_i[SI_NDISTINCT])
        lora_pad = ip[IP_LORA_PAD]
        if lora_pad != LORA_PAD_NONE:  # as the step-by-step path: n_dec decode tokens at the padded size (fixed batch)
            lora_flops, lora_bytes = _padded_lora(n_dec, distinct, _pad_bytes(lora_pad, fp, R_i, A_i, running, n_run))
        t_next = t_limit  # the first moment the scheduler has something to do
        if not closed and next_arr < n_known and R_f[RF_ARR, next_arr] < t_next:
            t_next = R_f[RF_ARR, next_arr]
        if S_i[SI_HEAPN] > 0 and heap_t[0] < t_next:
            t_next = heap_t[0]
        kv_cap = ip[IP_KV_BLOCKS]
        bb = fp[FP_BLOCK_BYTES]
        pool = fp[FP_POOL]
        ab = S_f[SF_ADAPTER_BYTES]
        m = 0  # j modulo bt
        j = 0
        busy = S_f[SF_BUSY]
        frag_int = S_f[SF_FRAG_INT]
        tokens_win = S_f[SF_TOKENS_WIN]
        while j < j_max and t < t_next and t <= fp[FP_HORIZON]:
            if win and _cutoff(t, W) >= qnext:
                # (the scheduler's cutoff releases the first queued request the pass held back: it may start; a
                # window that releases nobody changes nothing the pass read)
                break
            if grp and _starving(t, qgold, max_wait):
                break  # (a group starts starving)
            if grow:
                inc = ph[m]
                m += 1
                if m == bt:
                    m = 0
                if inc > 0:  # _grow_kv before this step: the blocks fit (else the scheduler preempts or evicts)
                    kv_new = S_i[SI_KV_BLOCKS] + inc
                    if (kv_new * bb + ab > pool) if unified else (kv_new + maxblk > kv_cap):
                        break
                    S_i[SI_KV_BLOCKS] = kv_new
                    frag = _fill_row(ip, fp, R_i, S_i, S_f, wq, wq_head, fl, row, waiting, n_run)
                    kvb = kv_new * bb
                    if kvb > S_f[SF_PEAK_KV]:
                        S_f[SF_PEAK_KV] = kvb
                    if kvb + ab > S_f[SF_PEAK_TOTAL]:
                        S_f[SF_PEAK_TOTAL] = kvb + ab
            ctx = ctx0 + float(j * n_run)
            dt = _step_dt(ip, fp, kernel_cost, k_n, k_k, k_params, 0.0, 0.0, n_dec, 0.0, ctx, lora_flops,
                          lora_bytes, distinct)
            t_end = t + dt
            lo = t if t > warm else warm
            hi = t_end if t_end < dur else dur
            if hi > lo:
                busy += hi - lo
                frag_int += frag * (hi - lo)  # (_window_add: the same window)
            accum_row(ts, bucket, nb, t, t_end, row)
            accum(ts, bucket, nb, t, t_end, np.int64(TS_BUSY), 1.0)
            if warm <= t_end < dur:
                tokens_win += n_run
            t = t_end
            j += 1
        # (the counters were kept in locals: the same sums, in the same order)
        S_f[SF_BUSY] = busy
        S_f[SF_FRAG_INT] = frag_int
        S_f[SF_TOKENS_WIN] = tokens_win
        S_i[SI_STEPS] += j
        if j == 0:
            return t, wq_head
        if n_run > S_i[SI_PEAKTOK]:
            S_i[SI_PEAKTOK] = n_run
        done = finishing and j == j_max  # its last step emitted some request's last token
        gen = j - 1 if done else j  # (that step's token: _emit's)
        for k in range(n_run):
            rr = running[k]
            if grow:  # the blocks _grow_kv gave it before steps kv, kv + bt, ... < j
                kv = (R_i[RI_BLOCKS, rr] + R_i[RI_SHARED, rr]) * bt - R_i[RI_PROMPT, rr] - R_i[RI_GEN, rr]
                if 0 <= kv < j:
                    R_i[RI_BLOCKS, rr] += (j - 1 - kv) // bt + 1
            R_i[RI_GEN, rr] += gen
        S_i[SI_LASTDONE] = 0
        if not done:
            return t, wq_head
        # the last step ends as the scheduler's (its pass found nobody waiting, SF_NOROOM's reset, or admitted
        # nobody again, the same memo); the finished requests free what the waiting ones may need
        if not blocked:
            S_f[SF_NOROOM] = _INF
        _emit(ip, fp, R_i, R_f, A_i, S_i, S_f, wq, fl, running, t, np.bool_(False))
        S_i[SI_LASTDONE] = n_run - S_i[SI_NRUN]
        S_i[SI_BLOCKED] = 0


# idle outcomes
IDLE_GO, IDLE_PAUSE, IDLE_END = 0, 1, 2


@njit(cache=True, nogil=True, _nrt=False)
def _idle(ip, fp, R_i, R_f, S_i, S_f, wq, heap_t, fl, ts, row, t, wq_head, next_arr, n_known, t_limit):
    """Nothing runs at t: jump to the next event (next arrival, load completion, batch-window boundary,
    starvation of a held group).  Returns (new t, IDLE_GO), (t, IDLE_PAUSE) when that event is after
    ``t_limit`` (a later call resumes here; SF_WAKE = the event), or (t, IDLE_END) when there is none."""
    closed = ip[IP_CLOSED] != 0
    window = ip[IP_WINDOW] != 0
    W = fp[FP_WINDOW]
    waiting = S_i[SI_NWAIT]
    t_next = _INF
    if not closed and next_arr < n_known:
        t_next = R_f[RF_ARR, next_arr]
    if S_i[SI_HEAPN] > 0 and heap_t[0] < t_next:
        t_next = heap_t[0]
    if window and waiting > 0:
        nb_t = (np.floor(t / W + 1e-9) + 1.0) * W
        if nb_t < t_next:
            t_next = nb_t
    if ip[IP_ORDER] == ORDER_GROUPED and waiting > 0:
        # a group below the threshold starts once its oldest request starves
        h = wq_head
        while h < S_i[SI_WQTAIL] and R_i[RI_STATUS, wq[h]] != ST_WAITING:
            h += 1
        if h < S_i[SI_WQTAIL]:
            st_t = R_f[RF_ARR, wq[h]] + fp[FP_MAX_WAIT]
            if t < st_t < t_next:
                t_next = st_t
    if t_next > t_limit:
        # an arrival not injected yet may come first: stop here, the next call recomputes the jump
        S_f[SF_WAKE] = t_next
        return t, IDLE_PAUSE
    if t_next >= _INF:
        if waiting > 0:
            S_i[SI_FLAGS] |= FLAG_DEADLOCK
        return t, IDLE_END
    if t_next <= t:
        t_next = t + 1e-9
    frag = _frag_now(ip, R_i, wq, wq_head, S_i[SI_WQTAIL], fl, S_i)
    row[:] = 0.0
    row[TS_QUEUE] = waiting
    row[TS_IN_SYSTEM] = waiting
    row[TS_RESIDENT] = S_i[SI_NRES] - S_i[SI_NLOADING]
    row[TS_LOADS] = S_i[SI_NLOADING]
    row[TS_ADAPTER_BYTES] = S_f[SF_ADAPTER_BYTES]
    row[TS_FRAG] = frag
    if S_i[SI_PCBLOCKS] > 0:  # cached prefixes hold KV while nothing runs (static KV: IP_PCACHE refuses unified)
        row[TS_PCBLOCKS] = S_i[SI_PCBLOCKS]
        row[TS_KV_BYTES] = S_i[SI_KV_BLOCKS] * fp[FP_BLOCK_BYTES]
        row[TS_KV_FRAC] = S_i[SI_KV_BLOCKS] / ip[IP_KV_BLOCKS]
    accum_row(ts, fp[FP_BUCKET], ip[IP_NBUCKETS], t, t_next, row)
    _window_add(S_f, SF_FRAG_INT, t, t_next, fp[FP_WARMUP], fp[FP_DURATION], frag)
    S_i[SI_LASTDONE] = 0
    return t_next, IDLE_GO


@njit(cache=True, nogil=True, _nrt=False)
def run_loop(ip, fp, R_i, R_f, A_i, A_f, a_list, S_i, S_f, wq, running, new_list, res_list,
             heap_t, heap_a, g_list, g_key, ts, ev_t, ev_i, fl, wf, wi):
    """Simulate until all work is done or the horizon passes. Mutates its arguments.

    Resumable: the loop's position lives in S_i / S_f, so a call continues where the last one stopped.
    With S_i[SI_FLEET] set, requests [0, S_i[SI_NKNOWN]) have arrived so far and the call returns
    (PH_TOP or PH_IDLE) before any iteration at t >= S_f[SF_TLIMIT]; otherwise it runs to the end
    (PH_DONE).  ``wf`` / ``wi``: float / int scratch (``scratch_sizes``: the time-series row, sorting,
    compaction), so that nothing in the loop allocates.  Returns how it ended (PH_*)."""
    n = ip[IP_N]
    nb = ip[IP_NBUCKETS]
    bucket = fp[FP_BUCKET]
    async_mode = ip[IP_ASYNC] != 0
    closed = ip[IP_CLOSED] != 0
    window = ip[IP_WINDOW] != 0
    grouped = ip[IP_ORDER] == ORDER_GROUPED
    W = fp[FP_WINDOW]
    row = wf[:TS_LEN]  # one time-series row, reused every step
    chunked = ip[IP_CHUNKED] != 0
    lora_pad = ip[IP_LORA_PAD]
    kernel_cost = fp[FP_KERNEL] != 0.0 and ip[IP_FIXED] == 0
    k_params = fp[FP_KPARAMS:FP_DENSE_N]  # views of fp for the kernel cost model
    k_n = fp[FP_DENSE_N:FP_DENSE_K]
    k_k = fp[FP_DENSE_K:FP_DENSE_END]
    fleet = S_i[SI_FLEET] != 0
    n_known = S_i[SI_NKNOWN] if fleet else n
    t_limit = S_f[SF_TLIMIT] if fleet else _INF
    wq_head = S_i[SI_WQHEAD]
    next_arr = S_i[SI_NEXTARR]
    t = S_f[SF_T]
    phase = S_i[SI_PHASE]
    if phase == PH_DONE:
        return PH_DONE
    if phase == PH_FRESH and closed:
        c = ip[IP_CONC] if ip[IP_CONC] < n else n
        for r in range(c):
            R_f[RF_ARR, r] = 0.0
            _arrive(R_i, R_f, A_i, S_i, wq, r, 0.0)
        S_i[SI_NISSUED] = c
    run = True
    if phase == PH_IDLE:  # resume the idle jump the last call stopped before
        t, code = _idle(ip, fp, R_i, R_f, S_i, S_f, wq, heap_t, fl, ts, row, t, wq_head, next_arr, n_known,
                        t_limit)
        run = code == IDLE_GO
        phase = PH_IDLE if code == IDLE_PAUSE else PH_DONE
    else:
        phase = PH_DONE
    while run:
        if t >= t_limit:
            phase = PH_TOP  # arrivals at or after t may not be injected yet
            break
        if S_i[SI_STEPS] > ip[IP_MAX_STEPS]:  # the guard: no input loops forever (sim raises on the flag)
            S_i[SI_FLAGS] |= FLAG_BUDGET
            break
        # ---- a run of pure-decode steps, if nothing else can happen (here, not after the step: a fleet
        # replica resumed mid-run goes on without a scheduler pass)
        t_run, wq_head = _decode_run(ip, fp, R_i, R_f, A_i, S_i, S_f, wq, fl, running, heap_t, ts, row, t, wq_head,
                                     next_arr, n_known, t_limit, closed, kernel_cost, k_n, k_k, k_params, wi)
        if t_run != t:
            t = t_run
            continue
        # ---- arrivals
        if not closed:
            while next_arr < n_known and R_f[RF_ARR, next_arr] <= t:
                # in the server when it arrived: waiting + running, plus those the step it arrived
                # during finished at its end (t)
                here = S_i[SI_NWAIT] + S_i[SI_NRUN]
                if R_f[RF_ARR, next_arr] < t:
                    here += S_i[SI_LASTDONE]
                if ip[IP_MAX_INSYS] > 0 and here >= ip[IP_MAX_INSYS]:
                    # the server holds max_in_system requests: this one is refused, never served
                    R_i[RI_STATUS, next_arr] = ST_DROPPED
                    S_i[SI_DROPS] += 1
                    next_arr += 1
                    continue
                _arrive(R_i, R_f, A_i, S_i, wq, next_arr, t)
                # cumulative load stall at its arrival (only the last stall can straddle it)
                a_t = R_f[RF_ARR, next_arr]
                c0 = S_f[SF_QSTALL]
                if a_t < S_f[SF_STALLE]:
                    c0 -= S_f[SF_STALLE] - (a_t if a_t > S_f[SF_STALLB] else S_f[SF_STALLB])
                R_f[RF_C0, next_arr] = c0
                # it arrived during the last step: count it as queued from its arrival
                accum(ts, bucket, nb, R_f[RF_ARR, next_arr], t, np.int64(TS_QUEUE), 1.0)
                accum(ts, bucket, nb, R_f[RF_ARR, next_arr], t, np.int64(TS_IN_SYSTEM), 1.0)
                next_arr += 1
        # ---- finished async loads
        while S_i[SI_HEAPN] > 0 and heap_t[0] <= t:
            a = heap_a[0]
            S_i[SI_HEAPN] = heap_pop(heap_t, heap_a, S_i[SI_HEAPN])
            A_i[AI_STATE, a] = AS_RESIDENT
            S_i[SI_NLOADING] -= 1
        if t > fp[FP_HORIZON]:
            S_i[SI_FLAGS] |= FLAG_HORIZON
            break
        # ---- schedule
        # (what a pass that admits nobody may still change: loads and admissions tick, evictions, refusals, preemption)
        S_i[SI_PASSES] += 1
        tick0 = S_i[SI_TICK]
        chg0 = S_i[SI_EVICTS] + S_i[SI_REJECTS] + S_i[SI_PREEMPTS] + S_i[SI_PCEVICTS]
        qgold = _INF
        qnext = _INF  # the arrival of the first queued request the window cutoff holds back from the scan (none)
        S_f[SF_NOROOM] = _INF
        if ip[IP_ONDEMAND] and S_i[SI_NRUN] > 0:
            p0 = _grow_kv(ip, fp, R_i, R_f, A_i, S_i, S_f, res_list, a_list, fl, ev_t, ev_i, t, running)
            if p0 < wq_head:
                wq_head = p0  # preempted requests rejoin the queue at their arrival position
        while wq_head < S_i[SI_WQTAIL] and R_i[RI_STATUS, wq[wq_head]] != ST_WAITING:
            wq_head += 1
        cutoff = t
        if window:
            cutoff = _cutoff(t, W)
        n_new = 0
        tokens = 0
        if chunked:  # the running requests' tokens come first: one per decode, the rest of an unfinished prefill
            tokens = S_i[SI_NRUN]
            if S_i[SI_NPART] > 0:
                tokens = _schedule_running(ip, R_i, S_i, running)
        wq_tail = S_i[SI_WQTAIL]
        scan_limit = ip[IP_SCAN]
        dead = 0  # finished requests the queue scan walked past
        loads_before = S_i[SI_LOADS]
        if not grouped and ip[IP_CLUSTER] > 0 and S_i[SI_NDISTINCT] >= ip[IP_CLUSTER]:
            # clustering: first admit queued requests whose adapter is already in the batch
            i = wq_head
            scanned = 0
            while i < wq_tail and scanned < scan_limit and S_i[SI_NRUN] < ip[IP_MAX_BATCH]:
                r = wq[i]
                i += 1
                if R_i[RI_STATUS, r] != ST_WAITING:
                    continue
                scanned += 1
                if A_i[AI_REF, R_i[RI_ADAPTER, r]] == 0:
                    continue
                code = _admit(ip, fp, R_i, R_f, A_i, A_f, S_i, S_f, res_list, a_list, fl, heap_t, heap_a, ev_t, ev_i,
                              ts, running, t, r, tokens, np.bool_(True), wi)
                if code == ADM_OK:
                    new_list[n_new] = r
                    n_new += 1
                    tokens += R_i[RI_PF, r]
                elif code == ADM_STOP:
                    break
        if not grouped:
            i = wq_head
            scanned = 0
            prefetch_only = False
            # Once every GPU slot is held by an adapter in use (a miss found no victim), or in static memory no
            # room could be made for an adapter as small as the smallest (SF_NOROOM), no
            # absent adapter can get one in this step: requests that need one are passed over
            # unchecked (vLLM checks max_loras before the token budget) and only requests of
            # resident adapters can still start.  ``rem`` counts those still ahead in the
            # queue, so the scan ends when none is left: the same admissions as scanning on
            # (IP_FASTSKIP = 0, tested), in O(slots) instead of O(queue) per step.
            res_only = False
            rem = 0
            while i < wq_tail and scanned < scan_limit:
                r = wq[i]
                i += 1
                if R_i[RI_STATUS, r] != ST_WAITING:
                    if R_i[RI_STATUS, r] != ST_RUNNING:
                        dead += 1
                    continue
                if R_f[RF_ARR, r] > cutoff:
                    qnext = R_f[RF_ARR, r]
                    break
                scanned += 1
                if res_only:
                    if A_i[AI_STATE, R_i[RI_ADAPTER, r]] == AS_ABSENT:
                        continue
                    rem -= 1
                if prefetch_only or S_i[SI_NRUN] >= ip[IP_MAX_BATCH]:
                    if ip[IP_PREFETCH]:
                        prefetch_only = True
                        _prefetch(ip, fp, R_i, A_i, A_f, S_i, S_f, res_list, a_list, running, fl, heap_t,
                                  heap_a, ev_t, ev_i, ts, t, r, wi)
                        continue
                    break
                code = _admit(ip, fp, R_i, R_f, A_i, A_f, S_i, S_f, res_list, a_list, fl, heap_t, heap_a, ev_t, ev_i,
                              ts, running, t, r, tokens, np.bool_(True), wi)
                if code == ADM_OK:
                    new_list[n_new] = r
                    n_new += 1
                    tokens += R_i[RI_PF, r]
                elif code == ADM_STOP:
                    if ip[IP_PREFETCH]:
                        prefetch_only = True
                        continue
                    break
                elif ip[IP_STRICT]:
                    break
                elif (code == ADM_NOSLOT and not res_only and not ip[IP_PREFETCH]
                      and ((ip[IP_SLOTS] > 0 and S_i[SI_NRES] >= ip[IP_SLOTS])
                           or (not ip[IP_UNIFIED] and S_f[SF_NOROOM] <= fp[FP_MIN_ADAPTER]))):
                    # (or the adapter memory is full of adapters in use: the no-room memo covers every size)
                    res_only = True
                    for j in range(S_i[SI_NRES]):
                        rem += A_i[AI_WAIT, res_list[j]]
                if res_only and rem <= 0 and ip[IP_FASTSKIP]:
                    break
        else:
            # group released waiting requests by adapter (linked lists through RI_NEXT)
            ng = 0
            i = wq_head
            scanned = 0
            while i < wq_tail and scanned < scan_limit:
                r = wq[i]
                i += 1
                if R_i[RI_STATUS, r] != ST_WAITING:
                    if R_i[RI_STATUS, r] != ST_RUNNING:
                        dead += 1
                    continue
                if R_f[RF_ARR, r] > cutoff:
                    qnext = R_f[RF_ARR, r]
                    break
                scanned += 1
                a = R_i[RI_ADAPTER, r]
                R_i[RI_NEXT, r] = -1
                if A_i[AI_GMARK, a] == 0:
                    A_i[AI_GMARK, a] = 1
                    A_i[AI_GHEAD, a] = r
                    A_i[AI_GTAIL, a] = r
                    A_i[AI_GCOUNT, a] = 1
                    A_f[AF_GOLDEST, a] = R_f[RF_ARR, r]
                    g_list[ng] = a
                    ng += 1
                else:
                    R_i[RI_NEXT, A_i[AI_GTAIL, a]] = r
                    A_i[AI_GTAIL, a] = r
                    A_i[AI_GCOUNT, a] += 1
            # the groups come in the queue order of their oldest requests, which is arrival order (checked here): then
            # the stable sort by class and oldest arrival (group_key) is a stable partition by class
            in_order = ip[IP_GPART] != 0
            prev = -_INF
            for j in range(ng):
                a = g_list[j]
                oldest = A_f[AF_GOLDEST, a]
                starving = _starving(t, oldest, fp[FP_MAX_WAIT])
                if not starving and oldest < qgold:
                    qgold = oldest
                if oldest < prev:
                    in_order = False
                prev = oldest
                g_key[j] = group_key(starving, A_i[AI_STATE, a] != AS_ABSENT, oldest)
            if in_order:
                _partition_groups(g_key, g_list, ng, wi[:ng])
            else:
                _sort_groups(g_key, g_list, ng, wf, wi)
            stop = False
            for jj in range(ng):
                a = g_list[jj]
                A_i[AI_GMARK, a] = 0
                if stop:
                    continue
                starving = _starving(t, A_f[AF_GOLDEST, a], fp[FP_MAX_WAIT])
                thr_ok = starving or A_i[AI_GCOUNT, a] >= ip[IP_THRESHOLD]
                r = A_i[AI_GHEAD, a]
                while r >= 0:
                    if S_i[SI_NRUN] >= ip[IP_MAX_BATCH]:
                        stop = True
                        break
                    code = _admit(ip, fp, R_i, R_f, A_i, A_f, S_i, S_f, res_list, a_list, fl, heap_t, heap_a, ev_t,
                                  ev_i, ts, running, t, r, tokens, thr_ok, wi)
                    if code == ADM_OK:
                        new_list[n_new] = r
                        n_new += 1
                        tokens += R_i[RI_PF, r]
                    elif code == ADM_STOP:
                        stop = True
                        break
                    else:
                        break
                    r = R_i[RI_NEXT, r]
        loads_now = S_i[SI_LOADS] - loads_before
        if ip[IP_QCOMPACT] and dead >= 256 and dead >= scanned:
            _compact_queue(R_i, S_i, wq, wq_head)  # (the next scans walk them no more)
        # nobody started and nothing changed: until a request finishes or arrives, a load ends, the window's cutoff
        # or a group's starvation changes or the KV left could refuse a request, every pass would do the same
        # (static, non-contiguous memory: there the KV is the only other thing a pass reads that a step changes).
        # The counters are a conservative guard: a pass that evicted or refused while starting nobody is not taken
        # as blocked, though repeating it would change nothing more (tests/test_blocked_runs.py)
        quiet = (ip[IP_BLOCKED_RUN] != 0 and n_new == 0 and S_i[SI_NWAIT] > 0 and not ip[IP_UNIFIED]
                 and not ip[IP_CONTIG] and S_i[SI_TICK] == tick0
                 and S_i[SI_EVICTS] + S_i[SI_REJECTS] + S_i[SI_PREEMPTS] + S_i[SI_PCEVICTS] == chg0)
        kvb = S_i[SI_KV_BLOCKS] * fp[FP_BLOCK_BYTES]
        if S_f[SF_ADAPTER_BYTES] > S_f[SF_PEAK_ADAPTER]:
            S_f[SF_PEAK_ADAPTER] = S_f[SF_ADAPTER_BYTES]
        if kvb > S_f[SF_PEAK_KV]:
            S_f[SF_PEAK_KV] = kvb
        if kvb + S_f[SF_ADAPTER_BYTES] > S_f[SF_PEAK_TOTAL]:
            S_f[SF_PEAK_TOTAL] = kvb + S_f[SF_ADAPTER_BYTES]
        n_run = S_i[SI_NRUN]
        waiting = S_i[SI_NWAIT]
        if n_run == 0:
            # ---- idle: advance to the next event
            S_i[SI_BLOCKED] = 0
            t, code = _idle(ip, fp, R_i, R_f, S_i, S_f, wq, heap_t, fl, ts, row, t, wq_head, next_arr, n_known,
                            t_limit)
            if code == IDLE_PAUSE:
                phase = PH_IDLE
                break
            if code == IDLE_END:
                break
            continue
        # ---- one step
        start = t + S_f[SF_STALL]  # compaction done by the GPU before the step
        S_f[SF_STALL] = 0.0
        if not async_mode and loads_now > 0:
            ready = t
            for k in range(n_new):
                rr = new_list[k]
                rd = A_f[AF_READY, R_i[RI_ADAPTER, rr]]
                if rd > ready:
                    ready = rd
            if ready > start:
                start = ready
            # the load stall is adapter-load wait for every request starting in this step (on top of
            # the stalls it spent queued)
            for k in range(n_new):
                if R_i[RI_PREEMPTED, new_list[k]] == 0:
                    R_f[RF_LOADWAIT, new_list[k]] = ready - t + R_f[RF_QSTALL, new_list[k]]
                elif chunked and np.isnan(R_f[RF_FIRST, new_list[k]]):  # readmitted before its first token
                    R_f[RF_LOADWAIT, new_list[k]] += ready - t
            if ready > t:  # every request still queued waits this stall out too
                S_f[SF_QSTALL] += ready - t
                S_f[SF_STALLB] = t
                S_f[SF_STALLE] = ready
                if S_i[SI_NPART] > 0:  # and so does a chunked prefill still in progress (before its first token)
                    for k in range(n_run):
                        if R_i[RI_PFDONE, running[k]] > 0:
                            R_f[RF_LOADWAIT, running[k]] += ready - t
        # step cost inputs
        p_tokens = 0.0
        attn_prefill = 0.0
        lora_flops = 0.0
        n_dec = 0
        n_sample = 0  # sequences that sample a token in this step (the LM head's rows, cost_model "kernel")
        ctx = 0.0
        pf_int = 0  # prefill tokens, prefill pieces, pieces that are not their prefill's last chunk (no token)
        n_pf = 0
        n_part = 0
        for k in range(n_run):
            rr = running[k]
            ab = float(A_i[AI_BYTES, R_i[RI_ADAPTER, rr]])
            g = R_i[RI_GEN, rr]
            if R_i[RI_PF, rr] > 0:
                p = float(R_i[RI_PF, rr])
                # chunked: its tokens prefilled in earlier steps; and those served from the prefix cache
                kd = float(R_i[RI_PFDONE, rr] + R_i[RI_CACHED, rr])
                p_tokens += p
                attn_prefill += p * p + 2.0 * p * kd  # causal pairs: the chunk's own and with the kd before it
                lora_flops += p * ab
                pf_int += R_i[RI_PF, rr]
                n_pf += 1
                if R_i[RI_PFDONE, rr] + R_i[RI_PF, rr] < R_i[RI_PROMPT, rr] + g - R_i[RI_CACHED, rr]:
                    n_part += 1  # not its last chunk: it emits nothing in this step
                else:
                    n_sample += 1  # its prefill ends in this step and emits its first token
            else:
                n_dec += 1
                ctx += float(R_i[RI_PROMPT, rr] + g)
                lora_flops += ab
        lora_bytes = S_f[SF_LORA_BYTES]  # bytes of the distinct adapters in the batch
        if lora_pad != LORA_PAD_NONE:  # every token's LoRA matmuls at the padded adapter size (docs/model.md 5.5)
            lora_flops, lora_bytes = _padded_lora(p_tokens + float(n_dec), float(S_i[SI_NDISTINCT]),
                                                  _pad_bytes(lora_pad, fp, R_i, A_i, running, n_run))
        dt = _step_dt(ip, fp, kernel_cost, k_n, k_k, k_params, p_tokens, attn_prefill, float(n_dec), float(n_sample),
                      ctx, lora_flops, lora_bytes, float(S_i[SI_NDISTINCT]))
        t_end = start + dt
        S_i[SI_STEPS] += 1
        S_i[SI_PFTOKENS] += pf_int
        S_i[SI_PFCHUNKS] += n_pf
        if pf_int + n_dec > S_i[SI_PEAKTOK]:
            S_i[SI_PEAKTOK] = pf_int + n_dec
        lo = start if start > fp[FP_WARMUP] else fp[FP_WARMUP]
        hi = t_end if t_end < fp[FP_DURATION] else fp[FP_DURATION]
        if hi > lo:
            S_f[SF_BUSY] += hi - lo
        # time series over [t, start) (sync load stall) and [start, t_end)
        frag = _fill_row(ip, fp, R_i, S_i, S_f, wq, wq_head, fl, row, waiting, n_run)
        accum_row(ts, bucket, nb, t, t_end, row)
        accum(ts, bucket, nb, start, t_end, np.int64(TS_BUSY), 1.0)
        _window_add(S_f, SF_FRAG_INT, t, t_end, fp[FP_WARMUP], fp[FP_DURATION], frag)
        if not async_mode:
            accum(ts, bucket, nb, t, start, np.int64(TS_LOADS), float(loads_now))
        # ---- tokens and completions
        if fp[FP_WARMUP] <= t_end < fp[FP_DURATION]:
            S_f[SF_TOKENS_WIN] += S_i[SI_NRUN] - n_part  # every running request emits one token (but chunks)
        # a prefill ends unfinished or an unfinished one ends
        _emit(ip, fp, R_i, R_f, A_i, S_i, S_f, wq, fl, running, t_end,
              np.bool_(chunked and (n_part > 0 or S_i[SI_NPART] > 0)))
        t = t_end
        S_i[SI_LASTDONE] = n_run - S_i[SI_NRUN]  # finished at t_end (preemption happens later, in scheduling)
        # (a decode run may go on past this pass while requests wait: none finished in its step)
        S_i[SI_BLOCKED] = 1 if quiet and S_i[SI_NRUN] == n_run else 0
        S_f[SF_QNEXT] = qnext
        S_f[SF_QGOLD] = qgold
    S_f[SF_END_T] = t
    S_f[SF_T] = t
    S_i[SI_WQHEAD] = wq_head
    S_i[SI_NEXTARR] = next_arr
    S_i[SI_PHASE] = phase
    return phase
