"""A copy of the repository with nothing beside it stands alone (issue 23): ``validate --quick`` runs and
opens no file outside the copy (checked with an audit hook on every ``open``), and the tests that read
the shipped measurements pass there with no skip.

The copy is the tree as git sees it (tracked and untracked-but-not-ignored files: what a clone of this
commit would hold, plus work not yet committed), in a fresh temporary folder whose ancestors hold no
``shared/reference-data``; it gets its own empty Numba cache (so it also compiles from scratch) and
no ``PYTEST_ADDOPTS`` (CI's JUnit file stays the outer run's)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the test files that read engine/data/reference (they skipped on a user's machine before issue 23)
DATA_TESTS = ("tests/test_data_manifest.py", "tests/test_kernels.py", "tests/test_seed3_preset.py",
              "tests/test_traces.py", "tests/test_calibrate.py")

#: Runs ``python -m engine <argv>`` with an audit hook recording every path opened, written as JSON
#: lines to the file named by $OPEN_LOG when the interpreter exits.
AUDIT = r"""
import atexit, json, os, runpy, sys
opened = set()
def hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        p = os.fsdecode(args[0])
        opened.add(os.path.abspath(p))
sys.addaudithook(hook)
atexit.register(lambda: open(os.environ["OPEN_LOG"], "w").write(json.dumps(sorted(opened))))
sys.argv = ["engine", *sys.argv[1:]]
runpy.run_module("engine", run_name="__main__", alter_sys=True)
"""


def _tree_files() -> list[str]:
    r = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                       capture_output=True, check=True)
    return [f for f in r.stdout.decode().split("\0") if f and (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("standalone")
    repo = base / "lora-what-if"
    for f in _tree_files():
        dst = repo / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dst)
    for d in repo.parents:  # nothing beside it, at any level
        assert not (d / "shared" / "reference-data").exists(), d
    return repo


def _env(repo: Path) -> dict:
    """The environment of a run in the copy: its own Numba cache and matplotlib folder beside it (shared by the
    module's runs, so the kernels compile once), CI's pytest options left out."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTHONPATH")}
    env.update(NUMBA_CACHE_DIR=str(repo.parent / "numba"), MPLCONFIGDIR=str(repo.parent / "mpl"),
               PYTHONDONTWRITEBYTECODE="1")
    return env


def _outside(paths: list[str], repo: Path, own: Path | None = None) -> list[str]:
    """Opened paths that are neither in the copy, the Python installation nor the test's own output folder
    ``own``, but in the original checkout's folder (where ``shared/`` lives; /tmp for a clone in /tmp), in the
    copy's own parent, or named like the old data."""
    allowed = [repo] + [Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}]
    allowed += [own.resolve()] if own is not None else []
    allowed += [repo.parent / "numba", repo.parent / "mpl"]  # the run's own caches (_env)
    watch = [ROOT.parent, repo.parent]
    bad = []
    for s in paths:
        p = Path(s).resolve()
        if any(p == a or a in p.parents for a in allowed):
            continue
        if "reference-data" in s or any(p == w or w in p.parents for w in watch):
            bad.append(s)
    return bad


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_validate_quick_in_a_copy_with_nothing_beside_it(copy, tmp_path):
    log = tmp_path / "opened.json"
    out = tmp_path / "v" / "validation.md"
    env = _env(copy) | {"OPEN_LOG": str(log)}
    r = subprocess.run([sys.executable, "-c", AUDIT, "validate", "--quick", "--no-plots", "--out", str(out)],
                       cwd=copy, env=env, capture_output=True, text=True, timeout=1100)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert out.is_file() and "Validation against public multi-LoRA serving measurements" in out.read_text()
    opened = json.loads(log.read_text())
    data = [p for p in opened if "/engine/data/reference/" in p]
    assert data and all(Path(p).is_relative_to(copy) for p in data), data  # it read the copy's own data
    assert not _outside(opened, copy, tmp_path), _outside(opened, copy, tmp_path)


def test_the_outside_check_would_catch_the_old_data_folder(tmp_path):
    repo = tmp_path / "repo"
    old = str(ROOT.parent / "shared" / "reference-data" / "slora_s1_results.csv")
    assert _outside([old, str(repo / "engine" / "x.csv"), "/etc/hosts"], repo) == [old]
    assert _outside([str(tmp_path / "shared" / "x.csv")], repo) == [str(tmp_path / "shared" / "x.csv")]
    # the run's own output folder is allowed, and only it: a sibling of it in the same parent is not
    out = tmp_path / "out"
    assert _outside([str(out / "v.md"), str(tmp_path / "shared" / "x.csv")], repo, out) == [
        str(tmp_path / "shared" / "x.csv")]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_data_tests_pass_in_the_copy_with_no_skip(copy, tmp_path):
    junit = tmp_path / "junit.xml"
    # validate --quick itself ran in the test above (test_calibrate's copy of it is left out here)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                        f"--junitxml={junit}", "-k", "not validate_quick", *DATA_TESTS],
                       cwd=copy, env=_env(copy), capture_output=True, text=True, timeout=1700)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    suites = ET.parse(junit).getroot()
    suite = suites if suites.tag == "testsuite" else suites.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "skipped", "failures", "errors")}
    assert counts["tests"] > 100 and counts["skipped"] == counts["failures"] == counts["errors"] == 0, counts
