"""Inputs a careless or hostile user can hand the CLI and the uploads (issue 25 item 4): deep or huge
JSON, unwritable output folders, files claiming absurd sizes. Each ends in one line naming what is wrong
and exit code 2 (the CLI) or a ValueError (the API and the app's upload handlers), never a traceback."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from legacy import legacy_preset

from engine import Scenario
from engine.cli import main
from engine.limits import MAX_JSON_BYTES, clip, loads_json

ROOT = Path(__file__).resolve().parents[1]
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def deep(tmp_path) -> Path:
    p = tmp_path / "deep.json"
    p.write_text(DEEP)
    return p


def _one_line_exit_2(capsys, argv) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    assert len(err) < 1000
    return err


@pytest.mark.parametrize("cmd", [
    ["run", "--scenario", "{deep}"],
    ["plan", "--scenario", "{deep}", "--slo", "ttft_p99_ms=500"],
    ["sweep", "--scenario", "{deep}", "--grid", "zipf_s=1", "--out", "{tmp}/sw"],
    ["calibrate", "--data", "{deep}", "--preset", "vllm-llama31-8b", "--out", "{tmp}/f.json"],
])
def test_deeply_nested_json_is_one_line(capsys, deep, tmp_path, cmd):
    err = _one_line_exit_2(capsys, [c.format(deep=deep, tmp=tmp_path) for c in cmd])
    assert "nested too deeply" in err


def test_an_unwritable_out_is_one_line(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    err = _one_line_exit_2(capsys, ["run", "--preset", "default", "--set", "duration_s=20", "--set", "warmup_s=1",
                                    "--out", str(blocker / "out")])
    assert str(blocker) in err


def test_a_result_file_claiming_absurd_sizes_is_refused(capsys, tmp_path):
    d = json.loads((ROOT / "examples" / "vllm_bench_result.json").read_text())
    for key, value, needle in (("completed", 1_000_000_000, "1,000,000,000 requests; allowed: at most"),
                               ("burstiness", 1e-300, "arrival_cv: invalid value")):
        p = tmp_path / f"{key}.json"
        p.write_text(json.dumps({**d, key: value}))
        err = _one_line_exit_2(capsys, ["calibrate", "--data", str(p), "--preset", "vllm-llama31-8b",
                                        "--out", str(tmp_path / "f.json")])
        assert needle in err


def test_loads_json_refuses_without_other_exceptions():
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_json(DEEP, "x")
    with pytest.raises(ValueError, match="^x: not valid JSON"):
        loads_json("{", "x")
    with pytest.raises(ValueError, match="at most"):
        loads_json(" " * (MAX_JSON_BYTES + 1), "x")
    with pytest.raises(ValueError, match="nested too deeply"):
        Scenario.from_json(DEEP)
    assert clip("a" * 10, 5) == "aaaaa... (10 characters)" and clip("ab") == "ab"


def test_the_config_upload_refuses_deep_json():
    from app.controls import register_config
    with pytest.raises(ValueError, match="config.json: JSON nested too deeply"):
        register_config(("[" * 50_000 + "]" * 50_000).encode())


@pytest.mark.parametrize("argv", [
    ["sweep", "--preset", "default", "--grid", "zipf_s=1", "--grid", "zipf_s=2", "--out", "{tmp}/s"],
    ["plan", "--preset", "default", "--slo", "ttft_p99_ms=500", "--grid", "max_loras=8", "--grid", "max_loras=16"],
    ["run", "--preset", "default", "--set", "zipf_s=1", "--set", "zipf_s=2"],
])
def test_duplicate_keys_are_refused_before_any_work(capsys, tmp_path, argv):
    err = _one_line_exit_2(capsys, [a.format(tmp=tmp_path) for a in argv])
    assert "given twice" in err


@pytest.mark.parametrize("cmd", [["sweep", "--preset", "default", "--grid", "zipf_s=1", "--out", "{tmp}/s"],
                                 ["plan", "--preset", "default", "--slo", "ttft_p99_ms=500"],
                                 ["reproduce", "seed1", "--quick", "--out", "{tmp}/r"]])
def test_workers_are_capped_by_the_cores(capsys, tmp_path, monkeypatch, cmd):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    from engine.backends import cpu_count
    err = _one_line_exit_2(capsys, [c.format(tmp=tmp_path) for c in cmd] + ["--workers", str(cpu_count() + 1)])
    assert f"--workers: invalid value {cpu_count() + 1}; allowed: 1 to {cpu_count()}" in err


def test_a_sweep_is_bounded_in_simulated_requests_before_it_starts(monkeypatch):
    from engine import sweep as sw
    base = legacy_preset("default")  # 16 req/s x 660 s = 10,560 expected requests a run
    monkeypatch.setattr(sw, "MAX_SWEEP_REQUESTS", 100_000)
    grid = {"zipf_s": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]}
    with pytest.raises(ValueError, match=r"^sweep: about 105,600 simulated requests .*; allowed: at most 100,000"):
        sw.run_sweeps([(base, grid, ["naive"])], replications=1)
