"""The layout and its rules: import-linter contracts, ruff, file sizes, no stray modules.

docs/architecture.md describes the layers these tests hold the code to.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONTRACTS = {c["id"]: c for c in PYPROJECT["tool"]["importlinter"]["contracts"]}
#: The engine's upper layers (everything else directly under engine/ is the model).
UPPER = {"__main__", "cli", "studies", "planner", "calibration", "live"}
#: The one file allowed to be long: the jitted loop (one function the compiler sees whole).
LONG_OK = {"engine/loop.py"}
MAX_LINES = 620


def _tool(name: str) -> str:
    exe = Path(sys.executable).parent / name
    found = str(exe) if exe.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed (it is in requirements-dev.txt)")
    return found


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_tool("lint-imports"), "--no-cache", "--no-logo"], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def _engine_children() -> set[str]:
    out = set()
    for p in (ROOT / "engine").iterdir():
        if p.suffix == ".py" and p.stem != "__init__":
            out.add(p.stem)
        elif p.is_dir() and (p / "__init__.py").exists():
            out.add(p.name)
    return out


def test_import_contracts_hold():
    r = _lint_imports(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    kept = r.stdout.count("KEPT")
    assert kept == len(CONTRACTS), r.stdout


def test_every_engine_module_is_in_a_layer():
    """A new file under engine/ must be named in the model contract or be one of the upper layers."""
    model = {m.removeprefix("engine.") for m in CONTRACTS["model-below-everything"]["source_modules"]}
    assert not model & UPPER
    children = _engine_children()
    assert children == model | UPPER, (
        f"unclassified: {sorted(children - model - UPPER)}; listed but missing: {sorted((model | UPPER) - children)}")
    # The app may import the public API only: every model module except the presets package is protected.
    protected = set(CONTRACTS["app-public-api"]["protected_modules"])
    for m in model - {"presets"}:
        assert f"engine.{m}" in protected, m
    for pkg in ("presets", "calibration", "planner", "studies"):
        assert f"engine.{pkg}.*" in protected, pkg


def test_contracts_bite(tmp_path):
    """The contracts are wired: a model module that imports a study, or a page that imports the loop, fails."""
    for d in ("engine", "app"):
        shutil.copytree(ROOT / d, tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert _lint_imports(tmp_path).returncode == 0
    sim = tmp_path / "engine" / "sim.py"
    sim.write_text(sim.read_text() + "\nfrom . import studies  # noqa\n")
    r = _lint_imports(tmp_path)
    assert r.returncode != 0 and "The model never imports" in r.stdout and "BROKEN" in r.stdout, r.stdout
    sim.write_text((ROOT / "engine" / "sim.py").read_text())
    page = tmp_path / "app" / "page_model.py"
    page.write_text(page.read_text() + "\nfrom engine import loop  # noqa\n")
    r = _lint_imports(tmp_path)
    assert r.returncode != 0 and "public API only" in r.stdout, r.stdout


def test_ruff_lint_passes():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_engine_files_stay_small():
    """One concept per file: nothing under engine/ beyond about 600 lines but the jitted loop."""
    long = {}
    for p in sorted((ROOT / "engine").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        n = len(p.read_text().splitlines())
        if n > MAX_LINES and rel not in LONG_OK:
            long[rel] = n
    assert not long, long


def test_engine_never_imports_the_ui_at_runtime():
    """Importing the whole engine (CLI included) loads neither Streamlit nor the app."""
    code = ("import sys, engine, engine.cli, engine.studies, engine.calibration, engine.planner; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('streamlit', 'app')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
