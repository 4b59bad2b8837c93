"""Where ``engine.sweep.parallel_map`` runs its chunks: a process pool, threads, or Ray.

``process`` (the default of sweeps): a ``spawn`` process pool on this machine.  ``thread``: a
thread pool (the jitted loop releases the GIL).  ``ray``: Ray tasks, on a local Ray instance or a
cluster.  Each chunk is ``[fn(x) for x in items]``, and every item is deterministic, so a
backend changes where the work runs, never the results.

Ray is optional (``pip install "ray[default]"``) and imported only when ``backend="ray"``.
Which Ray:

* already initialised (``ray.init`` called by you, or by an earlier sweep): used as it is, and
  never shut down here (your own ``runtime_env`` applies; only ``NUMBA_CACHE_DIR`` is added per task);
* else ``ray_address`` or the ``RAY_ADDRESS`` environment variable: ``ray.init(address=...)`` on that
  cluster, shipping this checkout's ``engine`` package to the workers (``runtime_env`` ``py_modules``,
  without ``__pycache__``): the workers need only the runtime requirements (NumPy, Numba, pandas,
  SciPy), not the engine, and run exactly the driver's code (they compile the jitted loop at first
  use: tens of seconds, then cached per node for that package version).  A ``host:port`` nothing
  listens on fails at once (Ray itself would retry for minutes);
* else a new local instance (``address="local"``, never an unrelated running one) with
  ``num_cpus`` = workers (or the core count) and no dashboard; the workers find the engine on
  ``PYTHONPATH`` (this checkout prepended).

``NUMBA_CACHE_DIR``, when set, is passed to the workers (``runtime_env`` ``env_vars``), so a local
instance's workers load the jitted loop the driver compiled; on a cluster the path must be writable
on the workers.  A Ray instance started here stays up for later sweeps in this process (starting
one costs seconds) until ``shutdown_ray()`` or the interpreter's exit (Ray's own ``atexit`` hook);
the CLI shuts it down when its command ends.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from pathlib import Path

BACKENDS = ("process", "thread", "ray")
RAY_INSTALL = 'pip install "ray[default]"'
_ENGINE_DIR = Path(__file__).resolve().parent
#: The address of the Ray instance this module started ("" for a local one); None: none started here.
_started: list[str | None] = [None]


class BackendError(RuntimeError):
    """A backend cannot run: its package is missing or its cluster cannot be reached (one-line message)."""


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def check_backend(backend: str | None, threads: bool = False, ray_address: str | None = None) -> str:
    """The backend to use (None: ``thread`` if ``threads`` else ``process``); ValueError naming a bad value."""
    if backend is None:
        backend = "thread" if threads else "process"
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend: invalid value {backend!r}; allowed: {', '.join(BACKENDS)}")
    if ray_address is not None:
        if not isinstance(ray_address, str) or not ray_address.strip():
            raise ValueError(f"ray_address: invalid value {ray_address!r}; allowed: None or a Ray address "
                             f"such as 'auto' or 'ray://head:10001'")
        if backend != "ray":
            raise ValueError(f"ray_address: given with backend {backend!r}; allowed: only with backend 'ray'")
    return backend


def import_ray():
    """The ``ray`` module, or BackendError naming the missing package and how to install it."""
    try:
        import ray
    except ImportError:
        raise BackendError(f"backend 'ray': the package 'ray' is not installed; install it with: "
                           f"{RAY_INSTALL}") from None
    return ray


def _env_vars() -> dict[str, str]:
    v = os.environ.get("NUMBA_CACHE_DIR")
    return {"NUMBA_CACHE_DIR": v} if v else {}


def connect_ray(workers: int | None, ray_address: str | None):
    """Initialise (or reuse) Ray; return ``(ray, cluster CPUs, per-task options)`` (see the module docstring)."""
    ray = import_ray()
    address = (ray_address or os.environ.get("RAY_ADDRESS") or "").strip()
    address = "" if address == "local" else address
    if ray.is_initialized():
        if _started[0] is None:  # someone else's Ray: as it is, plus the Numba cache location
            env = _env_vars()
            return ray, _cluster_cpus(ray), ({"runtime_env": {"env_vars": env}} if env else {})
        if _started[0] == address:
            return ray, _cluster_cpus(ray), {}
        shutdown_ray()  # ours, but for another address
    env = _env_vars()
    kw: dict = {"logging_level": logging.WARNING, "include_dashboard": False}
    if address:
        runtime_env = {"py_modules": [str(_ENGINE_DIR)], "excludes": ["__pycache__"]}
        kw.pop("include_dashboard")  # a cluster's dashboard is the cluster's business
    else:
        runtime_env = {}
        paths = [str(_ENGINE_DIR.parent), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        env = {**env, "PYTHONPATH": os.pathsep.join(paths)}
        kw["num_cpus"] = workers or cpu_count()
    if env:
        runtime_env["env_vars"] = env
    _probe(address)
    try:
        ray.init(address=address or "local", runtime_env=runtime_env, **kw)
    except Exception as e:  # ConnectionError, ValueError (bad address), TimeoutError, ...
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        msg = " ".join(str(e).split()) or type(e).__name__
        raise BackendError(f"backend 'ray': cannot start or reach {where} ({msg[:300]})") from None
    _started[0] = address
    return ray, _cluster_cpus(ray), {}


def _probe(address: str) -> None:
    """Fail fast on a ``host:port`` nothing listens on (Ray itself retries for minutes)."""
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not address or "://" in hostport or not sep or not port.isdigit():
        return  # "auto", or a format Ray names itself
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=5).close()
    except OSError as e:
        raise BackendError(f"backend 'ray': cannot reach the Ray cluster at {address!r} "
                           f"({e.strerror or type(e).__name__})") from None


def _cluster_cpus(ray) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def shutdown_ray() -> None:
    """Shut down the Ray instance this module started, if any (never one initialised elsewhere)."""
    if _started[0] is None:
        return
    _started[0] = None
    import ray
    if ray.is_initialized():
        ray.shutdown()


def map_chunk(fn: Callable, items: list) -> list:
    return [fn(x) for x in items]


def pool_chunks(fn: Callable, items: Sequence, chunks: list[list[int]], workers: int,
                threads: bool) -> Iterator[tuple[list[int], list]]:
    """Yield ``(indices, results)`` per chunk as the chunks complete, on a process or thread pool."""
    pool = (ThreadPoolExecutor(max_workers=workers) if threads else
            ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")))
    with pool as ex:
        futs = {ex.submit(map_chunk, fn, [items[i] for i in idx]): idx for idx in chunks}
        try:
            for f in as_completed(futs):
                yield futs[f], f.result()
        except BaseException:
            for f in futs:
                f.cancel()
            raise


def ray_chunks(ray, options: dict, fn: Callable, items: Sequence,
               chunks: list[list[int]]) -> Iterator[tuple[list[int], list]]:
    """Yield ``(indices, results)`` per chunk as the Ray tasks complete (``ray.wait``); cancel the rest on error.

    A task's exception is re-raised as itself (the Ray error, with the remote traceback, as its cause).
    """
    task = ray.remote(num_cpus=1)(map_chunk)
    if options:
        task = task.options(**options)
    fn_ref = ray.put(fn)
    pending = {task.remote(fn_ref, [items[i] for i in idx]): idx for idx in chunks}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                idx = pending.pop(ref)
                try:
                    rows = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    cause = getattr(e, "cause", None)
                    if isinstance(cause, Exception):
                        raise cause from e
                    raise
                yield idx, rows
    except BaseException:
        for ref in pending:
            ray.cancel(ref)
        raise
