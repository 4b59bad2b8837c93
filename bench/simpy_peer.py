"""Engine speed against a SimPy implementation of the same model: the engine's serial sub-model.

    python bench/simpy_peer.py [--requests 100000] [--output-tokens 8] [--runs 3] [--json]

The serial sub-model: preset ``default`` (A100-80GB, Llama-2-7B, roofline service) with one adapter,
preloaded before t = 0 (strategy ``preload_lru``: no loads, no swaps), ``max_batch_size`` 1 (one request
at a time, FCFS), Poisson arrivals, lognormal prompt and output lengths (means 256 and ``--output-tokens``),
the arrival rate set for a utilization of about 0.7 and ``duration_s`` = requests / rate.  A request's
service is its prefill step (its first token at the end), then one decode step per further output token;
each step lasts ``engine.costs.step_seconds`` of a batch of one, with the arguments the loop passes
(engine/loop.py; parameters taken from ``engine.sim._build``).

The SimPy model (``simpy_run``) is the idiomatic one: an arrival process starts one process per request,
which holds a capacity-1 ``simpy.Resource`` (the GPU) for one ``env.timeout`` per step; step times come
from ``step_seconds.py_func``, the engine's own function run as plain Python (the jitted dispatcher is
slower to call from Python).  It replays the engine's own request stream (``engine.workload.generate``).

Checked first: SimPy's mean TTFT and mean end-to-end latency equal the engine's (``engine.simulate``,
same scenario) to a relative 1e-9, with every request completed by both: MATCH/MISMATCH.  Then timed:
the engine's ``engine.simulate`` end to end (validation, workload, arrays, jitted loop, pandas result),
median of ``--runs`` warm runs after one warm-up; SimPy's full run (environment, processes, events; the
workload given), median of ``--runs`` runs.  Target: engine >= 25x faster than SimPy: PASS/MISS.
Prints the conditions (scenario, CPU, versions, load average at start and end).  Exits 0: a benchmark.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET_X = 25.0
RHO = 0.7       # GPU utilization the arrival rate is chosen for
REL_TOL = 1e-9  # agreement of the means


def loadavg() -> list[float]:
    """1-, 5- and 15-minute load averages (/proc/loadavg)."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        import os
        return [round(x, 2) for x in os.getloadavg()]


def step_model(sc):
    """(prefill(p), decode(ctx)): seconds of one step of a batch of one, as engine/loop.py costs it."""
    from engine import loop as L
    from engine import sim as S
    from engine.costs import step_seconds
    from engine.workload import generate

    sc = sc.validate()
    arr = S._build(sc, generate(sc.replace(duration_s=min(sc.duration_s, 1.0))))
    fp, ip = arr["fp"], arr["ip"]
    fixed = bool(ip[L.IP_FIXED] != 0)
    ab = float(arr["A_i"][L.AI_BYTES, 0])  # the one adapter's bytes: lora_flops per token and lora_bytes
    slots = float(ip[L.IP_PAD_SLOTS])
    tail = tuple(float(fp[k]) for k in (L.FP_PARAMS, L.FP_WEIGHT_BYTES, L.FP_FLOPS, L.FP_BW, L.FP_ATTN, L.FP_KV_TOK,
                                        L.FP_OVERHEAD, L.FP_LORA_ADAPTER, L.FP_LORA_SLOT, L.FP_PREFILL_TOK,
                                        L.FP_DECODE_STEP, L.FP_LORA_TOKSLOT))
    f = step_seconds.py_func

    def prefill(p: float) -> float:
        return f(fixed, p, p * p, 0.0, 0.0, p * ab, ab, 1.0, slots, *tail)

    def decode(ctx: float) -> float:
        return f(fixed, 0.0, 0.0, 1.0, ctx, ab, ab, 1.0, slots, *tail)

    return prefill, decode


def simpy_run(arrival, prompt, output, prefill, decode):
    """SimPy: one GPU (a capacity-1 Resource, FCFS), one process per request. Returns (first, finish) in s."""
    import simpy

    env = simpy.Environment()
    gpu = simpy.Resource(env, capacity=1)
    n = len(arrival)
    first, finish = [math.nan] * n, [math.nan] * n

    def request(i):
        with gpu.request() as turn:
            yield turn
            p = prompt[i]
            yield env.timeout(prefill(p))
            first[i] = env.now
            for g in range(1, output[i]):
                yield env.timeout(decode(p + g))
            finish[i] = env.now

    def arrivals():
        for i in range(n):
            d = arrival[i] - env.now
            yield env.timeout(d if d > 0.0 else 0.0)
            env.process(request(i))

    env.process(arrivals())
    env.run()
    return first, finish


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--output-tokens", type=int, default=8, help="mean output length (default 8)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    a = ap.parse_args()
    runs = max(1, a.runs)

    import numpy as np
    import simpy

    from bench.__main__ import machine
    from engine import Scenario, simulate
    from engine.workload import generate

    out = {"machine": {**machine(), "simpy": simpy.__version__}, "load_avg_at_start": loadavg()}
    say = (lambda *x: None) if a.json else (lambda *x: print(*x, flush=True))
    m = out["machine"]
    say(f"SimPy peer benchmark, {m['date']} (engine {m['engine']}, git {m['git'] or '-'})")
    say(f"machine: {m['cpu']}; {m['cores']} cores ({m['cores_usable']} usable); Python {m['python']}; numba "
        f"{m['numba']}; numpy {m['numpy']}; simpy {m['simpy']}; load average at start {out['load_avg_at_start']}")

    base = Scenario.from_preset("default", strategy="preload_lru", num_adapters=1, max_batch_size=1,
                                length_dist="lognormal", output_tokens=a.output_tokens, warmup_s=0.0, drain_s=3600.0)
    prefill, decode = step_model(base)
    service = prefill(256.0) + sum(decode(256.0 + g) for g in range(1, a.output_tokens))
    rate = RHO / service
    sc = base.replace(arrival_rate_rps=rate, duration_s=a.requests / rate).validate()
    wl = generate(sc)
    n = len(wl)
    cond = {k: getattr(sc, k) for k in ("gpu", "model", "service_mode", "strategy", "num_adapters", "max_batch_size",
                                        "arrival_process", "arrival_rate_rps", "duration_s", "prompt_tokens",
                                        "output_tokens", "length_dist", "length_spread", "seed")}
    out.update(scenario=cond, requests=n, runs=runs)
    say(f"scenario: preset default, {sc.gpu} / {sc.model}, {sc.service_mode} service, strategy {sc.strategy}, 1 adapter "
        f"(preloaded), max_batch_size 1, Poisson {rate:.3f} req/s x {sc.duration_s:,.0f} s = {n:,} requests, "
        f"lognormal lengths (CV {sc.length_spread:g}) prompt mean {sc.prompt_tokens}, output mean {sc.output_tokens}; "
        f"service at the mean lengths {service * 1e3:.1f} ms (utilization ~{RHO:g})")

    # ---- agreement: the same model?
    res = simulate(sc)  # also the engine's warm-up
    req = res.requests
    arrival = wl.arrival_s.tolist()
    prompt = wl.prompt_tokens.astype(np.float64).tolist()
    output = wl.output_tokens.tolist()
    first, finish = simpy_run(arrival, prompt, output, prefill, decode)
    fe = sc.frontend_ms
    first_a, finish_a, arr_a = np.array(first), np.array(finish), wl.arrival_s
    sp_ttft, sp_e2e = (first_a - arr_a) * 1e3 + fe, (finish_a - arr_a) * 1e3 + fe
    done = int(req["completed"].sum())
    eng_ttft, eng_e2e = req["ttft_ms"].to_numpy(), req["e2e_ms"].to_numpy()
    same_n = (len(req) == n and done == n and np.isfinite(sp_e2e).all()
              and np.array_equal(req["arrival_s"].to_numpy(), arr_a) and np.array_equal(req["output_tokens"], wl.output_tokens))
    chk = {"engine_completed": done, "simpy_completed": int(np.isfinite(sp_e2e).sum()),
           "engine_loads": res.summary["loads_total"], "engine_gpu_busy_frac": res.summary["gpu_busy_frac"]}
    for name, e, s in (("ttft", eng_ttft, sp_ttft), ("e2e", eng_e2e, sp_e2e)):
        chk[f"engine_mean_{name}_ms"], chk[f"simpy_mean_{name}_ms"] = float(np.mean(e)), float(np.mean(s))
        chk[f"max_abs_diff_{name}_ms"] = float(np.max(np.abs(e - s))) if same_n else None
    ok = same_n and chk["engine_loads"] == 0 and all(
        abs(chk[f"engine_mean_{k}_ms"] - chk[f"simpy_mean_{k}_ms"]) <= REL_TOL * abs(chk[f"engine_mean_{k}_ms"])
        for k in ("ttft", "e2e"))
    chk["verdict"] = "MATCH" if ok else "MISMATCH"
    out["agreement"] = chk
    say(f"agreement (relative tolerance {REL_TOL:g} on the means, every request): completed engine {done:,} / "
        f"SimPy {chk['simpy_completed']:,} of {n:,}; engine loads {chk['engine_loads']}, GPU busy "
        f"{chk['engine_gpu_busy_frac']:.3f}")
    for k in ("ttft", "e2e"):
        say(f"  mean {k.upper():<4} engine {chk[f'engine_mean_{k}_ms']:.9f} ms, SimPy {chk[f'simpy_mean_{k}_ms']:.9f} "
            f"ms; largest per-request difference {chk[f'max_abs_diff_{k}_ms']} ms")
    say(f"  {chk['verdict']}")

    # ---- speed
    eng, sp = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        simulate(sc)
        eng.append(time.perf_counter() - t0)
    for _ in range(runs):
        t0 = time.perf_counter()
        simpy_run(arrival, prompt, output, prefill, decode)
        sp.append(time.perf_counter() - t0)
    e_med, s_med = statistics.median(eng), statistics.median(sp)
    ratio = s_med / e_med
    out["speed"] = {"engine_s": e_med, "simpy_s": s_med, "engine_walls_s": eng, "simpy_walls_s": sp,
                    "engine_requests_per_s": n / e_med, "simpy_requests_per_s": n / s_med, "ratio": ratio,
                    "target": f"engine >= {TARGET_X:g}x SimPy", "verdict": "PASS" if ratio >= TARGET_X else "MISS"}
    out["load_avg_at_end"] = loadavg()
    say(f"speed (median of {runs}): engine.simulate {e_med:.3f} s ({n / e_med:,.0f} req/s; warm, after 1 warm-up), "
        f"SimPy {s_med:.3f} s ({n / s_med:,.0f} req/s)")
    say(f"  engine / SimPy speed: {ratio:.1f}x; target >= {TARGET_X:g}x: {out['speed']['verdict']}")
    say(f"load average (1/5/15 min): {out['load_avg_at_start']} at start, {out['load_avg_at_end']} at end")
    if a.json:
        print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - a benchmark reports, it does not fail
        print(f"simpy_peer: error: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(0)
