"""LoRA rank padding (Scenario.lora_rank_padding, docs/model.md 5.5): the LoRA FLOPs and bytes of a step at each
request's own adapter ("none", the default for every strategy), at the largest adapter in the step's batch
("batch_max": Punica's SGMV takes one rank per batch) or at the largest adapter configured ("max_rank": vLLM's LoRA
buffers at --max-lora-rank; the vLLM server profile and its fit run at it: tests/test_vllm_refit.py).

Checked: "auto" is "none" for every strategy and equals it bit for bit; with a single rank every mode gives the same
run bit for bit; step by step, with a batch whose composition does not depend on time, "batch_max" costs at least
"none" in every step and more in every step that mixes ranks, "max_rank" at least "batch_max"; an analytic oracle
(two requests of different ranks decoding together: step_seconds at the padded FLOPs and bytes computed by hand from
presets.adapter_bytes); the decode-run fast path equals the step-by-step loop with padding on; the error message."""
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legacy import legacy_preset
from test_fast_paths import _assert_same, _both, random_scenario_agrees

from engine import ENUMS, STRATEGIES, Scenario, presets, simulate
from engine import loop as L
from engine import sim as S
from engine.costs import step_seconds
from engine.workload import Workload, generate

MODES = ("none", "batch_max", "max_rank")
_STATE = ("R_i", "R_f", "A_i", "A_f", "S_i", "S_f", "ts", "ev_t", "ev_i", "heap_t", "heap_a")


def _run(sc: Scenario, wl: Workload | None = None) -> dict:
    """The loop's state arrays after a run (``wl``: the scenario's own stream if None)."""
    sc = sc.validate()
    if wl is None:
        wl = generate(sc, n_closed=sc.concurrency * 64 + 1024) if sc.arrival_process == "closed" else generate(sc)
    arr = S._build(sc, wl)
    L.run_loop(*[arr[k] for k in S.LOOP_ARGS])
    return arr


def _states_equal(a: dict, b: dict) -> None:
    for k in _STATE:
        assert np.array_equal(a[k], b[k], equal_nan=True), k


def _results_equal(a: S.SimResult, b: S.SimResult) -> None:
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.timeseries, b.timeseries, check_exact=True)
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)
    assert a.summary.keys() == b.summary.keys()
    for k, v in a.summary.items():
        if k != "lora_rank_padding_mode":
            w = b.summary[k]
            assert v == w or (isinstance(v, float) and math.isnan(v) and math.isnan(w)), (k, v, w)


# ---------------------------------------------------------------------------------------------- settings
def test_auto_is_none_for_every_strategy():
    assert ENUMS["lora_rank_padding"] == ("auto", "none", "batch_max", "max_rank")
    assert Scenario().lora_rank_padding == "auto"
    for name, pol in STRATEGIES.items():
        assert pol.lora_rank_padding == "none", name
        assert Scenario(strategy=name).lora_rank_padding_mode() == "none"
        for m in MODES:
            assert Scenario(strategy=name, lora_rank_padding=m).lora_rank_padding_mode() == m
    sc = legacy_preset("default", strategy="vllm", duration_s=10.0, warmup_s=1.0)
    assert simulate(sc).summary["lora_rank_padding_mode"] == "none"
    assert simulate(sc.replace(lora_rank_padding="batch_max")).summary["lora_rank_padding_mode"] == "batch_max"
    d = sc.to_dict()
    del d["lora_rank_padding"]  # a scenario.json written before the field existed
    assert Scenario.from_dict(d).lora_rank_padding == "auto"


@pytest.mark.parametrize("value", ["pad", "max", "", "None", "batch-max"])
def test_invalid_value_is_refused_naming_field_value_and_allowed(value):
    with pytest.raises(ValueError) as e:
        Scenario(lora_rank_padding=value).validate()
    assert str(e.value) == f"lora_rank_padding: invalid value {value!r}; allowed: auto, none, batch_max, max_rank"
    with pytest.raises(ValueError, match=r"^lora_rank_padding: invalid value 1; allowed: a string"):
        Scenario.from_dict({"lora_rank_padding": 1})


def test_build_lays_out_the_padding():
    sc = legacy_preset("default", adapter_ranks=(8, 64, 16), num_adapters=7, duration_s=5.0, warmup_s=1.0)
    wl = generate(sc)
    for mode, code in (("auto", L.LORA_PAD_NONE), ("none", L.LORA_PAD_NONE), ("batch_max", L.LORA_PAD_BATCH_MAX),
                       ("max_rank", L.LORA_PAD_MAX_RANK)):
        arr = S._build(sc.replace(lora_rank_padding=mode), wl)
        assert arr["ip"][L.IP_LORA_PAD] == code
        assert arr["fp"][L.FP_LORA_PAD_BYTES] == presets.adapter_bytes(sc.model_spec, 64, sc.target_modules)


def test_the_default_path_does_not_read_the_padding_slot():
    """Nonsense in FP_LORA_PAD_BYTES changes nothing while the padding is "none"."""
    sc = legacy_preset("default", strategy="slora", adapter_ranks=(8, 64), duration_s=20.0, warmup_s=2.0)
    wl = generate(sc)
    a, b = S._build(sc, wl), S._build(sc, wl)
    b["fp"][L.FP_LORA_PAD_BYTES] = 1e15
    for arr in (a, b):
        L.run_loop(*(arr[k] for k in S.LOOP_ARGS))
    _states_equal(a, b)


# ------------------------------------------------------------- the default and equal ranks: bit-identical
AUTO_CASES = {
    "default-vllm-mixed": ("default", dict(strategy="vllm", adapter_ranks=(8, 16, 32, 64), duration_s=30.0,
                                           warmup_s=3.0)),
    "default-slora-mixed": ("default", dict(strategy="slora", adapter_ranks=(8, 16, 32, 64), duration_s=30.0,
                                            warmup_s=3.0)),
    # the vLLM fit's runs (ranks 8/16) with the strategy's default instead of the preset's "max_rank"
    "vllm-llama31-8b": ("vllm-llama31-8b", dict(duration_s=120.0, warmup_s=10.0, lora_rank_padding="auto")),
}


@pytest.mark.parametrize("case", list(AUTO_CASES))
def test_auto_equals_none_bit_for_bit(case):
    preset, kw = AUTO_CASES[case]
    sc = legacy_preset(preset, **kw)
    assert sc.lora_rank_padding == "auto"
    _states_equal(_run(sc), _run(sc.replace(lora_rank_padding="none")))


EQUAL_CASES = {
    "default-naive": ("default", dict(duration_s=30.0, warmup_s=3.0)),
    "default-vllm": ("default", dict(strategy="vllm", duration_s=30.0, warmup_s=3.0)),
    "default-slora": ("default", dict(strategy="slora", duration_s=30.0, warmup_s=3.0)),
    "default-batch-16-16": ("default", dict(strategy="batch", adapter_ranks=(16, 16), adapter_rank=16,
                                            duration_s=30.0, warmup_s=3.0)),
    "slora-a10g-s1": ("slora-a10g-s1", dict(duration_s=60.0)),
    "seed3": ("seed3-llama31-8b-80gb", dict(duration_s=30.0, warmup_s=3.0)),
    "kernel-cost": ("a100-light", dict(cost_model="kernel", duration_s=40.0)),
    "closed": ("a100-light", dict(arrival_process="closed", concurrency=6, duration_s=40.0, warmup_s=2.0)),
    "chunked-long": ("default", dict(strategy="vllm", prompt_tokens=1500, length_dist="lognormal", max_loras=4,
                                     max_batched_tokens=512, arrival_rate_rps=8.0, duration_s=20.0, warmup_s=2.0,
                                     kv_reservation="on_demand")),
}


@pytest.mark.parametrize("case", list(EQUAL_CASES))
def test_equal_ranks_every_mode_gives_the_same_run(case):
    """With one rank, padding to the batch's or the configured largest adapter is padding to every adapter's own
    size: the same step times, bit for bit (the sums are of integer-valued floats, exact)."""
    preset, kw = EQUAL_CASES[case]
    sc = legacy_preset(preset, **kw)
    assert len(set(sc.ranks())) == 1
    ref = _run(sc.replace(lora_rank_padding="none"))
    assert ref["S_i"][L.SI_STEPS] > 0
    for mode in MODES[1:]:
        _states_equal(ref, _run(sc.replace(lora_rank_padding=mode)))


def test_equal_ranks_fleet_results_equal():
    sc = legacy_preset("default", num_replicas=3, router="lora_affinity", arrival_rate_rps=30.0,
                              duration_s=20.0, warmup_s=2.0)
    ref = simulate(sc.replace(lora_rank_padding="none"))
    for mode in MODES[1:]:
        _results_equal(ref, simulate(sc.replace(lora_rank_padding=mode)))


def test_fixed_service_has_no_lora_cost_to_pad():
    sc = legacy_preset("default", service_mode="fixed", adapter_ranks=(8, 64), duration_s=20.0, warmup_s=2.0)
    ref = _run(sc.replace(lora_rank_padding="none"))
    for mode in MODES[1:]:
        _states_equal(ref, _run(sc.replace(lora_rank_padding=mode)))


def test_mixed_ranks_change_the_run():
    """Not vacuous: with ranks 8..64 the padded modes give other step times."""
    sc = legacy_preset("default", strategy="vllm", adapter_ranks=(8, 16, 32, 64), duration_s=30.0,
                              warmup_s=3.0)
    t = {m: simulate(sc.replace(lora_rank_padding=m)).summary["tpot_mean_ms"] for m in MODES}
    assert t["none"] < t["batch_max"] <= t["max_rank"]


# ------------------------------------------------------------------------------- step by step, and an oracle
#: One GPU, adapters of ranks 8, 32, 64, 8, 32, 64, ... (adapter i: ADAPTER_RANKS[i % 3]), every adapter resident
#: after the first step's loads, every request admitted at t = 0: the batch of step j is the requests with at least
#: j output tokens whatever the step times, so two modes run the same batches and differ only in their durations.
ADAPTER_RANKS = (8, 32, 64)
STEPS = dict(gpu="a100-80gb", model="llama-2-7b", strategy="naive", num_adapters=6, adapter_rank=64,
             adapter_ranks=ADAPTER_RANKS, vram_budget_gb=2.0, gpu_mem_util=0.9, reserve_gb=1.0, max_batch_size=64,
             max_batched_tokens=8192, duration_s=10.0, warmup_s=0.0, drain_s=600.0, step_overhead_ms=0.5,
             lora_ms_per_adapter=0.0, lora_ms_per_slot=0.0, lora_us_per_token_slot=0.0)


def _trace(adapters, prompts, outputs) -> Workload:
    n = len(adapters)
    return Workload(np.zeros(n), np.asarray(adapters, np.int64), np.asarray(prompts, np.int64),
                    np.asarray(outputs, np.int64))


def _step_ends(sc: Scenario, wl: Workload) -> np.ndarray:
    """End time of steps 1..K: the request with output j finishes at the end of step j (outputs 1..K, distinct)."""
    r = simulate(sc, trace=wl).requests
    assert r["completed"].all()
    order = np.argsort(wl.output_tokens)
    assert np.array_equal(wl.output_tokens[order], np.arange(1, len(wl) + 1))
    return r["finish_s"].to_numpy()[order]


@pytest.mark.parametrize("kernel", [False, True])
@pytest.mark.parametrize("short", [64, 8])
def test_batch_max_costs_at_least_none_in_every_step_and_more_where_ranks_mix(short, kernel):
    """Requests of rank 8, 32 and 64 at t = 0 with outputs 1..18; those of rank ``short`` end first, so the last
    steps hold one rank.  Every step: none <= batch_max <= max_rank; strictly where the batch mixes ranks (and,
    for max_rank, where the batch lacks the largest rank); equal where it holds one rank (max_rank: rank 64)."""
    rng = np.random.default_rng(7)
    ranks_of = {8: [0, 3], 32: [1, 4], 64: [2, 5]}
    others = [r for r in ADAPTER_RANKS if r != short]
    outputs = list(rng.permutation(np.arange(1, 19)))
    # the rank-``short`` requests get outputs 1-6, the second rank 7-12, the third 13-18: steps 1-6 hold three
    # ranks, 7-12 two, 13-18 one
    adapters = []
    for o in outputs:
        rank = short if o <= 6 else others[0] if o <= 12 else others[1]
        adapters.append(ranks_of[rank][o % 2])
    prompts = rng.integers(20, 400, len(outputs))
    wl = _trace(adapters, prompts, outputs)
    sc = Scenario(**STEPS, cost_model="kernel" if kernel else "roofline").validate()
    ends = {m: _step_ends(sc.replace(lora_rank_padding=m), wl) for m in MODES}
    # step 1 (every prompt) starts when the adapters' loads end, at the same time in every mode: its end stands for
    # its duration; step j > 1 lasts ends[j] - ends[j - 1] (differences of times: equal up to rounding, 1e-12)
    dt = {m: np.diff(np.r_[0.0, e]) for m, e in ends.items()}
    rank = np.array([ADAPTER_RANKS[a % 3] for a in adapters])
    out = np.asarray(outputs)
    tol = 1e-12
    kinds = set()
    for j in range(len(outputs)):  # step j + 1 runs the requests with output >= j + 1
        present = set(rank[out >= j + 1].tolist())
        kinds.add(len(present))
        none, bmax, mmax = dt["none"][j], dt["batch_max"][j], dt["max_rank"][j]
        assert bmax >= none * (1 - tol) and mmax >= bmax * (1 - tol), (j, present)
        if len(present) > 1:
            assert bmax > none * (1 + 1e-6), (j, present)
        else:
            assert bmax == pytest.approx(none, rel=tol), (j, present)
        if present == {64}:
            assert mmax == pytest.approx(bmax, rel=tol), (j, present)
        if 64 not in present:
            assert mmax > bmax * (1 + 1e-6), (j, present)
    assert kinds == {1, 2, 3}


@pytest.mark.parametrize("pair", [(0, 2), (0, 1)])
def test_two_ranks_decoding_together_cost_step_seconds_at_the_padded_size(pair):
    """One rank-8 request (adapter 0) and one of rank 64 (adapter 2) or 32 (adapter 1), prompt p, outputs 2 and 3,
    at t = 0.  Step 2 decodes both (context 2 (p + 1)): it takes step_seconds with LoRA FLOPs and bytes
      none:      a_8 + a_r (each at its own size)
      batch_max: 2 a_r     (both at the batch's largest)
      max_rank:  2 a_64    (both at the largest configured)
    with a_r = presets.adapter_bytes(model, r, target_modules), 2 FLOP per parameter = its bytes."""
    p = 100
    sc = Scenario(**STEPS).validate()
    wl = _trace(list(pair), [p, p], [2, 3])
    m, g = sc.model_spec, sc.gpu_spec
    a = {r: float(presets.adapter_bytes(m, r, sc.target_modules)) for r in ADAPTER_RANKS}
    lo, hi = ADAPTER_RANKS[pair[0] % 3], ADAPTER_RANKS[pair[1] % 3]
    assert lo == 8 and hi in (32, 64)
    lora = {"none": a[lo] + a[hi], "batch_max": 2 * a[hi], "max_rank": 2 * a[64]}
    seen = {}
    for mode in MODES:
        r = simulate(sc.replace(lora_rank_padding=mode), trace=wl).requests
        first = (r.arrival_s + (r.ttft_ms - r.frontend_ms) / 1e3).to_numpy()  # end of step 1 (both prefilled)
        assert first[0] == first[1] and r["completed"].all()
        ends = (first[0], r["finish_s"].to_numpy()[0])  # the output-2 request finishes at the end of step 2
        expect = step_seconds(False, 0.0, 0.0, 2.0, 2.0 * (p + 1), lora[mode], lora[mode], 2.0, 0.0,
                              float(m.n_params), float(presets.weight_bytes(m)),
                              g.fp16_tflops * 1e12 * sc.compute_eff, g.hbm_gbps * 1e9 * sc.bw_eff,
                              float(m.n_layers * m.hidden_size), float(presets.kv_bytes_per_token(m)),
                              sc.step_overhead_ms / 1e3, 0.0, 0.0, 0.0, 0.0, 0.0)
        assert ends[1] - ends[0] == pytest.approx(expect, rel=1e-9), mode
        seen[mode] = ends[1] - ends[0]
    assert seen["none"] < seen["batch_max"] <= seen["max_rank"]
    assert (seen["batch_max"] == seen["max_rank"]) == (hi == 64)


# ------------------------------------------------------------------------- the decode-run fast path
FAST_CASES = {
    "default-vllm-mixed": ("default", dict(strategy="vllm", adapter_ranks=(8, 16, 32, 64), duration_s=40.0,
                                           warmup_s=5.0)),
    "default-slora-mixed": ("default", dict(strategy="slora", adapter_ranks=(8, 16, 32, 64), duration_s=40.0,
                                            warmup_s=5.0)),
    "light-hot-set": ("a100-light", dict(strategy="hot_set", hot_set_k=-1, adapter_ranks=(8, 64), duration_s=40.0)),
    "vllm-runs": ("vllm-llama31-8b", dict(duration_s=120.0, warmup_s=10.0, arrival_rate_rps=2.0)),
    "kernel-cost": ("a100-light", dict(cost_model="kernel", adapter_ranks=(8, 64), duration_s=40.0)),
    "on-demand-tight": ("default", dict(strategy="vllm", adapter_ranks=(8, 64), kv_cache_gb=0.35,
                                        arrival_rate_rps=4.0, duration_s=30.0, output_tokens=400, warmup_s=2.0)),
}


@pytest.mark.parametrize("mode", MODES[1:])
@pytest.mark.parametrize("case", list(FAST_CASES))
def test_decode_runs_equal_the_step_by_step_reference_with_padding(case, mode):
    preset, kw = FAST_CASES[case]
    a, b = _both(legacy_preset(preset, lora_rank_padding=mode, **kw))
    _assert_same(a, b)
    assert a["S_i"][L.SI_STEPS] > 0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategy=st.sampled_from(sorted(STRATEGIES)), mode=st.sampled_from(MODES[1:]),
       ranks=st.sampled_from([(8, 64), (8, 16, 32, 64), (64, 8, 8)]), rate=st.floats(0.5, 30.0),
       out=st.integers(1, 300), prompt=st.integers(1, 600), batch=st.integers(1, 64), ondemand=st.booleans(),
       seed=st.integers(0, 10_000))
def test_random_padded_scenarios_agree_with_the_reference(strategy, mode, ranks, rate, out, prompt, batch, ondemand,
                                                          seed):
    random_scenario_agrees(dict(strategy=strategy, lora_rank_padding=mode, adapter_ranks=ranks,
                                adapter_rank=max(ranks), arrival_rate_rps=rate, output_tokens=out, prompt_tokens=prompt,
                                max_batch_size=batch, duration_s=12.0, warmup_s=1.0, seed=seed), ondemand)
