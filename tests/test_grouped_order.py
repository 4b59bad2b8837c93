"""The grouped scan's order of adapter groups (ORDER_GROUPED: batch, batch_t4_k2, hotset_batch_t4; docs/model.md
6.2): starving groups, then resident ones, then the others, oldest first in each (policies.group_key: class x 1e12
+ oldest arrival).  The scan builds its groups in the wait queue's order of their oldest requests, which is arrival
order, so the stable sort by that key is a stable partition by class, read off the key (loop._partition_groups,
IP_GPART); where the groups are not in arrival order the loop merge-sorts them (loop._sort_groups, the
reference).  Checked: the partition against a stable argsort of the keys, and whole runs against the merge sort,
every state array equal bit for bit
(tests/test_fast_paths._assert_same), on standing queues where the three classes meet, on a fleet, on random
scenarios and on a hand-made workload whose queue is out of arrival order."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legacy import legacy_preset
from test_fast_paths import _assert_same, _both, _fleet_equals_reference

from engine import loop as L
from engine.policies import GROUP_CLASS_SCALE, group_class, group_key
from engine.workload import Workload

GROUPED = ("batch", "batch_t4_k2", "hotset_batch_t4")


@settings(max_examples=200, deadline=None)
@given(classes=st.lists(st.integers(0, 2), min_size=0, max_size=80),
       gaps=st.lists(st.sampled_from([0.0, 1e-9, 1e-4, 0.3, 7.0]), min_size=80, max_size=80),
       start=st.sampled_from([0.0, 12.5, 3.6e5]))
def test_partition_is_the_stable_sort_of_the_keys(classes, gaps, start):
    """With the oldest arrivals non-decreasing (ties and gaps below the key's rounding at 1e12 included), the
    partition gives the order np.argsort(group_key, kind="stable") gives."""
    n = len(classes)
    oldest = start + np.cumsum(gaps[:n])
    keys = np.array([group_key(c == 0, c == 1, o) for c, o in zip(classes, oldest)])
    items = np.arange(100, 100 + n, dtype=np.int64)
    want = items[np.argsort(keys, kind="stable")]
    L._partition_groups(keys.copy(), items, n, np.zeros(n, np.int64))
    assert list(items) == list(want)


def test_group_class_is_the_key_s_first_part():
    for starving in (False, True):
        for resident in (False, True):
            c = group_class(starving, resident)
            assert group_key(starving, resident, 0.0) == c * 1e12
            assert group_key(starving, resident, 3.6e5) // GROUP_CLASS_SCALE == c  # (read back off the key)
    assert [group_class(True, False), group_class(False, True), group_class(False, False)] == [0, 1, 2]


STANDING = {
    # the default scenario at twice its capacity and more: hundreds of groups, most absent with no room
    "batch-12": ("default", dict(strategy="batch", arrival_rate_rps=12.0, duration_s=60.0, warmup_s=5.0)),
    "batch-30": ("default", dict(strategy="batch", arrival_rate_rps=30.0, duration_s=30.0, warmup_s=2.0)),
    # a short max_wait: groups start starving while resident and absent ones wait (all three classes)
    "batch-starving": ("default", dict(strategy="batch", arrival_rate_rps=12.0, max_wait_ms=150.0, duration_s=40.0,
                                       warmup_s=2.0)),
    "t4-k2": ("default", dict(strategy="batch_t4_k2", arrival_rate_rps=30.0, duration_s=20.0, warmup_s=2.0)),
    "hotset-t4": ("default", dict(strategy="hotset_batch_t4", arrival_rate_rps=30.0, duration_s=20.0,
                                  warmup_s=2.0)),
    "kv-heavy": ("kv-qwen2-0.5b-heavy", dict(strategy="batch", duration_s=20.0, warmup_s=2.0)),
    "closed": ("a100-light", dict(strategy="batch", arrival_process="closed", concurrency=48, duration_s=30.0,
                                  warmup_s=2.0)),
}


@pytest.mark.parametrize("case", list(STANDING))
def test_partition_runs_equal_the_merge_sort(case):
    preset, kw = STANDING[case]
    fast, ref = _both(legacy_preset(preset, **kw), L.IP_GPART)
    _assert_same(fast, ref)
    assert fast["S_i"][L.SI_PASSES] > 0


def test_fleet_partition_equals_the_merge_sort(monkeypatch):
    sc = legacy_preset("default", strategy="batch", num_replicas=3, router="least_loaded", arrival_rate_rps=60.0,
                       duration_s=10.0, warmup_s=1.0)
    _fleet_equals_reference(monkeypatch, sc, L.IP_GPART)


def test_a_queue_out_of_arrival_order_is_merge_sorted():
    """A hand-made workload whose arrival times fall with the request index enters the queue in index order, all at
    the first one's time, so the groups come newest first: the loop must notice and merge-sort them (a partition
    would give the two adapter slots to the newest groups)."""
    sc = legacy_preset("default", strategy="batch", num_adapters=6, max_loras=2, duration_s=8.0, warmup_s=0.0,
                       max_batch_size=4).validate()
    rng = np.random.default_rng(7)
    n = 60
    arrival = 1.0 + 0.01 * np.arange(n)[::-1]  # request 0 last: the others wait for it to enter the queue
    wl = Workload(arrival, rng.integers(0, 6, n), np.full(n, 300), np.full(n, 60))
    fast, ref = _both(sc, L.IP_GPART, wl)
    _assert_same(fast, ref)
    assert (fast["R_i"][L.RI_STATUS] == L.ST_DONE).sum() == n


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strategy=st.sampled_from(GROUPED), rate=st.floats(4.0, 60.0), slots=st.sampled_from([0, 1, 2, 4]),
       batch=st.sampled_from([4, 16, 64]), window=st.sampled_from([0.0, 5.0, 25.0, 200.0]),
       max_wait=st.sampled_from([50.0, 500.0, 5000.0]), ondemand=st.booleans(), load=st.sampled_from(["sync", "async"]),
       seed=st.integers(0, 10_000))
def test_random_grouped_scenarios_agree(strategy, rate, slots, batch, window, max_wait, ondemand, load, seed):
    try:
        sc = legacy_preset("default", strategy=strategy, arrival_rate_rps=rate, max_loras=slots, max_batch_size=batch,
                           batch_window_ms=window, max_wait_ms=max_wait,
                           kv_reservation="on_demand" if ondemand else "full", load_mode=load, duration_s=8.0,
                           warmup_s=1.0, seed=seed).validate()
    except ValueError:
        return
    _assert_same(*_both(sc, L.IP_GPART))
