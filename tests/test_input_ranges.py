"""Every Scenario field has a range, checked on every construction path (issue 25 item 1), and the
reproducers of the hangs and runaway runs that unbounded fields allowed (issue 25, "one upload stops the
dashboard for everybody"): each now ends in a one-line ValueError naming the field, the value (at most
``MAX_QUOTE`` characters of it) and the range, or in a result within a time budget."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Scenario
from engine.limits import FLOAT_RANGES, MAX_DRAIN_RATIO, MAX_QUOTE, short_repr

ROOT = Path(__file__).resolve().parents[1]
BASE = Scenario.from_preset("default")
PATHS = {
    "Scenario(...)": lambda **kw: Scenario(**{**{f: getattr(BASE, f) for f in BASE.to_dict()
                                                 if f in Scenario.__dataclass_fields__}, **kw}),
    "from_preset": lambda **kw: Scenario.from_preset("default", **kw),
    "from_dict": lambda **kw: Scenario.from_dict({**BASE.to_dict(), **kw}),
    "replace": lambda **kw: BASE.replace(**kw),
}


def _outside(name: str) -> list:
    lo, lo_open, hi, _ = FLOAT_RANGES[name]
    vals = [hi * 1.5 + 1, math.nan, math.inf, -math.inf, 1e300, True, "fast"]
    vals += [lo] if lo_open else [lo - max(abs(lo) * 0.5, 1e-3)]
    if lo > 0:
        vals.append(1e-300)
    return vals


CASES = [(n, v) for n in FLOAT_RANGES for v in _outside(n)]


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("name,value", CASES, ids=[f"{n}={v!r}" for n, v in CASES])
def test_a_float_outside_its_range_is_refused_on_every_path(path, name, value):
    if path == "from_dict" and isinstance(value, str):
        value = "fast"  # from_dict coerces strings: a non-number string is refused by its coercion
    with pytest.raises(ValueError, match=rf"^{name}: ") as e:
        PATHS[path](**{name: value})
    assert "\n" not in str(e.value) and len(str(e.value)) < 600


@pytest.mark.parametrize("name", list(FLOAT_RANGES))
def test_the_ends_of_each_range_are_accepted_alone(name):
    lo, lo_open, hi, _ = FLOAT_RANGES[name]
    for v in ([hi] + ([] if lo_open else [lo])):
        try:
            Scenario.from_preset("default", **{name: v})
        except ValueError as e:  # only a rule relating fields may refuse an end (e.g. warmup_s < duration_s)
            assert not str(e).startswith(f"{name}: invalid value {v!r}; allowed: a number in"), e


@pytest.mark.parametrize("name,value", [("max_batch_size", True), ("num_adapters", False), ("seed", 1.0),
                                        ("host_warm", 1), ("gpu", ["a100-80gb"]), ("adapter_ranks", (8, True)),
                                        ("num_replicas", True), ("concurrency", "8")])
def test_wrong_types_are_refused_when_built(name, value):
    with pytest.raises(ValueError, match=rf"^{name}: invalid value"):
        PATHS["Scenario(...)"](**{name: value})


def test_error_lines_quote_at_most_a_bounded_piece_of_the_value():
    huge = "x" * 52_000_000
    with pytest.raises(ValueError, match="^gpu: invalid value 'xxx") as e:
        PATHS["Scenario(...)"](gpu=huge).validate()
    assert len(str(e.value).split("; allowed")[0]) <= MAX_QUOTE + 60
    assert len(short_repr(huge)) <= MAX_QUOTE + 40 and short_repr("ab") == "'ab'"
    assert short_repr(list(range(10**5))).endswith("characters)")


def test_drain_is_bounded_by_the_duration():
    with pytest.raises(ValueError, match="^drain_s: .*at most 1000 x duration_s"):
        Scenario.from_preset("default", duration_s=0.3, warmup_s=0.0, drain_s=86400.0).validate()
    Scenario.from_preset("default", duration_s=1.0, warmup_s=0.0, drain_s=float(MAX_DRAIN_RATIO)).validate()


# ---------------------------------------------------------------- the reproducers of issue 25


@pytest.mark.parametrize("build", [
    lambda: Scenario.from_dict({**BASE.to_dict(), "arrival_process": "closed", "load_latency_ms": 1e300}),
    lambda: Scenario.from_preset("slora-a10g-s1", load_latency_ms=1e20),
    lambda: Scenario.from_preset("default", arrival_process="gamma", arrival_cv=1e6),
    lambda: Scenario.from_preset("default", arrival_process="gamma", arrival_cv=1e-170),
    lambda: Scenario.from_preset("default", pcie_gbps=1e-300),
    lambda: Scenario.from_preset("default", compute_eff=1e-300),
    lambda: Scenario.from_preset("default", duration_s=1e-300),
    lambda: Scenario.from_preset("default", max_batch_size=True),
], ids=["closed-load-1e300", "slora-load-1e20", "cv-1e6", "cv-1e-170", "pcie-1e-300", "eff-1e-300",
        "duration-1e-300", "bool-batch"])
def test_the_reported_runaway_inputs_are_refused(build):
    with pytest.raises(ValueError):
        build()


#: Runs in a subprocess (a regression would hang the test process otherwise).
_ACCUM = textwrap.dedent("""
    import numpy as np
    from engine import loop as L
    ts = np.zeros((10, L.TS_LEN))
    L.accum(ts, 0.5, 10, 1e300, 2e300, 0, 1.0)       # once: int(t0 / bucket) overflowed, a 9e18-step loop
    L.accum_row(ts, 0.5, 10, 1e297, 1e298, np.ones(L.TS_LEN))
    L.accum(ts, 0.5, 10, 4.9, 5.2, 0, 1.0)           # the last bucket [4.5, 5): 0.1 of it
    print(json.dumps([float(ts.sum()), float(ts[9, 0])]))
""")


def test_time_accounting_past_the_horizon_returns_at_once():
    r = subprocess.run([sys.executable, "-c", "import json\n" + _ACCUM], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    total, last = json.loads(r.stdout.strip().splitlines()[-1])
    assert total == pytest.approx(0.1) and last == pytest.approx(0.1)


_LONGEST = textwrap.dedent("""
    import time
    from engine import Scenario, simulate
    sc = Scenario.from_dict({**Scenario.from_preset("default").to_dict(), "arrival_process": "closed",
                             "load_latency_ms": 3.6e6, "strategy": "naive", "duration_s": 60.0, "warmup_s": 5.0})
    t = time.time()
    s = simulate(sc).summary
    print(s["completed"], time.time() - t)
""")


def test_the_longest_allowed_load_latency_ends():
    """The largest load latency the range allows (an hour): the closed loop ends at its horizon with
    nothing completed (every request waits for a load that outlasts the run), not in a hang."""
    r = subprocess.run([sys.executable, "-c", _LONGEST], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    completed, _ = r.stdout.split()
    assert int(float(completed)) == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(FLOAT_RANGES)),
       value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30),
                       st.booleans(), st.text(max_size=5), st.none()))
def test_any_value_is_accepted_in_range_or_refused_naming_the_field(name, value):
    lo, lo_open, hi, _ = FLOAT_RANGES[name]
    inside = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
              and (value > lo or (value == lo and not lo_open)) and value <= hi)
    try:
        PATHS["Scenario(...)"](**{name: value})
    except ValueError as e:
        assert str(e).startswith(f"{name}: invalid value") and not inside, (name, value, e)
    else:
        assert inside, (name, value)


def test_fitting_never_leaves_the_ranges():
    from engine.calibration.fitting import FIT_BOUNDS
    for p, (lo, hi) in FIT_BOUNDS.items():
        if p in FLOAT_RANGES:
            flo, lo_open, fhi, _ = FLOAT_RANGES[p]
            assert (lo > flo or (lo == flo and not lo_open)) and hi <= fhi, p


def test_work_per_run_is_bounded_in_tokens():
    from engine.limits import MAX_RUN_TOKENS
    sc = Scenario.from_preset("default", arrival_rate_rps=10_000.0, duration_s=100.0, warmup_s=0.0,
                              prompt_tokens=100_000, output_tokens=100_000, max_batched_tokens=1 << 20)
    with pytest.raises(ValueError, match=r"^arrival_rate_rps: .*more work than one run may ask for"):
        sc.validate()
    assert MAX_RUN_TOKENS >= 1_000_000 * 300  # the 1M-request benchmark stays allowed


def test_the_arrival_generator_is_guarded(monkeypatch):
    import numpy as np

    from engine import workload
    monkeypatch.setattr(workload, "MAX_ARRIVAL_CHUNKS", 1)
    sc = Scenario.from_preset("default", arrival_process="gamma", arrival_cv=10.0, arrival_rate_rps=0.01,
                              duration_s=10.0, warmup_s=0.0)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(50):  # some draw needs a second chunk at cv 10; the guard then refuses it cleanly
        try:
            out.append(len(workload.draw_arrivals(sc, rng)))
        except ValueError as e:
            assert str(e).startswith("arrival_cv: invalid value 10.0")
            return
    pytest.fail(f"no draw needed a second chunk: {out}")


# ---------------------------------------------------------------- the step budget (a guard in the jitted loop)


@pytest.mark.parametrize("replicas", [1, 3])
def test_a_run_past_its_step_budget_stops_with_a_clear_error(monkeypatch, replicas):
    from engine import sim, simulate
    sc = Scenario.from_preset("default", duration_s=20.0, warmup_s=1.0, num_replicas=replicas,
                              arrival_rate_rps=16.0 * replicas)
    steps = simulate(sc).summary["steps"]  # every replica's steps, summed
    assert steps > 50
    monkeypatch.setattr(sim, "step_budget", lambda n, s: 50)
    with pytest.raises(ValueError, match=r"^stopped: budget reached; the run took more than 50 scheduler steps"):
        simulate(sc)


def test_real_runs_stay_far_below_the_step_budget():
    from engine import sim
    from engine.loop import SI_STEPS
    for preset in ("default", "vllm-llama31-8b", "slora-a10g-s1"):
        sc = Scenario.from_preset(preset).replace(duration_s=30.0, warmup_s=2.0).validate()
        wl = sim.generate(sc)
        arr = sim._run(sc, wl)
        assert 0 < arr["S_i"][SI_STEPS] < sim.step_budget(len(wl), sc) / 8, preset
