"""The reference-server dataset (engine/data/reference/reference_server/) and the rules that read it
(engine.calibration.reference_runs, reference_report): the design is what was run, the packed files read back as
the observed directories they came from, and each signature rule checked on cases with a known answer."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from engine.calibration import REFERENCE_DESIGN, read_tool_files, reference_run_table, unpack_reference_runs
from engine.calibration.reference_report import REFERENCE_PARAMS as C_PARAMS
from engine.calibration.reference_report import host_cache_misses, knee_rate, miss_gap, staircase
from engine.calibration.reference_runs import DATA_DIR, GROUPS, TRAIN_GROUPS, pack
from engine.live import ReferenceSpec, scenario_fields


# ------------------------------------------------------------------ rules with known answers
def test_host_cache_misses_is_an_lru_of_the_capacity():
    assert host_cache_misses([0, 1, 0, 1], 2).tolist() == [True, True, False, False]
    assert host_cache_misses([0, 1, 2, 0], 2).tolist() == [True, True, True, True]  # 0 was evicted by 2
    assert host_cache_misses([0, 1, 0, 2, 0, 1], 2).tolist() == [True, True, False, True, False, True]
    assert host_cache_misses([3, 3, 3], 1).tolist() == [True, False, False]


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.integers(0, 9), min_size=1, max_size=60), hs.integers(1, 12))
def test_host_cache_misses_against_a_reference(seq, cap):
    """Against a dict of last-use times (the slow LRU): a use misses iff fewer than ``cap`` distinct adapters
    were used since that adapter's last use, or it was never used."""
    want = []
    for i, a in enumerate(seq):
        prev = [j for j in range(i) if seq[j] == a]
        want.append(not prev or len(set(seq[prev[-1] + 1:i])) >= cap)
    assert host_cache_misses(seq, cap).tolist() == want
    assert host_cache_misses(seq, cap).sum() >= len(set(seq))  # every adapter misses on its first use


def test_miss_gap_is_the_difference_of_means():
    g, n_miss, n_hit = miss_gap([0, 0, 1, 1], [100.0, 10.0, 120.0, 20.0], 2)
    assert (n_miss, n_hit) == (2, 2) and g == pytest.approx(95.0)
    assert math.isnan(miss_gap([0, 1], [1.0, 2.0], 2)[0])  # no hits: no gap


def test_staircase_splits_on_gaps():
    assert [len(s) for s in staircase([10, 12, 80, 81, 160, 161, 162])] == [2, 2, 3]
    assert [len(s) for s in staircase([5, 5, 5])] == [3]
    assert staircase([]) == []


def test_knee_rate_interpolates_the_crossing():
    # throughput / offered: 1, 1, 0.9 at 10, 20, 30 -> crosses 0.95 halfway between 20 and 30
    assert knee_rate([10, 20, 30], [10, 20, 27]) == pytest.approx(25.0)
    assert knee_rate([30, 10, 20], [27, 10, 20]) == pytest.approx(25.0)  # order does not matter
    assert knee_rate([10, 20], [10, 20]) == math.inf
    assert math.isnan(knee_rate([10, 20], [5, 5]))


# ------------------------------------------------------------------ the reference server's small KV
def test_kv_blocks_sets_the_override_and_the_twins_kv():
    s = ReferenceSpec(kv_blocks=16).validate()
    assert s.kv_bytes_per_token == 4 * 2 * 4 * 64 * 2  # layers x (K, V) x kv heads x head dim x bf16
    f = scenario_fields(s.to_dict())
    assert f["kv_cache_gb"] * (1 << 30) == pytest.approx(16 * 128 * s.kv_bytes_per_token)
    assert scenario_fields(ReferenceSpec().to_dict())["kv_cache_gb"] == 1.0
    with pytest.raises(ValueError, match="kv_blocks: 4 blocks of 128 tokens hold fewer than max_model_len 1024"):
        ReferenceSpec(kv_blocks=4).validate()
    with pytest.raises(ValueError, match="kv_blocks: invalid value -1"):
        ReferenceSpec(kv_blocks=-1).validate()
    with pytest.raises(ValueError, match="kv_blocks: 1048576 blocks need more than kv_cache_gib 1"):
        ReferenceSpec(kv_blocks=1 << 20).validate()


# ------------------------------------------------------------------ the shipped dataset
def test_the_design_is_the_shipped_dataset():
    tab = reference_run_table()
    assert list(tab["run_id"]) == [r["run_id"] for r in REFERENCE_DESIGN], "every design run shipped, in order"
    by = {r["run_id"]: r for r in REFERENCE_DESIGN}
    val = tab[tab["study"] == "validation"]
    assert len(val) >= 24, "at least 24 validation runs"
    for _, r in tab.iterrows():
        d = by[r["run_id"]]
        assert (r["group"], r["study"], r["split"]) == (d["group"], d["study"], d["split"])
        spec = {**GROUPS[d["group"]]}
        for k, v in spec.items():
            assert r[k] == v, (r["run_id"], k)
    assert set(val[val["split"] == "train"]["group"]) == set(TRAIN_GROUPS)
    axes = val.assign(miss=val["max_cpu_loras"].fillna(0).astype(int) > 0)
    assert set(axes["max_loras"]) >= {1, 2, 4, 8} and axes["num_adapters"].max() >= 64 and axes["miss"].any()
    assert (~axes["prefix_caching"].astype(bool)).any() and (axes["kv_blocks"].fillna(0) > 0).any()
    assert set(val["zipf_s"]) >= {0.0, 1.0}


def test_the_packed_files_read_back_as_observed_runs(tmp_path):
    ids = ["m2-light", "m1-burst16"]
    dirs = unpack_reference_runs(tmp_path, run_ids=set(ids))
    assert sorted(dirs) == sorted(ids)
    runs = read_tool_files([dirs[i] for i in ids])
    light, burst = runs
    assert light.arrival == "poisson" and light.adapters is not None and light.num_requests > 40
    assert burst.arrival == "burst" and burst.num_requests == 16, "a closed loop that sent one request per client"
    info = json.loads((dirs["m2-light"] / "run.json").read_text())
    assert info["server"]["spec"]["max_loras"] == 2 and info["device"]["label"].startswith("CPU")
    req = pd.read_csv(dirs["m2-light"] / "requests.csv")
    assert (req["status"] == "ok").all()
    assert np.allclose(req["ttft_ms"], (req["first_token_s"] - req["send_s"]) * 1e3, atol=1e-3)
    # pack(unpack(x)) == x: the dataset round-trips through the directories users get from `observe`
    out = pack({i: dirs[i] for i in ids}, tmp_path / "packed")
    again = pd.read_csv(out["requests.csv"], dtype=str, keep_default_na=False)
    orig = pd.read_csv(DATA_DIR / "requests.csv", dtype=str, keep_default_na=False)
    orig = orig[orig["run_id"].isin(ids)].reset_index(drop=True)
    pd.testing.assert_frame_equal(again.sort_values(["run_id", "request_id"]).reset_index(drop=True),
                                  orig.sort_values(["run_id", "request_id"]).reset_index(drop=True))


def test_pack_refuses_a_run_outside_the_design(tmp_path):
    with pytest.raises(ValueError, match="run_id: 'nope' is not in the design"):
        pack({"nope": tmp_path})


def test_reference_fit_is_the_validations_fit():
    """The page replays shipped runs at reference_fit(): the values the validation report states."""
    from engine.calibration import reference_fit, reference_validation
    rv = reference_validation(quick=True, max_nfev=3)
    assert reference_fit(max_nfev=3) == rv.values
    assert set(rv.values) == set(C_PARAMS)
    held = rv.table[rv.table["split"] == "held-out"]
    assert set(held["case"]) == {"m1-burst16", "m2-burst16", "m4-burst16"}, "quick: the training runs and the bursts"
    assert set(rv.table[rv.table["split"] == "train"]["group"]) == set(TRAIN_GROUPS)
