"""The data the engine reads ship inside the package (engine/data/): exactly the files of
``engine/data/manifest.json``, unchanged (digest and row count), each with its source, licence and
citation in ``engine/data/README.md``; and no code reads a path outside the repository."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

import engine
from engine.calibration import kernel_fit, refdata
from engine.scenario import TRACE_DIR

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "engine" / "data"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
ENTRIES = MANIFEST["files"]
#: files under engine/data/ that are documentation, not data
DOCS = {"README.md", "manifest.json", "traces/LICENSE-traces.md"}
LICENCES = {"Apache-2.0", "MIT"}


def _data_files() -> set[str]:
    return {p.relative_to(DATA).as_posix() for p in DATA.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts} - DOCS


def test_the_data_folder_holds_exactly_the_manifest():
    assert _data_files() == {e["path"] for e in ENTRIES}
    assert len({e["path"] for e in ENTRIES}) == len(ENTRIES)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["path"])
def test_each_file_is_unchanged_and_attributed(entry):
    p = DATA / entry["path"]
    raw = p.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == entry["sha256"]
    assert raw.count(b"\n") - 1 == entry["rows"]  # header + one line per row (no quoted newlines here)
    for k in ("what", "read_by", "source_repository", "source_commit", "source_path", "licence", "citation"):
        assert isinstance(entry[k], str) and entry[k].strip(), k
    assert re.fullmatch(r"[0-9a-f]{7,40}", entry["source_commit"])
    if entry.get("measured_by") == "this project":  # measured here: the collector is in this repository, MIT
        assert entry["source_repository"] == "this repository" and entry["licence"] == "MIT"
        assert (ROOT / entry["source_path"].split()[0]).is_file()
    else:
        assert entry["source_repository"].startswith("https://github.com/")
        assert entry["licence"] in LICENCES or entry["licence"].startswith("CC-BY")
    readme = (DATA / "README.md").read_text()
    assert f"`{entry['path']}`" in readme and entry["source_commit"] in readme
    assert f"{entry['rows']:,}" in readme


def test_the_engine_reads_its_data_through_the_package_path():
    assert refdata.REF_DIR == Path(engine.__file__).resolve().parent / "data" / "reference"
    assert TRACE_DIR == Path(engine.__file__).resolve().parent / "data" / "traces"
    for name in ("slora_s1_results.csv", "vllm_llama31_8b_multilora_runs.csv", "vllm_lora_load_times.csv",
                 kernel_fit.KERNEL_CSV):
        p = refdata._ref(name)
        assert p.is_file() and ROOT in p.parents


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"^data: no such file .*nope\.csv"):
        refdata._ref("nope.csv")
    with pytest.raises(ValueError, match="data: no such file"):
        refdata._ref("x", tmp_path / "absent.csv")


#: how code could reach outside the tree: the old data folder next to the checkout, or ``Path(__file__)``'s
#: parents beyond the repository root (checked against the file's depth below)
OUTSIDE = re.compile(r"reference-data|\.\./shared")
PARENTS = re.compile(r"__file__\)\.resolve\(\)\.parents\[(\d+)\]")


def test_no_code_points_outside_the_repository():
    """The static half; tests/test_standalone.py runs a copy of the tree with nothing beside it."""
    offenders = []
    for d in ("engine", "app", "bench"):
        for p in (ROOT / d).rglob("*.py"):
            depth = len(p.relative_to(ROOT).parts)  # parents[depth] is the repository's parent
            for i, line in enumerate(p.read_text().splitlines(), 1):
                hops = [int(n) for n in PARENTS.findall(line)]
                if OUTSIDE.search(line) or any(n >= depth for n in hops):
                    offenders.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_outside_check_catches_the_old_rule():
    old = 'REF_DIR = Path(__file__).resolve().parents[3] / "shared" / "reference-data"'
    assert OUTSIDE.search(old) and int(PARENTS.findall(old)[0]) >= 3


def test_the_docker_image_keeps_the_data():
    import importlib.util
    spec = importlib.util.spec_from_file_location("docker_context", ROOT / ".ci" / "docker_context.py")
    dc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dc)
    rules = dc.load_patterns(ROOT / ".dockerignore")
    for e in ENTRIES:
        assert not dc.is_excluded(f"engine/data/{e['path']}", rules), e["path"]
    assert not dc.is_excluded("engine/data/README.md", rules)
