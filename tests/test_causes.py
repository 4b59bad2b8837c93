"""engine.causes (engine/bottlenecks.py): each plain-language cause appears on a scenario built to show it, and only there."""
import pytest
from legacy import legacy_preset

from engine import causes, run_causes, simulate

BASE = dict(duration_s=120.0)
SCENARIOS = {
    "pcie": dict(pcie_gbps=0.3, strategy="naive", vram_budget_gb=1.0),
    "loads": dict(pcie_gbps=0.5, strategy="naive", vram_budget_gb=1.0, arrival_rate_rps=10.0),
    "kv": dict(kv_cache_gb=0.5, arrival_rate_rps=25.0),
    "slots": dict(strategy="vllm", max_loras=2, pcie_gbps=200.0),
    "compute": dict(arrival_rate_rps=14.0, max_batch_size=8, num_adapters=20),
    "light": dict(arrival_rate_rps=2.0),
}


@pytest.mark.parametrize("key", list(SCENARIOS))
def test_each_cause_on_its_scenario(key):
    r = simulate(legacy_preset("a100-light", **BASE, **SCENARIOS[key]))
    got = run_causes(r)
    keys = [c.key for c in got]
    assert keys[0] == key, [c.message for c in got]
    others = set(SCENARIOS) - {key}
    if key in ("light", "compute", "loads"):
        assert not others & set(keys), keys
    msg = got[0].message
    assert any(ch.isdigit() for ch in msg)  # the numbers that triggered it


def test_rules_on_hand_made_measures():
    import pandas as pd
    ts = pd.DataFrame({"t_s": [0.0, 1.0], "queue_len": [5.0, 5.0], "kv_used_frac": [0.2, 0.2],
                       "resident_adapters": [4.0, 4.0], "loads_in_flight": [0.0, 0.0]})
    s = {"pcie_busy_frac": 0.8, "swap_share_of_ttft": 0.5, "gpu_busy_frac": 0.2, "swap_rate": 0.6}
    assert [c.key for c in causes(s, ts, 0.0, 2.0)] == ["pcie"]
    assert "PCIe link 80% busy" in causes(s, ts, 0.0, 2.0)[0].message
    s2 = {**s, "pcie_busy_frac": 0.1}
    assert [c.key for c in causes(s2, ts, 0.0, 2.0)] == ["loads"]
    s3 = {"pcie_busy_frac": 0.0, "swap_share_of_ttft": 0.0, "gpu_busy_frac": 0.99}
    assert [c.key for c in causes(s3, ts, 0.0, 2.0, slots=4)] == ["slots"]
    assert [c.key for c in causes(s3, ts, 0.0, 2.0, slots=8)] == ["compute"]
    assert [c.key for c in causes({**s3, "rejections": 3}, ts, 0.0, 2.0)] == ["kv"]
    idle = ts.assign(queue_len=0.0)
    light = causes({"gpu_busy_frac": 0.99, "queue_mean_ms": 1.0, "ttft_mean_ms": 20.0}, idle, 0.0, 2.0)
    assert [c.key for c in light] == ["light"]
    mixed = causes({"gpu_busy_frac": 0.5, "queue_mean_ms": 10.0, "ttft_mean_ms": 20.0}, idle, 0.0, 2.0)
    assert [c.key for c in mixed] == ["mixed"]
