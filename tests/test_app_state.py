"""The dashboard's state without hidden changes, its links and its exports (pure: no running app).

* No control is clamped by another: the hot-set size keeps the user's value whatever the VRAM budget; the run
  pins what fits and says so.  The VRAM caption states adapters, KV and concurrent requests (engine.planner).
* The share link is short (only what differs from the preset) and reproduces the scenario.
* The summary CSV carries the scenario's fields; scenario.json carries the compared strategies and replications
  and reads back (older plain files too).
* The Findings and Model pages' sections, table of contents and the claims' What-if links.
"""
from __future__ import annotations

import io
import json
from urllib.parse import parse_qs

import pandas as pd
import pytest

from app import controls, exports, page_findings, page_whatif  # page_whatif registers its wi_ parameters
from engine import Scenario, simulate
from engine.planner import memory_split


def strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if not k.startswith("_")}


def query_dict(q: str) -> dict:
    return {k: (v if k == controls.STRATEGY_KEY else v[-1]) for k, v in parse_qs(q).items()}


# ------------------------------------------------------------------ no silent clamping
def test_hot_set_size_is_not_clamped_by_the_budget():
    base, issues = controls.resolve({"preset": "a100-light"})  # 64 rank-16 adapters fit in 2 GiB, 48 pinned
    assert not issues and base["hot_set_k"] == 48
    low, issues = controls.resolve({"preset": "a100-light", "vram_budget_gb": 1.0})
    assert not issues and low["hot_set_k"] == 48, "the control keeps the user's value"
    assert "hot_set_k" not in controls.url_params(low), "no silent URL change"
    # the run pins what fits (32 slots of 32 MiB, one kept for swaps) and says so
    sc, notes = controls.build_scenario(low)
    assert sc.hot_set_k == 31
    assert len(notes) == 1 and "48" in notes[0] and "31" in notes[0] and "hot_set" in notes[0]
    sc.replace(strategy="hot_set").validate()
    # raising the budget again: the same scenario as never lowering it
    back, _ = controls.resolve({**{k: v for k, v in strip(low).items()}, "vram_budget_gb": 2.0})
    assert controls.build_scenario(back)[0] == controls.build_scenario(base)[0]
    assert controls.build_scenario(back)[0].hot_set_k == 48


def test_fit_hot_set_notes_only_for_strategies_that_pin():
    sc = Scenario.from_preset("a100-light", vram_budget_gb=1.0)
    fitted, note = controls.fit_hot_set(sc, ["naive", "batch"])
    assert fitted.hot_set_k == 31 and note is None
    assert controls.fit_hot_set(Scenario.from_preset("a100-light"), ["hot_set"]) == (
        Scenario.from_preset("a100-light"), None)
    auto = Scenario.from_preset("a100-light", vram_budget_gb=1.0, hot_set_k=-1)
    assert controls.fit_hot_set(auto, ["hot_set"]) == (auto, None)  # -1: all that fit, nothing to say


@pytest.mark.parametrize("kw", [dict(), dict(vram_budget_gb=1.0), dict(max_loras=10), dict(num_adapters=20),
                                dict(gpu="rtx3090", vram_budget_gb=0.5)])
def test_hot_set_limit_is_what_the_engine_accepts(kw):
    sc = Scenario.from_preset("default", strategy="hot_set", **kw)
    k = controls.hot_set_limit(sc)
    sc.replace(hot_set_k=k).validate()
    with pytest.raises(ValueError, match="hot_set_k"):
        sc.replace(hot_set_k=k + 1).validate()


def test_vram_caption_states_adapters_kv_and_requests():
    for query in [{}, {"vram_budget_gb": 8.0}, {"gpu": "rtx3090", "model": "llama-7b", "vram_budget_gb": 1.0},
                  {"preset": "seed3-llama31-8b-80gb"}]:
        values, _ = controls.resolve(query)
        c = controls.BY_KEY["vram_budget_gb"]
        note = c.note(values, values["vram_budget_gb"])
        sc = controls.build_scenario(values)[0]
        m = memory_split(sc)
        assert f"{sc.max_vram_budget_gb():.2f} GiB" in note
        what = f"{sc.max_loras} slots" if sc.strategy == "vllm" and sc.max_loras > 0 else f"{m['adapters_fit']} adapters"
        assert what in note, (note, what)
        assert f"{m['kv_gib']:.1f} GiB of KV" in note
        assert f"{m['kv_concurrent_requests']:,} requests" in note


def test_hot_set_note_says_what_the_run_pins():
    values, _ = controls.resolve({"preset": "a100-light", "vram_budget_gb": 1.0})
    note = controls.BY_KEY["hot_set_k"].note(values, 48)
    assert "31" in note and "48" in note and "stays set" in note
    assert "31" in controls.BY_KEY["hot_set_k"].note(values, -1)


# ------------------------------------------------------------------ share link
def test_share_query_is_short_and_round_trips():
    assert controls.share_query(controls.resolve({})[0]) == ""
    # a GPU other than the default's (an H100 80 GB since issue 24), so that the link has to carry it
    values, _ = controls.resolve({"gpu": "a100-80gb", "zipf_s": 1.3, "strategy": ["batch", "slora"],
                                  "arrival_process": "gamma", "arrival_cv": 2.0, "duration_s": 60.0})
    assert values["gpu"] != controls.resolve({})[0]["gpu"]
    q = query_dict(controls.share_query(values))
    # pcie_gbps follows the GPU (and the server profile's batch limits too): not carried; only what differs
    # from the preset
    assert set(q) == {"gpu", "zipf_s", "strategy", "arrival_process", "arrival_cv", "duration_s"}
    back, issues = controls.resolve(q)
    assert not issues and strip(back) == strip(values)
    assert controls.build_scenario(back) == controls.build_scenario(values)


def test_share_query_of_another_preset_names_it_and_its_differences_only():
    values, _ = controls.resolve({"preset": "seed1-rtx3090", "arrival_rate_rps": 4.0})
    q = query_dict(controls.share_query(values))
    assert q == {"preset": "seed1-rtx3090", "arrival_rate_rps": "4"}
    assert strip(controls.resolve(q)[0]) == strip(values)


def test_share_query_baseline_and_page_parameters():
    values, _ = controls.resolve({"strategy": ["naive", "batch"]})
    assert "baseline" not in query_dict(controls.share_query({**values, "baseline": "naive"}))  # the default one
    q = query_dict(controls.share_query({**values, "baseline": "batch"}, page_params={"wi_reps": ["5"]}))
    assert q["baseline"] == "batch" and q["wi_reps"] == "5"
    clean, issues = controls.sanitize_query(parse_qs(controls.share_query({**values, "baseline": "batch"},
                                                                          page_params={"wi_reps": ["5"]})))
    assert not issues and clean["wi_reps"] == "5" and clean["baseline"] == "batch"


# ------------------------------------------------------------------ exports
@pytest.fixture(scope="module")
def runs():
    sc = Scenario.from_preset("default", duration_s=60.0, warmup_s=5.0, zipf_s=1.3)
    return sc, {s: simulate(sc.replace(strategy=s)).summary for s in ["naive", "batch"]}


def test_summary_csv_carries_the_scenario(runs):
    sc, summaries = runs
    df = pd.read_csv(io.BytesIO(exports.summary_csv(summaries, sc)))
    assert list(df["strategy"]) == ["naive", "batch"]
    assert list(df.columns[:1 + len(summaries["naive"])]) == ["strategy", *summaries["naive"]]
    for k, v in sc.to_dict().items():
        if k == "strategy":
            continue
        assert k in df.columns, k
        cell = df[k].iloc[0]
        if isinstance(v, (list, dict)):
            assert json.loads(cell) == v
        elif isinstance(v, bool):
            assert bool(cell) == v
        elif isinstance(v, (int, float)):
            assert cell == pytest.approx(v), k
        elif v == "":
            assert pd.isna(cell), k  # an empty text field is an empty cell
        else:
            assert cell == v, k
    assert df["ttft_p50_ms"].tolist() == pytest.approx([m["ttft_p50_ms"] for m in summaries.values()])
    # without a scenario: the metrics only (as before)
    assert list(pd.read_csv(io.BytesIO(exports.summary_csv(summaries))).columns) == ["strategy", *summaries["naive"]]


def test_scenario_json_round_trips_strategies_and_replications():
    sc = Scenario.from_preset("default", zipf_s=1.4, strategy="batch")
    text = exports.scenario_json(sc, ["naive", "batch", "slora"], 5).decode()
    d = json.loads(text)
    assert d["strategies"] == ["naive", "batch", "slora"] and d["replications"] == 5 and d["strategy"] == "batch"
    assert exports.read_scenario_json(text) == (sc, ["naive", "batch", "slora"], 5)
    # an older (or the engine CLI's) plain scenario.json still reads
    assert exports.read_scenario_json(sc.to_json()) == (sc, None, None)
    assert exports.scenario_json(sc).decode().strip() == sc.to_json()


@pytest.mark.parametrize("extra, match", [
    ({"strategies": "naive,batch"}, None), ({"strategies": [1, 2]}, "strategies"),
    ({"replications": 2.5}, "replications"), ({"replications": "3"}, "replications"),
    ({"replications": True}, "replications"), ({"warp": 1}, "warp"),
])
def test_scenario_json_reader_names_bad_keys(extra, match):
    d = {**Scenario.from_preset("default").to_dict(), **extra}
    if match is None:  # a single name is accepted as a list of one
        assert exports.read_scenario_json(json.dumps(d))[1] == ["naive,batch"]
        return
    with pytest.raises(ValueError, match=match):
        exports.read_scenario_json(json.dumps(d))
    with pytest.raises(ValueError, match="not valid JSON"):
        exports.read_scenario_json("{nope")


def test_replications_param_is_the_whatif_pages():
    assert controls.REPLICATIONS_PARAM == page_whatif.K_REPS


# ------------------------------------------------------------------ findings and model documents
DOC = """Intro line.

## First part

Text.

```
## not a heading (code)
```

### A `code_name` sub part

More.

## First part

Again.
"""


def test_doc_sections_and_contents():
    intro, secs = page_findings.doc_sections(DOC)
    assert intro == "Intro line."
    assert [(s.level, s.title, s.anchor) for s in secs] == [
        (2, "First part", "first-part"), (3, "A `code_name` sub part", "a-code-name-sub-part"),
        (2, "First part", "first-part-2")]
    assert "## not a heading" in secs[0].body
    toc = page_findings.toc_markdown(secs)
    assert toc.splitlines() == ["- [First part](#first-part)", "  - [A code_name sub part](#a-code-name-sub-part)",
                                "- [First part](#first-part-2)"]


REPORT = """# Findings

* Seed 1 (the simulator): preset `seed1-rtx3090`: RTX 3090.
* Seed 2 (the benchmark): presets `kv-<model>-<workload>`: A10G.

## Claims in detail

### S1-1 (seed 1): Batch cuts TTFT at 64 req/s.

* Conditions: preset, 64 req/s, output 32, window 50 ms

| view | ours (mean [95% CI]) | verdict | reason |
|---|---|---|---|
| preset | batch vs naive 14.7% (naive 64.8 ms, batch 74.2 ms) | **does not hold** | x |

### K-2 (seed 2): For Qwen2-0.5B multi-adapter serving costs no throughput.

* Conditions: kv-qwen2-0.5b presets at heavy load, both workloads

| view | ours | verdict | reason |
|---|---|---|---|
| preset | throughput vs single_adapter: heavy round_robin_k1: -96.0% | **does not hold** | x |
"""


def test_claims_link_their_scenario_on_whatif():
    seeds = page_findings.seed_presets(REPORT)
    assert seeds["1"] == ["seed1-rtx3090"]
    assert seeds["2"] == [p for p in ["kv-qwen2-0.5b-heavy", "kv-qwen2-0.5b-heavy_mixed", "kv-qwen2-1.5b-heavy",
                                      "kv-qwen2-1.5b-heavy_mixed"]]
    _, secs = page_findings.doc_sections(page_findings.split_title(REPORT)[1])
    s1, k2 = secs[1], secs[2]
    (preset, values, strategies), = page_findings.claim_scenarios(s1, seeds)
    assert preset == "seed1-rtx3090" and strategies == ["naive", "batch"]
    assert values == {"arrival_rate_rps": "64", "output_tokens": "32", "batch_window_ms": "50"}
    q = query_dict(page_findings.whatif_query(preset, values, strategies))
    # 64 req/s is the preset's own rate: not in the (short) link
    assert q == {"preset": "seed1-rtx3090", "strategy": ["naive", "batch"], "output_tokens": "32",
                 "batch_window_ms": "50"}
    v, issues = controls.resolve(q)
    assert not issues and v["arrival_rate_rps"] == 64.0 and v["output_tokens"] == 32
    items = page_findings.claim_scenarios(k2, seeds)
    assert [p for p, *_ in items] == ["kv-qwen2-0.5b-heavy", "kv-qwen2-0.5b-heavy_mixed"]
    assert items[0][2] == ["single_adapter", "round_robin_k1"]
    md = page_findings.links_markdown(items)
    assert md.count("](whatif?preset=kv-qwen2-0.5b-heavy") == 2 and "comparing single_adapter, round_robin_k1" in md
    assert page_findings.claim_scenarios(secs[0], seeds) == []  # not a claim


def test_every_claim_of_the_report_links_a_valid_scenario():
    if not page_findings.FINDINGS_MD.is_file():
        pytest.skip("docs/findings.md not generated")
    text = page_findings.FINDINGS_MD.read_text(encoding="utf-8")
    seeds = page_findings.seed_presets(text)
    assert {"1", "2", "3"} <= set(seeds)
    _, secs = page_findings.doc_sections(page_findings.split_title(text)[1])
    claims = [s for s in secs if page_findings._CLAIM.match(page_findings.plain(s.title))]
    assert len(claims) >= 10
    for s in claims:
        items = page_findings.claim_scenarios(s, seeds)
        assert items, s.title
        for preset, values, strategies in items:
            clean, issues = controls.sanitize_query(parse_qs(page_findings.whatif_query(preset, values, strategies)))
            assert not issues, (s.title, issues)
            v, _ = controls.resolve(clean)
            assert v["preset"] == preset and v["strategy"] == strategies, s.title
            controls.build_scenario(v)  # the engine accepts it
