"""read_trace reads both trace formats: ours (arrival_s, adapter_id, prompt_tokens, output_tokens) and the public
Azure LLM inference traces as processed by Vidur (arrived_at, num_prefill_tokens, num_decode_tokens, optionally
adapter_id), the latter read as a shipped trace is replayed (time scale, window, adapters drawn)."""
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine import TRACES, Scenario, read_trace, shipped_trace, simulate
from engine.workload import MAX_TRACE_ROWS, STREAM_ADAPTERS, draw_adapters, replay_trace, streams

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "engine" / "data" / "traces"
AZ = "arrived_at,num_prefill_tokens,num_decode_tokens\n"
OURS = "arrival_s,adapter_id,prompt_tokens,output_tokens\n"


def _raw(name: str) -> Path:
    return DATA / TRACES[name]["file"]


def _same(a: dict, b: dict) -> bool:
    """Equal summaries (NaN equal to NaN)."""
    return a.keys() == b.keys() and all(
        x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
        for x, y in ((a[k], b[k]) for k in a))


def _small() -> Scenario:
    return Scenario.from_preset("default", num_adapters=8, duration_s=30.0, warmup_s=0.0)


# ---------------------------------------------------------------- the Azure/Vidur format


@pytest.mark.parametrize("name,scale", [("azure-conv-2023", 1.0), ("azure-code-2023", 1.5)])
def test_azure_file_reads_as_the_shipped_trace(name, scale):
    sc = Scenario.from_preset(name, trace_time_scale=scale, duration_s=240.0, warmup_s=10.0, seed=11)
    wl = read_trace(str(_raw(name)), sc)
    ref = shipped_trace(name, sc)  # the window, scaled, adapters drawn as simulate draws them
    assert 0 < len(wl) == len(ref) < TRACES[name]["rows"]
    assert np.array_equal(wl.arrival_s, ref.arrival_s.to_numpy())
    assert np.array_equal(wl.adapter, ref.adapter_id.to_numpy())
    assert np.array_equal(wl.prompt_tokens, ref.prompt_tokens.to_numpy())
    assert np.array_equal(wl.output_tokens, ref.output_tokens.to_numpy())
    assert [a.dtype for a in (wl.arrival_s, wl.adapter, wl.prompt_tokens, wl.output_tokens)] == \
        [np.float64, np.int64, np.int64, np.int64]
    # exactly the workload the preset replays, and the file's own values divided by the time scale
    rp = replay_trace(sc)
    for a, b in zip((wl.arrival_s, wl.adapter, wl.prompt_tokens, wl.output_tokens),
                    (rp.arrival_s, rp.adapter, rp.prompt_tokens, rp.output_tokens)):
        assert np.array_equal(a, b)
    raw = pd.read_csv(_raw(name))
    assert np.array_equal(wl.arrival_s, raw.arrived_at.to_numpy()[: len(wl)] / scale)
    assert wl.arrival_s.max() < sc.duration_s <= raw.arrived_at.iloc[len(wl)] / scale
    # the same bytes from a file object or as text
    for src in (io.BytesIO(_raw(name).read_bytes()), _raw(name).read_text()):
        assert np.array_equal(read_trace(src, sc).adapter, wl.adapter)


def test_azure_adapters_are_seeded():
    name = "azure-conv-2023"
    sc = Scenario.from_preset(name, duration_s=120.0, warmup_s=10.0, seed=3)
    a = read_trace(str(_raw(name)), sc).adapter
    assert np.array_equal(a, read_trace(str(_raw(name)), sc).adapter)
    assert np.array_equal(a, draw_adapters(sc, streams(3)[STREAM_ADAPTERS], len(a)))
    b = read_trace(str(_raw(name)), sc.replace(seed=4)).adapter
    assert len(a) == len(b) and not np.array_equal(a, b)
    # the strategy does not matter (paired comparisons): same adapters under every strategy
    for s in ("naive", "batch", "vllm"):
        assert np.array_equal(read_trace(str(_raw(name)), sc.replace(strategy=s)).adapter, a)
    # the scenario's popularity model draws them: a uniform popularity spreads them wider than Zipf
    u = read_trace(str(_raw(name)), sc.replace(popularity="uniform")).adapter
    assert not np.array_equal(u, a) and u.max() < sc.num_adapters
    # a longer window's adapters extend a shorter one's (sequential draws)
    longer = read_trace(str(_raw(name)), sc.replace(duration_s=240.0)).adapter
    assert len(longer) > len(a) and np.array_equal(longer[: len(a)], a)


def test_azure_adapter_column_is_used_when_present():
    sc = _small()
    wl = read_trace("arrived_at,adapter_id,num_prefill_tokens,num_decode_tokens,extra\n"
                    "0.0,5,10,5,x\n1.0,7,20,6,y\n2.5,0,30,7,z\n", sc)
    assert wl.adapter.tolist() == [5, 7, 0]
    assert wl.arrival_s.tolist() == [0.0, 1.0, 2.5]
    assert wl.prompt_tokens.tolist() == [10, 20, 30] and wl.output_tokens.tolist() == [5, 6, 7]
    # scaled and windowed like the rest of the format
    wl = read_trace(AZ.replace("arrived_at,", "arrived_at,adapter_id,") + "0.0,1,10,5\n20.0,2,10,5\n40.0,3,10,5\n",
                    sc.replace(trace_time_scale=2.0, duration_s=15.0))
    assert wl.arrival_s.tolist() == [0.0, 10.0] and wl.adapter.tolist() == [1, 2]


def test_azure_window_and_time_scale():
    sc = _small().replace(duration_s=10.0)
    text = AZ + "0.0,10,5\n4.0,10,5\n9.999,10,5\n10.0,10,5\n50.0,10,5\n"
    assert read_trace(text, sc).arrival_s.tolist() == [0.0, 4.0, 9.999]  # < duration_s, as simulate replays
    assert read_trace(text, sc.replace(trace_time_scale=2.0)).arrival_s.tolist() == [0.0, 2.0, 4.9995, 5.0]
    assert read_trace(text, sc.replace(trace_time_scale=0.5)).arrival_s.tolist() == [0.0, 8.0]
    # a row past the window may exceed the scenario's token limits (never replayed)...
    mbt = sc.max_batched_tokens
    assert len(read_trace(AZ + f"0.0,10,5\n11.0,{mbt + 1},5\n", sc)) == 1
    # ... but not within it, nor be malformed anywhere
    with pytest.raises(ValueError, match=rf"^trace: row 3: num_prefill_tokens='{mbt + 1}'; allowed: an integer in"):
        read_trace(AZ + f"0.0,10,5\n9.0,{mbt + 1},5\n", sc)
    with pytest.raises(ValueError, match=r"^trace: row 3: num_decode_tokens='0'; allowed: an integer >= 1"):
        read_trace(AZ + "0.0,10,5\n500.0,10,0\n", sc)
    with pytest.raises(ValueError, match=r"^trace: row 4: arrived_at='1.0'; allowed: non-decreasing"):
        read_trace(AZ + "0.0,10,5\n500.0,10,5\n1.0,10,5\n", sc)
    # no request in the window
    with pytest.raises(ValueError, match=r"^trace: row 2: arrived_at='20'; allowed: at least one request replayed: "
                                         r"arrived_at / trace_time_scale \(1\) < duration_s \(10 s\)"):
        read_trace(AZ + "20,10,5\n", sc)
    with pytest.raises(ValueError, match=r"^trace_time_scale: invalid value 0.0"):
        read_trace(AZ + "0,10,5\n", sc.replace(trace_time_scale=0.0))


def test_azure_kv_bound_applies_to_replayed_rows():
    sc = Scenario.from_preset("default", num_adapters=4, duration_s=10.0, warmup_s=0.0)
    fit = sc.max_fitting_request_tokens()
    ok = AZ + "0.0,2000,500\n" + f"0.5,8000,{fit - 8000}\n" + f"10.0,8000,{fit}\n"
    wl = read_trace(ok, sc)
    assert len(wl) == 2
    r = simulate(sc, trace=wl)
    assert r.requests.completed.iloc[0] and len(r.requests) == 2
    with pytest.raises(ValueError, match=rf"^trace: row 3: num_prefill_tokens='8000'; allowed: num_prefill_tokens "
                                         rf"\+ num_decode_tokens <= {fit} \(the longest"):
        read_trace(AZ + "0.0,2000,500\n" + f"1.0,8000,{fit - 7999}\n", sc)


@pytest.mark.parametrize("name", ["azure-conv-2023", "azure-code-2023"])
def test_raw_shipped_file_reproduces_the_preset(name):
    """Uploading the raw shipped file with the preset's scenario (trace_time_scale included) repeats the preset."""
    for scale in (1.0, 1.7):
        preset = Scenario.from_preset(name, duration_s=90.0, warmup_s=10.0, trace_time_scale=scale,
                                      strategy="batch")
        direct = simulate(preset)
        replayed = simulate(preset.replace(trace=""), trace=read_trace(str(_raw(name)), preset))
        assert direct.summary["requests"] > 0
        assert _same(replayed.summary, direct.summary)
        pd.testing.assert_frame_equal(replayed.requests, direct.requests)


def test_dashboard_upload_of_the_raw_file_replays_the_trace():
    """The What-if page's upload path (runner.run with the uploaded bytes) reads the Azure format too."""
    from app import runner
    name = "azure-code-2023"
    preset = Scenario.from_preset(name, duration_s=60.0, warmup_s=5.0, strategy="naive")
    record = runner.trace_record(_raw(name).name, _raw(name).read_bytes())
    up = runner.run(preset.replace(trace=""), trace=record)
    assert _same(up["summary"], simulate(preset).summary)


# ---------------------------------------------------------------- our format, unchanged


def test_our_format_is_unchanged():
    sc = _small()
    text = OURS + "0.0,3,10,5\n1.5,0,20,6\n1.5,7,30,7\n99.0,1,40,8\n"
    wl = read_trace(text, sc.replace(trace_time_scale=2.0))  # neither scaled nor windowed
    assert wl.arrival_s.tolist() == [0.0, 1.5, 1.5, 99.0]
    assert wl.adapter.tolist() == [3, 0, 7, 1]
    assert wl.prompt_tokens.tolist() == [10, 20, 30, 40] and wl.output_tokens.tolist() == [5, 6, 7, 8]
    assert [a.dtype for a in (wl.arrival_s, wl.adapter, wl.prompt_tokens, wl.output_tokens)] == \
        [np.float64, np.int64, np.int64, np.int64]
    # rows past duration_s are still checked against the scenario's limits
    with pytest.raises(ValueError, match=r"^trace: row 3: adapter_id='8'; allowed: an integer in \[0, 7\]"):
        read_trace(OURS + "0.0,3,10,5\n99.0,8,10,5\n", sc)
    # the scenario's shipped_trace export reads back as it was written
    pre = Scenario.from_preset("azure-code-2023", duration_s=60.0, seed=5)
    df = shipped_trace("azure-code-2023", pre)
    wl = read_trace(df.to_csv(index=False), pre.replace(trace=""))
    assert np.array_equal(wl.arrival_s, df.arrival_s.to_numpy())
    assert np.array_equal(wl.adapter, df.adapter_id.to_numpy())


@pytest.mark.parametrize("bad,match", [
    ("0.0,0,10,5\n0.5,9,10,5\n", r"^trace: row 3: adapter_id='9'; allowed: an integer in \[0, 7\] \(num_adapters\)"),
    ("0.0,0,10,5\n-1,0,10,5\n", r"^trace: row 3: arrival_s='-1'; allowed: a number >= 0"),
    ("0.0,0,10,5\n1.0,0,10.5,5\n", r"^trace: row 3: prompt_tokens='10.5'; allowed: an integer in \[1, "),
    ("0.0,0,10,5\n1.0,0,10,x\n", r"^trace: row 3: output_tokens='x'; allowed: an integer >= 1"),
    ("1.0,0,10,5\n0.5,0,10,5\n", r"^trace: row 3: arrival_s='0.5'; allowed: non-decreasing arrival times"),
])
def test_our_format_errors_are_unchanged(bad, match):
    with pytest.raises(ValueError, match=match):
        read_trace(OURS + bad, _small())


# ---------------------------------------------------------------- invalid Azure-format files and headers


@pytest.mark.parametrize("rows,match", [
    ("0.0,10,5\n1.0,-3,5\n", r"^trace: row 3: num_prefill_tokens='-3'; allowed: an integer in \[1, "),
    ("0.0,10,5\n1.0,12.5,5\n", r"^trace: row 3: num_prefill_tokens='12.5'; allowed: an integer in \[1, "),
    ("0.0,10,5\n1.0,abc,5\n", r"^trace: row 3: num_prefill_tokens='abc'; allowed: an integer in \[1, "),
    ("0.0,10,5\n1.0,10,\n", r"^trace: row 3: num_decode_tokens=''; allowed: an integer >= 1"),
    ("0.0,10,5\n1.0,10,2.5\n", r"^trace: row 3: num_decode_tokens='2.5'; allowed: an integer >= 1"),
    ("0.0,10,5\n1.0,10,0\n", r"^trace: row 3: num_decode_tokens='0'; allowed: an integer >= 1"),
    ("0.0,10,5\n-0.5,10,5\n", r"^trace: row 3: arrived_at='-0.5'; allowed: a number >= 0"),
    ("0.0,10,5\nNaN,10,5\n", r"^trace: row 3: arrived_at='NaN'; allowed: a number >= 0"),
    ("0.0,10,5\ninf,10,5\n", r"^trace: row 3: arrived_at='inf'; allowed: a number >= 0"),
    ("0.0,10,5\nsoon,10,5\n", r"^trace: row 3: arrived_at='soon'; allowed: a number >= 0"),
    ("0.0,10,5\n2.0,10,5\n1.0,10,5\n", r"^trace: row 4: arrived_at='1.0'; allowed: non-decreasing arrival times"),
    # the first bad row wins, whatever its column
    ("0.0,10,5\n1.0,10,0\n2.0,x,5\n", r"^trace: row 3: num_decode_tokens='0'"),
])
def test_azure_bad_value_names_row_and_column(rows, match):
    with pytest.raises(ValueError, match=match):
        read_trace(AZ + rows, _small())


@pytest.mark.parametrize("value", ["8", "-1", "1.5", "x"])
def test_azure_bad_adapter_id(value):
    with pytest.raises(ValueError, match=rf"^trace: row 3: adapter_id='{value}'; allowed: an integer in \[0, 7\]"):
        read_trace(f"arrived_at,adapter_id,num_prefill_tokens,num_decode_tokens\n0.0,0,10,5\n1.0,{value},10,5\n",
                   _small())


@pytest.mark.parametrize("header,match", [
    # neither format: both column sets listed
    ("a,b", r"^trace: missing column\(s\): the header \(a, b\) matches neither format; required: arrival_s, "
            r"adapter_id, prompt_tokens, output_tokens \(the upload format\), or arrived_at, num_prefill_tokens, "
            r"num_decode_tokens and optionally adapter_id"),
    ("adapter_id,tokens", r"^trace: missing column\(s\): the header .* matches neither format"),
    # one format, incomplete
    ("arrived_at,num_prefill_tokens", r"^trace: missing column\(s\) num_decode_tokens; required: arrived_at, "
                                      r"num_prefill_tokens, num_decode_tokens \(adapter_id optional\)"),
    ("num_prefill_tokens,num_decode_tokens", r"^trace: missing column\(s\) arrived_at; required: arrived_at"),
    ("arrival_s,prompt_tokens,output_tokens", r"^trace: missing column\(s\) adapter_id; required: arrival_s, "
                                              r"adapter_id, prompt_tokens, output_tokens$"),
    # both formats mixed
    ("arrival_s,arrived_at,adapter_id,prompt_tokens,output_tokens",
     r"^trace: columns of both formats \(arrival_s, prompt_tokens, output_tokens; arrived_at\); allowed: one of"),
    ("arrival_s,adapter_id,num_prefill_tokens,num_decode_tokens",
     r"^trace: columns of both formats \(arrival_s; num_prefill_tokens, num_decode_tokens\)"),
    ("arrived_at,num_prefill_tokens,num_decode_tokens,arrival_s", r"^trace: columns of both formats"),
])
def test_headers_of_neither_or_both_formats(header, match):
    with pytest.raises(ValueError, match=match):
        read_trace(f"{header}\n" + ",".join(["1"] * len(header.split(","))) + "\n", _small())


def test_empty_and_row_cap_apply_to_both_formats(monkeypatch):
    for head in (AZ, OURS):
        with pytest.raises(ValueError, match=r"^trace: no rows$"):
            read_trace(head.strip() + "\n", _small())
    import engine.workload as w
    monkeypatch.setattr(w, "MAX_TRACE_ROWS", 2)
    with pytest.raises(ValueError, match=r"^trace: more than 2 rows; allowed: at most 2"):
        read_trace(AZ + "0,10,5\n1,10,5\n2,10,5\n", _small())
    assert len(read_trace(AZ + "0,10,5\n1,10,5\n", _small())) == 2
    assert MAX_TRACE_ROWS == 1_000_000


# ---------------------------------------------------------------- the command line


def test_cli_runs_an_azure_format_trace(tmp_path):
    sc = Scenario.from_preset("default", num_adapters=8, duration_s=5.0, warmup_s=0.5, drain_s=10.0, seed=2)
    scen = tmp_path / "scenario.json"
    scen.write_text(sc.to_json())
    rows = pd.read_csv(_raw("azure-code-2023")).head(40)
    rows = rows[rows.num_prefill_tokens <= sc.max_batched_tokens]
    trace = tmp_path / "azure.csv"
    rows.to_csv(trace, index=False)
    out = tmp_path / "out"
    env = {**os.environ, "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", str(ROOT / ".numba_cache"))}
    p = subprocess.run([sys.executable, "-m", "engine", "run", "--scenario", str(scen), "--trace", str(trace),
                        "--out", str(out), "--json"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    wl = read_trace(str(trace), sc)
    assert len(wl) == int((rows.arrived_at < sc.duration_s).sum()) > 0
    req = pd.read_csv(out / "requests.csv")
    assert len(req) == len(wl) and 0 < summary["requests"] <= len(wl)  # summary: those after warmup_s
    assert np.array_equal(req.arrival_s.to_numpy(), wl.arrival_s)
    assert np.array_equal(req.adapter.to_numpy(), wl.adapter)
    assert np.array_equal(req.prompt_tokens.to_numpy(), wl.prompt_tokens)
    # a bad value: exit 2 and one line naming the row and the column
    bad = tmp_path / "bad.csv"
    bad.write_text(AZ + "0.0,10,5\n1.0,10,-2\n")
    p = subprocess.run([sys.executable, "-m", "engine", "run", "--scenario", str(scen), "--trace", str(bad)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and "trace: row 3: num_decode_tokens='-2'" in p.stderr


def test_the_dashboard_caps_an_uploaded_trace_like_a_generated_workload(monkeypatch):
    """A trace whose window holds more requests than the hosted app's cap per strategy is refused before it is
    simulated (a 1M-row upload used to be simulated on every rerun); the CLI still takes it."""
    from app import controls, runner
    monkeypatch.setattr(runner, "MAX_REQUESTS_PER_RUN", 10)  # the file has 63 requests in its first 60 s
    sc = Scenario.from_preset("azure-code-2023", duration_s=60.0, warmup_s=5.0, strategy="naive").replace(trace="")
    record = runner.trace_record("big.csv", _raw("azure-code-2023").read_bytes())
    with pytest.raises(ValueError, match=r"^trace: 63 requests arrive within duration_s \(60 s\); allowed: at most 10 "):
        runner._full(sc.to_json(), "test", record["digest"], record["data"])
    assert controls.MAX_REQUESTS_PER_RUN == 200_000
