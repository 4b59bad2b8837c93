"""Shortcuts in engine/metrics.py against the plain computations they replace (bit for bit)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import metrics


@settings(max_examples=200, deadline=None)
@given(x=st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=400),
       qs=st.lists(st.sampled_from([0, 1, 25, 50, 90, 95, 99, 99.9, 100]), min_size=1, max_size=4))
def test_percentiles_in_one_partition_equal_one_call_each(x, qs):
    x = np.array(x, np.float64)
    got = metrics._pcts(x, tuple(qs))
    want = [metrics._pct(x, q) for q in qs]
    assert np.array_equal(got, want, equal_nan=True)


@settings(max_examples=100, deadline=None)
@given(events=st.lists(st.tuples(st.floats(0, 10), st.integers(0, 70_000), st.sampled_from([1, -1])),
                       min_size=1, max_size=200))
def test_adapter_duplication_radix_order_is_the_stable_order(events):
    """adapter_duplication sorts adapter ids as 16-bit (a radix sort) when they fit: the same stable order as
    sorting the int64 ids, so the same value bit for bit."""
    events.sort(key=lambda e: e[0])
    t = np.array([e[0] for e in events])
    a = np.array([e[1] for e in events], np.int64)
    d = np.array([e[2] for e in events], np.int64)
    if a.max() < 65536:
        assert np.array_equal(np.argsort(a, kind="stable"), np.argsort(a.astype(np.uint16), kind="stable"))
    got = metrics.adapter_duplication(t, d, a, 1.0, 9.0)
    assert np.isnan(got) or np.isfinite(got)
