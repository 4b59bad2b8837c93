"""Numba's on-disk cache, keyed on the source of every jitted module together.

Numba's ``cache=True`` keys a compiled function on its own file only: after an edit to a module it
calls (``fleet.py`` and ``loop.py`` calling ``costs.py``, ``policies.py``, ...), the stale machine
code of the caller is loaded and silently runs the old callee.  Imported first by ``engine``, before
any jitted module is decorated, this module points ``numba.config.CACHE_DIR`` at a subdirectory
named by the digest of all the jitted modules' sources (``JIT_MODULES``): any edit to any of them
gives a new directory, hence a fresh compile, and an unchanged tree reuses its cache.

Where: ``$NUMBA_CACHE_DIR/engine-<digest>`` if the variable is set (Docker, CI); otherwise
``engine/__pycache__/engine-<digest>`` when the source tree is writable, else
``~/.cache/lora-whatif/numba/engine-<digest>``.  Older ``engine-*`` directories are left in place
(delete them at will).  Deterministic: spawned and Ray workers compute the same digest.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numba

#: The engine modules that define jitted functions (tests/test_jitcache.py checks the list is complete).
JIT_MODULES = ("costs", "fleet", "kernels", "loop", "memory", "policies", "routers")
ENGINE_DIR = Path(__file__).resolve().parent


def source_digest(root: Path = ENGINE_DIR, modules: tuple[str, ...] = JIT_MODULES) -> str:
    """16 hex digits of SHA-256 over the jitted modules' names and bytes, in ``modules`` order."""
    h = hashlib.sha256()
    for m in modules:
        h.update(m.encode() + b"\0")
        h.update((root / f"{m}.py").read_bytes())
    return h.hexdigest()[:16]


def _writable(d: Path) -> bool:
    p = d
    while not p.exists():
        p = p.parent
    return os.access(p, os.W_OK)


def cache_base() -> str:
    """The directory the digest subdirectory goes in (see the module docstring)."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return env
    local = ENGINE_DIR / "__pycache__"
    if _writable(local):
        return str(local)
    return os.path.join(os.path.expanduser("~"), ".cache", "lora-whatif", "numba")


def configure() -> str:
    """Point Numba's cache at ``cache_base()/engine-<digest>``; returns that directory."""
    path = os.path.join(cache_base(), f"engine-{source_digest()}")
    numba.config.CACHE_DIR = path
    return path


CACHE_DIR = configure()
