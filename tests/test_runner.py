"""app.runner.run_replications (the What-if page's threads) gives what the serial engine calls give."""
from __future__ import annotations

from legacy import legacy_preset

from app import runner
from engine import simulate


def test_threaded_replications_equal_serial_engine_runs():
    sc = legacy_preset("default", duration_s=20.0, warmup_s=2.0, arrival_rate_rps=8.0)
    strategies = ["naive", "hot_set", "slora"]
    results, reps, failed = runner.run_replications(sc, strategies, 3)
    assert not failed and list(results) == strategies and list(reps) == strategies
    for s in strategies:
        want = [simulate(sc.replace(strategy=s, seed=sc.seed + k)).summary for k in range(3)]
        assert reps[s] == want, s
        assert results[s]["summary"] == want[0]


def test_a_strategy_that_cannot_run_is_reported_not_raised():
    # hot_set_k above what the budget pins is refused by hot_set only
    sc = legacy_preset("default", duration_s=10.0, warmup_s=1.0, hot_set_k=16)
    results, reps, failed = runner.run_replications(sc, ["naive", "hot_set"], 2)
    assert list(results) == ["naive"] and list(reps) == ["naive"] and len(reps["naive"]) == 2
    assert "hot_set_k" in failed["hot_set"]
