"""Helpers shared by the CLI's command modules: one-line errors (exit code 2), argument parsing."""
from __future__ import annotations

import argparse
import math
import os
import sys

from ..limits import short_repr


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
            raise ValueError(f"{option}: invalid value {short_repr(it)}; allowed: {what}")
        k, v = it.split("=", 1)
        if k.strip() in out:
            raise ValueError(f"{option}: field {k.strip()!r} given twice; allowed: each field once")
        out[k.strip()] = v
    return out


def parse_grid(items) -> dict[str, list[str]]:
    """``["gpu=a,b", "max_loras=8;16"]`` -> ``{"gpu": ["a", "b"], "max_loras": ["8", "16"]}`` (``--grid``)."""
    out = {}
    for k, v in parse_pairs(items, "--grid", "field=value1,value2,...").items():
        vals = [x.strip() for x in v.split(";" if ";" in v else ",") if x.strip()]
        if not vals:
            raise ValueError(f"--grid: {k}: no values; allowed: field=value1,value2,...")
        if k in out:
            raise ValueError(f"--grid: field {k!r} given twice; allowed: once, with all its values")
        out[k] = vals
    return out


def add_backend_args(p, default: str) -> None:
    """``--backend`` and ``--ray-address`` (engine/backends.py); ``default`` names the command's own default."""
    p.add_argument("--backend", choices=("process", "thread", "ray"), default=None,
                   help=f"where the runs go (default: {default}); ray: pip install \"ray[default]\"")
    p.add_argument("--ray-address", metavar="ADDR", default=None,
                   help="Ray cluster to use (implies --backend ray; default: $RAY_ADDRESS, else a local Ray)")


def backend_args(a) -> dict:
    """``{"backend": ..., "ray_address": ...}`` from the parsed flags; ValueError naming a bad combination."""
    backend, address = a.backend, a.ray_address
    if address is not None:
        if not address.strip():
            raise ValueError("--ray-address: invalid value ''; allowed: a Ray address such as auto or host:6379")
        if backend not in (None, "ray"):
            raise ValueError(f"--ray-address: given with --backend {backend}; allowed: only with --backend ray")
        backend = "ray"
    workers = getattr(a, "workers", None)
    if workers is not None and address is None and os.environ.get("RAY_ADDRESS") is None:
        from ..backends import cpu_count
        if workers > cpu_count():
            raise ValueError(f"--workers: invalid value {workers}; allowed: 1 to {cpu_count()} (this machine's cores; "
                             "more workers than cores only slow each other down; a Ray cluster's size is set with "
                             "--ray-address)")
    return {"backend": backend, "ray_address": address}


def end_backend(kw: dict) -> None:
    """After a command: shut down the Ray instance it started, if any (a CLI run leaves nothing behind)."""
    if kw.get("backend") == "ray":
        from ..backends import shutdown_ray
        shutdown_ray()


def jsonable(d):
    """Non-finite floats -> None, so that ``json.dumps(..., allow_nan=False)`` succeeds."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def positive_int(name):
    """argparse ``type=`` for a positive integer, with an error naming the option."""
    def parse(s):
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name}: invalid value {short_repr(s)}; allowed: a positive integer") from None
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


def add_base_args(p, scenario_help: str) -> None:
    """``--preset``, ``--scenario`` (its help: ``scenario_help``) and ``--set``: the base scenario of a command
    that simulates many variants of it (``base_scenario``)."""
    p.add_argument("--preset", default="default", help="base scenario preset (see `presets`)")
    p.add_argument("--scenario", help=scenario_help)
    p.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override a base scenario field")


def base_scenario(a):
    """The Scenario of ``add_base_args``' flags: the ``--scenario`` file, else the ``--preset``, with the
    ``--set`` overrides; ValueError naming the flag."""
    from ..scenario import Scenario
    base = load_scenario_file(a.scenario) if a.scenario else Scenario.from_preset(a.preset)
    over = parse_pairs(a.set)
    return base.replace(**over) if over else base
