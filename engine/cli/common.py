"""Helpers shared by the CLI's command modules: one-line errors (exit code 2), argument parsing."""
from __future__ import annotations

import argparse
import math
import sys


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit with code 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def fail(msg: str) -> int:
    """Print ``error: msg`` to stderr; return the exit code 2."""
    print(f"error: {msg}", file=sys.stderr)
    return 2


def parse_pairs(items, option: str = "--set", what: str = "field=value") -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``; ValueError naming the option and the item."""
    out = {}
    for it in items or []:
        if "=" not in it or not it.split("=", 1)[0].strip():
            raise ValueError(f"{option}: invalid value {it!r}; allowed: {what}")
        k, v = it.split("=", 1)
        out[k.strip()] = v
    return out


def jsonable(d):
    """Non-finite floats -> None, so that ``json.dumps(..., allow_nan=False)`` succeeds."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def positive_int(name):
    """argparse ``type=`` for a positive integer, with an error naming the option."""
    def parse(s):
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: invalid value {s!r}; allowed: a positive integer") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name}: invalid value {s!r}; allowed: a positive integer")
        return v
    return parse


def progress_default() -> bool:
    """Progress bars only on a terminal."""
    return sys.stderr.isatty()


def load_scenario_file(path: str):
    """The Scenario of a scenario.json (the CLI's, or the dashboard's export: ``Scenario.from_export``, whose
    compared strategies and replications the CLI ignores); ValueError naming the file and the problem."""
    from pathlib import Path

    from ..scenario import Scenario
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ValueError(f"--scenario: cannot read {path!r} ({e.strerror})") from None
    try:
        return Scenario.from_export(text)[0]
    except ValueError as e:
        raise ValueError(f"--scenario: {path!r}: {e}") from None
