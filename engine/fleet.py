"""The fleet: ``num_replicas`` identical GPUs behind a router, one jitted loop over all of them.

Every replica is a full server of the scenario (same GPU, model, memory and policy) with its own
copy of the single-GPU loop's arrays.  Arrays of a fixed size are stacked with a leading replica
axis (``A_i[k]`` is replica k's adapter table); the per-request arrays are ragged, one flat buffer
each with replica k's block at ``off[k]`` (``cap[k]`` requests; a block is laid out exactly as the
single-GPU array and viewed as one, so the same compiled ``run_loop`` serves both).

``run_fleet`` takes the arrivals in time order: it advances every replica to the arrival time
(``run_loop`` with a time limit: each replica stops before any iteration at or after it), asks the
router (``routers.route``) for a replica, which sees every replica's state at that instant, and
injects the request into it; after the last arrival it runs every replica to the end.  A request
is routed once, at arrival (no migration).  Replicas that cannot change state before the arrival
(busy in a step that ends after it, or idle with their next event after it) are not called, nor are those
paused inside a run of decode steps whose outstanding requests and residency cannot change before a
known time (``SF_QUIET``, set by the loop): such a replica is advanced only when a request is routed to
it or that time has passed, and its run resumes exactly where it would have been.

``run`` is the Python side: it lays the arrays out from the single-GPU builder's template, draws
the static routes, grows a replica's block when a state-reading router sends it more requests than
it has room for (doubling; the loop returns to Python and resumes), and hands the arrays back.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import loop as L
from .policies import EVICT_BELADY, STRATEGIES
from .routers import ROUTERS, route, static_routes
from .workload import Workload

#: Arrays with one row per replica (``np.stack`` of the template), in run_loop's argument order.
_STACKED = ("ip", "fp", "A_i", "A_f", "S_i", "S_f", "running", "new_list", "res_list", "heap_t", "heap_a",
            "g_list", "g_key", "ts", "fl")


@njit(cache=True, nogil=True)
def _advance(k, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list, res_list,
             heap_t, heap_a, g_list, g_key, ts, evt, evi, fl):
    """Run replica k's loop (until its time limit S_f[k, SF_TLIMIT])."""
    o = off[k]
    c = cap[k]
    eo = eoff[k]
    ec = ecap[k]
    return L.run_loop(ip[k], fp[k], Ri[o * L.RI_LEN:(o + c) * L.RI_LEN].reshape((L.RI_LEN, c)),
                      Rf[o * L.RF_LEN:(o + c) * L.RF_LEN].reshape((L.RF_LEN, c)), A_i[k], A_f[k], al[o:o + c],
                      S_i[k], S_f[k], wq[o:o + c], running[k], new_list[k], res_list[k], heap_t[k], heap_a[k],
                      g_list[k], g_key[k], ts[k], evt[eo:eo + ec], evi[3 * eo:3 * (eo + ec)].reshape((3, ec)), fl[k])


@njit(cache=True, nogil=True)
def run_fleet(code, slack, routes, start, arr_t, arr_a, arr_p, arr_o, arr_b, owner, lidx, load,
              off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list, res_list,
              heap_t, heap_a, g_list, g_key, ts, evt, evi, fl):
    """Route and inject arrivals ``start``, ``start + 1``, ... in time order, then finish every replica.

    Returns (n, -1) when done, or (i, k) when arrival i is routed to replica k and k's block is full
    (the caller grows it and calls again from i: nothing has changed since the routing decision)."""
    nr = ip.shape[0]
    n = arr_t.shape[0]
    for i in range(start, n):
        t = arr_t[i]
        for k in range(nr):
            ph = S_i[k, L.SI_PHASE]
            if ph == L.PH_TOP and t <= S_f[k, L.SF_T]:
                continue  # in a step (or at an iteration) at or after t: nothing happens before t
            if ph == L.PH_IDLE and t < S_f[k, L.SF_WAKE]:
                continue  # idle, and its next known event is after t
            if ph == L.PH_TOP and t < S_f[k, L.SF_QUIET]:
                continue  # inside a decode run: nothing the router reads changes before SF_QUIET
            S_f[k, L.SF_TLIMIT] = t
            _advance(k, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list,
                     res_list, heap_t, heap_a, g_list, g_key, ts, evt, evi, fl)
        a = arr_a[i]
        k = route(code, slack, i, a, routes, S_i, S_f, A_i, t, load)
        m = S_i[k, L.SI_NKNOWN]
        if m >= cap[k]:
            return i, k
        if S_i[k, L.SI_PHASE] == L.PH_TOP and S_f[k, L.SF_T] < t:
            # a quiet replica left behind: bring it to t before the request joins it (its run resumes exactly)
            S_f[k, L.SF_TLIMIT] = t
            _advance(k, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list,
                     res_list, heap_t, heap_a, g_list, g_key, ts, evt, evi, fl)
        S_f[k, L.SF_QUIET] = -1.0  # a request joins: its next iteration schedules
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
    for k in range(nr):
        S_f[k, L.SF_TLIMIT] = L._INF
        _advance(k, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i, A_f, al, S_i, S_f, wq, running, new_list, res_list,
                 heap_t, heap_a, g_list, g_key, ts, evt, evi, fl)
    return n, -1


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


@njit(cache=True, nogil=True)
def run_static(routes, arr_t, arr_a, arr_p, arr_o, arr_b, owner, lidx, off, cap, eoff, ecap, ip, fp, Ri, Rf, A_i,
               A_f, al, S_i, S_f, wq, running, new_list, res_list, heap_t, heap_a, g_list, g_key, ts, evt, evi, fl):
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
                 heap_t, heap_a, g_list, g_key, ts, evt, evi, fl)


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
            v["a_list"][:] = np.argsort(ad, kind="stable")
            counts = np.bincount(ad, minlength=sc.num_adapters)
            ptr = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
            v["A_i"][L.AI_PTR] = ptr
            v["A_i"][L.AI_CUR] = ptr
            v["A_i"][L.AI_END] = ptr + counts
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
                   st["g_list"], st["g_key"], st["ts"], st["evt"], st["evi"], st["fl"])
    else:
        i = 0
        while True:
            i, k = run_fleet(router.code, sc.affinity_load_slack, routes, i, arr_t, adapter, arr_p, arr_o, blocks,
                             owner, lidx, load, st["off"], st["cap"], st["eoff"], st["ecap"], st["ip"], st["fp"],
                             st["Ri"], st["Rf"], st["A_i"], st["A_f"], st["al"], st["S_i"], st["S_f"], st["wq"],
                             st["running"], st["new_list"], st["res_list"], st["heap_t"], st["heap_a"],
                             st["g_list"], st["g_key"], st["ts"], st["evt"], st["evi"], st["fl"])
            if k < 0:
                break
            _grow(st, k, n, max_events)  # arrival i goes to k, whose block is full: more room, then resume
    st["owner"], st["lidx"] = owner, lidx
    st["held0"] = template["A_i"][L.AI_STATE] != L.AS_ABSENT  # adapters on every GPU before t = 0
    return st
