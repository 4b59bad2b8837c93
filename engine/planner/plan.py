"""``plan()``: from "what if" to "what should I set" — an SLO-driven search over configurations.

For every configuration of a grid of scenario fields (GPU, ``max_loras``,
``max_cpu_loras``, strategy, ...) and every replication seed, a bracketing
search (``search.py``) finds the largest arrival rate (``max_rate``) or adapter
count (``max_adapters``) that meets the SLO on a stable server, checks the
base rate (``min_cost``), or finds the fewest replicas behind the router that
serve the base rate, the fleet's total (``min_replicas``).  Replication k uses
seed ``base.seed + k`` for every configuration (common random numbers), so
configurations are compared paired; a configuration whose paired difference to
the best one has a 95 % CI that includes zero is a *tie*, not a runner-up.  Among the best and its ties the
pick is the first by the stated tie-break (``TIE_BREAK``: fewest GPUs, then the lowest cost, then the best value of
the objective), said in ``PlanResult.tie_break`` and per row in the ``tie_break`` column; ``PlanResult.notes``
also say when the pick uses the largest or smallest value of a numeric grid field (try one beyond it).  Invalid
configurations (weights or KV do not fit) stay in the table as infeasible, with the reason.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..calibration.allreduce_check import allreduce_caveat
from ..metrics import mean_ci
from ..ranking import rank
from ..scenario import ENUMS, MAX_REPLICAS, Scenario, coerce
from ..sweep import Progress, check_backend, parallel_map
from . import band as band_mod
from . import search
from .commands import server_commands, sglang_command
from .deployment import Deployment
from .memory import memory_split, sglang_slot_budget_gb, vllm_slot_budget_gb
from .prices import cost_per_mtok_usd, price_table
from .slo import SLO_METRICS, check_slo
from .ties import (
    _fmt_value,
    _plain,
    break_ties,
    edge_notes,
    tie_break_short,
    tie_break_text,
    tie_notes,
)

OBJECTIVES = ("max_rate", "max_adapters", "min_cost", "min_replicas")
#: A deployment's own inputs: a grid over one of them rebuilds the deployment's scenario (``_point_scenario``).
DEPLOYMENT_FIELDS = tuple(f for f in Deployment.__dataclass_fields__ if f != "server")
#: Headline column of each objective in the table (its mean over replications; ``_ci_low``/``_ci_high`` beside).
VALUE_COLUMNS = {"max_rate": "max_rate_rps", "max_adapters": "max_adapters", "min_cost": "meets_slo_frac",
                 "min_replicas": "replicas_needed"}
#: The scenario field each objective searches (a grid may not set it).
SEARCHED = {"max_rate": "arrival_rate_rps", "max_adapters": "num_adapters", "min_replicas": "num_replicas"}
MAX_REPLICAS_SEARCH = search.MAX_REPLICAS_SEARCH
#: Upper bounds on one plan (configurations, and configurations x replications).
MAX_CONFIGS = 256
MAX_SEARCHES = 2048
#: Summary metrics reported at each configuration's optimum (besides the SLO's own).
REPORTED = ("ttft_p50_ms", "ttft_p99_ms", "tpot_mean_ms", "throughput_req_s", "throughput_tok_s",
            "swap_rate", "gpu_busy_frac", "slo_attainment")
#: Also reported for min_replicas (the fleet's measures, docs/model.md 12).
FLEET_REPORTED = ("load_imbalance", "adapter_duplication")


@dataclass
class PlanResult:
    """``table``: one row per configuration (ranked; ties marked). ``best``: the winner's row (None if none)."""

    table: pd.DataFrame
    best: dict | None
    objective: str
    slo: dict
    grid: dict
    base: Scenario
    replications: int
    runs: pd.DataFrame = field(repr=False, default=None)  # one row per (configuration, replication)
    tie_break: str = ""                     # the stated tie-break rule of the objective (``tie_break_text``)
    notes: list[str] = field(default_factory=list)  # the ties and how the pick won; grid edges; search bounds
    deployment: Deployment | None = None    # the plan's base as its user stated it (``plan(Deployment(...))``)

    def scenario(self, config: int) -> Scenario:
        """The scenario of configuration ``config`` (a table index), at its optimum where one was found."""
        row = self.table.loc[config]
        sc = _point_scenario(self.base, self.deployment, {k: _plain(row[k]) for k in self.grid}, self.grid)
        if self.objective == "max_rate" and row.get("max_rate_rps", 0) > 0:
            sc = sc.replace(arrival_rate_rps=float(row["max_rate_rps"]))
        if self.objective == "max_adapters" and row.get("max_adapters", 0) > 0:
            sc = sc.replace(num_adapters=int(row["max_adapters"]))
        if self.objective == "min_replicas" and row.get("replicas_needed_max", 0) > 0:
            sc = sc.replace(num_replicas=int(row["replicas_needed_max"]))  # the conservative count
        return sc


def _check_grid(grid, objective: str) -> dict[str, list]:
    if not isinstance(grid, Mapping):
        raise ValueError(f"grid: invalid value {grid!r}; allowed: a dict of scenario field -> list of values")
    names = set(Scenario.field_names())
    searched = SEARCHED.get(objective)
    out = {}
    for k, vals in grid.items():
        if k not in names:
            raise ValueError(f"grid: unknown scenario field {k!r}; allowed: {', '.join(sorted(names))}")
        if k == "seed":
            raise ValueError("grid: field 'seed' is set by replications (seed = base.seed + k); allowed: any other field")
        if k == searched:
            raise ValueError(f"grid: field {k!r} is what the objective {objective!r} searches; allowed: any other field")
        if isinstance(vals, (str, bytes)) or not isinstance(vals, (Sequence, np.ndarray)):
            raise ValueError(f"grid: field {k!r} needs a list of values, got {vals!r}")
        vals = [coerce(k, v) for v in vals]
        bad = [v for v in vals if k in ENUMS and v not in ENUMS[k]]
        if bad:
            raise ValueError(f"grid: field {k!r}: invalid value {bad[0]!r}; allowed: {', '.join(ENUMS[k])}")
        if not vals:
            raise ValueError(f"grid: field {k!r} has no values; allowed: a non-empty list")
        if len(set(map(repr, vals))) != len(vals):
            raise ValueError(f"grid: field {k!r} has duplicate values in {vals!r}")
        out[k] = vals
    return out


def _with_vllm_slots(sc: Scenario, grid: Mapping) -> Scenario:
    """vLLM preallocates ``max_loras`` slots at ``max_lora_rank``, SGLang ``max_loras`` (--max-loras-per-batch)
    slots at its largest rank: size the adapter budget like them, unless the grid sets ``vram_budget_gb`` itself."""
    if sc.max_loras > 0 and "vram_budget_gb" not in grid and "max_loras" in grid:
        if sc.strategy == "vllm":
            return sc.replace(vram_budget_gb=vllm_slot_budget_gb(sc))
        if sc.strategy == "sglang":
            return sc.replace(vram_budget_gb=sglang_slot_budget_gb(sc))
    return sc


def _point_scenario(base: Scenario, deployment: Deployment | None, point: dict, grid: Mapping) -> Scenario:
    """The scenario of one grid point: a deployment's own inputs (e.g. ``gpu``) rebuild it from its server's
    profile (the GPU's PCIe link, vLLM's batch limits on that GPU, the slots' memory), the other fields apply on
    top; without a deployment, the base with the point's values (vLLM's slots sized as it preallocates them)."""
    if deployment is None:
        return _with_vllm_slots(base.replace(**point), grid)
    own = {k: v for k, v in point.items() if k in DEPLOYMENT_FIELDS}
    rest = {k: v for k, v in point.items() if k not in own}
    sc = deployment.replace(**own).scenario()
    return _with_vllm_slots(sc.replace(**rest), grid) if rest else sc


def _configs(base: Scenario, grid: dict, deployment: Deployment | None = None
             ) -> list[tuple[dict, Scenario | None, str]]:
    keys = list(grid)
    out = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        point = dict(zip(keys, combo))
        try:
            sc = _point_scenario(base, deployment, point, grid).validate()
            reason = ""
        except (ValueError, TypeError) as e:
            sc, reason = None, str(e)
        out.append((point, sc, reason))
    return out


def _config_task(args) -> list[dict]:
    """Worker: the searches of one configuration, one per replication seed (in order).

    Replication 0 brackets from the base value; the others start at replication 0's answer with a
    small step (their crossings differ by noise only), which halves their probes.
    """
    sc, seeds, slo, objective, rel_tol, probe_requests, max_replicas, *hint = args
    out, start = [], (hint[0] if hint else None)  # a start near the answer (the error band's searches)
    for seed in seeds:
        s = sc.replace(seed=seed)
        if objective == "max_rate":
            r = search.max_rate(s, slo, rel_tol, probe_requests, start=start)
        elif objective == "max_adapters":
            r = search.max_adapters(s, slo, rel_tol, probe_requests, start=start)
        elif objective == "min_replicas":
            r = search.min_replicas(s, slo, probe_requests, start=start, upper=max_replicas)
        else:
            r = search.at_rate(s, slo, probe_requests)
        if start is None and r.value > 0:
            start = r.value
        out.append({"value": r.value, "probes": r.probes, "reason": r.reason, "capped": r.capped,
                    "summary": r.summary})
    return out


def plan(base: Scenario, slo: dict, grid: dict, replications: int = 3, objective: str = "max_rate",
         rel_tol: float = 0.03, probe_requests: int | None = 6000,
         gpu_prices_usd_per_hour: Mapping[str, float] | None = None,
         workers: int | None = None, progress: Progress = False, threads: bool = True,
         backend: str | None = None, ray_address: str | None = None,
         max_replicas: int = MAX_REPLICAS_SEARCH, band="auto") -> PlanResult:
    """Rank configurations by the objective under the SLO (see the module docstring).

    ``slo``: ``{summary metric: threshold}`` (``slo.SLO_METRICS`` says which are bounds from above or
    below); ``grid``: ``{scenario field: [candidate values]}``; ``objective``: ``max_rate`` (largest
    stable arrival rate within the SLO, req/s), ``max_adapters`` (largest ``num_adapters`` at the base
    rate), ``min_cost`` (cheapest configuration meeting the SLO at the base rate, by the GPU price
    presets in US$/h) or ``min_replicas`` (fewest ``num_replicas`` in [1, ``max_replicas``] behind the
    configuration's ``router`` that serve the base rate, the fleet's total, stably within the SLO; fewer
    is better, then the cheaper fleet; ``rel_tol`` does not apply: the count is exact).  ``rel_tol``: a
    search stops when its bracket is within this relative width.
    ``probe_requests``: each probe's measurement window is shortened (never lengthened) to about this
    many arrivals (None: the base scenario's window).  Raises ValueError naming the bad argument
    before any simulation.  ``workers``/``threads``: the pool (``engine.sweep.parallel_map``; threads by
    default: no start-up cost, and the jitted loop runs outside the GIL).  ``backend``: ``"thread"``,
    ``"process"`` or ``"ray"`` (with ``ray_address`` or ``$RAY_ADDRESS``: a cluster); it overrides
    ``threads``; the table is the same whatever the backend.  ``band``: the error band (``band.py``): "auto"
    (each configuration's measured error, ``engine.calibration.error_band``), a fraction, or None (off).
    """
    deployment = base if isinstance(base, Deployment) else None
    if deployment is not None:
        base = deployment.scenario()
    if not isinstance(base, Scenario):
        raise ValueError(f"base: expected engine.Scenario or planner.Deployment, got {type(base).__name__}")
    base = base.validate()
    check_backend(backend, threads, ray_address)
    slo = check_slo(slo)
    if objective not in OBJECTIVES:
        raise ValueError(f"objective: invalid value {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    if base.trace and objective == "max_rate":
        raise ValueError(f"trace: invalid value {base.trace!r} for objective 'max_rate' (it searches "
                         f"arrival_rate_rps, which a replayed trace ignores); allowed: '' (generated traffic), "
                         f"or the objectives max_adapters / min_cost, which keep the trace's own rate")
    if base.arrival_process == "closed" and not base.trace:
        raise ValueError("arrival_process: invalid value 'closed' for a plan; allowed: poisson, gamma "
                         "(the planner searches open-loop arrival rates)")
    if isinstance(replications, bool) or not isinstance(replications, int) or not 1 <= replications <= 20:
        raise ValueError(f"replications: invalid value {replications!r}; allowed: an integer in [1, 20]")
    if isinstance(rel_tol, bool) or not isinstance(rel_tol, (int, float)) or not 0.005 <= rel_tol <= 0.5:
        raise ValueError(f"rel_tol: invalid value {rel_tol!r}; allowed: a number in [0.005, 0.5]")
    if probe_requests is not None and (isinstance(probe_requests, bool) or not isinstance(probe_requests, int)
                                       or not 500 <= probe_requests <= 200_000):
        raise ValueError(f"probe_requests: invalid value {probe_requests!r}; allowed: None or an integer in "
                         f"[500, 200000]")
    if isinstance(max_replicas, bool) or not isinstance(max_replicas, int) or not 1 <= max_replicas <= MAX_REPLICAS:
        raise ValueError(f"max_replicas: invalid value {max_replicas!r}; allowed: an integer in [1, {MAX_REPLICAS}]")
    grid = _check_grid(grid, objective)
    prices = price_table(gpu_prices_usd_per_hour)
    configs = _configs(base, grid, deployment)
    if len(configs) > MAX_CONFIGS:
        raise ValueError(f"grid: {len(configs)} configurations; allowed: at most {MAX_CONFIGS}")
    feasible = [i for i, (_, sc, _) in enumerate(configs) if sc is not None]
    if len(feasible) * replications > MAX_SEARCHES:
        raise ValueError(f"grid: {len(feasible)} configurations x {replications} replications; allowed: at most "
                         f"{MAX_SEARCHES} searches")
    if not (band is None or band == "auto" or (isinstance(band, (int, float)) and not isinstance(band, bool)
                                                and 0 <= band <= 5)):
        raise ValueError(f"band: invalid value {band!r}; allowed: 'auto', None or a fraction in [0, 5]")
    seeds = [base.seed + k for k in range(replications)]

    def args(sc):
        return sc, seeds, slo, objective, float(rel_tol), probe_requests, max_replicas

    def pmap(tasks):
        return parallel_map(_config_task, tasks, workers=workers, progress=progress, desc="plan", threads=threads,
                            backend=backend, ray_address=ray_address)
    per_config = pmap([args(configs[i][1]) for i in feasible]) if feasible else []

    def band_args(sc, start=None):  # a bound: on the first seed only (the nominal answer carries the noise's CI)
        return sc, seeds[:1], slo, objective, float(rel_tol), probe_requests, max_replicas, start
    nominal = {i: rs[0]["value"] for i, rs in zip(feasible, per_config)}
    bands, bounds = band_mod.run(configs, feasible, objective, band_args, band, pmap, nominal)
    owner = [(i, k) for i in feasible for k in range(replications)]
    results = [r for rs in per_config for r in rs]
    runs = pd.DataFrame([{"config": i, "replication": k, "value": r["value"], "probes": r["probes"],
                          "reason": r["reason"], "capped": r["capped"],
                          **{m: (r["summary"] or {}).get(m, math.nan) for m in (*slo, *_reported(objective))}}
                         for (i, k), r in zip(owner, results)])
    table = _table(base, slo, grid, configs, runs, objective, prices, replications, max_replicas)
    if bands:
        table = band_mod.add_columns(table, objective, bands, bounds,
                                     lambda c, v: v * configs[c][1].tensor_parallel_size if objective == "min_replicas"
                                     else _gpus(objective, configs[c][1], v, configs[c][1].num_replicas))
    best = table.iloc[0].to_dict() if len(table) and bool(table.iloc[0]["recommended"]) else None
    res = PlanResult(table=table, best=best, objective=objective, slo=slo, grid=grid, base=base, deployment=deployment,
                     replications=replications, runs=runs, tie_break=tie_break_text(objective))
    if best is not None:
        tied = table[table["recommended"].astype(bool) | table["tie_with_best"].astype(bool)]
        res.notes = [*([band_mod.band_note(best, objective)] if bands else []),
                     *tie_notes(table, objective, grid),
                     *edge_notes(best, grid, _edge_check(res), {f: list(tied[f]) for f in grid}),
                     *_bound_notes(res), *_tp_notes(res)]
    return res


def plan_commands(res: PlanResult) -> list:
    """The server command lines of a plan: vLLM's for the pick; SGLang's for the pick too, unless the grid compared
    strategy ``sglang`` (SGLang's own scheduling, docs/model.md 6.5) and the pick is another strategy: then SGLang's
    line is that of the best SGLang-scheduled configuration meeting the SLO (the first ``sglang`` row of the ranked
    table), so SGLang's flags rest on SGLang's rules; [] without a pick."""
    if res.best is None:
        return []
    vllm, sglang = server_commands(res.scenario(res.best["config"]), decided=res.grid)
    strategies = [str(v) for v in res.grid.get("strategy", ())]
    if "sglang" in strategies and res.best.get("strategy") != "sglang":
        rows = res.table[(res.table["strategy"] == "sglang") & res.table["meets_slo"].astype(bool)]
        if len(rows):
            c = int(rows.iloc[0]["config"])
            sglang = sglang_command(res.scenario(c), decided=res.grid)
            sglang.note = (f"From the best configuration simulated with SGLang's scheduling (strategy 'sglang', "
                           f"config {c}), not the pick ({res.best['strategy']}). " + sglang.note)
    return [vllm, sglang]


def _tp_notes(res: PlanResult) -> list[str]:
    """What the band leaves out when the pick is a tensor-parallel group (docs/model.md 5.7)."""
    tp = int(res.best.get("tensor_parallel_size", res.base.tensor_parallel_size))
    if tp <= 1:
        return []
    return [f"Not in that band: the all-reduces of the {tp}-GPU groups come from {allreduce_caveat()}."]


def _value_name(objective: str) -> str:
    return VALUE_COLUMNS[objective]


def _reported(objective: str) -> tuple[str, ...]:
    return (*REPORTED, *FLEET_REPORTED) if objective == "min_replicas" else REPORTED


def _table(base, slo, grid, configs, runs, objective, prices, replications, max_replicas=MAX_REPLICAS_SEARCH
           ) -> pd.DataFrame:
    vname = _value_name(objective)
    rows = []
    for i, (point, sc, reason) in enumerate(configs):
        row = {"config": i, **point}
        row["strategy"] = (sc or base).strategy if "strategy" not in point else point["strategy"]
        if objective == "min_replicas":
            row["router"] = (sc or base).router if "router" not in point else point["router"]
        row["feasible"] = sc is not None
        gpu = sc.gpu if sc is not None else point.get("gpu", base.gpu)
        row["price_usd_per_hour"] = prices.get(gpu, math.nan)
        if sc is not None:
            row.update(memory_split(sc))
        g = runs[runs["config"] == i] if len(runs) else runs
        vals = g["value"].to_numpy(float) if len(g) else np.array([])
        if objective == "min_cost":
            vals = (vals > 0).astype(float)
        missing = objective == "min_replicas" and bool((vals <= 0).any())
        mean, lo, hi = mean_ci(vals) if len(vals) and not missing else (math.nan, math.nan, math.nan)
        row[vname] = mean
        row[f"{vname}_ci_low"], row[f"{vname}_ci_high"] = lo, hi
        tp = (sc or base).tensor_parallel_size  # a replica is a tensor-parallel group of tp GPUs
        row["gpus_per_replica"] = tp
        n_gpus = (sc or base).num_replicas * tp
        if objective == "min_replicas":
            cap = search.replicas_cap(sc or base, max_replicas)
            row["replicas_needed_max"] = float(vals.max()) if len(vals) and not missing else math.nan
            row["replicas_by_replication"] = ",".join(str(int(v)) if v > 0 else f">{cap}" for v in vals)
            n_gpus = row["replicas_needed_max"] * tp
        row["probes"] = int(g["probes"].sum()) if len(g) else 0
        row["capped"] = bool(g["capped"].any()) if len(g) else False
        for m in (*slo, *_reported(objective)):
            row[m] = float(np.nanmean(g[m])) if len(g) and np.isfinite(g[m]).any() else math.nan
        # the fleet's price: every GPU of it (num_replicas x tensor_parallel_size)
        row["fleet_price_usd_per_hour"] = row["price_usd_per_hour"] * n_gpus
        row["gpus"] = _gpus(objective, sc or base, mean, n_gpus)
        row["gpus_price_usd_per_hour"] = row["price_usd_per_hour"] * row["gpus"]
        row["cost_per_mtok_usd"] = cost_per_mtok_usd(row["fleet_price_usd_per_hour"], row["throughput_tok_s"])
        if sc is None:
            row["reason"] = reason
        elif objective == "min_replicas" and not (mean > 0):
            n_bad = int((vals <= 0).sum())
            row["reason"] = (f"SLO not met with up to {cap} replicas in {n_bad} of {len(vals)} replication(s): "
                             + _first(g.loc[g["value"] <= 0, "reason"]))
        elif objective != "min_cost" and not (mean > 0):
            row["reason"] = "SLO not met at any probed value: " + _first(g["reason"])
        elif objective == "min_cost" and mean < 1:
            row["reason"] = "SLO not met at the base rate in every replication: " + _first(g["reason"])
        else:
            row["reason"] = ""
        rows.append(row)
    table = pd.DataFrame(rows)
    return _rank(table, runs, objective, vname, replications)


def _gpus(objective: str, sc: Scenario, mean: float, n_gpus: float) -> float:
    """The ``gpus`` column (``TIE_BREAK``'s first key): GPUs the answer needs for the base scenario's demand.

    max_rate: ``num_replicas x tensor_parallel_size x ceil(base arrival rate / max rate)``; max_adapters:
    ``num_replicas x tensor_parallel_size x ceil(base num_adapters / max adapters)`` (copies of the configuration,
    each serving its share); min_cost: ``num_replicas x tensor_parallel_size``; min_replicas: the replicas to
    deploy x tensor_parallel_size.  NaN when the configuration has no answer."""
    if objective in ("max_rate", "max_adapters"):
        demand = sc.arrival_rate_rps if objective == "max_rate" else sc.num_adapters
        if not (mean > 0):
            return math.nan
        return float(sc.num_replicas * sc.tensor_parallel_size * max(1, math.ceil(demand / mean - 1e-9)))
    return float(n_gpus)


def _first(reasons) -> str:
    for r in reasons:
        if r:
            return str(r)
    return ""


def _rank(table: pd.DataFrame, runs: pd.DataFrame, objective: str, vname: str, replications: int) -> pd.DataFrame:
    """Sort best first; mark ties with the best (paired CI of the difference includes 0) and the winner."""
    ok = table["feasible"] & (table["reason"] == "")
    table["meets_slo"] = ok
    if objective == "min_cost":
        key = np.where(ok, table["cost_per_mtok_usd"].fillna(np.inf), np.inf)
        order = np.lexsort((-table[vname].fillna(-1).to_numpy(), key))
    elif objective == "min_replicas":  # fewest GPUs (replicas x GPUs each, mean), then the cheaper fleet, per token
        key = np.where(ok, (table[vname] * table["gpus_per_replica"]).fillna(np.inf).to_numpy(), np.inf)
        order = np.lexsort((table["cost_per_mtok_usd"].fillna(np.inf).to_numpy(),
                            table["fleet_price_usd_per_hour"].fillna(np.inf).to_numpy(), key))
    else:
        key = np.where(ok, -table[vname].fillna(0).to_numpy(), np.inf)
        order = np.argsort(key, kind="stable")
    table = table.iloc[order].reset_index(drop=True)
    table["recommended"] = False
    table["tie_with_best"] = False
    table["diff_to_best_ci_low"] = math.nan
    table["diff_to_best_ci_high"] = math.nan
    table["tie_break"] = ""
    if not len(table) or not bool(table.loc[0, "meets_slo"]):
        return table.set_index("config", drop=False)
    table.loc[0, "recommended"] = True
    if objective == "min_cost":
        best_cost = table.loc[0, "cost_per_mtok_usd"]
        for j in range(1, len(table)):
            if table.loc[j, "meets_slo"] and table.loc[j, "price_usd_per_hour"] == table.loc[0, "price_usd_per_hour"]:
                c = table.loc[j, "cost_per_mtok_usd"]
                table.loc[j, "tie_with_best"] = bool(abs(c - best_cost) <= 0.02 * best_cost)
        return break_ties(table, objective).set_index("config", drop=False)
    ok_cfgs = [int(c) for c in table.loc[table["meets_slo"], "config"]]
    vals = {c: runs[runs["config"] == c].sort_values("replication")["value"].to_numpy(float) for c in ok_cfgs}
    if objective == "min_replicas":  # compared in GPUs: a replica of a tensor-parallel group is several
        per = dict(zip(table["config"].astype(int), table["gpus_per_replica"]))
        vals = {c: v * per[c] for c, v in vals.items()}
    # same order as the table's (both stable; equal means keep the table's order): r.best is row 0
    r = rank(vals, higher_is_better=objective != "min_replicas")
    for j in range(1, len(table)):
        c = int(table.loc[j, "config"])
        if c not in r.stats or "diff_ci_low" not in r.stats[c]:
            continue
        table.loc[j, "diff_to_best_ci_low"] = r.stats[c]["diff_ci_low"]
        table.loc[j, "diff_to_best_ci_high"] = r.stats[c]["diff_ci_high"]
        table.loc[j, "tie_with_best"] = c in r.tied
    return break_ties(table, objective).set_index("config", drop=False)


def _edge_check(res: PlanResult):
    """``edge_notes``'s check: would the pick with ``field = value`` validate?"""
    sc = res.scenario(int(res.best["config"]))

    def check(f: str, v) -> str:
        try:
            _with_vllm_slots(sc.replace(**{f: coerce(f, v)}), res.grid).validate()
        except (ValueError, TypeError) as e:
            return str(e).split(";")[0]
        return ""
    return check


def _bound_notes(res: PlanResult) -> list[str]:
    """A note when the pick's search still met the SLO at its upper end (its value is a lower bound)."""
    b = res.best
    if res.objective not in ("max_rate", "max_adapters") or not bool(b.get("capped")):
        return []
    vname = _value_name(res.objective)
    sc = _point_scenario(res.base, res.deployment, {k: _plain(b[k]) for k in res.grid}, res.grid)
    return [f"The pick's {vname} ({_fmt_value(b[vname])}) is a lower bound: a search still met the SLO at its "
            f"upper end ({search.upper_bound_text(sc, SEARCHED[res.objective])})."]


def plan_summary(res: PlanResult) -> str:
    """One paragraph: the recommendation, its ties, and the conditions."""
    vname = _value_name(res.objective)
    slo = ", ".join(f"{k} {'<=' if SLO_METRICS[k] == 'max' else '>='} {v:g}" for k, v in res.slo.items())
    if res.best is None:
        return f"No configuration meets the SLO ({slo}); see the reasons per row."
    b = res.best
    fields = ", ".join(f"{k}={b[k]}" for k in res.grid)
    ties = res.table[res.table["tie_with_best"]]
    unit = {"max_rate_rps": " req/s", "max_adapters": " adapters", "meets_slo_frac": "",
            "replicas_needed": " replicas"}[vname]
    head = f"Best: {fields or 'the base scenario'}"
    if res.objective == "min_cost":
        head += f" at US${b['cost_per_mtok_usd']:.3g} per million output tokens"
    elif res.objective == "min_replicas":
        n = int(b["replicas_needed_max"])
        spread = (f"; per replication {b['replicas_by_replication']}, mean {b[vname]:.3g}"
                  if res.replications > 1 else "")
        rate = ("the trace's arrivals" if res.base.trace else
                f"{float(b.get('arrival_rate_rps', res.base.arrival_rate_rps)):.4g} req/s")
        tp = int(b.get("tensor_parallel_size", res.base.tensor_parallel_size))
        each = f" of {tp} GPUs each ({n * tp} GPUs)" if tp > 1 else ""
        head += (f": {n} replica(s){each} behind the {b['router']} router serve {rate} "
                 f"(the most any replication needed{spread}), US${b['fleet_price_usd_per_hour']:.3g}/h for the fleet, "
                 f"US${b['cost_per_mtok_usd']:.3g} per million output tokens")
    else:
        ci = (f" (95% CI {b[vname + '_ci_low']:.4g}-{b[vname + '_ci_high']:.4g})"
              if math.isfinite(b[vname + "_ci_low"]) else " (1 replication: no CI)")
        head += f": {b[vname]:.4g}{unit}{ci}"
    if len(ties):
        head += (f"; tied within the noise: {len(ties)} other configuration(s), picked by the "
                 f"{tie_break_short(res.objective)}")
    return head + f". SLO: {slo}; {res.replications} replication(s), common random numbers."

