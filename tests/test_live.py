"""The live layer without vLLM: the observer against a small OpenAI-style HTTP server on the loopback (streamed
first-token time, errors recorded row by row, unreachable and unknown-adapter messages), the /metrics reading, the
reference server's spec and its scenario fields, the measured device's round trip, and the fit on runs the engine
itself generated (a synthetic server with known parameters)."""
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine import Scenario, simulate
from engine.calibration import fit_tool_runs, read_tool_files
from engine.calibration.readers import run_case
from engine.calibration.readers.observed import twin_base, write_simulated
from engine.live import ReferenceSpec, observe, parse_metrics, prompt_text, scenario_fields
from engine.presets import GPUS, gpu_from_dict

FIRST_DELAY_S = 0.15
GAP_S = 0.01
ADAPTERS = ["l0", "l1", "l2"]


class _Handler(BaseHTTPRequestHandler):
    """A server that answers like vLLM's OpenAI API: /v1/models (a base and three adapters), /metrics, and
    streamed /v1/completions (the first token after FIRST_DELAY_S, then one every GAP_S); the adapter "l2" gets
    HTTP 500."""

    def log_message(self, *a):
        pass

    def _send(self, code, body: bytes, ctype="application/json"):
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/v1/models":
            data = [{"id": "base", "parent": None}] + [{"id": a, "parent": "base"} for a in ADAPTERS]
            self._send(200, json.dumps({"object": "list", "data": data}).encode())
        elif self.path == "/metrics":
            self._send(200, METRICS.encode(), "text/plain")
        else:
            self._send(404, b"{}")

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if body["model"] == "l2":
            self._send(500, json.dumps({"error": {"message": "internal failure on l2"}}).encode())
            return
        n_prompt = len(body["prompt"].split())
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        time.sleep(FIRST_DELAY_S)
        for i in range(body["max_tokens"]):
            if i:
                time.sleep(GAP_S)
            chunk = {"choices": [{"index": 0, "text": f" w{i + 1}"}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        usage = {"choices": [], "usage": {"prompt_tokens": n_prompt, "completion_tokens": body["max_tokens"]}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


METRICS = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="base"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="base"} 5.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="base"} 0.25
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="base"} 2.0
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="l3",waiting_lora_adapters="l3"} 1.70e+09
vllm:lora_requests_info{max_lora="2",running_lora_adapters="l0,l1",waiting_lora_adapters="l2"} 1.80e+09
"""


@pytest.fixture(scope="module")
def fake_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def _traffic(**kw):
    base = dict(num_adapters=3, popularity="power", power_alpha=1.0, arrival_rate_rps=20.0, duration_s=1.0,
                warmup_s=0.0, prompt_tokens=12, output_tokens=5, length_dist="fixed", prefix_tokens=0, prefix_share=0.0)
    return Scenario.from_preset("default").replace(**{**base, **kw})


def test_observe_records_every_request_with_streamed_times(fake_server, tmp_path):
    sc = _traffic()
    obs = observe(fake_server, sc, out_dir=tmp_path, metrics_period_s=0.1)
    r = obs.requests
    wl_n = len(pd.read_csv(tmp_path / "requests.csv"))
    assert wl_n == len(r) == obs.summary()["sent"] > 5
    ok, bad = r[r["status"] == "ok"], r[r["status"] != "ok"]
    assert len(bad) and (bad["adapter"] == "l2").all() and (bad["status"] == "http_500").all()
    assert (bad["error"] == "internal failure on l2").all()
    assert len(ok) and (ok["adapter"] != "l2").all() and len(ok) + len(bad) == len(r)
    # the recorded TTFT is the first streamed chunk's time; every token's time is listed
    first = ok["token_times_ms"].str.split().str[0].astype(float)
    np.testing.assert_allclose(first, ok["ttft_ms"], atol=1e-3)
    assert (ok["ttft_ms"] >= FIRST_DELAY_S * 1e3).all() and (ok["ttft_ms"] < FIRST_DELAY_S * 1e3 + 2000).all()
    assert (ok["token_chunks"] == 5).all() and (ok["output_tokens_reported"] == 5).all()
    assert (ok["prompt_tokens_reported"] == 12).all()
    np.testing.assert_allclose(ok["tpot_ms"], (ok["end_s"] - ok["first_token_s"]) * 1e3 / 4, rtol=0.2)
    ts = obs.timeseries
    assert len(ts) >= 3 and (ts["running"] == 3).all() and (ts["running_adapters"] == "l0 l1").all()
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["summary"]["by_status"]["http_500"] == len(bad)


def test_observe_sends_the_engines_request_stream(fake_server):
    from engine.workload import generate
    sc = _traffic(num_adapters=2, output_tokens=2, duration_s=0.6)
    obs = observe(fake_server, sc, metrics_period_s=0.2)
    wl = generate(sc)
    r = obs.requests.sort_values("request_id")
    assert list(r["adapter_index"]) == list(wl.adapter) and list(r["prompt_tokens"]) == list(wl.prompt_tokens)
    lag = r["send_s"].to_numpy() - wl.arrival_s
    assert (lag >= 0).all() and np.median(lag) < 0.05


def test_unreachable_url_is_one_line(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ValueError, match=r"^observe: cannot reach http://127.0.0.1:\d+ .*is the server running") as e:
        observe(f"http://127.0.0.1:{port}", _traffic(), out_dir=tmp_path / "o")
    assert "\n" not in str(e.value) and not (tmp_path / "o").exists()
    p = subprocess.run([sys.executable, "-m", "engine", "observe", "--url", f"http://127.0.0.1:{port}", "--set",
                        "duration_s=1", "--set", "warmup_s=0"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "cannot reach" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_unknown_adapter_names_are_refused_before_sending(fake_server):
    with pytest.raises(ValueError, match=r"adapter 'nope' is not served at this URL; the server lists l0, l1, l2"):
        observe(fake_server, _traffic(num_adapters=1), adapters=["nope"])
    with pytest.raises(ValueError, match=r"num_adapters: 5 adapters in the scenario, but the server lists 3"):
        observe(fake_server, _traffic(num_adapters=5))


@pytest.mark.parametrize("kw, field", [(dict(max_requests=0), "max_requests"), (dict(request_timeout_s=0), "request_timeout_s"),
                                       (dict(metrics_period_s=1e4), "metrics_period_s")])
def test_observe_bounds_are_checked(fake_server, kw, field):
    with pytest.raises(ValueError, match=f"^{field}: invalid value"):
        observe(fake_server, _traffic(), **kw)


def test_max_requests_caps_what_is_sent(fake_server):
    obs = observe(fake_server, _traffic(num_adapters=2, arrival_rate_rps=50.0), max_requests=4)
    assert len(obs.requests) == 4


def test_parse_metrics_takes_the_newest_lora_series():
    m = parse_metrics(METRICS)
    assert (m["running"], m["waiting"], m["kv_usage"], m["preemptions"]) == (3.0, 5.0, 0.25, 2.0)
    assert (m["running_adapters"], m["waiting_adapters"], m["n_running_adapters"], m["max_lora"]) == ("l0 l1", "l2", 2, 2)


def test_prompt_text_is_exact_and_shares_only_the_prefix():
    a, b = prompt_text(0, 40, 16, 0, 1024).split(), prompt_text(1, 40, 16, 0, 1024).split()
    assert len(a) == len(b) == 40 and a[:16] == b[:16] and a[16:] != b[16:]
    assert all(w.startswith("w") and 1 <= int(w[1:]) <= 1023 for w in a)


def test_reference_spec_checks_and_maps_to_scenario_fields():
    for kw, msg in ((dict(max_loras=0), "max_loras: invalid value 0"), (dict(max_cpu_loras=1, max_loras=2), "max_cpu_loras"),
                    (dict(adapter_ranks=(16,), max_lora_rank=8), "max_lora_rank: 8 < the largest"),
                    (dict(target_modules=("x_proj",)), "target_modules"), (dict(kv_cache_gib=0), "kv_cache_gib: invalid value 0")):
        with pytest.raises(ValueError, match=msg):
            ReferenceSpec(**kw).validate()
    with pytest.raises(ValueError, match="--server: unknown field 'nope'"):
        ReferenceSpec.from_strings({"nope": "1"})
    s = ReferenceSpec.from_strings({"max_loras": "4", "adapter_ranks": "8,16", "prefix_caching": "off", "num_adapters": "4"})
    assert s.lora_rank == 16 and s.max_loras == 4 and not s.prefix_caching
    f = scenario_fields(s.to_dict())
    assert f["max_loras"] == 4 and f["max_cpu_loras"] == 4 and f["adapter_ranks"] == (8, 16, 8, 16)
    assert f["prefix_caching"] == "off" and f["strategy"] == "vllm" and f["kv_block_tokens"] == 128 and not f["host_warm"]


def test_measured_device_round_trips_in_scenario_json():
    from engine.live.device import cpu_device
    figures = {"hbm_gbps": 20.0, "pcie_gbps": 40.0, "fp16_tflops": 0.1, "memory_gib": 16.0, "cpus": 2,
               "processor": "x86_64", "loadavg": 0.5, "when": "2026-12-05 00:00 UTC"}
    g = cpu_device(figures)
    sc = Scenario.from_preset("default", gpu=g.name)
    d = json.loads(sc.to_json())
    assert d["device_definition"]["hbm_gbps"] == 20.0
    del GPUS[g.name]
    assert Scenario.from_dict(d) == sc and GPUS[g.name] == g
    with pytest.raises(ValueError, match=r"device_definition.hbm_gbps: invalid value"):
        gpu_from_dict({**d["device_definition"], "hbm_gbps": -1})


def _synthetic(tmp_path: Path, truth: dict, rates=(2.0, 5.0, 10.0)):
    spec = ReferenceSpec(num_adapters=8, max_loras=2).to_dict()
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 1024, "hidden_size": 256,
           "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4,
           "max_position_embeddings": 1024, "tie_word_embeddings": False, "hidden_act": "silu"}
    dev = {"name": "cpu-synthetic", "label": "synthetic CPU", "memory_gib": 16.0, "hbm_gbps": 25.0,
           "fp16_tflops": 0.2, "pcie_gbps": 40.0, "source": "tests"}
    traffic = _traffic(num_adapters=8, prompt_tokens=64, output_tokens=16, length_dist="lognormal", length_spread=0.5,
                       duration_s=20.0)
    obj = {"scenario": traffic.to_dict(), "server": {"spec": spec, "model_config": cfg, "model_name": "reference-llama"},
           "device": dev}
    base = twin_base(obj, "synthetic")
    for i, rate in enumerate(rates):
        res = simulate(base.replace(arrival_rate_rps=rate, seed=i, **truth))
        write_simulated(res, tmp_path / f"r{i}", info={k: obj[k] for k in ("server", "device")})
    return base, read_tool_files([tmp_path])


def test_replay_of_a_synthetic_observation_is_exact(tmp_path, registry):
    truth = dict(step_overhead_ms=6.0, frontend_ms=15.0)
    base, runs = _synthetic(tmp_path, truth, rates=(5.0,))
    assert runs[0].adapters is not None and runs[0].server_fields["max_loras"] == 2
    case = run_case(runs[0], base.replace(**truth))
    sim = case.metric_fn(simulate(case.scenario, trace=case.trace), case.scenario)
    for k in ("request_throughput", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms"):
        assert sim[k] == pytest.approx(case.measured[k], rel=1e-9), k


def test_fit_recovers_known_parameters_from_a_synthetic_server(tmp_path, registry):
    truth = dict(step_overhead_ms=6.0, frontend_ms=15.0)
    base, runs = _synthetic(tmp_path, truth)
    start = base.replace(step_overhead_ms=2.0, frontend_ms=2.0)
    tf = fit_tool_runs(runs, start, params=["step_overhead_ms", "frontend_ms"], hold_out="highest-rate")
    for k, v in truth.items():
        assert tf.result.values[k] == pytest.approx(v, rel=0.03), k
    held = tf.table[tf.table["split"] == "held-out"]
    assert held["rel_error"].abs().max() < 0.05
