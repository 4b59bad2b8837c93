"""The What-if page's replications until the verdict is decided (issue 26 item 2): ``page_whatif.run_until_decided``
looks after 2, 3, ... replications with ``engine.decide`` (a rule that keeps its error rate over the looks) and
stops at the first decided look or at the cap; the URL toggle ``wi_auto``; the banner never claims a win the
sequential rule has not reached."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import kpi_tables
from streamlit.testing.v1 import AppTest

from app import controls, page_whatif, runner
from engine import Scenario

MAIN = str(Path(__file__).resolve().parent.parent / "app" / "main.py")


def _fake_runs(monkeypatch, table: dict[str, list[float]]):
    """run_replications returning ``table[s][k]`` as the objective of replication k (nothing read from the caches);
    records each call's (first, n)."""
    calls = []

    def fake(sc, strategies, n, trace=None, first=0):
        calls.append((first, n))
        reps = {s: [{"ttft_p99_ms": table[s][k], "requests": 100, "not_completed": 0} for k in range(first, n)]
                for s in strategies}
        return ({s: {"summary": r[0]} for s, r in reps.items()} if first == 0 else {}), reps, {}
    monkeypatch.setattr(page_whatif.runner, "run_replications", fake)
    monkeypatch.setattr(page_whatif.runner, "cached_replications", lambda *a, **k: None)  # (every look: a run)
    return calls


def test_a_clear_winner_stops_early_and_a_close_call_runs_to_the_cap(monkeypatch):
    sc = Scenario.from_preset("default")
    # naive always 10x slower, tightly: decided after few looks
    clear = {"naive": [1000.0 + k for k in range(8)], "slora": [100.0 + 0.1 * k for k in range(8)]}
    calls = _fake_runs(monkeypatch, clear)
    *_, d = page_whatif.run_until_decided(sc, ["naive", "slora"], 8, "ttft_p99_ms")
    # each look runs only its new replication: (0, 2), then (2, 3), (3, 4), ...
    assert d.status == "win" and d.leader == "slora" and calls[-1][1] < 8
    assert calls == [(0, 2)] + [(k - 1, k) for k in range(3, calls[-1][1] + 1)]
    # noisy and equal in the mean: no decision before the cap
    noisy = {"naive": [100, 140, 90, 150, 95, 130, 105, 120], "batch": [130, 95, 140, 100, 135, 98, 125, 110]}
    calls = _fake_runs(monkeypatch, {k: [float(x) for x in v] for k, v in noisy.items()})
    _, reps, _, d = page_whatif.run_until_decided(sc, ["naive", "batch"], 5, "ttft_p99_ms")
    assert calls == [(0, 2), (2, 3), (3, 4), (4, 5)] and d.status == "undecided" and d.capped
    assert [r["ttft_p99_ms"] for r in reps["naive"]] == noisy["naive"][:5]  # the looks' replications, in order


def test_one_contender_runs_the_cap_and_bounds_are_left_out(monkeypatch):
    sc = Scenario.from_preset("default")
    calls = _fake_runs(monkeypatch, {"vllm": [1.0] * 5, "oracle": [0.5] * 5})
    *_, d = page_whatif.run_until_decided(sc, ["vllm", "oracle"], 4, "ttft_p99_ms")  # oracle: a bound
    assert d is None and calls == [(0, 2), (2, 4)]


@pytest.mark.parametrize("raw, want, issue", [("false", False, False), ("true", True, False), ("maybe", None, True)])
def test_the_url_toggle_is_sanitized(raw, want, issue):
    clean, issues = page_whatif.sanitize_query({page_whatif.K_AUTO: [raw]})
    assert clean.get(page_whatif.K_AUTO) is want or (want is None and page_whatif.K_AUTO not in clean)
    assert bool(issues) == issue and (not issue or "wi_auto" in issues[0].message)


@pytest.fixture(scope="module")
def warm():
    runner.compile_kernels()


def test_the_page_says_how_many_replications_it_took_and_why(warm):
    at = AppTest.from_file(MAIN, default_timeout=180)
    at.query_params["duration_s"] = "60"
    at.query_params["wi_reps"] = "4"
    at.query_params["wi_auto"] = "true"
    at.run()
    assert not at.exception and not at.error
    (cap,) = [c.value for c in at.caption if "until decided, at most 4" in c.value]
    n = int(cap.split(" replication")[0])
    assert 2 <= n <= 4 and len(kpi_tables(at)[0]) == len(controls.DEFAULT_STRATEGIES)
    off = AppTest.from_file(MAIN, default_timeout=180)
    for k, v in {"duration_s": "60", "wi_reps": "2"}.items():  # off: the default
        off.query_params[k] = v
    off.run()
    assert not off.exception and not [c for c in off.caption if "until decided" in c.value]
    assert off.toggle(key=page_whatif.K_AUTO).value is False


def test_the_banner_never_claims_a_win_the_sequential_rule_has_not_reached():
    from engine import decide
    # at 3 replications the plain paired 95 % CI excludes zero (lead 100 +- 99), the rule's wider one does not
    reps = {"naive": [{"ttft_p99_ms": v, "requests": 100, "not_completed": 0} for v in (200.0, 160.0, 240.0)],
            "slora": [{"ttft_p99_ms": v, "requests": 100, "not_completed": 0} for v in (100.0, 100.0, 100.0)]}
    text, kind = page_whatif.verdict(reps, "ttft_p99_ms")
    assert kind == "win"
    d = decide(page_whatif.sequential_values(reps, "ttft_p99_ms"), False, max_reps=3)
    assert d.status == "undecided"
    t2, k2 = page_whatif.sequential_banner(text, kind, d)
    assert k2 == "tie" and t2.startswith("No verdict yet") and text in t2
    assert page_whatif.sequential_banner(text, kind, None) == (text, kind)  # a fixed count: the plain verdict
