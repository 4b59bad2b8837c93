"""The wait queue's compaction (loop._compact_queue, IP_QCOMPACT) against the queue that keeps every entry: under a
standing queue, requests admitted out of order (grouped, skipping scans) leave their entries behind, and once a scan
walks past more finished ones than waiting ones it looks at, they are dropped.  Every state array equal bit for
bit but the queue's indices (tests/test_fast_paths._assert_same), and the waiting and running requests in the same
order, each at the place its RI_WQPOS says."""
import numpy as np
import pytest
from legacy import legacy_preset
from test_fast_paths import _assert_same, _both

from engine import loop as L

OVERLOADED = {  # (the legacy default's 16 req/s, offered at 60: a standing queue of about 500)
    "batch": dict(strategy="batch", arrival_rate_rps=60.0, max_batch_size=256),
    "hot_set": dict(strategy="hot_set", arrival_rate_rps=60.0, max_batch_size=256),
    "vllm": dict(strategy="vllm", arrival_rate_rps=60.0, max_batch_size=256),
}


def _live_order(arr) -> list[int]:
    wq, status = arr["wq"], arr["R_i"][L.RI_STATUS]
    return [int(r) for r in wq[arr["S_i"][L.SI_WQHEAD]:arr["S_i"][L.SI_WQTAIL]]
            if status[r] in (L.ST_WAITING, L.ST_RUNNING)]


@pytest.mark.parametrize("case", list(OVERLOADED))
def test_compaction_changes_nothing_but_the_queue_indices(case):
    sc = legacy_preset("default", duration_s=25.0, warmup_s=2.0, drain_s=0.0, **OVERLOADED[case])
    fast, ref = _both(sc, L.IP_QCOMPACT)
    _assert_same(fast, ref)
    assert fast["S_i"][L.SI_WQTAIL] < ref["S_i"][L.SI_WQTAIL]  # it did compact
    assert _live_order(fast) == _live_order(ref)
    live = np.flatnonzero(np.isin(fast["R_i"][L.RI_STATUS], (L.ST_WAITING, L.ST_RUNNING)))
    pos = fast["R_i"][L.RI_WQPOS, live]
    waiting_or_after = pos >= fast["S_i"][L.SI_WQHEAD]
    assert np.array_equal(fast["wq"][pos], live)  # each where its index says
    assert waiting_or_after[fast["R_i"][L.RI_STATUS, live] == L.ST_WAITING].all()


def test_compact_queue_keeps_the_order_of_what_is_left():
    """The helper itself on a queue of five states: finished and dropped entries go, the rest keep their order."""
    R_i = np.zeros((L.RI_LEN, 8), np.int64)
    S_i = np.zeros(L.SI_LEN, np.int64)
    status = [L.ST_DONE, L.ST_WAITING, L.ST_DONE, L.ST_RUNNING, L.ST_DROPPED, L.ST_WAITING, L.ST_DONE, L.ST_WAITING]
    R_i[L.RI_STATUS] = status
    wq = np.array([7, 6, 5, 4, 3, 2, 1, 0], np.int64)  # request 7 first
    R_i[L.RI_WQPOS, wq] = np.arange(8)
    S_i[L.SI_WQTAIL] = 8
    L._compact_queue(R_i, S_i, wq, 1)  # (entry 0, before the head, stays)
    assert S_i[L.SI_WQTAIL] == 4
    assert list(wq[:4]) == [7, 5, 3, 1]  # (6, 4, 2, 0: finished or dropped)
    for k in range(1, 4):
        assert R_i[L.RI_WQPOS, wq[k]] == k
