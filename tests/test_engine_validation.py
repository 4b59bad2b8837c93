"""Every invalid input gives a ValueError (or exit code 2) that names the field."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from engine import Scenario, compare, presets, read_trace, simulate

ROOT = Path(__file__).resolve().parents[1]

BAD = [
    ("gpu", "tpu-v9"), ("model", "gpt-5"), ("strategy", "magic"), ("service_mode", "exact"),
    ("load_mode", "lazy"), ("arrival_process", "uniform"), ("popularity", "flat"),
    ("memory_mode", "shared"), ("length_dist", "normal"), ("target_modules", "mlp"),
    ("arrival_rate_rps", 0.0), ("arrival_rate_rps", -3.0), ("arrival_rate_rps", float("inf")),
    ("pcie_gbps", 0.0), ("zipf_s", -0.1), ("duration_s", 0.0), ("warmup_s", 1e9),
    ("max_batch_size", 0), ("num_adapters", 0), ("adapter_rank", 0), ("prompt_tokens", 0),
    ("output_tokens", 0), ("concurrency", 0), ("compute_eff", 1.5), ("gpu_mem_util", 0.0),
    ("batch_window_ms", 0.0), ("vram_budget_gb", -1.0), ("vram_budget_gb", 500.0),
    ("vram_budget_gb", 0.001), ("hot_set_k", 10_000), ("adapter_ranks", (8, 0)),
    ("arrival_cv", 0.0), ("power_alpha", 0.0), ("slo_ttft_ms", -5.0), ("kv_block_tokens", 0),
    ("prompt_tokens", 100_000), ("max_loras", -1),
    ("trace", "no-such-trace"), ("trace_time_scale", 0.0), ("trace_time_scale", 100.0),
]


@pytest.mark.parametrize("field,value", BAD)
def test_invalid_field_raises_value_error_naming_it(field, value):
    base = Scenario.from_preset("default", strategy="hot_set" if field == "hot_set_k" else "naive")
    with pytest.raises(ValueError) as e:
        simulate(base.replace(**{field: value}))
    assert str(e.value).startswith(field + ":"), str(e.value)


def test_base_model_larger_than_gpu_names_model():
    with pytest.raises(ValueError, match=r"^model: .*do not fit"):
        Scenario(gpu="rtx3090", model="llama-2-13b", vram_budget_gb=1.0).validate()


def test_too_many_requests_is_refused_before_running():
    with pytest.raises(ValueError, match=r"^arrival_rate_rps: .*at most"):
        Scenario.from_preset("default", arrival_rate_rps=10_000.0, duration_s=3600.0).validate()


@pytest.mark.parametrize("field,value", [("arrival_rate_rps", "fast"), ("max_batch_size", "2.5"),
                                         ("adapter_ranks", "8,x"), ("host_warm", "maybe"),
                                         ("seed", True), ("gpu", 3)])
def test_coercion_errors_name_the_field(field, value):
    with pytest.raises(ValueError, match=rf"^{field}: invalid value"):
        Scenario.from_dict({field: value})


def test_unknown_field_and_preset():
    with pytest.raises(ValueError, match=r"^warp_speed: unknown scenario field"):
        Scenario.from_dict({"warp_speed": 9})
    with pytest.raises(ValueError, match=r"^preset: unknown value 'nope'"):
        Scenario.from_preset("nope")
    with pytest.raises(ValueError, match=r"^scenario.json: not valid JSON"):
        Scenario.from_json("{not json")


def test_round_trip_is_exact():
    sc = Scenario.from_preset("seed1-rtx3090", adapter_ranks=(8, 16, 32), zipf_s=0.37, host_warm=False)
    d = sc.to_dict()
    assert Scenario.from_dict(json.loads(json.dumps(d))) == sc
    assert Scenario.from_json(sc.to_json()) == sc
    assert sc.replace(seed=9).seed == 9 and sc.replace(seed=9).replace(seed=sc.seed) == sc


def test_adapter_size_is_computed():
    m = presets.get_model("llama-2-7b")
    assert presets.adapter_bytes(m, 16, "qkvo") == 32 * 1024 ** 2
    assert presets.adapter_bytes(m, 32, "qkvo") == 2 * presets.adapter_bytes(m, 16, "qkvo")
    sc = Scenario(model="llama-2-7b", num_adapters=4, adapter_ranks=(8, 64))
    assert sc.adapter_sizes() == [16 * 1024 ** 2, 128 * 1024 ** 2] * 2


# ---- trace replay

def test_trace_replay_and_first_bad_row():
    sc = Scenario.from_preset("default", num_adapters=4, duration_s=10.0, warmup_s=0.0)
    ok = "arrival_s,adapter_id,prompt_tokens,output_tokens\n0.0,0,10,5\n0.5,3,20,5\n1.0,1,30,2\n"
    r = simulate(sc, trace=read_trace(ok, sc))
    assert list(r.requests.adapter) == [0, 3, 1] and r.requests.completed.all()
    bad = ok + "1.5,9,10,5\n2.0,x,10,5\n"
    with pytest.raises(ValueError, match=r"^trace: row 5: adapter_id='9'"):
        read_trace(bad, sc)
    with pytest.raises(ValueError, match=r"^trace: row 3: arrival_s"):
        read_trace("arrival_s,adapter_id,prompt_tokens,output_tokens\n1.0,0,10,5\n0.5,0,10,5\n", sc)
    with pytest.raises(ValueError, match=r"^trace: missing column"):
        read_trace("a,b\n1,2\n", sc)
    with pytest.raises(ValueError, match=r"^trace: row 2: prompt_tokens"):
        read_trace("arrival_s,adapter_id,prompt_tokens,output_tokens\n0,0,-4,5\n", sc)


# ---- CLI

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "engine", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_cli_run_writes_files_and_json(tmp_path):
    p = _cli("run", "--preset", "default", "--strategy", "batch", "--set", "duration_s=20", "--set",
             "warmup_s=2", "--out", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["requests"] > 0
    req = pd.read_csv(tmp_path / "requests.csv")
    assert len(req) >= summary["requests"]
    for f in ("timeseries.csv", "summary.csv", "scenario.json", "events.csv"):
        assert (tmp_path / f).exists()
    sc = Scenario.from_json((tmp_path / "scenario.json").read_text())
    assert sc.strategy == "batch" and sc.duration_s == 20.0
    assert not (tmp_path / "replicas.csv").exists() and not (tmp_path / "timeseries_by_replica.csv").exists()


def test_cli_run_on_a_fleet_writes_the_per_replica_files(tmp_path, capsys):
    from engine.cli import main
    from engine.metrics import REPLICA_COLUMNS
    args = ["run", "--preset", "default", "--set", "duration_s=20", "--set", "warmup_s=2", "--set", "num_replicas=3",
            "--set", "arrival_rate_rps=30", "--set", "router=least_loaded", "--out", str(tmp_path)]
    assert main(args) == 0
    assert "replicas.csv, timeseries_by_replica.csv" in capsys.readouterr().out
    res = simulate(Scenario.from_json((tmp_path / "scenario.json").read_text()))
    reps = pd.read_csv(tmp_path / "replicas.csv")
    assert list(reps.columns) == list(REPLICA_COLUMNS) and list(reps["replica"]) == [0, 1, 2]
    assert reps["requests"].sum() == res.summary["requests"]
    pd.testing.assert_frame_equal(reps, res.replicas, check_dtype=False)
    by = pd.read_csv(tmp_path / "timeseries_by_replica.csv")
    assert list(by.columns) == list(res.timeseries_by_replica.columns) and by.columns[0] == "replica"
    assert sorted(by["replica"].unique()) == [0, 1, 2] and len(by) == len(res.timeseries_by_replica)
    pd.testing.assert_frame_equal(by, res.timeseries_by_replica.reset_index(drop=True), check_dtype=False)
    fleet = pd.read_csv(tmp_path / "timeseries.csv")
    assert by.groupby("t_s")["queue_len"].sum().to_numpy() == pytest.approx(fleet["queue_len"].to_numpy())


@pytest.mark.parametrize("args,field", [
    (["--set", "nosuch=1"], "nosuch"), (["--set", "zipf_s=-2"], "zipf_s"),
    (["--set", "arrival_rate_rps=abc"], "arrival_rate_rps"), (["--strategy", "x"], "strategy"),
    (["--preset", "nope"], "preset"), (["--set", "oops"], "--set")])
def test_cli_bad_input_exits_2_with_one_line(args, field):
    p = _cli("run", *args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in p.stderr


@pytest.mark.parametrize("metrics", [["completed_frac"], "ttft_p99_ms", [], ["ttft_p99_ms", "warp"]])
def test_compare_names_a_bad_metric(metrics):
    sc = Scenario.from_preset("default", duration_s=2.0, warmup_s=0.5, num_adapters=4, hot_set_k=-1)
    with pytest.raises(ValueError, match=r"^metrics: invalid value .*allowed: a non-empty list of summary metrics"):
        compare(sc, ["naive"], replications=1, metrics=metrics)
    ok = compare(sc, ["naive"], replications=2, metrics=["ttft_p99_ms"])
    assert list(ok["metric"]) == ["ttft_p99_ms"]
