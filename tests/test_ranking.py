"""engine.rank: a winner only outside the noise (paired replications), bounds never win."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import rank


def test_clear_winner_and_tie():
    r = rank({"a": [10, 11, 12], "b": [20, 21, 22], "c": [10.5, 10.0, 12.5]}, higher_is_better=False)
    assert r.best == "a" and r.order[0] == "a" and r.order[-1] == "b"
    assert r.tied == ["c"] and r.winner is None  # a - c = [-0.5, 1, -0.5]: CI includes 0
    r2 = rank({"a": [10, 11, 12], "b": [20, 21, 22]}, higher_is_better=False)
    assert r2.winner == "a" and r2.tied == [] and r2.stats["b"]["diff_ci_high"] < 0


def test_paired_differences_not_marginal_cis():
    # marginal CIs overlap widely (replication noise is shared), but b is always 1 above a: a real lead
    a = np.array([10.0, 50.0, 90.0])
    r = rank({"a": a, "b": a + 1.0}, higher_is_better=True)
    assert r.winner == "b" and r.stats["a"]["diff_to_best"] == pytest.approx(1.0)


def test_identical_candidates_tie():
    r = rank({"x": [1.0, 2.0, 3.0], "y": [1.0, 2.0, 3.0]}, higher_is_better=True)
    assert r.tied == ["y"] and r.winner is None


def test_bounds_never_win_or_tie():
    r = rank({"oracle": [1, 1, 1], "naive": [5, 6, 7], "hot_set": [9, 9, 9]}, higher_is_better=False,
             exclude=["oracle"])
    assert r.best == "naive" and r.winner == "naive" and "oracle" not in r.tied
    assert r.order[-1] == "oracle" and r.excluded == ["oracle"]


def test_one_replication_has_no_ci():
    r = rank({"a": [1.0], "b": [2.0]}, higher_is_better=True)
    assert not r.has_ci and r.best == "b" and r.winner == "b"
    r = rank({"a": [2.0], "b": [2.0]}, higher_is_better=True)
    assert r.tied == ["b"] or r.tied == ["a"]


def test_non_finite_is_ineligible_and_bad_input():
    r = rank({"a": [1.0, math.nan], "b": [2.0, 3.0]}, higher_is_better=False)
    assert r.best == "b" and r.order[-1] == "a"
    with pytest.raises(ValueError, match="replication counts differ"):
        rank({"a": [1.0, 2.0], "b": [1.0]}, higher_is_better=True)
    with pytest.raises(ValueError, match="values: empty"):
        rank({}, higher_is_better=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=3, max_size=6), st.floats(0.0, 100.0), st.booleans())
def test_shifting_one_candidate_far_makes_it_the_winner(base, shift, hib):
    a = np.array(base)
    spread = float(np.ptp(a)) + 1.0
    better = a + (1 if hib else -1) * (10 * spread + shift)
    r = rank({"a": a, "b": better}, higher_is_better=hib)
    assert r.winner == "b"
