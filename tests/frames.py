"""Exact comparison of two simulation results, for the tests of fast paths and no-op features."""
from __future__ import annotations

import math

import pandas as pd


def frames_equal(a, b, skip=(), replicas: bool = False) -> None:
    """``a`` and ``b`` (SimResults) are equal frame for frame and in every summary value but those in ``skip``;
    with ``replicas``, the per-replica frames too (a fleet's)."""
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    pd.testing.assert_frame_equal(a.timeseries, b.timeseries, check_exact=True)
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)
    if replicas:
        pd.testing.assert_frame_equal(a.replicas, b.replicas, check_exact=True)
        pd.testing.assert_frame_equal(a.timeseries_by_replica, b.timeseries_by_replica, check_exact=True)
    assert a.summary.keys() == b.summary.keys()
    for k, v in a.summary.items():
        if k not in skip:
            w = b.summary[k]
            assert v == w or (isinstance(v, float) and math.isnan(v) and math.isnan(w)), (k, v, w)
