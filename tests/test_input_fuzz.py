"""Any input ends in a clean ValueError or in a result within a time and memory budget (issue 25): a
property test over every Scenario field and every construction path, the hostile families included (huge
and tiny floats, NaN/inf, wrong types, long strings, deep JSON).

Each case runs in one long-lived worker subprocess (``WORKER``) with an address-space limit; the parent
gives every case ``CASE_SECONDS`` and fails on a timeout (a hang), a crash of the worker (memory), or any
exception other than ValueError. The default suite runs a fixed sample on short scenarios; ``-m slow``
runs hypothesis over full presets."""
from __future__ import annotations

import base64
import dataclasses
import math
import os
import pickle
import random
import selectors
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Scenario
from engine.presets import SCENARIOS

ROOT = Path(__file__).resolve().parents[1]
CASE_SECONDS = 120
MEMORY_BYTES = 8 * 2**30  # address space of the worker (Numba/LLVM map more than they touch)
FIELDS = {f.name: f.type for f in dataclasses.fields(Scenario)}
PATHS = ("Scenario(...)", "from_preset", "from_dict", "replace", "from_json")

WORKER = r"""
import base64, json, pickle, resource, sys, traceback
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
from engine import Scenario, simulate_summary
for line in sys.stdin:
    path, preset, fields = pickle.loads(base64.b64decode(line))
    try:
        if path == "Scenario(...)":
            sc = Scenario(**{**Scenario.from_preset(preset).to_dict(), **fields})
        elif path == "from_preset":
            sc = Scenario.from_preset(preset, **fields)
        elif path == "from_dict":
            sc = Scenario.from_dict({**Scenario.from_preset(preset).to_dict(), **fields})
        elif path == "replace":
            sc = Scenario.from_preset(preset).replace(**fields)
        else:  # from_json: the text as given (deep JSON, junk)
            sc = Scenario.from_json(fields["text"])
        s = simulate_summary(sc)
        out = ("result", int(s["completed"]))
    except ValueError as e:
        msg = str(e)
        out = ("valueerror", msg[:300], len(msg), "\n" in msg)
    except BaseException as e:
        out = ("crash", type(e).__name__, traceback.format_exc()[-1500:])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sys.stdout.write(base64.b64encode(pickle.dumps((out, peak))).decode() + "\n")
    sys.stdout.flush()
"""


class Worker:
    def __init__(self):
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"} | {"PYTHONPATH": str(ROOT)}
        self.p = subprocess.Popen([sys.executable, "-c", WORKER, str(MEMORY_BYTES)], cwd=ROOT, env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.p.stdout, selectors.EVENT_READ)

    def run(self, path: str, preset: str, fields: dict):
        self.p.stdin.write(base64.b64encode(pickle.dumps((path, preset, fields))).decode() + "\n")
        self.p.stdin.flush()
        if not self.sel.select(timeout=CASE_SECONDS):
            self.close()
            pytest.fail(f"no answer within {CASE_SECONDS} s (a hang): {path} {preset} {_show(fields)}")
        line = self.p.stdout.readline()
        if not line:
            err = self.p.stderr.read()[-2000:]
            pytest.fail(f"the worker died (memory?): {path} {preset} {_show(fields)}\n{err}")
        return pickle.loads(base64.b64decode(line))

    def close(self):
        self.p.kill()
        self.p.wait()


def _show(fields: dict) -> str:
    return repr({k: (v if len(repr(v)) < 80 else f"<{type(v).__name__} of {len(repr(v))} chars>")
                 for k, v in fields.items()})[:600]


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


def _check(worker: Worker, path: str, preset: str, fields: dict) -> str:
    (kind, *rest), _peak = worker.run(path, preset, fields)
    assert kind != "crash", f"{path} {preset} {_show(fields)}: {rest[0]}\n{rest[1]}"
    if kind == "valueerror":
        msg, length, multiline = rest
        assert not multiline and length < 1200, (path, _show(fields), msg)  # one short line
    return kind


# ---------------------------------------------------------------- the value families

HUGE_TEXT = "x" * 1_000_000
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def _family_values(kind: str) -> list:
    common = [None, True, False, "", "fast", HUGE_TEXT, [1], {"a": 1}, math.nan, math.inf, -math.inf]
    if kind == "float":
        return common + [0.0, -1.0, 1e-300, 5e-324, 1e300, 1.7976931348623157e308, 3, 10**30]
    if kind == "int":
        return common + [0, -1, 2**63, 2**70, 1.5, 1e300, 10**9]
    if kind == "bool":
        return common + [0, 1, "true"]
    return common + [0, 1.5, "default", "\x00", "=cmd|' /C calc'!A0", "[click](https://evil.example/)"]


def _kind(name: str) -> str:
    t = str(FIELDS[name])
    return "float" if "float" in t else "int" if "int" in t and "tuple" not in t else "bool" if "bool" in t else "str"


#: short base scenarios for the default sample (the values under test decide the run's size)
FAST = {"duration_s": 10.0, "warmup_s": 1.0, "drain_s": 10.0}


def _sample(n: int, seed: int = 7) -> list[tuple[str, str, dict]]:
    rng = random.Random(seed)
    names = sorted(FIELDS)
    cases = []
    for i in range(n):
        name = names[i % len(names)]
        value = rng.choice(_family_values(_kind(name)))
        path = PATHS[i % 4]
        fields = {**FAST, name: value}
        cases.append((path, "default", fields))
    cases.append(("from_json", "default", {"text": DEEP_JSON}))
    cases.append(("from_json", "default", {"text": '{"gpu": "' + "a" * 5_000_000 + '"}'}))
    cases.append(("from_json", "default", {"text": "\ufeff{]"}))
    # the reproducers of the issue, once more end to end
    cases.append(("from_dict", "default", {"arrival_process": "closed", "load_latency_ms": 1e300,
                                           "strategy": "batch"}))
    cases.append(("from_preset", "slora-a10g-s1", {"load_latency_ms": 1e20}))
    cases.append(("from_preset", "default", {"arrival_process": "gamma", "arrival_cv": 1e6}))
    cases.append(("from_preset", "default", {"duration_s": 0.3, "warmup_s": 0.0, "drain_s": 86400.0,
                                             "arrival_rate_rps": 3000.0, "max_batch_size": 1,
                                             "step_overhead_ms": 1000.0}))
    return cases


SAMPLE = _sample(2 * len(FIELDS))


def test_the_sample_covers_every_field_and_path():
    named = {k for _, _, f in SAMPLE for k in f}
    assert set(FIELDS) <= named and {p for p, _, _ in SAMPLE} == set(PATHS)


def test_a_fixed_sample_ends_in_a_valueerror_or_a_result(worker):
    kinds = [_check(worker, *case) for case in SAMPLE]
    assert kinds.count("valueerror") > len(kinds) // 3 and "result" in kinds


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(preset=st.sampled_from(sorted(SCENARIOS)), path=st.sampled_from(PATHS[:4]),
       data=st.data())
def test_any_input_ends_in_a_valueerror_or_a_bounded_result(worker, preset, path, data):
    names = data.draw(st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=3, unique=True))
    fields = {}
    for name in names:
        fields[name] = data.draw(st.one_of(
            st.sampled_from(_family_values(_kind(name))),
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(-10**20, 10**20),
            st.text(max_size=20)))
    _check(worker, path, preset, fields)
