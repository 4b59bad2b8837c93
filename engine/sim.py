"""Public entry points: ``simulate`` and ``compare``.

``simulate`` validates the scenario, draws (or takes) the request stream, lays out
the loop's arrays, runs the jitted loop and turns its arrays into DataFrames.  With
``num_replicas`` > 1 the stream goes to a fleet of identical GPUs behind a router
(``engine/fleet.py``; docs/model.md 12) and the result carries fleet and per-replica figures.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import fleet, kernels
from . import loop as L
from .costs import allreduce_step_terms
from .metrics import (
    REPLICA_COLUMNS,
    REPLICA_INPUTS,
    adapter_duplication,
    fleet_counters,
    load_imbalance,
    replica_row,
    summarize,
)
from .policies import EVICT_BELADY, STRATEGIES, belady_lists, hot_set_pins
from .prefix import caching_on, caching_runs, check_upload
from .scenario import MAX_REQUESTS, Scenario
from .workload import Workload, generate, max_request_blocks, popularity, replay_trace

TIER_NAMES = np.array(["gpu", "cpu", "disk"])
EVENT_NAMES = np.array(["swap", "evict", "compact", "reject"])
_TIER_DTYPE = pd.CategoricalDtype(list(TIER_NAMES))
_EVENT_DTYPE = pd.CategoricalDtype(list(EVENT_NAMES))
MAX_EVENTS = 2_000_000
#: Scenario.lora_rank_padding (resolved: ``Scenario.lora_rank_padding_mode``) -> the loop's IP_LORA_PAD code.
LORA_PAD_CODES = {"none": L.LORA_PAD_NONE, "batch_max": L.LORA_PAD_BATCH_MAX, "max_rank": L.LORA_PAD_MAX_RANK}


@dataclass
class SimResult:
    """One run.  ``requests``: one row per request (``replica``: the GPU that served it, 0 on one GPU);
    ``timeseries``: the fleet's (sums of counts, means of fractions over replicas: docs/model.md 9);
    ``timeseries_by_replica``: the same columns per replica (``replica`` first); ``replicas``: one row
    per replica (``metrics.REPLICA_COLUMNS``); ``events``: loads, evictions, ... with their replica."""
    scenario: Scenario
    requests: pd.DataFrame
    timeseries: pd.DataFrame
    summary: dict
    events: pd.DataFrame = field(repr=False, default=None)
    replicas: pd.DataFrame = field(repr=False, default=None)
    timeseries_by_replica: pd.DataFrame = field(repr=False, default=None)


def effective(sc: Scenario) -> dict:
    """Policy-resolved settings the loop uses (load mode, memory mode, slots)."""
    pol = STRATEGIES[sc.strategy]
    slots = sc.max_loras
    if pol.max_resident > 0:
        slots = pol.max_resident if slots == 0 else min(slots, pol.max_resident)
    return {
        "load_mode": pol.load_mode or sc.load_mode,
        "memory_mode": pol.memory_mode or sc.memory_mode,
        "slots": slots,
    }


def _build(sc: Scenario, wl: Workload):
    pol = STRATEGIES[sc.strategy]
    eff = effective(sc)
    m = sc.model_spec
    g = sc.gpu_spec
    n = len(wl)
    A = sc.num_adapters
    plan = sc.memory_plan()
    tp = sc.tensor_parallel_size
    kv_tok = sc.kv_bytes_per_token()  # each GPU's share (docs/model.md 5.7)
    block_bytes = kv_tok * sc.kv_block_tokens
    unified = eff["memory_mode"] == "unified"
    contiguous = sc.kv_allocator == "contiguous"
    kv_blocks = int(plan["kv"] // block_bytes)
    pool = plan["adapters"] + plan["kv"]
    adapter_cap = plan["adapters"]
    sizes = np.asarray(sc.adapter_sizes(), np.int64)
    pins = hot_set_pins(sc) if (pol.pins_hot_set or pol.hot_set_mb > 0) else []
    if pol.hot_set_mb > 0 and not unified:
        # the pinned set is taken from the KV budget, not from the adapter budget
        pinned_bytes = int(sizes[pins].sum()) if pins else 0
        kv_blocks -= -(-pinned_bytes // block_bytes)
        adapter_cap += pinned_bytes
    if contiguous and unified:
        arena = int(pool // block_bytes)
        pool = float(arena * block_bytes)
        membytes = -(-sizes // block_bytes) * block_bytes
    else:
        arena = kv_blocks
        membytes = sizes

    adapter = wl.adapter.copy()
    if pol.single_adapter:
        adapter[:] = 0
    horizon = sc.duration_s + sc.drain_s
    bucket = sc.duration_s / 200.0
    nb = int(math.ceil(horizon / bucket)) + 2

    ip = np.zeros(L.IP_LEN, np.int64)
    ip[L.IP_N] = n
    ip[L.IP_A] = A
    ip[L.IP_MAX_BATCH] = sc.max_batch_size
    ip[L.IP_MAX_TOKENS] = sc.max_batched_tokens
    ip[L.IP_SLOTS] = eff["slots"]
    ip[L.IP_HOST_CAP] = sc.max_cpu_loras
    ip[L.IP_KV_BLOCKS] = max(kv_blocks, 1)
    ip[L.IP_ORDER] = pol.order
    ip[L.IP_EVICT] = pol.evict
    ip[L.IP_STRICT] = int(pol.strict_fcfs)
    ip[L.IP_WINDOW] = int(pol.window)
    ip[L.IP_THRESHOLD] = pol.threshold
    ip[L.IP_ASYNC] = int(eff["load_mode"] == "async")
    ip[L.IP_UNIFIED] = int(unified)
    ip[L.IP_PREFETCH] = int(pol.prefetch and eff["load_mode"] == "async")
    ip[L.IP_CLUSTER] = pol.cluster
    ip[L.IP_LORA_FIRST] = int(pol.lora_first)  # SGLang: the adapter is checked before the token and KV budget
    ip[L.IP_CLOSED] = int(wl.closed)
    ip[L.IP_CONC] = sc.concurrency
    ip[L.IP_FIXED] = int(sc.service_mode == "fixed")
    ip[L.IP_SCAN] = max(1024, 4 * sc.max_batch_size)
    ip[L.IP_NBUCKETS] = nb
    ip[L.IP_MAX_EVENTS] = min(MAX_EVENTS, 4 * n + 1024)
    ip[L.IP_PAD_SLOTS] = sc.max_loras
    ip[L.IP_ONDEMAND] = int(sc.kv_reservation == "on_demand")
    ip[L.IP_BLOCK_TOK] = sc.kv_block_tokens
    ip[L.IP_MAX_INSYS] = sc.max_in_system if not wl.closed else 0  # open loop, a replayed trace included
    ip[L.IP_FASTSKIP] = 1  # 0 scans the whole queue (the reference the fast path is tested against)
    ip[L.IP_CHUNKED] = int(sc.chunked_prefill_on())
    # the loop's shortcuts (loop.py's IP_ list says what each does), each tested equal to its reference, 0: decode
    # runs, their KV growth, blocked runs, the wait queue's compaction, the grouped scan's partition
    ip[[L.IP_DECODE_RUN, L.IP_RUN_GROW, L.IP_BLOCKED_RUN, L.IP_QCOMPACT, L.IP_GPART]] = 1
    ip[L.IP_MAXBLK] = max_request_blocks(wl, sc.kv_block_tokens)
    ip[L.IP_QUIET] = 1  # fleet: 0 advances every replica to every arrival (the reference, tested equal)
    ip[L.IP_MAX_STEPS] = step_budget(n, sc)
    ip[L.IP_LORA_PAD] = LORA_PAD_CODES[sc.lora_rank_padding_mode()]
    ip[L.IP_CONTIG] = int(contiguous)
    ip[L.IP_ARENA] = arena
    ip[L.IP_PCACHE] = int(caching_runs(sc) and wl.prefix is not None)  # docs/model.md 3.7 (0: the loop as before)
    ip[L.IP_MEAN_BLOCKS] = max(1, int(round(float(np.mean(
        -(-(wl.prompt_tokens + wl.output_tokens) // sc.kv_block_tokens))))) if n else 1)

    fp = np.zeros(L.FP_LEN, np.float64)
    fp[L.FP_DURATION] = sc.duration_s
    fp[L.FP_HORIZON] = horizon
    fp[L.FP_WINDOW] = sc.batch_window_ms / 1e3
    fp[L.FP_MAX_WAIT] = sc.max_wait_ms / 1e3
    fp[L.FP_PCIE_BPS] = sc.pcie_gbps * 1e9
    fp[L.FP_DISK_BPS] = sc.disk_gbps * 1e9
    fp[L.FP_LOAD_LAT] = sc.load_latency_ms / 1e3
    fp[L.FP_DISK_LAT] = sc.disk_latency_ms / 1e3
    fp[L.FP_ADAPTER_CAP] = adapter_cap
    fp[L.FP_POOL] = pool
    fp[L.FP_BLOCK_BYTES] = block_bytes
    fp[L.FP_WEIGHT_BYTES] = plan["weights"]
    fp[L.FP_PARAMS] = m.n_params if tp == 1 else plan["weights"] / 2.0  # each GPU's share (2 bytes per parameter)
    fp[L.FP_FLOPS] = g.fp16_tflops * 1e12 * sc.compute_eff
    fp[L.FP_BW] = g.hbm_gbps * 1e9 * sc.bw_eff
    fp[L.FP_ATTN] = float(m.n_layers * (m.n_heads // tp) * m.head_dim)  # L x attention width per GPU (= hidden_size but Gemma-2)
    fp[L.FP_KV_TOK] = kv_tok
    fp[L.FP_OVERHEAD] = sc.step_overhead_ms / 1e3
    fp[L.FP_LORA_ADAPTER] = sc.lora_ms_per_adapter / 1e3
    fp[L.FP_LORA_SLOT] = sc.lora_ms_per_slot / 1e3
    fp[L.FP_LORA_TOKSLOT] = sc.lora_us_per_token_slot / 1e6
    fp[L.FP_LORA_PAD_BYTES] = float(sizes.max()) if len(sizes) else 0.0  # the largest adapter configured
    fp[L.FP_MIN_ADAPTER] = float(membytes.min()) if len(membytes) else 0.0
    fp[L.FP_PREFILL_TOK] = sc.prefill_ms_per_token / 1e3
    fp[L.FP_DECODE_STEP] = sc.decode_ms_per_token / 1e3
    fp[L.FP_BUCKET] = bucket
    fp[L.FP_WARMUP] = sc.warmup_s
    # cost_model "kernel" (docs/model.md 5.4): the dense GEMMs at the spec sheet's peak and bandwidth
    fp[L.FP_KERNEL] = float(sc.cost_model == "kernel")
    fp[L.FP_COST_SCALE] = sc.cost_scale
    fp[L.FP_N_LAYERS] = m.n_layers
    fp[L.FP_PEAK_FLOPS] = g.fp16_tflops * 1e12
    fp[L.FP_PEAK_BW] = g.hbm_gbps * 1e9
    fp[L.FP_VOCAB] = m.vocab_size if tp == 1 else -(-m.vocab_size // tp)  # the LM head's shard (vLLM: vocab parallel)
    fp[L.FP_HIDDEN] = m.hidden_size
    fp[L.FP_KPARAMS:L.FP_DENSE_N] = kernels.param_array()
    fp[L.FP_DENSE_N:L.FP_DENSE_K], fp[L.FP_DENSE_K:L.FP_DENSE_END] = kernels.dense_dims(m, tp)
    fp[L.FP_AR_STEP], fp[L.FP_AR_TOK] = allreduce_step_terms(m, sc.gpu, tp)

    R_i = np.zeros((L.RI_LEN, n), np.int64)
    R_i[L.RI_ADAPTER] = adapter
    R_i[L.RI_PROMPT] = wl.prompt_tokens
    R_i[L.RI_OUTPUT] = wl.output_tokens
    R_i[L.RI_BLOCKS] = -(-(wl.prompt_tokens + wl.output_tokens) // sc.kv_block_tokens)
    R_i[L.RI_PFX] = 0 if wl.prefix is None else wl.prefix
    R_f = np.full((L.RF_LEN, n), np.nan)
    R_f[L.RF_ARR] = wl.arrival_s
    R_f[L.RF_LOADWAIT] = 0.0
    R_f[L.RF_C0] = 0.0
    R_f[L.RF_QSTALL] = 0.0

    A_i = np.zeros((L.AI_LEN, A), np.int64)
    A_i[L.AI_BYTES] = sizes
    A_i[L.AI_MEMBYTES] = membytes
    A_i[L.AI_RESPOS] = -1
    A_i[L.AI_EXTSTART] = -1
    A_f = np.zeros((L.AF_LEN, A), np.float64)
    a_list = np.zeros(n, np.int64)  # Belady's lists: no other eviction order reads them (46 ms of a 1M run's build)
    if pol.evict == EVICT_BELADY:
        a_list[:], A_i[L.AI_PTR], A_i[L.AI_END] = belady_lists(adapter, A)
        A_i[L.AI_CUR] = A_i[L.AI_PTR]

    S_i = np.zeros(L.SI_LEN, np.int64)
    S_f = np.zeros(L.SF_LEN, np.float64)
    res_list = np.zeros(A, np.int64)

    # preloads before t = 0 (not counted as loads)
    pre: list[int] = []
    pinned = False
    if pol.pins_hot_set or pol.hot_set_mb > 0:
        pre = list(pins)
        pinned = True
    elif pol.preload_all:
        order = np.argsort(-popularity(sc), kind="stable")
        used = 0.0
        cap = adapter_cap
        for a in order:
            if (eff["slots"] and len(pre) >= eff["slots"]) or used + A_i[L.AI_BYTES, a] > cap:
                break
            pre.append(int(a))
            used += A_i[L.AI_BYTES, a]
    fl = np.zeros((2, sc.max_batch_size + A + 2), np.int64)
    placed = 0
    for a in pre:
        if contiguous and unified:
            A_i[L.AI_EXTSTART, a] = placed
            placed += int(membytes[a] // block_bytes)
        A_i[L.AI_STATE, a] = L.AS_RESIDENT
        A_i[L.AI_PINNED, a] = int(pinned)
        A_i[L.AI_HOST, a] = 1
        res_list[S_i[L.SI_NRES]] = a
        A_i[L.AI_RESPOS, a] = S_i[L.SI_NRES]
        S_i[L.SI_NRES] += 1
        S_f[L.SF_ADAPTER_BYTES] += A_i[L.AI_MEMBYTES, a]
    # host cache: warm = filled at server start, most popular first (GPU-preloaded ones first)
    if sc.host_warm:
        cap = sc.max_cpu_loras or A
        A_i[L.AI_HOST] = 0
        pre_set = set(pre)
        rest = [int(a) for a in np.argsort(-popularity(sc), kind="stable") if int(a) not in pre_set]
        for a in (pre + rest)[:cap]:
            A_i[L.AI_HOST, a] = 1
    elif sc.max_cpu_loras:
        A_i[L.AI_HOST] = 0
        for a in pre[: sc.max_cpu_loras]:
            A_i[L.AI_HOST, a] = 1
    S_i[L.SI_HOSTCOUNT] = int(A_i[L.AI_HOST].sum())
    # LRU order of the warm host cache: least popular is least recent
    A_i[L.AI_HOSTLAST] = np.where(A_i[L.AI_HOST] == 1, A - np.argsort(np.argsort(-popularity(sc), kind="stable")), 0)

    if contiguous:
        fl[0, 0] = placed
        fl[1, 0] = arena - placed
        S_i[L.SI_NFREE] = 1 if arena > placed else 0
    mb = sc.max_batch_size
    arrays = dict(
        fl=fl,
        ip=ip, fp=fp, R_i=R_i, R_f=R_f, A_i=A_i, A_f=A_f, a_list=a_list, S_i=S_i, S_f=S_f,
        wq=np.zeros(n, np.int64), running=np.zeros(mb, np.int64), new_list=np.zeros(mb, np.int64),
        res_list=res_list, heap_t=np.zeros(A, np.float64), heap_a=np.zeros(A, np.int64),
        g_list=np.zeros(ip[L.IP_SCAN], np.int64), g_key=np.zeros(ip[L.IP_SCAN], np.float64),
        ts=np.zeros((nb, L.TS_LEN), np.float64),
        ev_t=np.zeros(ip[L.IP_MAX_EVENTS], np.float64),
        ev_i=np.zeros((3, ip[L.IP_MAX_EVENTS]), np.int64),
    )
    nwf, nwi = L.scratch_sizes(mb, A, int(ip[L.IP_SCAN]))
    arrays["wf"], arrays["wi"] = np.zeros(nwf, np.float64), np.zeros(nwi, np.int64)
    return arrays


#: The loop's arguments, in order, as keys of the dict ``_build`` returns.
LOOP_ARGS = ("ip", "fp", "R_i", "R_f", "A_i", "A_f", "a_list", "S_i", "S_f", "wq", "running", "new_list",
             "res_list", "heap_t", "heap_a", "g_list", "g_key", "ts", "ev_t", "ev_i", "fl", "wf", "wi")


def step_budget(n: int, sc: Scenario) -> int:
    """The most scheduler steps a run of ``n`` requests may take: 8 x (each request alone in its steps, one per
    output token and prefill chunk, plus two), + 10^6. Far above any run's real count (steps are shared by a
    batch); a guard against a loop that would not end, never a model rule."""
    per = sc.max_request_tokens() + 2
    return int(min(8 * n * per + 1_000_000, 1 << 62))


def _check_budget(flags: int, budget: int) -> None:
    if flags & L.FLAG_BUDGET:
        raise ValueError(f"stopped: budget reached; the run took more than {budget:,} scheduler steps (a guard "
                         "against a run that would not end, far above any real run's count): please report the "
                         "scenario")


def _run(sc: Scenario, wl: Workload):
    arr = _build(sc, wl)
    L.run_loop(*(arr[k] for k in LOOP_ARGS))
    _check_budget(int(arr["S_i"][L.SI_FLAGS]), int(arr["ip"][L.IP_MAX_STEPS]))
    return arr


def simulate(scenario: Scenario, trace: Workload | None = None) -> SimResult:
    """Run one scenario (optionally replaying a trace from ``workload.read_trace``).

    A scenario with ``trace`` set replays that shipped trace; an uploaded ``trace`` as well is refused.
    """
    sc, wl, arr = _simulate_arrays(scenario, trace)
    if sc.num_replicas > 1:
        return _fleet_result(sc, arr)
    return _result(sc, wl, arr)


def simulate_summary(scenario: Scenario, trace: Workload | None = None) -> dict:
    """``simulate(scenario, trace).summary``, equal key for key, without building the result's DataFrames
    (requests, time series, events): for sweeps, plans and replications, which read only the summary."""
    sc, wl, arr = _simulate_arrays(scenario, trace)
    if sc.num_replicas > 1:
        return _fleet_result(sc, arr).summary
    cols = _request_cols(sc, arr["R_i"], arr["R_f"])
    summary = summarize(sc, cols, _counters(sc, arr))
    _fleet_keys(summary, [summary["requests"]], 1.0)
    return summary


def _simulate_arrays(scenario: Scenario, trace: Workload | None):
    """Validate, draw or take the workload, run the loop (or the fleet): (scenario, workload, arrays)."""
    if not isinstance(scenario, Scenario):
        raise ValueError(f"scenario: expected engine.Scenario, got {type(scenario).__name__}")
    sc = scenario.validate()
    if trace is not None and sc.trace:
        raise ValueError(f"trace: the scenario replays the shipped trace {sc.trace!r} and an uploaded trace was "
                         "given too; allowed: one of them (set the scenario's trace to '' to replay the upload)")
    check_upload(sc, trace)
    if trace is not None:
        wl = trace
        if wl.adapter.max(initial=0) >= sc.num_adapters:
            raise ValueError(f"trace: adapter_id {int(wl.adapter.max())} >= num_adapters ({sc.num_adapters})")
        keep = wl.arrival_s < sc.duration_s
        wl = Workload(wl.arrival_s[keep], wl.adapter[keep], wl.prompt_tokens[keep], wl.output_tokens[keep],
                      prefix=None if wl.prefix is None else wl.prefix[keep])
    elif sc.trace:  # a shipped trace: open loop, whatever arrival_process says
        wl = replay_trace(sc)
    elif sc.arrival_process == "closed":  # one GPU only (validate refuses a closed-loop fleet)
        n = sc.concurrency * 16 + 1024
        while True:
            wl = generate(sc, n_closed=n)
            arr = _run(sc, wl)
            if not (arr["S_i"][L.SI_FLAGS] & L.FLAG_EXHAUSTED):
                break
            if n >= MAX_REQUESTS:
                raise ValueError(
                    f"duration_s: closed loop would issue more than {MAX_REQUESTS} requests in "
                    f"{sc.duration_s} s; allowed: a shorter duration_s or fewer clients")
            n = min(2 * n, MAX_REQUESTS)
        return sc, wl, arr
    else:
        wl = generate(sc)
    if sc.num_replicas > 1:
        empty = np.zeros(0, np.int64)
        template = _build(sc, Workload(np.zeros(0), empty, empty, empty))
        template["ip"][L.IP_MAX_STEPS] = step_budget(len(wl), sc)  # each replica: the fleet's whole stream
        st = fleet.run(sc, wl, template, MAX_EVENTS)
        for flags in st["S_i"][:, L.SI_FLAGS]:
            _check_budget(int(flags), int(template["ip"][L.IP_MAX_STEPS]))
        return sc, wl, st
    return sc, wl, _run(sc, wl)


def _request_cols(sc: Scenario, R_i, R_f) -> dict:
    """The per-request columns (docs/model.md 7) of the requests that arrived."""
    issued = R_i[L.RI_STATUS] != L.ST_FUTURE
    if issued.all():  # (every request arrived: views, not 15 copies; the result's DataFrame copies what it keeps)
        issued = slice(None)
    arrival = R_f[L.RF_ARR][issued]
    status = R_i[L.RI_STATUS][issued]
    first = R_f[L.RF_FIRST][issued]
    finish = R_f[L.RF_FINISH][issued]
    admit = R_f[L.RF_ADMIT][issued]
    out = R_i[L.RI_OUTPUT][issued]
    lw = R_f[L.RF_LOADWAIT][issued] * 1e3
    qstall = R_f[L.RF_QSTALL][issued] * 1e3  # sync: load stalls the request waited out while queued (in lw)
    fe = sc.frontend_ms * sc.cost_scale
    ttft = (first - arrival) * 1e3 + fe  # the API server's own latency comes on top of the engine's
    sync = effective(sc)["load_mode"] == "sync"
    prefill = (first - admit) * 1e3 - (lw - qstall if sync else 0.0)
    queue = ttft - fe - lw - prefill
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (finish - first) * 1e3 / (out - 1), np.nan)
    cols = {
        "arrival_s": arrival,
        "adapter": R_i[L.RI_ADAPTER][issued],
        "prompt_tokens": R_i[L.RI_PROMPT][issued],
        "output_tokens": out,
        "queue_ms": queue,
        "frontend_ms": np.where(np.isnan(first), np.nan, fe),
        "load_wait_ms": np.where(np.isnan(first), np.nan, lw),
        # its part spent queued while the GPU stalled on other requests' loads (sync; 0 in async mode)
        "load_wait_queued_ms": np.where(np.isnan(first), np.nan, qstall),
        "prefill_ms": prefill,
        "ttft_ms": ttft,
        "tpot_ms": tpot,
        "e2e_ms": (finish - arrival) * 1e3 + fe,
        "admit_s": admit,
        "preemptions": R_i[L.RI_PREEMPTED][issued],
        "dropped": status == L.ST_DROPPED,
        "finish_s": finish,
        "loaded": R_i[L.RI_LOADED][issued].astype(bool),
        "tier": pd.Categorical.from_codes(R_i[L.RI_TIER][issued], dtype=_TIER_DTYPE),
        "completed": status == L.ST_DONE,
        "cached_tokens": R_i[L.RI_PCHIT][issued],  # its prompt tokens served from the prefix cache (docs/model.md 3.7)
    }
    return cols


def _ts_frame(ts_raw, nb: int, bucket: float) -> pd.DataFrame:
    """Time-weighted bucket means (docs/model.md 9) of the loop's accumulators ``ts_raw``."""
    tsa = ts_raw[:nb] / bucket
    return pd.DataFrame({
        "t_s": np.arange(nb) * bucket,
        "queue_len": tsa[:, L.TS_QUEUE],
        "batch_size": tsa[:, L.TS_BATCH],
        "in_system": tsa[:, L.TS_IN_SYSTEM],
        "resident_adapters": tsa[:, L.TS_RESIDENT],
        "loads_in_flight": tsa[:, L.TS_LOADS],
        "kv_used_frac": tsa[:, L.TS_KV_FRAC],
        "gpu_busy_frac": tsa[:, L.TS_BUSY],
        "adapter_bytes_resident": tsa[:, L.TS_ADAPTER_BYTES],
        "kv_bytes_used": tsa[:, L.TS_KV_BYTES],
        "kv_frag": tsa[:, L.TS_FRAG],
        "pcie_busy_frac": tsa[:, L.TS_PCIE],
        "prefix_cached_blocks": tsa[:, L.TS_PCBLOCKS],
    })


def _nb(sc: Scenario, arr, end_t: float) -> int:
    return int(min(arr["ts"].shape[0], math.ceil(max(end_t, sc.duration_s) / arr["fp"][L.FP_BUCKET])))


def _events(arrs: list) -> pd.DataFrame:
    """The event log of one or more GPUs (replica k: ``arrs[k]``), in time order (ties: by replica)."""
    ne = [int(a["S_i"][L.SI_NEV]) for a in arrs]
    t, ev_i = arrs[0]["ev_t"][:ne[0]], arrs[0]["ev_i"][:, :ne[0]]
    rep = np.zeros(ne[0], np.int64)
    if len(arrs) > 1:
        t = np.concatenate([a["ev_t"][:m] for a, m in zip(arrs, ne)])
        ev_i = np.concatenate([a["ev_i"][:, :m] for a, m in zip(arrs, ne)], axis=1)
        rep = np.repeat(np.arange(len(arrs), dtype=np.int64), ne)
        o = np.argsort(t, kind="stable")
        t, ev_i, rep = t[o], ev_i[:, o], rep[o]
    return pd.DataFrame({
        "t_s": t,
        "kind": pd.Categorical.from_codes(ev_i[0], dtype=_EVENT_DTYPE),
        "adapter": ev_i[1],
        "bytes": ev_i[2],
        "replica": rep,
    })


def _counters(sc: Scenario, arr) -> dict:
    """Whole-run counters of one GPU's loop arrays."""
    S_i, S_f = arr["S_i"], arr["S_f"]
    end_t = float(S_f[L.SF_END_T])
    flags = int(S_i[L.SI_FLAGS])
    counters = {
        "loads_total": int(S_i[L.SI_LOADS]),
        "disk_loads_total": int(S_i[L.SI_DISK_LOADS]),
        "evictions_total": int(S_i[L.SI_EVICTS]),
        "steps": int(S_i[L.SI_STEPS]),
        "busy_s_in_window": float(S_f[L.SF_BUSY]),
        "tokens_in_window": float(S_f[L.SF_TOKENS_WIN]),
        "end_s": end_t,
        "stopped_at_horizon": bool(flags & L.FLAG_HORIZON),
        "deadlock": bool(flags & L.FLAG_DEADLOCK),
        "events_truncated": bool(flags & L.FLAG_EVENTS_FULL),
        "kv_blocks_total": int(arr["ip"][L.IP_KV_BLOCKS]),
        "swap_events": int(S_i[L.SI_LOADS]),
        "compact_events": int(S_i[L.SI_COMPACTS]),
        "preemptions": int(S_i[L.SI_PREEMPTS]),
        "prefill_tokens_total": int(S_i[L.SI_PFTOKENS]),  # prompt (+ recomputed) tokens prefilled, all steps
        "prefill_chunks_total": int(S_i[L.SI_PFCHUNKS]),  # (request, step) prefill pieces: > admissions if chunked
        "peak_step_tokens": int(S_i[L.SI_PEAKTOK]),       # most prefill + decode tokens in one step
        "chunked_prefill_on": bool(arr["ip"][L.IP_CHUNKED]),  # (the field says "auto"; this is what ran)
        "lora_rank_padding_mode": sc.lora_rank_padding_mode(),  # (likewise: "auto" resolved by the strategy)
        "dropped_total": int(S_i[L.SI_DROPS]),
        "compacted_bytes": float(S_f[L.SF_COMPACT_BYTES]),
        "pcie_busy_frac": float(S_f[L.SF_PCIE_BUSY] / (sc.duration_s - sc.warmup_s)),
        "rejections": int(S_i[L.SI_REJECTS]),
        "avg_frag": float(S_f[L.SF_FRAG_INT] / (sc.duration_s - sc.warmup_s)),
        "peak_adapter_bytes": float(S_f[L.SF_PEAK_ADAPTER]),
        "peak_kv_bytes": float(S_f[L.SF_PEAK_KV]),
        "peak_gpu_dynamic_bytes": float(S_f[L.SF_PEAK_TOTAL]),
        "adapter_capacity_bytes": float(arr["fp"][L.FP_ADAPTER_CAP]),
        "kv_capacity_bytes": float(arr["ip"][L.IP_KV_BLOCKS] * arr["fp"][L.FP_BLOCK_BYTES]),
        "pool_bytes": float(arr["fp"][L.FP_POOL]),
        "memory_mode": effective(sc)["memory_mode"],
        "load_mode": effective(sc)["load_mode"],
        "prefix_caching_on": caching_on(sc),  # ("auto" resolved by the strategy; docs/model.md 3.7)
        "prefix_cache_ran": caching_runs(sc),  # on, and the workload has a shared prefix (else nothing to cache)
        "prefix_cached_tokens_total": int(S_i[L.SI_PCTOK]),  # served from the cache, every admission (+ prefill_tokens_total = prompt + recomputed)
        "prefix_cache_hits_total": int(S_i[L.SI_PCHITS]), "prefix_cache_evictions": int(S_i[L.SI_PCEVICTS]),
    }
    return counters


def _fleet_keys(summary: dict, requests_per_replica, duplication: float) -> None:
    summary["num_replicas"] = len(requests_per_replica)
    summary["load_imbalance"] = load_imbalance(requests_per_replica)
    summary["adapter_duplication"] = duplication


def _result(sc: Scenario, wl: Workload, arr) -> SimResult:
    cols = _request_cols(sc, arr["R_i"], arr["R_f"])
    cols["replica"] = np.zeros(len(cols["arrival_s"]), np.int64)
    req = pd.DataFrame(cols, copy=False)
    counters = _counters(sc, arr)
    ts = _ts_frame(arr["ts"], _nb(sc, arr, counters["end_s"]), arr["fp"][L.FP_BUCKET])
    summary = summarize(sc, cols, counters)
    _fleet_keys(summary, [summary["requests"]], 1.0)
    replicas = pd.DataFrame([{"replica": 0, **{k: summary[k] for k in REPLICA_COLUMNS[1:]}}])
    return SimResult(scenario=sc, requests=req, timeseries=ts, summary=summary, events=_events([arr]),
                     replicas=replicas, timeseries_by_replica=pd.concat([pd.DataFrame({"replica": 0}, index=ts.index),
                                                                         ts], axis=1))


#: Time-series columns that are fractions (averaged over a fleet's replicas); the others are summed.
_TS_MEAN = ("kv_used_frac", "gpu_busy_frac", "kv_frag", "pcie_busy_frac")


def _fleet_result(sc: Scenario, st: dict) -> SimResult:
    """A fleet's result: requests in arrival order over every replica, fleet and per-replica figures."""
    reps = fleet.replica_arrays(st)
    owner = st["owner"]
    N = len(reps)
    # request i is column lidx[i] of its replica's block: gather every field in arrival order
    R_i, R_f = np.empty((L.RI_LEN, len(owner)), np.int64), np.empty((L.RF_LEN, len(owner)), np.float64)
    fleet.gather_requests(st["Ri"], st["Rf"], st["off"], st["cap"], owner, st["lidx"], R_i, R_f)
    issued = R_i[L.RI_STATUS] != L.ST_FUTURE
    cols = _request_cols(sc, R_i, R_f)
    cols["replica"] = owner[issued]
    req = pd.DataFrame(cols, copy=False)
    per = [_counters(sc, v) for v in reps]
    counters = fleet_counters(per)
    nb = _nb(sc, reps[0], counters["end_s"])
    bucket = reps[0]["fp"][L.FP_BUCKET]
    by = [_ts_frame(v["ts"], nb, bucket) for v in reps]
    ts = by[0].copy()
    for c in ts.columns[1:]:
        ts[c] = np.sum([f[c].to_numpy() for f in by], axis=0)
        if c in _TS_MEAN:
            ts[c] /= N
    by_replica = pd.concat([pd.concat([pd.DataFrame({"replica": k}, index=f.index), f], axis=1)
                            for k, f in enumerate(by)], ignore_index=True)
    ev = _events(reps)
    summary = summarize(sc, cols, counters)
    window = sc.duration_s - sc.warmup_s
    summary["gpu_busy_frac"] = counters["busy_s_in_window"] / (N * window)  # the mean over GPUs
    grp = np.argsort(cols["replica"].astype(np.uint8), kind="stable")  # (radix sort: num_replicas <= 64)
    by_rep = {c: cols[c][grp] for c in REPLICA_INPUTS}
    ends = np.cumsum(np.bincount(cols["replica"], minlength=N))
    rows = []
    for k in range(N):
        lo = ends[k - 1] if k else 0
        rows.append({"replica": k, **replica_row(sc, {c: v[lo:ends[k]] for c, v in by_rep.items()}, per[k])})
    replicas = pd.DataFrame(rows, columns=list(REPLICA_COLUMNS))
    dup = np.nan
    if not counters["events_truncated"]:
        held = np.flatnonzero(st["held0"])
        kind = ev["kind"].cat.codes.to_numpy()
        chg = (kind == 0) | (kind == 1)  # swap (a load: +1), evict (-1)
        dup = adapter_duplication(np.r_[np.zeros(N * len(held)), ev["t_s"].to_numpy()[chg]],
                                  np.r_[np.ones(N * len(held), np.int64), np.where(kind[chg] == 0, 1, -1)],
                                  np.r_[np.tile(held, N), ev["adapter"].to_numpy()[chg]], sc.warmup_s, sc.duration_s)
    _fleet_keys(summary, replicas["requests"].to_numpy(), dup)
    return SimResult(scenario=sc, requests=req, timeseries=ts, summary=summary, events=ev, replicas=replicas,
                     timeseries_by_replica=by_replica)


def compare(scenario: Scenario, strategies=None, replications: int = 5, metrics=None) -> pd.DataFrame:
    """Mean and 95% CI of each summary metric per strategy over ``replications`` seeds.

    Replication k uses seed ``scenario.seed + k`` for every strategy (common random numbers).
    Returns one row per (strategy, metric) with columns mean, ci_low, ci_high, half_width, n.
    """
    from .metrics import mean_ci

    strategies = list(strategies or [scenario.strategy])
    for s in strategies:
        if s not in STRATEGIES:
            raise ValueError(f"strategies: unknown value {s!r}; allowed: {', '.join(STRATEGIES)}")
    if not (isinstance(replications, int) and 1 <= replications <= 1000):
        raise ValueError(f"replications: invalid value {replications!r}; allowed: an integer in [1, 1000]")
    rows = []
    for s in strategies:
        for k in range(replications):
            summ = simulate_summary(scenario.replace(strategy=s, seed=scenario.seed + k))
            if not rows and metrics is not None:  # checked on the first run's summary, before the others
                numeric = [m for m, v in summ.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
                bad = [m for m in (metrics if isinstance(metrics, (list, tuple)) else [metrics]) if m not in numeric]
                if bad or not isinstance(metrics, (list, tuple)) or not metrics:
                    raise ValueError(f"metrics: invalid value {bad[0] if bad else metrics!r}; allowed: a non-empty "
                                     f"list of summary metrics ({', '.join(sorted(numeric))})")
            rows.append({"strategy": s, "replication": k, **summ})
    df = pd.DataFrame(rows)
    metric_cols = metrics or [c for c in df.columns if c not in ("strategy", "replication")
                              and pd.api.types.is_numeric_dtype(df[c])]
    out = []
    for s, g in df.groupby("strategy", sort=False):
        for mcol in metric_cols:
            mean, lo, hi = mean_ci(g[mcol].to_numpy(dtype=float))
            out.append({"strategy": s, "metric": mcol, "mean": mean, "ci_low": lo, "ci_high": hi,
                        "half_width": (hi - lo) / 2 if np.isfinite(hi) else np.nan, "n": len(g)})
    return pd.DataFrame(out)
