"""engine.sweep: grids x strategies x replications, common random numbers, CIs, validation."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from engine import Scenario
from engine.sweep import ID_COLUMNS, run_sweep, run_sweeps, summarize_sweep


def small(**kw) -> Scenario:
    """Seed-1 preset, short: each run takes a few milliseconds once compiled."""
    return Scenario.from_preset("seed1-rtx3090", **{"duration_s": 6.0, "warmup_s": 1.0, **kw})


GRID = {"arrival_rate_rps": [8.0, 32.0], "zipf_s": [0.6, 1.2]}
STRATS = ["naive", "batch"]


@pytest.fixture(scope="module")
def sweep1() -> pd.DataFrame:
    return run_sweep(small(), GRID, STRATS, replications=3, workers=1)


def test_tidy_rows_and_columns(sweep1):
    df = sweep1
    assert len(df) == 2 * 2 * 2 * 3
    assert list(df.columns[:5]) == ["arrival_rate_rps", "zipf_s", "strategy", "replication", "seed"]
    for m in ("ttft_mean_ms", "ttft_p99_ms", "swap_rate", "throughput_tok_s", "slo_attainment"):
        assert m in df.columns and pd.api.types.is_numeric_dtype(df[m])
    assert df.attrs["grid_fields"] == ["arrival_rate_rps", "zipf_s"]
    # one row per (point, strategy, replication), in grid-product / strategy / replication order
    keys = list(zip(df.arrival_rate_rps, df.zipf_s, df.strategy, df.replication))
    assert len(set(keys)) == len(keys)
    assert keys[0] == (8.0, 0.6, "naive", 0) and keys[3] == (8.0, 0.6, "batch", 0)
    assert keys[-1] == (32.0, 1.2, "batch", 2)


def test_common_random_numbers(sweep1):
    # replication k uses seed base.seed + k for every strategy and grid point
    base = small(seed=7)
    df = run_sweep(base, {"arrival_rate_rps": [8.0]}, STRATS, replications=2, workers=1)
    assert list(df.seed) == [7, 8, 7, 8]
    assert set(zip(sweep1.replication, sweep1.seed)) == {(0, 0), (1, 1), (2, 2)}
    # same seed -> same request stream for both strategies (identical arrivals counted)
    for (_, _, _k), g in sweep1.groupby(["arrival_rate_rps", "zipf_s", "replication"]):
        assert g["requests"].nunique() == 1


def test_deterministic(sweep1):
    again = run_sweep(small(), GRID, STRATS, replications=3, workers=1)
    pd.testing.assert_frame_equal(sweep1, again)


def test_workers_1_and_2_identical(sweep1):
    calls = []
    two = run_sweep(small(), GRID, STRATS, replications=3, workers=2, progress=lambda d, t: calls.append((d, t)))
    pd.testing.assert_frame_equal(sweep1, two)
    assert two.attrs == sweep1.attrs
    assert calls[-1] == (24, 24) and all(t == 24 for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_run_sweeps_matches_run_sweep(sweep1):
    a, b = run_sweeps([(small(), GRID, STRATS), (small(), {"batch_window_ms": [5.0]}, ["batch"])], 3, workers=1)
    pd.testing.assert_frame_equal(a, sweep1)
    assert len(b) == 3 and b.attrs["grid_fields"] == ["batch_window_ms"]


def test_summary_ci_matches_scipy(sweep1):
    s = summarize_sweep(sweep1, ["ttft_mean_ms", "swap_rate"])
    assert list(s.columns) == ["arrival_rate_rps", "zipf_s", "strategy", "metric", "mean", "ci_low", "ci_high", "n"]
    assert len(s) == 2 * 2 * 2 * 2
    for _, r in s.iterrows():
        x = sweep1[(sweep1.arrival_rate_rps == r.arrival_rate_rps) & (sweep1.zipf_s == r.zipf_s)
                   & (sweep1.strategy == r.strategy)][r.metric].to_numpy(float)
        lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
        assert r.n == 3
        assert r["mean"] == pytest.approx(x.mean())
        assert r.ci_low == pytest.approx(lo) and r.ci_high == pytest.approx(hi)


def test_summary_default_metrics_exclude_ids(sweep1):
    s = summarize_sweep(sweep1)
    assert not set(s.metric) & (set(ID_COLUMNS) | {"arrival_rate_rps", "zipf_s"})
    assert {"ttft_mean_ms", "throughput_tok_s"} <= set(s.metric)


def test_ci_shrinks_with_replications():
    base = small(arrival_rate_rps=24.0, duration_s=4.0, warmup_s=0.5)
    df = run_sweep(base, {"zipf_s": [1.0]}, ["naive"], replications=16, workers=1)
    hw = {}
    for n in (4, 16):
        s = summarize_sweep(df[df.replication < n], ["ttft_mean_ms"]).iloc[0]
        assert s.n == n
        hw[n] = (s.ci_high - s.ci_low) / 2
    assert hw[4] > 0 and hw[16] < hw[4]


@pytest.mark.parametrize("grid, strategies, needle", [
    ({"arrival_rate_rpz": [1.0]}, ["naive"], "arrival_rate_rpz"),
    ({"zipf_s": [1.0, -1.0]}, ["naive"], "zipf_s"),
    ({"arrival_rate_rps": [8.0, "fast"]}, ["naive"], "arrival_rate_rps"),
    ({"vram_budget_gb": [10.0, 50.0]}, ["naive"], "vram_budget_gb"),
    ({"zipf_s": []}, ["naive"], "zipf_s"),
    ({"zipf_s": 1.0}, ["naive"], "zipf_s"),
    ({"strategy": ["naive"]}, ["naive"], "strategy"),
    ({"seed": [1, 2]}, ["naive"], "seed"),
    ({"zipf_s": [1.0]}, ["naive", "fifo"], "fifo"),
    ({"zipf_s": [1.0]}, [], "strategies"),
])
def test_invalid_input_named_before_any_run(grid, strategies, needle):
    calls = []
    with pytest.raises(ValueError, match=needle):
        run_sweep(small(), grid, strategies, replications=2, workers=1, progress=lambda d, t: calls.append(d))
    assert calls == []


@pytest.mark.parametrize("kw, needle", [({"replications": 0}, "replications"), ({"replications": 2.5}, "replications"),
                                        ({"replications": 2, "workers": 0}, "workers")])
def test_invalid_counts(kw, needle):
    with pytest.raises(ValueError, match=needle):
        run_sweep(small(), {"zipf_s": [1.0]}, ["naive"], **kw)


def test_invalid_value_for_one_strategy_only_is_caught_first():
    # hot_set_k is checked only for hot_set; the error names the field and the strategy
    with pytest.raises(ValueError, match=r"hot_set_k.*strategy hot_set"):
        run_sweep(small(), {"hot_set_k": [10, 500]}, ["naive", "hot_set"], replications=2, workers=1)


def test_nan_metrics_do_not_break_summary():
    df = pd.DataFrame({"x": [1, 1, 1], "strategy": ["a"] * 3, "replication": [0, 1, 2], "seed": [0, 1, 2],
                       "m": [1.0, math.nan, 3.0]})
    s = summarize_sweep(df, ["m"], by=["x"]).iloc[0]
    assert s.n == 2 and s["mean"] == 2.0 and np.isfinite(s.ci_low)
