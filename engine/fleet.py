"""The fleet: ``num_replicas`` identical GPUs behind a router, one jitted loop over all of them.

Every replica is a full server of the scenario (same GPU, model, memory and policy) with its own
copy of the single-GPU loop's arrays.  Arrays of a fixed size are stacked with a leading replica
axis (``A_i[k]`` is replica k's adapter table); the per-request arrays are ragged, one flat buffer
each with replica k's block at ``off[k]`` (``cap[k]`` requests; a block is laid out exactly as the
single-GPU array and viewed as one, so the same compiled ``run_loop`` serves both).

``run_fleet`` takes the arrivals in time order: it brings the replicas to the arrival time (``run_loop``
with a time limit: a replica stops before any iteration at or after it), asks the router (``routers.route``)
for a replica, which sees every replica's state at that instant, and injects the request into it; after the
last arrival it runs every replica to the end.  A request is routed once, at arrival (no migration).

A replica is advanced only when what the router reads of it could have changed (docs/model.md 12): its
outstanding count falls only when a request finishes, which takes at least (tokens it still needs) x (the
shortest possible step, ``min_step_seconds``) from the replica's next iteration (``_bounds``), and its adapter
residency changes only in a scheduling pass with requests waiting or by evicting an adapter nobody uses
(``_holds_known``, checked for lora_affinity's candidates only).  Until then it is left behind, and
a request routed to it joins it there: its run does not depend on when its arrivals are injected, as long as
each is known before the replica reaches it (what ``run_static`` relies on too).  Bit-identical to advancing
every replica to every arrival (IP_QUIET = 0; tests/test_fast_paths.py).

``run`` is the Python side: it lays the arrays out from the single-GPU builder's template, draws
the static routes, grows a replica's block when a state-reading router sends it more requests than
it has room for (doubling; the loop returns to Python and resumes), and hands the arrays back.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import kernels
from . import loop as L
from .costs import step_seconds
from .policies import EVICT_BELADY, STRATEGIES, belady_lists
from .routers import ROUTER_LORA_AFFINITY, ROUTERS, least_loaded, route, static_routes
from .workload import Workload, max_request_blocks

#: Arrays with one row per replica (``np.stack`` of the template), in run_loop's argument order.
_STACKED = ("ip", "fp", "A_i", "A_f", "S_i", "S_f", "running", "new_list", "res_list", "heap_t", "heap_a",
            "g_list", "g_key", "ts", "fl", "wf", "wi")


@njit(cache=True, nogil=True, _nrt=False)
def _advance(k, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list, res_list,
             heap_t, heap_a, g_list, g_key, ts, evt, evi, fl, wf, wi):
    """Run replica k's loop (until its time limit S_f[k, SF_TLIMIT])."""
    o = off[k]
    c = cap[k]
    eo = eoff[k]
    ec = ecap[k]
    return L.run_loop(ip[k], fp[k], Ri[o * L.RI_LEN:(o + c) * L.RI_LEN].reshape((L.RI_LEN, c)),
                      Rf[o * L.RF_LEN:(o + c) * L.RF_LEN].reshape((L.RF_LEN, c)), A_i[k], A_f[k], al[o:o + c],
                      S_i[k], S_f[k], wq[o:o + c], running[k], new_list[k], res_list[k], heap_t[k], heap_a[k],
                      g_list[k], g_key[k], ts[k], evt[eo:eo + ec], evi[3 * eo:3 * (eo + ec)].reshape((3, ec)), fl[k],
                      wf[k], wi[k])


@njit(cache=True, nogil=True, _nrt=False)
def _arrival_bound(ip, k, t_arr, output, dt_min):
    """The earliest replica k's outstanding count can fall because of a request arriving at ``t_arr`` and not
    taken in yet: at its arrival if max_in_system may refuse it, else when its ``output`` tokens are done."""
    return t_arr if ip[k, L.IP_MAX_INSYS] > 0 else t_arr + output * dt_min


@njit(cache=True, nogil=True, _nrt=False)
def _bounds(k, off, cap, ip, Ri, Rf, S_i, S_f, wq, running, dt_min, qc, qr):
    """Lower bounds, from replica k's paused state and its known requests, on the first instant at which
    its outstanding count (``qc[k]``) and its adapter residency (``qr[k]``) can change.

    Outstanding falls only when a request finishes (or, with max_in_system, is dropped at ingestion): request r
    needs output - generated more steps, each at least ``dt_min`` long, from the replica's next iteration
    (or from its arrival, not ingested yet).  Residency (absent or not) changes only in a scheduling pass with
    requests waiting (loads, evictions, prefetch), or, on-demand KV in unified memory, when KV growth evicts."""
    o = off[k]
    c = cap[k]
    bi = o * L.RI_LEN
    bf = o * L.RF_LEN
    t0 = S_f[k, L.SF_T]
    if S_i[k, L.SI_PHASE] == L.PH_DONE:
        qc[k] = L._INF
        qr[k] = L._INF
        return
    rem = 1 << 62
    for j in range(S_i[k, L.SI_NRUN]):
        r = running[k, j]
        d = Ri[bi + L.RI_OUTPUT * c + r] - Ri[bi + L.RI_GEN * c + r]
        if d < rem:
            rem = d
    nw = S_i[k, L.SI_NWAIT]
    if nw > 0:
        found = 0
        h = S_i[k, L.SI_WQHEAD]
        tail = S_i[k, L.SI_WQTAIL]
        while h < tail and found < nw and found < 64:
            r = wq[o + h]
            h += 1
            if Ri[bi + L.RI_STATUS * c + r] != L.ST_WAITING:
                continue
            found += 1
            d = Ri[bi + L.RI_OUTPUT * c + r] - Ri[bi + L.RI_GEN * c + r]
            if d < rem:
                rem = d
        if found < nw:
            rem = 1  # (not all seen: the least a request can still need)
    q = t0 + rem * dt_min if rem < (1 << 62) else L._INF
    qres = t0 if nw > 0 or (ip[k, L.IP_UNIFIED] and ip[k, L.IP_ONDEMAND] and S_i[k, L.SI_NRUN] > 0) else L._INF
    for r in range(S_i[k, L.SI_NEXTARR], S_i[k, L.SI_NKNOWN]):
        ta = Rf[bf + L.RF_ARR * c + r]
        if ta < qres:
            qres = ta
        d = _arrival_bound(ip, k, ta, Ri[bi + L.RI_OUTPUT * c + r], dt_min)
        if d < q:
            q = d
    qc[k] = q
    qr[k] = qres


@njit(cache=True, nogil=True, _nrt=False)
def _current(k, t, S_i, S_f):
    """Whether replica k's state is its state at t (no iteration of it starts before t)."""
    ph = S_i[k, L.SI_PHASE]
    return (ph == L.PH_DONE or (ph == L.PH_TOP and t <= S_f[k, L.SF_T])
            or (ph == L.PH_IDLE and t < S_f[k, L.SF_WAKE]))


@njit(cache=True, nogil=True, _nrt=False)
def _holds_known(k, a, t, off, cap, ip, Ri, S_i, S_f, A_i, qc, qr):
    """Whether replica k holds adapter a (resident or loading) at t exactly as its state says now.

    True when the state is current or its residency cannot change before t (``qr``); else an absent adapter
    stays absent unless a request for it waits or arrives (only they load it), and a held one stays held
    while a running request uses it (pick_victim never evicts an adapter in use), i.e. until a request
    finishes (``qc``) or, with on-demand KV, one is preempted, or, in static memory, while nobody waits and
    every request not taken in yet has its adapter held (no load, hence no eviction)."""
    if t < qr[k] or _current(k, t, S_i, S_f):
        return True
    if A_i[k, L.AI_STATE, a] == L.AS_ABSENT:
        if A_i[k, L.AI_WAIT, a] != 0:
            return False
        o = off[k]
        c = cap[k]
        for r in range(S_i[k, L.SI_NEXTARR], S_i[k, L.SI_NKNOWN]):
            if Ri[o * L.RI_LEN + L.RI_ADAPTER * c + r] == a:
                return False
        return True
    if A_i[k, L.AI_REF, a] > 0 and t < qc[k] and ip[k, L.IP_ONDEMAND] == 0:
        return True
    # held and idle: in static memory an adapter is evicted only to make room for a load, and only a request for
    # an absent adapter needs one (unified memory: KV admission and growth evict idle adapters too)
    if ip[k, L.IP_UNIFIED] or S_i[k, L.SI_NWAIT] > 0:
        return False
    o = off[k]
    c = cap[k]
    for r in range(S_i[k, L.SI_NEXTARR], S_i[k, L.SI_NKNOWN]):
        if A_i[k, L.AI_STATE, Ri[o * L.RI_LEN + L.RI_ADAPTER * c + r]] == L.AS_ABSENT:
            return False
    return True


@njit(cache=True, nogil=True, _nrt=False)
def run_fleet(code, slack, routes, start, arr_t, arr_a, arr_p, arr_o, arr_b, owner, lidx, load, dt_min, qc, qr,
              off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list, res_list,
              heap_t, heap_a, g_list, g_key, ts, evt, evi, fl, wf, wi):
    """Route and inject arrivals ``start``, ``start + 1``, ... in time order, then finish every replica.

    A replica is advanced to an arrival only if what the router reads of it (its outstanding count; with
    lora_affinity, its residency too) could have changed by then (``_bounds``);
    otherwise it stays behind, and a request routed to it joins it there (its run does not depend on when its
    arrivals are injected, as long as each is known before the replica reaches it).  ``qc`` / ``qr``: the
    bounds per replica (-1: unknown).

    Returns (n, -1) when done, or (i, k) when arrival i is routed to replica k and k's block is full
    (the caller grows it and calls again from i: nothing has changed since the routing decision)."""
    nr = ip.shape[0]
    n = arr_t.shape[0]
    affinity = code == ROUTER_LORA_AFFINITY
    for i in range(start, n):
        t = arr_t[i]
        for k in range(nr):
            if _current(k, t, S_i, S_f):
                continue  # in a step (or at an iteration) at or after t, or idle until after t: nothing happens
            if ip[k, L.IP_QUIET] and t < qc[k]:
                continue  # its outstanding count is what it says (lora_affinity: residency is checked below)
            S_f[k, L.SF_TLIMIT] = t
            _advance(k, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list,
                     res_list, heap_t, heap_a, g_list, g_key, ts, evt, evi, fl, wf, wi)
            _bounds(k, off, cap, ip, Ri, Rf, S_i, S_f, wq, running, dt_min, qc, qr)
        a = arr_a[i]
        if affinity:
            # the candidates (within slack of the least loaded) whose residency of a may differ from their state now
            bound = load[least_loaded(S_i, S_f, t, load)] + slack
            for k in range(nr):
                if load[k] <= bound and not _holds_known(k, a, t, off, cap, ip, Ri, S_i, S_f, A_i, qc, qr):
                    S_f[k, L.SF_TLIMIT] = t
                    _advance(k, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list,
                             res_list, heap_t, heap_a, g_list, g_key, ts, evt, evi, fl, wf, wi)
                    _bounds(k, off, cap, ip, Ri, Rf, S_i, S_f, wq, running, dt_min, qc, qr)
        k = route(code, slack, i, a, routes, S_i, S_f, A_i, t, load)
        m = S_i[k, L.SI_NKNOWN]
        if m >= cap[k]:
            return i, k
        o = off[k]
        c = cap[k]
        bi = o * L.RI_LEN
        bf = o * L.RF_LEN
        Ri[bi + L.RI_ADAPTER * c + m] = a
        Ri[bi + L.RI_PROMPT * c + m] = arr_p[i]
        Ri[bi + L.RI_OUTPUT * c + m] = arr_o[i]
        Ri[bi + L.RI_BLOCKS * c + m] = arr_b[i]
        Rf[bf + L.RF_ARR * c + m] = t
        S_i[k, L.SI_NKNOWN] = m + 1
        owner[i] = k
        lidx[i] = m
        if S_i[k, L.SI_PHASE] == L.PH_IDLE and t < S_f[k, L.SF_WAKE]:
            S_f[k, L.SF_WAKE] = t
        if t < qr[k]:
            qr[k] = t
        d = _arrival_bound(ip, k, t, arr_o[i], dt_min)
        if d < qc[k]:
            qc[k] = d
    for k in range(nr):
        S_f[k, L.SF_TLIMIT] = L._INF
        _advance(k, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list, res_list,
                 heap_t, heap_a, g_list, g_key, ts, evt, evi, fl, wf, wi)
    return n, -1


def min_step_seconds(ip: np.ndarray, fp: np.ndarray) -> float:
    """A lower bound on the duration of any step of a replica with parameters ``ip`` / ``fp`` (a step holds
    at least one token; every step cost is nondecreasing in tokens, context and LoRA work; the kernel model's
    GEMMs take at least their weight read and launch time), less 1e-9 relative for rounding; 0 if unsure."""
    if fp[L.FP_KERNEL] != 0.0 and ip[L.IP_FIXED] == 0:
        eta_c, tau_c, eta_m, _tau_m, _alpha, gamma = fp[L.FP_KPARAMS:L.FP_DENSE_N]
        if not (eta_c > 0 and eta_m > 0 and gamma >= 0 and tau_c >= 0):
            return 0.0
        nk = fp[L.FP_DENSE_N:L.FP_DENSE_K] * fp[L.FP_DENSE_K:L.FP_DENSE_END]
        per_gemm = np.maximum((2.0 * nk / fp[L.FP_PEAK_FLOPS] + tau_c) / eta_c,
                              kernels.DTYPE_BYTES * nk / fp[L.FP_PEAK_BW] / eta_m)
        slots = float(ip[L.IP_PAD_SLOTS])
        extra = fp[L.FP_OVERHEAD] + fp[L.FP_LORA_SLOT] * slots + fp[L.FP_LORA_TOKSLOT] * slots
        lb = fp[L.FP_N_LAYERS] * float(per_gemm.sum()) + fp[L.FP_KV_TOK] / fp[L.FP_BW] + extra
    else:
        fixed = ip[L.IP_FIXED] != 0
        args = (0.0, 0.0, 0.0, 0.0, float(ip[L.IP_PAD_SLOTS]), fp[L.FP_PARAMS], fp[L.FP_WEIGHT_BYTES], fp[L.FP_FLOPS],
                fp[L.FP_BW], fp[L.FP_ATTN], fp[L.FP_KV_TOK], fp[L.FP_OVERHEAD], fp[L.FP_LORA_ADAPTER],
                fp[L.FP_LORA_SLOT], fp[L.FP_PREFILL_TOK], fp[L.FP_DECODE_STEP], fp[L.FP_LORA_TOKSLOT])
        lb = min(step_seconds(fixed, 1.0, 1.0, 0.0, *args), step_seconds(fixed, 0.0, 0.0, 1.0, *args))
    lb = float(lb) * fp[L.FP_COST_SCALE] * (1.0 - 1e-9)
    return lb if math.isfinite(lb) and lb > 0.0 else 0.0


@njit(cache=True, nogil=True, _nrt=False)
def gather_requests(Ri, Rf, off, cap, owner, lidx, R_i, R_f):
    """R_i[:, i] / R_f[:, i] = request i's fields in its replica's block (``owner[i]``, column ``lidx[i]``):
    the fleet's per-request arrays in arrival order, as one GPU's ``R_i`` / ``R_f``."""
    for i in range(owner.shape[0]):
        k = owner[i]
        c = cap[k]
        bi = off[k] * L.RI_LEN + lidx[i]
        bf = off[k] * L.RF_LEN + lidx[i]
        for f in range(L.RI_LEN):
            R_i[f, i] = Ri[bi + f * c]
        for f in range(L.RF_LEN):
            R_f[f, i] = Rf[bf + f * c]


def initial_capacity(n: int, num_replicas: int) -> int:
    """Requests a replica has room for at first under a state-reading router (grown by doubling)."""
    return min(n, int(math.ceil(1.25 * n / num_replicas)) + 64)


def _offsets(cap: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(cap)[:-1]]).astype(np.int64)


def _request_blocks(cap: np.ndarray):
    """Empty per-request buffers for blocks of ``cap`` requests: R_i zeros, R_f NaN except the
    accumulated stall fields (0), as ``sim._build`` lays them out."""
    total = int(cap.sum())
    Ri = np.zeros(L.RI_LEN * total, np.int64)
    Rf = np.full(L.RF_LEN * total, np.nan)
    off = _offsets(cap)
    for o, c in zip(off, cap):
        v = Rf[o * L.RF_LEN:(o + c) * L.RF_LEN].reshape(L.RF_LEN, c)
        v[[L.RF_LOADWAIT, L.RF_C0, L.RF_QSTALL]] = 0.0
    return Ri, Rf, np.zeros(total, np.int64), np.zeros(total, np.int64), off


def _event_caps(cap: np.ndarray, max_events: int) -> np.ndarray:
    return np.minimum(max_events, 4 * cap + 1024).astype(np.int64)


def _views(st: dict, k: int) -> dict:
    """Replica k's arrays, shaped as the single-GPU loop's (views into the fleet's buffers)."""
    o, c, eo, ec = (int(st[x][k]) for x in ("off", "cap", "eoff", "ecap"))
    v = {name: st[name][k] for name in _STACKED}
    v["R_i"] = st["Ri"][o * L.RI_LEN:(o + c) * L.RI_LEN].reshape(L.RI_LEN, c)
    v["R_f"] = st["Rf"][o * L.RF_LEN:(o + c) * L.RF_LEN].reshape(L.RF_LEN, c)
    v["wq"] = st["wq"][o:o + c]
    v["a_list"] = st["al"][o:o + c]
    v["ev_t"] = st["evt"][eo:eo + ec]
    v["ev_i"] = st["evi"][3 * eo:3 * (eo + ec)].reshape(3, ec)
    return v


def replica_arrays(st: dict) -> list[dict]:
    """Every replica's arrays (views), as ``sim._build`` returns them for one GPU."""
    return [_views(st, k) for k in range(len(st["cap"]))]


def _grow(st: dict, k: int, n: int, max_events: int) -> None:
    """Give replica k room for twice as many requests (at most n), keeping every replica's state."""
    old = replica_arrays(st)
    cap = st["cap"].copy()
    cap[k] = min(n, max(2 * cap[k], cap[k] + 1))
    ecap = _event_caps(cap, max_events)
    st["Ri"], st["Rf"], st["wq"], st["al"], st["off"] = _request_blocks(cap)
    st["evt"] = np.zeros(int(ecap.sum()), np.float64)
    st["evi"] = np.zeros(3 * int(ecap.sum()), np.int64)
    st["cap"], st["ecap"], st["eoff"] = cap, ecap, _offsets(ecap)
    for j, o in enumerate(old):
        v = _views(st, j)
        m = o["R_i"].shape[1]
        v["R_i"][:, :m] = o["R_i"]
        v["R_f"][:, :m] = o["R_f"]
        v["wq"][:m] = o["wq"]
        v["a_list"][:m] = o["a_list"]
        e = o["ev_t"].shape[0]
        v["ev_t"][:e] = o["ev_t"]
        v["ev_i"][:, :e] = o["ev_i"]
        st["ip"][j, L.IP_N] = cap[j]
        st["ip"][j, L.IP_MAX_EVENTS] = ecap[j]


@njit(cache=True, nogil=True, _nrt=False)
def run_static(routes, arr_t, arr_a, arr_p, arr_o, arr_b, owner, lidx, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i,
               A_f, al, S_i, S_f, wq, running, new_list, res_list, heap_t, heap_a, g_list, g_key, ts, evt, evi, fl, wf, wi):
    """A router that reads no state: every replica gets its requests up front and runs to the end on its
    own (the same result as ``run_fleet``: a replica's run does not depend on when its arrivals are
    injected, as long as each is known before the replica reaches it; tests/test_fleet.py checks it)."""
    for i in range(arr_t.shape[0]):
        k = routes[i]
        m = S_i[k, L.SI_NKNOWN]
        o = off[k]
        c = cap[k]
        Ri[o * L.RI_LEN + L.RI_ADAPTER * c + m] = arr_a[i]
        Ri[o * L.RI_LEN + L.RI_PROMPT * c + m] = arr_p[i]
        Ri[o * L.RI_LEN + L.RI_OUTPUT * c + m] = arr_o[i]
        Ri[o * L.RI_LEN + L.RI_BLOCKS * c + m] = arr_b[i]
        Rf[o * L.RF_LEN + L.RF_ARR * c + m] = arr_t[i]
        S_i[k, L.SI_NKNOWN] = m + 1
        owner[i] = k
        lidx[i] = m
    for k in range(ip.shape[0]):
        S_f[k, L.SF_TLIMIT] = L._INF
        _advance(k, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list, res_list,
                 heap_t, heap_a, g_list, g_key, ts, evt, evi, fl, wf, wi)


def run(sc, wl: Workload, template: dict, max_events: int, lockstep: bool = False) -> dict:
    """Simulate the fleet of ``sc.num_replicas`` replicas on the stream ``wl`` (open loop).

    ``template``: one replica's arrays for an empty stream (``sim._build(sc, empty)``: parameters,
    preloads, host cache).  Returns the fleet's buffers (``replica_arrays`` gives each replica's
    arrays) with ``owner`` (the replica of each request of ``wl``) and ``lidx`` (its index there).
    A router that reads no state runs the replicas one after the other (``run_static``) unless
    ``lockstep`` (the reference the shortcut is tested against)."""
    N = sc.num_replicas
    n = len(wl)
    pol = STRATEGIES[sc.strategy]
    router = ROUTERS[sc.router]
    adapter = np.zeros(n, np.int64) if pol.single_adapter else wl.adapter.astype(np.int64)
    blocks = -(-(wl.prompt_tokens + wl.output_tokens) // sc.kv_block_tokens)
    if router.stateful:
        routes = np.zeros(1, np.int64)
        cap = np.full(N, initial_capacity(n, N), np.int64)
    else:
        routes = static_routes(sc.router, adapter, N, sc.num_adapters, sc.seed)
        cap = np.bincount(routes, minlength=N).astype(np.int64)
    ecap = _event_caps(cap, max_events)
    st = {name: np.stack([template[name]] * N) for name in _STACKED}
    st["ip"][:, L.IP_N] = cap
    st["ip"][:, L.IP_MAX_EVENTS] = ecap
    st["ip"][:, L.IP_MEAN_BLOCKS] = max(1, int(round(float(np.mean(blocks))))) if n else 1
    st["ip"][:, L.IP_MAXBLK] = max_request_blocks(wl, sc.kv_block_tokens)  # (the template's workload is empty)
    st["S_i"][:, L.SI_FLEET] = 1
    st["Ri"], st["Rf"], st["wq"], st["al"], st["off"] = _request_blocks(cap)
    st["cap"], st["ecap"], st["eoff"] = cap, ecap, _offsets(ecap)
    st["evt"] = np.zeros(int(ecap.sum()), np.float64)
    st["evi"] = np.zeros(3 * int(ecap.sum()), np.int64)
    if not router.stateful and pol.evict == EVICT_BELADY:
        # Belady: each replica's requests per adapter in stream order (CSR), known up front
        for k in range(N):
            v = _views(st, k)
            ad = adapter[routes == k]
            v["a_list"][:], v["A_i"][L.AI_PTR], v["A_i"][L.AI_END] = belady_lists(ad, sc.num_adapters)
            v["A_i"][L.AI_CUR] = v["A_i"][L.AI_PTR]
    owner = np.full(n, -1, np.int64)
    lidx = np.full(n, -1, np.int64)
    load = np.zeros(N, np.int64)
    arr_t = np.ascontiguousarray(wl.arrival_s, dtype=np.float64)
    arr_p = np.ascontiguousarray(wl.prompt_tokens, dtype=np.int64)
    arr_o = np.ascontiguousarray(wl.output_tokens, dtype=np.int64)
    blocks = np.ascontiguousarray(blocks, dtype=np.int64)
    if not router.stateful and not lockstep:
        run_static(routes, arr_t, adapter, arr_p, arr_o, blocks, owner, lidx, st["off"], st["cap"], st["eoff"],
                   st["ecap"], st["ip"], st["fp"], st["Ri"], st["Rf"], st["A_i"], st["A_f"], st["al"], st["S_i"],
                   st["S_f"], st["wq"], st["running"], st["new_list"], st["res_list"], st["heap_t"], st["heap_a"],
                   st["g_list"], st["g_key"], st["ts"], st["evt"], st["evi"], st["fl"], st["wf"], st["wi"])
    else:
        i = 0
        dt_min = min_step_seconds(st["ip"][0], st["fp"][0])
        qc = np.full(N, -1.0)
        qr = np.full(N, -1.0)
        while True:
            i, k = run_fleet(router.code, sc.affinity_load_slack, routes, i, arr_t, adapter, arr_p, arr_o, blocks,
                             owner, lidx, load, dt_min, qc, qr, st["off"], st["cap"], st["eoff"], st["ecap"], st["ip"], st["fp"],
                             st["Ri"], st["Rf"], st["A_i"], st["A_f"], st["al"], st["S_i"], st["S_f"], st["wq"],
                             st["running"], st["new_list"], st["res_list"], st["heap_t"], st["heap_a"],
                             st["g_list"], st["g_key"], st["ts"], st["evt"], st["evi"], st["fl"], st["wf"], st["wi"])
            if k < 0:
                break
            _grow(st, k, n, max_events)  # arrival i goes to k, whose block is full: more room, then resume
    st["owner"], st["lidx"] = owner, lidx
    st["held0"] = template["A_i"][L.AI_STATE] != L.AS_ABSENT  # adapters on every GPU before t = 0
    return st
