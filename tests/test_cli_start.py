"""A CLI that says where to start (issue 23 item 4): ``python -m engine --help`` ends with three worked
examples (a what-if, a plan, a calibration), each a real command; ``presets`` prints a table of the scenario
presets (description, calibration status, the default marked), GPUs, models and strategies, and ``--json``
the same for machines."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from engine import Scenario, presets
from engine.calibration import calibration_status, is_tool_file
from engine.cli import build_parser, main
from engine.policies import STRATEGIES

ROOT = Path(__file__).resolve().parents[1]
STATUSES = ("calibrated", "transferred", "modified", "uncalibrated")


def _examples(help_text: str) -> list[tuple[str, str]]:
    """(comment, command) pairs of the "Start here" epilog, read back from the help text."""
    assert "Start here" in help_text, help_text
    lines = [ln for ln in help_text[help_text.index("Start here"):].splitlines()[1:] if ln.strip()]
    assert len(lines) % 2 == 0, lines
    pairs = []
    for comment, cmd in zip(lines[::2], lines[1::2]):
        assert comment.startswith("  # "), comment
        assert cmd.startswith("  python -m engine "), cmd
        pairs.append((comment[4:], cmd.strip()))
    return pairs


@pytest.fixture(scope="module")
def help_text() -> str:
    return build_parser().format_help()


def test_help_ends_with_three_examples(help_text):
    ex = _examples(help_text)
    assert [c.split(":")[0] for c, _ in ex] == ["what-if", "plan", "calibrate"], ex
    assert help_text.rstrip().endswith(ex[-1][1]), "the help must end with the examples"
    for comment, _ in ex:
        assert len(comment) > 20 and "\n" not in comment


def test_examples_are_real_commands(help_text):
    """Each example parses with the real parser, names existing presets and (calibrate) an existing result file,
    relative to the repository root."""
    parser = build_parser()
    for (_, cmd), name in zip(_examples(help_text), ("run", "plan", "calibrate")):
        argv = shlex.split(cmd)
        assert argv[:3] == ["python", "-m", "engine"], cmd
        a = parser.parse_args(argv[3:])  # a bad flag exits (SystemExit 2) and fails the test
        assert a.cmd == name and callable(a.func), cmd
        assert a.preset in presets.SCENARIOS, cmd
        if name == "calibrate":
            for f in a.data:
                assert (ROOT / f).is_file(), f"{f} (named in --help) does not exist in the repository"
                assert is_tool_file(ROOT / f), f"{f} is not a benchmark tool result file"
        if name == "plan":
            assert a.slo and a.grid, cmd


def test_what_if_example_runs(help_text, capsys):
    cmd = _examples(help_text)[0][1]
    assert main(shlex.split(cmd)[3:]) == 0
    out = capsys.readouterr().out
    assert "ttft_p99_ms" in out and "throughput_tok_s" in out, out


def test_description_says_more_than_one_gpu():
    d = build_parser().description
    assert "fleet" in d and "router" in d, d
    assert "plan" in d and "calibrate" in d, d
    assert not d.rstrip().endswith("on one GPU."), d


def test_every_preset_has_a_one_line_description():
    missing = sorted(set(presets.SCENARIOS) - set(presets.DESCRIPTIONS))
    assert not missing, f"scenario presets without a DESCRIPTIONS entry (engine/presets/scenarios.py): {missing}"
    extra = sorted(set(presets.DESCRIPTIONS) - set(presets.SCENARIOS))
    assert not extra, f"DESCRIPTIONS of no preset: {extra}"
    for name, d in presets.DESCRIPTIONS.items():
        assert d and d == d.strip() and "\n" not in d and "  " not in d, (name, d)
        assert len(d) <= 100, f"{name}: {len(d)} characters; one line is at most 100"


def _presets_table(out: str) -> list[tuple[str, str, str, str]]:
    """(mark, name, status, description) rows of ``presets``' scenario table; wrapped descriptions joined."""
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("NAME") and "STATUS" in ln)
    col = lines[head].index("DESCRIPTION")
    rows: list[list[str]] = []
    for ln in lines[head + 1:]:
        if not ln.strip():
            break
        m = re.match(r"^([* ]) (\S+)\s+(" + "|".join(STATUSES) + r")\s+(.*)$", ln)
        if m and ln[col - 1] == " ":
            rows.append(list(m.groups()))
        elif rows and ln[:col].strip() == "" and len(ln) > col:
            rows[-1][3] += " " + ln[col:].strip()
        else:  # the legend under the table
            break
    return [tuple(r) for r in rows]


@pytest.fixture(scope="module")
def presets_out() -> str:
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["presets"]) == 0
    return buf.getvalue()


def test_presets_table(presets_out):
    rows = _presets_table(presets_out)
    assert [r[1] for r in rows] == list(presets.SCENARIOS), "every scenario preset, in order"
    for _, name, status, desc in rows:
        assert desc == presets.DESCRIPTIONS[name], (name, desc)
        assert status == calibration_status(Scenario.from_preset(name)).kind, name
    marked = [r[1] for r in rows if r[0] == "*"]
    run_default = build_parser().parse_args(["run"]).preset
    assert marked == [run_default] == ["default"], marked
    kinds = {r[2] for r in rows}
    assert {"calibrated", "transferred", "uncalibrated"} <= kinds, kinds
    for ln in presets_out.splitlines():
        assert len(ln) <= 100, f"wider than 100 columns: {ln!r}"


def test_presets_lists_gpus_models_strategies(presets_out):
    starts = {ln.split()[0] for ln in presets_out.splitlines() if ln.startswith("  ") and ln.strip()}
    for names in (presets.GPUS, presets.MODELS, STRATEGIES):
        assert set(names) <= starts, sorted(set(names) - starts)
    for g in presets.GPUS.values():
        assert re.search(rf"^  {re.escape(g.name)}\s+{g.memory_gib:g} GiB\s+{re.escape(g.label)}$", presets_out,
                         re.M), g.name


def test_presets_json(presets_out, capsys):
    assert main(["presets", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["default_preset"] == "default"
    table = {name: (mark, status, desc) for mark, name, status, desc in _presets_table(presets_out)}
    assert [s["name"] for s in doc["scenarios"]] == list(table)
    for s in doc["scenarios"]:
        mark, status, desc = table[s["name"]]
        assert (s["status"], s["description"], s["default"]) == (status, desc, mark == "*"), s
        assert s["status_preset"] is None or s["status_preset"] in presets.SCENARIOS, s
    assert sum(s["default"] for s in doc["scenarios"]) == 1
    assert [g["name"] for g in doc["gpus"]] == list(presets.GPUS)
    assert [m["name"] for m in doc["models"]] == list(presets.MODELS)
    assert [s["name"] for s in doc["strategies"]] == list(STRATEGIES)


def test_presets_help_documents_json_keys(capsys):
    with pytest.raises(SystemExit) as e:
        main(["presets", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "--json" in text
    for key in ("default_preset", "scenarios", "gpus", "models", "strategies", "status_preset", "memory_gib",
                "n_params", "role"):
        assert key in text, key
