"""Shipped real traces (engine/data/traces/): files and licence, the replay (arrivals, lengths, adapters),
the time scale, validation, the request cap, downloads, and that scenarios without a trace are unchanged."""
from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import engine.scenario as scenario_module
from engine import TRACE_CITATION, TRACES, Scenario, presets, read_trace, shipped_trace, simulate
from engine.popularity import popularity
from engine.workload import STREAM_ADAPTERS, draw_adapters, generate, replay_trace, streams

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "engine" / "data" / "traces"
MANIFEST = json.loads((ROOT / "engine" / "data" / "manifest.json").read_text())
NAMES = ["azure-conv-2023", "azure-code-2023"]
COLUMNS = ["arrived_at", "num_prefill_tokens", "num_decode_tokens"]
STRATS = ["naive", "hot_set", "batch", "vllm"]


def _same(a: dict, b: dict) -> bool:
    """Equal summaries (NaN equal to NaN)."""
    return a.keys() == b.keys() and all(
        x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
        for x, y in ((a[k], b[k]) for k in a))


def _file(name: str) -> pd.DataFrame:
    return pd.read_csv(DATA / TRACES[name]["file"])


def _in_window(name: str, scale: float, duration: float) -> pd.DataFrame:
    f = _file(name)
    return f[f.arrived_at.to_numpy() / scale < duration]


# ---------------------------------------------------------------- shipped files


def test_traces_ship_with_licence_and_match_the_reference_data():
    assert list(TRACES) == NAMES
    lic = (DATA / "LICENSE-traces.md").read_text()
    for needle in ("CC-BY", "AzurePublicDataset", "Splitwise", "ISCA 2024", "Patel"):
        assert needle in lic and needle in TRACE_CITATION, needle
    for name, t in TRACES.items():
        f = _file(name)
        assert list(f.columns) == COLUMNS and len(f) == t["rows"] and t["file"] in lic
        assert f.arrived_at.is_monotonic_increasing and f.arrived_at.iloc[0] == 0.0
        assert (f.num_prefill_tokens >= 1).all() and (f.num_decode_tokens >= 1).all()
        entry, = [e for e in MANIFEST["files"] if e["path"] == f"traces/{t['file']}"]
        assert hashlib.sha256((DATA / t["file"]).read_bytes()).hexdigest() == entry["sha256"]
        assert entry["rows"] == t["rows"]


def test_docker_context_keeps_the_traces():
    spec = importlib.util.spec_from_file_location("docker_context", ROOT / ".ci" / "docker_context.py")
    dc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dc)
    rules = dc.load_patterns(ROOT / ".dockerignore")
    for t in TRACES.values():
        assert not dc.is_excluded(f"engine/data/traces/{t['file']}", rules)
    assert not dc.is_excluded("engine/data/traces/LICENSE-traces.md", rules)


def test_shipped_file_arrays_are_cached_and_read_only():
    a = scenario_module.shipped_trace_file("azure-code-2023")
    assert a is scenario_module.shipped_trace_file("azure-code-2023")
    for x in a:
        assert not x.flags.writeable
    with pytest.raises(ValueError, match=r"^trace: invalid value 'nope'"):
        scenario_module.shipped_trace_file("nope")


# ---------------------------------------------------------------- the replay


@pytest.mark.parametrize("name", NAMES)
def test_preset_replays_the_files_arrivals_and_lengths_exactly(name):
    sc = Scenario.from_preset(name)
    assert sc.trace == name and sc.trace_time_scale == 1.0 and sc.duration_s == 600.0
    r = simulate(sc)
    w = _in_window(name, 1.0, sc.duration_s)
    assert len(r.requests) == len(w) == sc.expected_requests() > 1000
    assert np.array_equal(r.requests.arrival_s.to_numpy(), w.arrived_at.to_numpy())
    assert np.array_equal(r.requests.prompt_tokens.to_numpy(), w.num_prefill_tokens.to_numpy())
    assert np.array_equal(r.requests.output_tokens.to_numpy(), w.num_decode_tokens.to_numpy())
    assert sc.max_request_tokens() == int((w.num_prefill_tokens + w.num_decode_tokens).max())


@pytest.mark.parametrize("scale", [0.5, 2.0, 3.7])
def test_time_scale_divides_the_arrival_times(scale):
    sc = Scenario.from_preset("azure-conv-2023", trace_time_scale=scale, duration_s=300.0, warmup_s=10.0)
    r = simulate(sc)
    f = _file("azure-conv-2023")
    t = f.arrived_at.to_numpy() / scale
    n = int((t < 300.0).sum())
    assert len(r.requests) == n
    assert np.array_equal(r.requests.arrival_s.to_numpy(), t[:n])
    assert np.array_equal(r.requests.prompt_tokens.to_numpy(), f.num_prefill_tokens.to_numpy()[:n])


@pytest.mark.parametrize("name", NAMES)
def test_time_scale_two_doubles_the_realised_rate(name):
    base = Scenario.from_preset(name, duration_s=600.0)
    fast = base.replace(trace_time_scale=2.0)
    # exactly the requests of twice the window at the real rate, in half the time
    assert fast.expected_requests() == base.replace(duration_s=1200.0).expected_requests()
    r1, r2 = simulate(base.replace(trace_time_scale=0.5, duration_s=1200.0)), simulate(base)
    rate = lambda r: len(r.requests) / r.scenario.duration_s  # noqa: E731
    assert rate(r2) == pytest.approx(2 * rate(r1), rel=1e-12)  # same 600 s of trace in half the time
    ratio = simulate(fast).summary["requests"] / r2.summary["requests"]
    assert 1.6 < ratio < 2.5  # the trace's rate varies over the hour; twice as many arrivals, roughly


def test_adapters_follow_the_popularity_model():
    sc = Scenario.from_preset("azure-conv-2023", duration_s=3600.0)  # the whole file: 19,366 requests
    wl = replay_trace(sc)
    assert len(wl) == TRACES["azure-conv-2023"]["rows"]
    p = popularity(sc)
    freq = np.bincount(wl.adapter, minlength=sc.num_adapters) / len(wl)
    sd = np.sqrt(p * (1 - p) / len(wl))
    assert np.all(np.abs(freq - p) < 5 * sd + 1e-12), np.max(np.abs(freq - p) / sd)
    assert freq[0] == pytest.approx(p[0], abs=5 * sd[0]) and p[0] > 0.15  # Zipf 1.0 over 200 adapters
    # the same draws a generated stream of this seed makes (the adapter stream of 4.1)
    assert np.array_equal(wl.adapter, draw_adapters(sc, streams(sc.seed)[STREAM_ADAPTERS], len(wl)))
    gen = generate(sc.replace(trace=""))
    k = min(len(gen), len(wl))
    assert np.array_equal(wl.adapter[:k], gen.adapter[:k])
    # power popularity too
    pw = sc.replace(popularity="power", power_alpha=0.5, num_adapters=50)
    f2 = np.bincount(replay_trace(pw).adapter, minlength=50) / len(wl)
    p2 = popularity(pw)
    assert np.all(np.abs(f2 - p2) < 5 * np.sqrt(p2 * (1 - p2) / len(wl)))


def test_adapters_are_common_across_strategies_and_differ_across_seeds():
    sc = Scenario.from_preset("azure-code-2023", duration_s=200.0, warmup_s=10.0)
    ads = {s: simulate(sc.replace(strategy=s)).requests.adapter.to_numpy() for s in STRATS}
    for s in STRATS[1:]:
        assert np.array_equal(ads[s], ads[STRATS[0]]), s
    other = simulate(sc.replace(seed=1)).requests
    assert len(other) == len(ads["naive"])
    assert np.array_equal(other.arrival_s.to_numpy(), simulate(sc).requests.arrival_s.to_numpy())
    assert (other.adapter.to_numpy() != ads["naive"]).mean() > 0.5
    # a longer replay extends a shorter one (sequential draws)
    longer = replay_trace(sc.replace(duration_s=400.0))
    assert np.array_equal(longer.adapter[: len(ads["naive"])], ads["naive"])


def test_closed_arrival_process_is_ignored_while_a_trace_replays():
    sc = Scenario.from_preset("azure-code-2023", duration_s=120.0, warmup_s=5.0)
    a = simulate(sc).requests
    b = simulate(sc.replace(arrival_process="closed", concurrency=3, arrival_rate_rps=0.0)).requests
    pd.testing.assert_frame_equal(a, b)


def test_preset_stand_in_matches_the_window():
    """The presets' workload fields (used when trace is "") are the 600 s window's means and prompt CV."""
    for name in NAMES:
        sc = Scenario.from_preset(name)
        w = _in_window(name, 1.0, 600.0)
        assert sc.arrival_rate_rps == pytest.approx(len(w) / 600.0, rel=0.01)
        assert sc.prompt_tokens == pytest.approx(w.num_prefill_tokens.mean(), rel=0.01)
        assert sc.output_tokens == pytest.approx(w.num_decode_tokens.mean(), rel=0.02)
        cv = w.num_prefill_tokens.std() / w.num_prefill_tokens.mean()
        assert sc.length_spread == pytest.approx(cv, abs=0.01)
        standin = sc.replace(trace="").validate()
        assert standin.arrival_process == "poisson" and standin.length_dist == "lognormal"
        r = simulate(standin)
        assert r.summary["requests"] > 0
        # the conversation preset's batch-token limit admits its longest prompt at every time scale
        assert sc.replace(trace_time_scale=50.0).validate().expected_requests() == TRACES[name]["rows"]


# ---------------------------------------------------------------- validation and the request cap


@pytest.mark.parametrize("field,value", [
    ("trace", "azure-chat-2099"), ("trace", "AZURE-CONV-2023"),
    ("trace_time_scale", 0.0), ("trace_time_scale", -1.0), ("trace_time_scale", 0.01),
    ("trace_time_scale", 51.0), ("trace_time_scale", float("inf")),
])
def test_invalid_trace_fields_name_the_field(field, value):
    sc = Scenario.from_preset("azure-conv-2023")
    with pytest.raises(ValueError) as e:
        simulate(sc.replace(**{field: value}))
    msg = str(e.value)
    assert msg.startswith(f"{field}: invalid value"), msg
    assert ("azure-conv-2023" in msg) if field == "trace" else ("[0.05, 50]" in msg)
    with pytest.raises(ValueError, match=r"^trace_time_scale: invalid value"):
        Scenario.from_dict({"trace_time_scale": "fast"})


def test_prompt_longer_than_max_batched_tokens_is_refused_naming_it():
    sc = Scenario.from_preset("azure-code-2023", max_batched_tokens=4096)
    longest = int(_in_window("azure-code-2023", 1.0, 600.0).num_prefill_tokens.max())
    with pytest.raises(ValueError, match=rf"^max_batched_tokens: invalid value 4096; allowed: at least {longest}"):
        sc.validate()
    # the conversation trace's 14,050-token prompt enters the window from trace_time_scale ~1.85
    conv = Scenario.from_preset("azure-conv-2023", max_batched_tokens=8192)
    conv.validate()
    with pytest.raises(ValueError, match=r"^max_batched_tokens: .*at least 14050"):
        conv.replace(trace_time_scale=2.0).validate()
    # the drawn-length check (prompt_tokens) does not apply while a trace replays
    long_prompts = dict(max_batched_tokens=8192, prompt_tokens=9000, length_dist="fixed")
    sc.replace(**long_prompts).validate()
    with pytest.raises(ValueError, match=r"^prompt_tokens: invalid value 9000"):
        sc.replace(**long_prompts, trace="").validate()


def test_memory_checks_size_the_kv_for_the_traces_longest_request():
    sc = Scenario.from_preset("azure-conv-2023")
    n = sc.max_request_tokens()
    assert sc.replace(trace="").max_request_tokens() < n <= sc.max_fitting_request_tokens()
    with pytest.raises(ValueError, match=r"^kv_cache_gb: .*the KV of one longest request"):
        sc.replace(kv_cache_gb=0.5).validate()  # 0.5 GiB holds ~1,000 tokens of Llama-2-7B KV
    with pytest.raises(ValueError, match=rf"^vram_budget_gb: .*{n}-token request"):
        sc.replace(vram_budget_gb=sc.max_vram_budget_gb() + 0.5).validate()


def test_request_cap_counts_the_traces_requests(monkeypatch):
    sc = Scenario.from_preset("azure-conv-2023", arrival_rate_rps=1e9)  # the rate is not used
    assert sc.validate().expected_requests() == len(_in_window("azure-conv-2023", 1.0, 600.0))
    with pytest.raises(ValueError, match=r"^arrival_rate_rps: "):
        sc.replace(trace="").validate()
    monkeypatch.setattr(scenario_module, "MAX_REQUESTS", 2000)
    with pytest.raises(ValueError, match=r"^trace_time_scale: trace 'azure-conv-2023' .* 2867 requests.*at most 2000"):
        sc.validate()
    sc.replace(trace_time_scale=0.5).validate()  # 1,445 requests


def test_uploaded_trace_and_shipped_trace_together_are_refused():
    sc = Scenario.from_preset("azure-code-2023", duration_s=60.0, warmup_s=5.0)
    wl = read_trace("arrival_s,adapter_id,prompt_tokens,output_tokens\n0.0,0,10,5\n", sc)
    with pytest.raises(ValueError, match=r"^trace: the scenario replays the shipped trace 'azure-code-2023'"):
        simulate(sc, trace=wl)
    assert len(simulate(sc.replace(trace=""), trace=wl).requests) == 1


# ---------------------------------------------------------------- downloads


@pytest.mark.parametrize("name", NAMES)
def test_download_as_shipped(name):
    df = shipped_trace(name)
    pd.testing.assert_frame_equal(df, _file(name))
    df.iloc[0, 1] = -5  # a copy: the cache is untouched
    assert shipped_trace(name).iloc[0, 1] == _file(name).iloc[0, 1]
    with pytest.raises(ValueError, match=r"^trace: invalid value 'x'"):
        shipped_trace("x")


@pytest.mark.parametrize("name,scale", [("azure-conv-2023", 1.0), ("azure-code-2023", 1.5)])
def test_download_in_trace_format_replays_the_same_run(name, scale):
    sc = Scenario.from_preset(name, trace_time_scale=scale, duration_s=240.0, warmup_s=10.0, seed=7)
    df = shipped_trace(name, sc)
    assert list(df.columns) == ["arrival_s", "adapter_id", "prompt_tokens", "output_tokens"]
    direct = simulate(sc)
    assert np.array_equal(df.adapter_id.to_numpy(), direct.requests.adapter.to_numpy())
    csv = df.to_csv(index=False).encode()
    # replayed on a scenario whose drawn lengths are short (the default's 256 + 64): the KV bound is the memory's
    upload_sc = sc.replace(trace="", length_dist="fixed", prompt_tokens=256, output_tokens=64)
    assert upload_sc.max_request_tokens() < int((df.prompt_tokens + df.output_tokens).max())
    replayed = simulate(upload_sc, trace=read_trace(io.BytesIO(csv), upload_sc))
    pd.testing.assert_frame_equal(replayed.requests, direct.requests)
    assert _same(replayed.summary, direct.summary)
    full = shipped_trace(name, sc, window=False)
    assert len(full) == TRACES[name]["rows"]
    pd.testing.assert_frame_equal(full.iloc[: len(df)], df)
    assert np.array_equal(full.arrival_s.to_numpy(), _file(name).arrived_at.to_numpy() / scale)


def test_read_trace_kv_bound_is_the_memorys():
    sc = Scenario.from_preset("default", num_adapters=4, duration_s=10.0, warmup_s=0.0)
    fit = sc.max_fitting_request_tokens()
    assert fit > sc.max_request_tokens()
    head = "arrival_s,adapter_id,prompt_tokens,output_tokens\n"
    ok = head + "0.0,0,2000,500\n" + f"0.5,1,8000,{fit - 8000}\n"  # longer than 256 + 64; the 2nd fills the KV
    r = simulate(sc, trace=read_trace(ok, sc))
    assert r.requests.completed.iloc[0] and len(r.requests) == 2
    with pytest.raises(ValueError, match=rf"^trace: row 3: prompt_tokens='8000'; allowed: .*<= {fit} \(the longest"):
        read_trace(head + "0.0,0,2000,500\n" + f"1.0,1,8000,{fit - 7999}\n", sc)


# ---------------------------------------------------------------- scenarios without a trace


def test_scenarios_without_a_trace_carry_the_defaults():
    for name, d in presets.SCENARIOS.items():
        sc = Scenario.from_preset(name)
        assert sc.trace == d.get("trace", "") and sc.trace_time_scale == 1.0
        j = json.loads(sc.to_json())
        assert j["trace"] == sc.trace and j["trace_time_scale"] == 1.0
        assert Scenario.from_json(sc.to_json()) == sc
        if not sc.trace:
            assert sc.expected_requests() == (sc.concurrency if sc.arrival_process == "closed"
                                              else sc.arrival_rate_rps * sc.duration_s)
    old = Scenario.from_preset("default").to_dict()
    del old["trace"], old["trace_time_scale"]  # a scenario.json written before the fields existed
    assert Scenario.from_dict(old) == Scenario.from_preset("default")


def test_generated_stream_is_unchanged_by_the_new_fields():
    sc = Scenario.from_preset("default", duration_s=30.0, warmup_s=2.0)
    wl = generate(sc)
    rs = streams(sc.seed)
    assert np.array_equal(wl.adapter, draw_adapters(sc, rs[STREAM_ADAPTERS], len(wl)))
    # the time scale is read only by a trace replay
    a, b = simulate(sc), simulate(sc.replace(trace_time_scale=3.0))
    pd.testing.assert_frame_equal(a.requests, b.requests)
    assert _same(a.summary, b.summary)
