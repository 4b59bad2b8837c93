"""backend="ray": the same sweeps, plans and CLI files as the process pool; clear errors without Ray.

One local Ray instance per test process (module fixture, ``address="local"``: under pytest-xdist each
worker starts its own instead of attaching to the other's, which would shut it down under it).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from engine import Scenario
from engine.planner import plan
from engine.sweep import BackendError, run_sweep, run_sweeps

ROOT = Path(__file__).resolve().parents[1]
GRID = {"arrival_rate_rps": [8.0, 32.0], "zipf_s": [0.6, 1.2]}
STRATS = ["naive", "batch"]
SLO = {"ttft_p99_ms": 400.0}
PLAN_GRID = {"gpu": ["a100-80gb", "h100-80gb"], "max_loras": [8, 16]}
CLI_SWEEP = ["sweep", "--preset", "seed1-rtx3090", "--set", "duration_s=6", "--set", "warmup_s=1",
             "--grid", "arrival_rate_rps=8,32", "--grid", "zipf_s=0.6,1.2", "--strategies", "naive,batch",
             "--replications", "2", "--workers", "2"]


def small() -> Scenario:
    """Seed-1 preset, short: a few milliseconds per run once compiled (as in tests/test_sweep.py)."""
    return Scenario.from_preset("seed1-rtx3090", duration_s=6.0, warmup_s=1.0)


def plan_base() -> Scenario:
    return Scenario.from_preset("default", duration_s=60.0, warmup_s=5.0, drain_s=30.0, arrival_rate_rps=10.0,
                                num_adapters=50)


def small_plan(**kw):
    return plan(plan_base(), SLO, PLAN_GRID, replications=2, probe_requests=500, rel_tol=0.1, **kw).table


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    return run_sweep(small(), GRID, STRATS, replications=2, workers=1)


def test_sweep_on_ray_is_identical_to_processes_and_in_process(ray_local, reference):
    calls = []
    on_ray = run_sweep(small(), GRID, STRATS, replications=2, workers=2, backend="ray",
                       progress=lambda d, t: calls.append((d, t)))
    pd.testing.assert_frame_equal(on_ray, reference)
    assert on_ray.attrs == reference.attrs
    # progress: from 0 to every run, never backwards, updated per chunk (not only at the end)
    assert calls[0] == (0, 16) and calls[-1] == (16, 16) and len(calls) > 3
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    pd.testing.assert_frame_equal(run_sweep(small(), GRID, STRATS, replications=2, workers=2, backend="process"),
                                  reference)
    # workers=None: one task chunk per cluster CPU share; several sweeps in one call keep their order
    a, b = run_sweeps([(small(), GRID, STRATS), (small(), {"batch_window_ms": [5.0, 20.0]}, ["batch"])], 2,
                      backend="ray")
    pd.testing.assert_frame_equal(a, reference)
    assert list(b["batch_window_ms"]) == [5.0, 5.0, 20.0, 20.0]


def test_plan_on_ray_is_identical_to_processes_and_in_process(ray_local):
    ref = small_plan(workers=1)
    assert len(ref) == 4 and ref["meets_slo"].any()
    pd.testing.assert_frame_equal(small_plan(workers=2, backend="ray"), ref)
    pd.testing.assert_frame_equal(small_plan(workers=2, backend="process"), ref)
    pd.testing.assert_frame_equal(small_plan(workers=2, threads=True), ref)  # the older spelling still works


def test_studies_on_ray_write_the_same_files(ray_local, tmp_path):
    """reproduce seed3 (quick) as Ray tasks: byte-identical CSVs to a run in this process (kv-interference goes
    through the same parallel_map: tests/test_reproduce.py compares it on threads)."""
    from engine.studies import mode, reproduce_seed3

    def csvs(d: Path) -> dict[str, bytes]:
        return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.rglob("*.csv"))}

    for name, kw in (("ref", {"workers": 1}), ("ray", {"workers": 2, "backend": "ray"})):
        reproduce_seed3(tmp_path / name / "seed3", mode(True), progress=False, **kw)
    ref = csvs(tmp_path / "ref")
    assert len(ref) >= 6 and csvs(tmp_path / "ray") == ref


def test_ray_reused_not_shut_down(ray_local):
    """A Ray initialised elsewhere is used as it is and left running (the CLI's clean-up included)."""
    from engine.sweep import shutdown_ray
    run_sweep(small(), {"arrival_rate_rps": [8.0, 16.0]}, ["naive"], replications=2, workers=2, backend="ray")
    shutdown_ray()
    assert ray_local.is_initialized()


def test_cli_sweep_on_ray_writes_the_same_csv(tmp_path, capsys):
    """The real CLI path: its own local Ray (a fresh process), shut down when the command ends."""
    pytest.importorskip("ray")
    from engine.cli import main
    assert main([*CLI_SWEEP, "--backend", "process", "--out", str(tmp_path / "p")]) == 0
    assert "16 runs" in capsys.readouterr().out
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    r = subprocess.run([sys.executable, "-m", "engine", *CLI_SWEEP, "--backend", "ray", "--out", str(tmp_path / "r")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    for f in ("sweep.csv", "summary.csv"):
        assert (tmp_path / "r" / f).read_bytes() == (tmp_path / "p" / f).read_bytes(), f


@pytest.mark.parametrize("kw, needle", [
    ({"backend": "dask"}, "backend: invalid value 'dask'; allowed: process, thread, ray"),
    ({"backend": "Ray"}, "backend: invalid value 'Ray'"),
    ({"backend": "process", "ray_address": "auto"}, "ray_address: given with backend 'process'"),
    ({"backend": "ray", "ray_address": " "}, "ray_address: invalid value ' '"),
])
def test_bad_backend_values_are_named(kw, needle):
    with pytest.raises(ValueError, match="^" + re.escape(needle)):
        run_sweep(small(), GRID, STRATS, replications=2, workers=2, **kw)
    with pytest.raises(ValueError, match="^" + re.escape(needle)):
        plan(plan_base(), SLO, PLAN_GRID, replications=2, **kw)


def test_cli_bad_backend_values_exit_2_with_one_line(tmp_path, capsys):
    from engine.cli import main
    with pytest.raises(SystemExit) as e:
        main([*CLI_SWEEP, "--out", str(tmp_path), "--backend", "dask"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --backend: invalid choice: 'dask'" in err and err.count("\n") == 1, err
    for cmd in (CLI_SWEEP + ["--out", str(tmp_path)], ["plan", "--slo", "ttft_p99_ms=400"]):
        assert main([*cmd, "--backend", "process", "--ray-address", "auto"]) == 2
        err = capsys.readouterr().err
        assert err == "error: --ray-address: given with --backend process; allowed: only with --backend ray\n", err


def test_missing_ray_is_a_clear_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(BackendError, match=r"the package 'ray' is not installed; install it with: "
                                           r"pip install \"ray\[default\]\""):
        run_sweep(small(), GRID, STRATS, replications=2, workers=2, backend="ray")
    with pytest.raises(BackendError, match="package 'ray'"):
        plan(plan_base(), SLO, PLAN_GRID, replications=2, backend="ray")
    from engine.cli import main
    for cmd in ([*CLI_SWEEP, "--backend", "ray", "--out", str(tmp_path)],
                ["plan", "--preset", "default", "--slo", "ttft_p99_ms=400", "--ray-address", "auto"],
                ["reproduce", "seed3", "--quick", "--backend", "ray", "--out", str(tmp_path / "seed3")],
                ["findings", "--quick", "--backend", "ray", "--out", str(tmp_path / "f.md")]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert err == ("error: backend 'ray': the package 'ray' is not installed; install it with: "
                       "pip install \"ray[default]\"\n"), err
    assert not (tmp_path / "sweep.csv").exists() and not (tmp_path / "f.md").exists()
    assert not (tmp_path / "seed3" / "results").exists()
