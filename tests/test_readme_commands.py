"""Every command of the README's CLI section runs as printed from the repository root (issue 23 item 2),
and the Python examples of its API section run.

The commands are read from the fenced block after ``<!-- cli-commands -->``; each is run with its output
folder moved under a temporary directory (``--out X`` -> ``<tmp>/X``, so the repository's docs are never
overwritten and ``out/...`` paths one command writes are the ones the next reads) and, for the commands
that take minutes as printed, their ``--quick`` form (``QUICK``). Nothing else is changed. A command that
reads an ``out/...`` file another command writes (``run --scenario out/fitted.json`` after ``calibrate``)
runs that command first if its output is not there yet (any order, any xdist worker)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

#: subcommand -> flags added in the test (the printed command takes minutes: validate about 6)
QUICK = {"validate": ["--quick", "--no-plots"], "findings": ["--quick"]}


def _block(marker: str) -> list[str]:
    m = re.search(re.escape(marker) + r"\n```bash\n(.*?)```", README, re.S)
    assert m, f"README has no ```bash block after {marker}"
    lines = [ln.split("  #", 1)[0].strip() for ln in m.group(1).splitlines()]
    return [ln for ln in lines if ln]


COMMANDS = _block("<!-- cli-commands -->")
#: Subcommands that start the reference server: they need requirements-live.txt's environment (tests/test_live_server.py)
LIVE = {"reference-server", "observe"}


def _need_live() -> None:
    from engine.live import live_python
    try:
        live_python()
    except ValueError as e:
        if os.environ.get("REQUIRE_REAL_SERVER") == "1":
            pytest.fail(f"real-server command required (REQUIRE_REAL_SERVER=1) but {e}")
        pytest.skip(str(e))


def _argv(cmd: str, tmp: Path) -> list[str]:
    argv = shlex.split(cmd)
    assert argv[:3] == ["python", "-m", "engine"], cmd
    out = []
    for i, a in enumerate(argv):
        prev = argv[i - 1] if i else ""
        out.append(str(tmp / a) if prev in ("--out", "--scenario") and (a.startswith("out/") or prev == "--out")
                   else a)
    return [sys.executable, *out[1:], *QUICK.get(argv[3], [])]


def test_the_block_covers_every_subcommand():
    from engine.cli import build_parser
    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    used = {shlex.split(c)[3] for c in COMMANDS}
    assert used == set(sub.choices), set(sub.choices) ^ used
    # every example input a command names ships with the repository
    for c in COMMANDS:
        for a in shlex.split(c):
            if a.startswith(("examples/", "engine/data/", "tests/fixtures/")):
                assert (ROOT / a).exists(), a


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("readme")


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("cmd", COMMANDS)
def test_readme_command_runs(cmd, workdir):
    if shlex.split(cmd)[3] in LIVE:
        _need_live()
    for path in [a for a in shlex.split(cmd)[3:] if a.startswith("out/")]:
        writer = [c for c in COMMANDS if f"--out {path}" in c]
        if writer and writer[0] != cmd and not (workdir / path).exists():
            _run(writer[0], workdir)
    _run(cmd, workdir)


def _run(cmd: str, workdir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    r = subprocess.run(_argv(cmd, workdir), cwd=ROOT, env=env, capture_output=True, text=True, timeout=850)
    assert r.returncode == 0, f"{cmd}\nexit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    out = shlex.split(cmd)
    if "--out" in out:
        assert (workdir / out[out.index("--out") + 1]).exists(), cmd


def test_docs_are_never_the_test_output(tmp_path):
    argv = _argv("python -m engine validate --out docs/validation.md", tmp_path)
    assert str(tmp_path / "docs" / "validation.md") in argv and "--quick" in argv


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("i", range(len(re.findall(r"```python\n", README))))
def test_readme_python_example_runs(i, tmp_path):
    code = re.findall(r"```python\n(.*?)```", README, re.S)[i]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"} | {"PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=550)
    assert r.returncode == 0, f"example {i}:\n{code}\n{r.stderr[-3000:]}"
