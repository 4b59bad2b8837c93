"""engine.jitcache: Numba's cache directory follows the digest of every jitted module, so an edit to a callee
(which Numba's own per-file key ignores) never loads stale machine code."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numba

from engine import jitcache

ROOT = Path(__file__).resolve().parent.parent


def test_jit_modules_lists_every_module_with_jitted_functions():
    jitted = {p.stem for p in (ROOT / "engine").rglob("*.py") if re.search(r"@(njit|jit|vectorize)\b", p.read_text())}
    assert jitted == set(jitcache.JIT_MODULES), "a jitted module missing from (or stale in) JIT_MODULES"


def test_digest_changes_with_any_jitted_module_and_only_then(tmp_path):
    for m in jitcache.JIT_MODULES:
        shutil.copy(ROOT / "engine" / f"{m}.py", tmp_path / f"{m}.py")
    d0 = jitcache.source_digest(tmp_path)
    assert d0 == jitcache.source_digest(ROOT / "engine") and re.fullmatch(r"[0-9a-f]{16}", d0)
    (tmp_path / "unrelated.py").write_text("x = 1\n")
    assert jitcache.source_digest(tmp_path) == d0
    seen = {d0}
    for m in jitcache.JIT_MODULES:
        f = tmp_path / f"{m}.py"
        text = f.read_text()
        f.write_text(text + "\n# edited\n")
        d = jitcache.source_digest(tmp_path)
        assert d not in seen, m
        seen.add(d)
        f.write_text(text)
    assert jitcache.source_digest(tmp_path) == d0


def test_numba_uses_the_digest_directory():
    assert numba.config.CACHE_DIR == jitcache.CACHE_DIR
    assert jitcache.CACHE_DIR.endswith(f"engine-{jitcache.source_digest()}")


def test_a_fresh_process_writes_its_cache_under_the_digest(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    code = ("from engine import Scenario, simulate, jitcache; "
            "simulate(Scenario.from_preset('default', duration_s=2.0, warmup_s=0.5, num_adapters=4, hot_set_k=-1)); "
            "print(jitcache.CACHE_DIR)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    where = Path(out.stdout.strip().splitlines()[-1])
    assert where == tmp_path / f"engine-{jitcache.source_digest()}"
    assert any(where.rglob("*.nbi")) and not any(p for p in tmp_path.iterdir() if p != where)
