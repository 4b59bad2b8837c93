#!/usr/bin/env python3
"""Check a pytest JUnit XML report after the README test command has run.

Usage:  python3 .ci/check_junit.py JUNIT_XML [REQUIRED_SUBSTRING ...]

Fails (exit 1) when
  * the report is missing or is not parseable XML,
  * it reports 0 test cases,
  * for each REQUIRED_SUBSTRING (default: test_browser): no test case has it in
    its classname/file/name, or any such test case was skipped (this includes
    xfail) or failed / errored.
Otherwise prints a one-line summary and exits 0. Standard library only.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

DEFAULT_REQUIRED = ("test_browser",)


def _case_id(case: ET.Element) -> str:
    classname = case.get("classname", "")
    name = case.get("name", "")
    return f"{classname}::{name}" if classname else name


def _outcome(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "passed"


def check(path: Path | str, required: tuple[str, ...] | list[str] = DEFAULT_REQUIRED) -> list[str]:
    """Return a list of problems (empty when the report is acceptable)."""
    path = Path(path)
    if not path.is_file():
        return [f"JUnit report {path} is missing (did pytest run at all?)"]
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        return [f"JUnit report {path} is not valid XML: {exc}"]

    cases = list(root.iter("testcase"))
    problems: list[str] = []
    if not cases:
        problems.append(f"JUnit report {path} contains 0 test cases")
        return problems

    for needle in required:
        matching = [
            c
            for c in cases
            if needle in c.get("classname", "")
            or needle in c.get("file", "")
            or needle in c.get("name", "")
        ]
        if not matching:
            problems.append(f"no test case matching {needle!r} ran (required in CI)")
            continue
        for case in matching:
            outcome = _outcome(case)
            if outcome != "passed":
                el = case.find(outcome)
                detail = (el.get("message") or el.text or "").strip().splitlines()
                detail_s = f": {detail[0][:300]}" if detail else ""
                problems.append(f"required test {_case_id(case)} {outcome}{detail_s}")
    return problems


def summary(path: Path | str) -> str:
    cases = list(ET.parse(path).getroot().iter("testcase"))
    counts: dict[str, int] = {}
    for case in cases:
        outcome = _outcome(case)
        counts[outcome] = counts.get(outcome, 0) + 1
    parts = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return f"{len(cases)} test cases ({parts})"


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: check_junit.py JUNIT_XML [REQUIRED_SUBSTRING ...]", file=sys.stderr)
        return 2
    required = tuple(argv[2:]) or DEFAULT_REQUIRED
    problems = check(argv[1], required)
    if problems:
        for p in problems:
            print(f"check_junit: FAIL: {p}", file=sys.stderr)
        return 1
    print(f"check_junit: OK: {summary(argv[1])}; required {', '.join(required)} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
