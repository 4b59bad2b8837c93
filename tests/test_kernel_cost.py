"""cost_model "kernel" (docs/model.md 5.4): the step cost with the dense GEMMs of engine/kernels.py.

The default ("roofline") must be what every preset runs and must not read the kernel slots; the
kernel step cost is checked against an analytic oracle built from engine.kernels' public API and the
presets, against a plain-Python transcription of its equations, for monotonicity, and in a fleet."""
import hashlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import ENUMS, Scenario, kernels, presets, simulate
from engine import loop as L
from engine.costs import kernel_step_seconds, step_seconds
from engine.sim import LOOP_ARGS, _build
from engine.workload import Workload, generate

# ------------------------------------------------------------------ roofline: bit-identical to before

CASES = {
    **{f"default-{s}": ("default", dict(strategy=s, duration_s=30.0, warmup_s=5.0)) for s in
       ("naive", "hot_set", "batch", "vllm", "oracle", "slora")},
    "vllm-llama31-8b": ("vllm-llama31-8b", dict(duration_s=60.0, warmup_s=10.0)),
    "slora-a10g-s1": ("slora-a10g-s1", dict(duration_s=60.0)),
    "slora-a100-80-s1": ("slora-a100-80-s1", dict(duration_s=30.0)),
    "kv-qwen2-0.5b-heavy": ("kv-qwen2-0.5b-heavy", dict(duration_s=20.0, warmup_s=2.0)),
    "azure-code-2023": ("azure-code-2023", dict(duration_s=60.0, warmup_s=5.0)),
    "seed3-calibrated": ("seed3-llama31-8b-80gb-calibrated", dict(duration_s=30.0, warmup_s=5.0)),
    "fleet-2": ("default", dict(num_replicas=2, router="least_loaded", arrival_rate_rps=32.0, duration_s=20.0,
                                warmup_s=2.0)),
    "fixed": ("default", dict(service_mode="fixed", duration_s=20.0, warmup_s=2.0)),
}
_COLS = ["arrival_s", "ttft_ms", "tpot_ms", "e2e_ms", "finish_s", "admit_s", "preemptions", "replica"]


def _digest(res) -> str:
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(res.requests[_COLS].to_numpy(np.float64)).tobytes())
    h.update(np.ascontiguousarray(res.timeseries.to_numpy(np.float64)).tobytes())
    h.update(repr((res.summary["steps"], res.summary["end_s"])).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("case", list(CASES))
def test_roofline_is_the_default_and_kernel_changes_the_run(case):
    """Every preset runs the roofline cost unless told otherwise (results equal to the explicit field, bit for
    bit), and the kernel cost is not a no-op on any of them (fixed service has no cost model to change)."""
    preset, kw = CASES[case]
    implicit = Scenario.from_preset(preset, **kw)
    assert implicit.cost_model == "roofline"
    base = _digest(simulate(implicit))
    assert _digest(simulate(implicit.replace(cost_model="roofline"))) == base
    if implicit.service_mode != "fixed":
        assert _digest(simulate(implicit.replace(cost_model="kernel"))) != base


def test_kernel_slots_are_not_read_by_the_roofline_path():
    """Garbage in the kernel model's fp slots changes nothing while cost_model is "roofline"."""
    sc = Scenario.from_preset("default", duration_s=20.0, warmup_s=2.0, strategy="slora")
    wl = generate(sc)
    a, b = _build(sc, wl), _build(sc, wl)
    assert b["fp"][L.FP_KERNEL] == 0.0
    b["fp"][L.FP_KERNEL + 1:L.FP_DENSE_END] = 1e-3  # layers, peaks, dims, parameters: all nonsense (not the
    # all-reduce slots after them, which both cost models read: tests/test_tensor_parallel.py)
    for arr in (a, b):
        L.run_loop(*(arr[k] for k in LOOP_ARGS))
    for k in ("R_f", "ts", "S_f"):
        np.testing.assert_array_equal(a[k], b[k])


def test_kernel_cost_changes_the_run():
    """Not vacuous: the same scenario with cost_model "kernel" gives other step times."""
    sc = Scenario.from_preset("default", duration_s=20.0, warmup_s=2.0)
    r, k = simulate(sc), simulate(sc.replace(cost_model="kernel"))
    assert r.summary["tpot_mean_ms"] != pytest.approx(k.summary["tpot_mean_ms"], rel=1e-3)


# ------------------------------------------------------------------ validation


def test_cost_model_is_an_enum_with_a_clear_error():
    assert ENUMS["cost_model"] == ("roofline", "kernel")
    assert Scenario().cost_model == "roofline"
    with pytest.raises(ValueError, match=r"^cost_model: invalid value 'vidur'; allowed: roofline, kernel$"):
        Scenario(cost_model="vidur").validate()
    with pytest.raises(ValueError, match=r"cost_model: invalid value 'kernel' with service_mode 'fixed'; allowed: "
                                         r"'roofline'"):
        Scenario(service_mode="fixed", cost_model="kernel").validate()
    Scenario(service_mode="fixed", cost_model="roofline").validate()
    sc = Scenario(cost_model="kernel").validate()
    assert Scenario.from_dict(sc.to_dict()).cost_model == "kernel"
    d = sc.to_dict()
    del d["cost_model"]  # a scenario.json written before the field existed
    assert Scenario.from_dict(d).cost_model == "roofline"


def test_build_lays_out_the_kernel_model():
    sc = Scenario.from_preset("vllm-llama31-8b", cost_model="kernel")
    fp = _build(sc, generate(sc.replace(duration_s=5.0, warmup_s=1.0)))["fp"]
    g, m = sc.gpu_spec, sc.model_spec
    assert fp[L.FP_KERNEL] == 1.0 and fp[L.FP_N_LAYERS] == m.n_layers
    assert fp[L.FP_PEAK_FLOPS] == g.fp16_tflops * 1e12 and fp[L.FP_PEAK_BW] == g.hbm_gbps * 1e9
    assert fp[L.FP_FLOPS] == g.fp16_tflops * 1e12 * sc.compute_eff  # the roofline's slots are unchanged
    assert (fp[L.FP_VOCAB], fp[L.FP_HIDDEN]) == (m.vocab_size, m.hidden_size)
    np.testing.assert_array_equal(fp[L.FP_KPARAMS:L.FP_DENSE_N], kernels.param_array())
    n, k = kernels.dense_dims(m, 1)
    np.testing.assert_array_equal(fp[L.FP_DENSE_N:L.FP_DENSE_K], n)
    np.testing.assert_array_equal(fp[L.FP_DENSE_K:L.FP_DENSE_END], k)
    assert L.FP_DENSE_END == L.FP_DENSE_K + len(kernels.DENSE_OPS)
    assert L.FP_LEN == fp.shape[0] == L.FP_AR_TOK + 1


# ------------------------------------------------------------------ analytic oracle: one request


def _one_request(prompt: int, output: int, adapter: int = 0, n: int = 1) -> Workload:
    return Workload(np.full(n, 0.5), np.full(n, adapter, np.int64), np.full(n, prompt, np.int64),
                    np.full(n, output, np.int64))


def _oracle_ms(sc: Scenario, prompt: int, output: int) -> tuple[float, float]:
    """(prefill step, mean decode step) in ms of one request alone, from engine.kernels' Python API
    (dense_layer_ms; gemm_seconds for the LM head) and the presets: docs/model.md 5.4."""
    g, m = sc.gpu_spec, sc.model_spec
    p = kernels.param_array()
    peak, bw = g.fp16_tflops * 1e12, g.hbm_gbps * 1e9
    lm_head = kernels.gemm_seconds(1.0, float(m.vocab_size), float(m.hidden_size), peak, bw, *p) * 1e3
    ld = m.n_layers * m.n_heads * m.head_dim  # attention width: hidden_size for all but Gemma-2 (4096 vs 3584)
    kv = presets.kv_bytes_per_token(m)
    ab = sc.adapter_sizes()[0]  # the request's adapter (id 0; presets.adapter_bytes of its rank) ...
    if sc.lora_rank_padding_mode() == "max_rank":  # ... or the largest configured (vLLM's profile: docs/model.md 5.5)
        ab = max(sc.adapter_sizes())
    extra = sc.step_overhead_ms + sc.lora_ms_per_adapter + sc.lora_ms_per_slot * sc.max_loras

    def rest(flops, nbytes):
        return 1e3 * max(flops / (peak * sc.compute_eff), nbytes / (bw * sc.bw_eff))

    tok_slot = sc.lora_us_per_token_slot * 1e-3 * sc.max_loras
    prefill = (m.n_layers * kernels.dense_layer_ms(sc.gpu, sc.model, prompt) + lm_head
               + rest(2 * ld * prompt**2 + prompt * ab, kv * prompt + ab) + extra + tok_slot * prompt)
    decode = [m.n_layers * kernels.dense_layer_ms(sc.gpu, sc.model, 1) + lm_head
              + rest(4 * ld * (prompt + k) + ab, kv * (prompt + k + 1) + ab) + extra + tok_slot
              for k in range(1, output)]  # decode step k: context prompt + k, one token written
    return prefill, float(np.mean(decode))


@pytest.mark.parametrize("preset,prompt,output,kw", [
    ("default", 16, 11, dict(step_overhead_ms=0.7, lora_ms_per_adapter=0.1)),
    ("default", 700, 40, dict(compute_eff=0.05, step_overhead_ms=0.0)),  # attention compute-bound
    ("vllm-llama31-8b", 200, 30, dict(drain_s=60.0)),                      # LoRA slot terms, GQA
    ("slora-a10g-s1", 300, 20, {}),
    ("default", 900, 30, dict(model="gemma-2-9b", compute_eff=0.05)),  # n_heads x head_dim != hidden_size
])
def test_one_request_tpot_and_prefill_match_the_analytic_oracle(preset, prompt, output, kw):
    sc = Scenario.from_preset(preset, cost_model="kernel", duration_s=30.0, warmup_s=0.0, **kw)
    req = simulate(sc, trace=_one_request(prompt, output)).requests.iloc[0]
    prefill_ms, tpot_ms = _oracle_ms(sc, prompt, output)
    assert req.tpot_ms == pytest.approx(tpot_ms, rel=1e-9)
    assert req.prefill_ms == pytest.approx(prefill_ms, rel=1e-9)
    # and the kernel cost is not the roofline's
    rr = simulate(sc.replace(cost_model="roofline"), trace=_one_request(prompt, output)).requests.iloc[0]
    assert rr.tpot_ms != pytest.approx(tpot_ms, rel=1e-4)


@pytest.mark.parametrize("router", ["round_robin", "least_loaded"])
def test_fleet_with_kernel_cost(router):
    """Two requests at once on two replicas: each runs alone on its GPU, so each matches the oracle;
    then a loaded fleet runs to completion."""
    sc = Scenario.from_preset("default", cost_model="kernel", num_replicas=2, router=router, duration_s=30.0,
                              warmup_s=0.0, step_overhead_ms=0.3)
    r = simulate(sc, trace=_one_request(64, 21, n=2))
    assert sorted(r.requests["replica"]) == [0, 1]
    _, tpot_ms = _oracle_ms(sc, 64, 21)
    np.testing.assert_allclose(r.requests["tpot_ms"], tpot_ms, rtol=1e-9)
    big = simulate(sc.replace(arrival_rate_rps=40.0, duration_s=20.0, warmup_s=2.0))
    one = simulate(sc.replace(arrival_rate_rps=20.0, duration_s=20.0, warmup_s=2.0, num_replicas=1))
    assert big.summary["num_replicas"] == 2 and set(big.requests["replica"]) == {0, 1}
    assert big.requests["completed"].all()
    # half the traffic per GPU: each replica's decode steps cost about what one GPU at half the rate pays
    assert big.summary["tpot_mean_ms"] == pytest.approx(one.summary["tpot_mean_ms"], rel=0.1)
    assert big.summary["tpot_mean_ms"] != pytest.approx(
        simulate(sc.replace(cost_model="roofline", arrival_rate_rps=40.0, duration_s=20.0,
                            warmup_s=2.0)).summary["tpot_mean_ms"], rel=1e-3)


# ------------------------------------------------------------------ the jitted step cost


def _ref_gemm(m, n, k, peak, bw, eta_c, tau_c, eta_m, tau_m, alpha, gamma):
    """docs/model.md 5.4, per GEMM, transcribed with the math module."""
    mt = m if m <= 128 else 128 * math.ceil(m / 128)
    x_c = 2 * mt * n * k / peak
    x_m = 2 * (n * k + m * k + m * n) / bw
    t_c = (x_c + tau_c) / eta_c
    t_m = x_m / (eta_m * (1 - math.exp(-((x_m / tau_m) ** alpha))))
    return max(t_c, t_m) + gamma * min(t_c, t_m)


def _ref_kernel_step(x: dict, model, gpu, ce: float, be: float, params) -> float:
    """docs/model.md 5.4, "The step cost", transcribed."""
    m, g = presets.get_model(model), presets.get_gpu(gpu)
    peak, bw = g.fp16_tflops * 1e12, g.hbm_gbps * 1e9
    shapes = kernels.op_shapes(m, 1)
    tokens = x["P"] + x["D"]
    dense = 0.0
    if tokens > 0:
        dense = m.n_layers * sum(_ref_gemm(tokens, n, k, peak, bw, *params) for n, k in shapes.values())
    if x["S"] > 0:
        dense += _ref_gemm(x["S"], m.vocab_size, m.hidden_size, peak, bw, *params)
    ld = m.n_layers * m.n_heads * m.head_dim  # attention width: hidden_size for all but Gemma-2 (4096 vs 3584)
    kv = presets.kv_bytes_per_token(m)
    flops = 2 * ld * x["P2"] + 4 * ld * x["C"] + x["lf"]
    nbytes = kv * (x["C"] + x["P"] + x["D"]) + x["lb"]
    rest = max(flops / (peak * ce), nbytes / (bw * be))
    return (dense + rest + x["oh"] + x["la"] * x["dist"] + x["ls"] * x["slots"]
            + x["lts"] * (x["P"] + x["D"]) * x["slots"])


def _jit_kernel_step(x: dict, model, gpu, ce: float, be: float, params) -> float:
    m, g = presets.get_model(model), presets.get_gpu(gpu)
    n_dims, k_dims = kernels.dense_dims(m, 1)
    return kernel_step_seconds(
        float(x["P"]), float(x["P2"]), float(x["D"]), float(x["S"]), float(x["C"]), x["lf"], x["lb"], float(x["dist"]),
        float(x["slots"]), g.fp16_tflops * 1e12 * ce, g.hbm_gbps * 1e9 * be, float(m.n_layers * m.hidden_size),
        float(presets.kv_bytes_per_token(m)), x["oh"], x["la"], x["ls"], x["lts"], float(m.n_layers), n_dims, k_dims,
        np.asarray(params, np.float64), g.fp16_tflops * 1e12, g.hbm_gbps * 1e9, float(m.vocab_size),
        float(m.hidden_size))


@st.composite
def _step_inputs(draw):
    prompts = draw(st.lists(st.integers(1, 8192), max_size=6))
    D = draw(st.integers(0, 2048))
    return dict(
        P=sum(prompts), P2=sum(p * p for p in prompts), D=D, S=len(prompts) + D,
        C=D * draw(st.integers(1, 4000)), lf=draw(st.floats(0, 1e12)), lb=draw(st.floats(0, 1e9)),
        dist=draw(st.integers(0, 64)), slots=draw(st.integers(0, 64)), oh=draw(st.floats(0, 0.02)),
        la=draw(st.floats(0, 1e-3)), ls=draw(st.floats(0, 1e-3)), lts=draw(st.floats(0, 1e-6)))


_PARAMS = st.tuples(st.floats(0.05, 1.0), st.floats(0, 2e-5), st.floats(0.05, 1.0), st.floats(1e-7, 2e-5),
                    st.floats(0.05, 1.0), st.floats(0, 1.0))


@settings(max_examples=300, deadline=None)
@given(x=_step_inputs(), model=st.sampled_from(["llama-2-7b", "llama-3.1-8b", "llama-7b", "qwen2-0.5b"]),
       gpu=st.sampled_from(sorted(presets.GPUS)), ce=st.floats(0.05, 1.0), be=st.floats(0.05, 1.0),
       params=st.one_of(st.just(tuple(kernels.param_array())), _PARAMS))
def test_jitted_kernel_step_equals_the_python_reference(x, model, gpu, ce, be, params):
    assert _jit_kernel_step(x, model, gpu, ce, be, params) == pytest.approx(
        _ref_kernel_step(x, model, gpu, ce, be, params), rel=1e-12, abs=0.0)


@settings(max_examples=200, deadline=None)
@given(x=_step_inputs(), model=st.sampled_from(["llama-2-7b", "llama-3.1-8b"]), gpu=st.sampled_from(sorted(presets.GPUS)))
def test_roofline_step_is_unchanged(x, model, gpu):
    """The default step cost is still docs/model.md 5.1: one max over the whole step's FLOPs and bytes."""
    m, g = presets.get_model(model), presets.get_gpu(gpu)
    peak, bw = g.fp16_tflops * 1e12 * 0.6, g.hbm_gbps * 1e9 * 0.8
    ld, kv, w = m.n_layers * m.hidden_size, presets.kv_bytes_per_token(m), presets.weight_bytes(m)
    flops = 2 * m.n_params * (x["P"] + x["D"]) + 2 * ld * x["P2"] + 4 * ld * x["C"] + x["lf"]
    nbytes = w + kv * (x["C"] + x["P"] + x["D"]) + x["lb"]
    ref = (max(flops / peak, nbytes / bw) + x["oh"] + x["la"] * x["dist"] + x["ls"] * x["slots"]
           + x["lts"] * (x["P"] + x["D"]) * x["slots"])
    got = step_seconds(False, float(x["P"]), float(x["P2"]), float(x["D"]), float(x["C"]), x["lf"], x["lb"],
                       float(x["dist"]), float(x["slots"]), m.n_params, float(w), peak, bw, float(ld), float(kv),
                       x["oh"], x["la"], x["ls"], 1.0, 1.0, x["lts"])
    assert got == pytest.approx(ref, rel=1e-12, abs=0.0)


def test_empty_step_has_no_dense_time():
    """No tokens and no sampled sequence: only the overheads (the kernel terms are 0, not a weight read)."""
    x = dict(P=0, P2=0, D=0, S=0, C=0, lf=0.0, lb=0.0, dist=0, slots=3, oh=1e-3, la=0.0, ls=2e-4, lts=0.0)
    assert _jit_kernel_step(x, "llama-2-7b", "a100-80gb", 0.6, 0.8, kernels.param_array()) == pytest.approx(1.6e-3)


@pytest.mark.parametrize("model,gpu", [("llama-2-7b", "a100-80gb"), ("llama-3.1-8b", "h100-64gb"),
                                       ("llama-7b", "a10g"), ("qwen2-0.5b", "a100-80gb")])
def test_kernel_step_is_monotone_in_batch_tokens(model, gpu):
    """More tokens never make a step cheaper: one prompt of 0..16384 tokens on top of a decode batch,
    and 0..2048 decoding requests (each with 600 tokens of context, each sampling)."""
    params = kernels.param_array()
    base = dict(P=0, P2=0, D=0, S=0, C=0, lf=0.0, lb=3e7, dist=1, slots=0, oh=5e-4, la=0.0, ls=0.0, lts=0.0)
    for d in (0, 1, 37, 512):
        prev = -1.0
        for p in range(0, 16385, 7):
            x = {**base, "P": p, "P2": p * p, "D": d, "S": d + (p > 0), "C": 600 * d, "lf": 1e6 * (p + d)}
            t = _jit_kernel_step(x, model, gpu, 0.6, 0.8, params)
            assert t >= prev, (d, p)
            prev = t
    prev = -1.0
    for d in range(0, 2049):
        x = {**base, "D": d, "S": d, "C": 600 * d, "lf": 1e6 * d}
        t = _jit_kernel_step(x, model, gpu, 0.6, 0.8, params)
        assert t >= prev, d
        prev = t
