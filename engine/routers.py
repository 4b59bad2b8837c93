"""Routers: which replica of a fleet serves an arriving request (docs/model.md, "Fleet").

A router is one entry in ``ROUTERS`` (name, code, whether it reads the replicas' state) behind one
jitted decision, ``route``, that the fleet loop (``engine/fleet.py``) calls once per arrival, after
every replica has been advanced to the arrival time:

* ``random``: a uniform replica, from the router's own seeded stream (``router_uniforms``; the
  workload's four streams are untouched, so every router sees the same requests);
* ``round_robin``: request i (in arrival order) goes to replica i mod N;
* ``least_loaded``: the fewest outstanding requests (waiting + running at that instant), ties to
  the lowest index;
* ``lora_affinity``: among the replicas whose outstanding count is within ``affinity_load_slack``
  of the least loaded, one where the request's adapter is resident or loading (the least loaded
  of them, ties to the lowest index); if there is none, the least loaded;
* ``adapter_hash``: a static partition of the adapters by consistent hashing (``hash_ring``: a
  ring of ``VNODES`` virtual nodes per replica); popularity decides nothing.

``random``, ``round_robin`` and ``adapter_hash`` read nothing but the request, so their routes are
drawn up front (``static_routes``); the two others read the replicas' state (``stateful``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from .loop import AI_STATE, AS_ABSENT, SF_T, SI_LASTDONE, SI_NEXTARR, SI_NKNOWN, SI_NRUN, SI_NWAIT

ROUTER_RANDOM, ROUTER_ROUND_ROBIN, ROUTER_LEAST_LOADED, ROUTER_LORA_AFFINITY, ROUTER_ADAPTER_HASH = range(5)

#: Virtual nodes per replica on the consistent-hash ring.
VNODES = 128
#: Fixed salts of the ring, one per domain (nodes, adapters: hashed twice, so no adapter lands on a node by
#: construction; the partition is a property of the deployment: the same in every
#: replication; the scenario's seed varies the traffic, not the ring).
_SALT_NODE = 0x5EED_F1EE_7000_0001
_SALT_ADAPTER = 0x5EED_F1EE_7000_0002
#: The router's random stream: child 4 of the seed's SeedSequence (the workload uses children 0-3).
STREAM_ROUTER = 4


@dataclass(frozen=True)
class Router:
    name: str
    code: int
    stateful: bool  # reads the replicas' state at arrival (else its routes are fixed by the stream)
    description: str


ROUTERS: dict[str, Router] = {r.name: r for r in [
    Router("round_robin", ROUTER_ROUND_ROBIN, False,
           "request i (in arrival order) goes to replica i mod num_replicas"),
    Router("random", ROUTER_RANDOM, False,
           "a uniformly random replica per request (the router's own seeded stream)"),
    Router("least_loaded", ROUTER_LEAST_LOADED, True,
           "the replica with the fewest outstanding requests (waiting + running) at arrival; ties to the "
           "lowest index"),
    Router("lora_affinity", ROUTER_LORA_AFFINITY, True,
           "a replica where the request's adapter is resident or loading, among those within "
           "affinity_load_slack outstanding requests of the least loaded; otherwise the least loaded"),
    Router("adapter_hash", ROUTER_ADAPTER_HASH, False,
           "every request of an adapter to one replica: consistent hashing of the adapter id on a ring "
           f"with {VNODES} virtual nodes per replica (popularity decides nothing)"),
]}


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 (wrapping arithmetic): a fixed, well-spread hash."""
    with np.errstate(over="ignore"):
        z = (x.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)  # the x-th SplitMix64 state
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_ring(num_replicas: int, num_adapters: int) -> np.ndarray:
    """Replica of each adapter: the first virtual node clockwise of the adapter's hash.

    Replica k's virtual nodes do not depend on the number of replicas, so going from N to N + 1
    replicas moves only the adapters the new replica's nodes capture (about 1 / (N + 1) of them),
    all to the new replica."""
    k = np.repeat(np.arange(num_replicas, dtype=np.uint64), VNODES)
    v = np.tile(np.arange(VNODES, dtype=np.uint64), num_replicas)
    pos = _mix64(_mix64((k << np.uint64(20)) | v) ^ np.uint64(_SALT_NODE))
    order = np.argsort(pos, kind="stable")
    pos, owner = pos[order], k[order].astype(np.int64)
    h = _mix64(_mix64(np.arange(num_adapters, dtype=np.uint64)) ^ np.uint64(_SALT_ADAPTER))
    j = np.searchsorted(pos, h, side="left") % len(pos)
    return owner[j]


def router_uniforms(seed: int, n: int) -> np.ndarray:
    """The random router's draws: one uniform per request, from the seed's router stream."""
    ss = np.random.SeedSequence(seed).spawn(STREAM_ROUTER + 1)[STREAM_ROUTER]
    return np.random.Generator(np.random.PCG64(ss)).random(n)


def static_routes(name: str, adapter: np.ndarray, num_replicas: int, num_adapters: int, seed: int) -> np.ndarray:
    """The replica of every request for a router that reads no state (``stateful`` False)."""
    n = len(adapter)
    if name == "round_robin":
        return np.arange(n, dtype=np.int64) % num_replicas
    if name == "random":
        return np.minimum((router_uniforms(seed, n) * num_replicas).astype(np.int64), num_replicas - 1)
    if name == "adapter_hash":
        return hash_ring(num_replicas, num_adapters)[adapter]
    raise ValueError(f"router: {name!r} reads the replicas' state; allowed: "
                     + ", ".join(r.name for r in ROUTERS.values() if not r.stateful))


@njit(cache=True, nogil=True, _nrt=False)
def outstanding(S_i, S_f, k, t):
    """Requests replica k holds at instant t: waiting + running, plus those arrived and not yet taken
    in (injected after its last iteration) and those finishing at the end of a step still running at t."""
    o = S_i[k, SI_NWAIT] + S_i[k, SI_NRUN] + S_i[k, SI_NKNOWN] - S_i[k, SI_NEXTARR]
    if t < S_f[k, SF_T]:
        o += S_i[k, SI_LASTDONE]
    return o


@njit(cache=True, nogil=True, _nrt=False)
def least_loaded(S_i, S_f, t, load):
    """The replica with the fewest outstanding requests at t (ties to the lowest index); ``load`` gets every
    replica's count (lora_affinity's candidates are those within ``affinity_load_slack`` of it)."""
    best = 0
    for k in range(S_i.shape[0]):
        load[k] = outstanding(S_i, S_f, k, t)
        if load[k] < load[best]:
            best = k
    return best


@njit(cache=True, nogil=True, _nrt=False)
def route(code, slack, i, a, routes, S_i, S_f, A_i, t, load):
    """Replica for request i (adapter a, arriving at t).  ``routes``: the precomputed routes of a
    static router; ``load``: scratch, one entry per replica (left holding the outstanding counts)."""
    if code != ROUTER_LEAST_LOADED and code != ROUTER_LORA_AFFINITY:
        return routes[i]
    nr = S_i.shape[0]
    best = least_loaded(S_i, S_f, t, load)
    if code == ROUTER_LORA_AFFINITY:
        bound = load[best] + slack
        aff = -1
        for k in range(nr):
            if load[k] <= bound and A_i[k, AI_STATE, a] != AS_ABSENT and (aff < 0 or load[k] < load[aff]):
                aff = k
        if aff >= 0:
            return aff
    return best
