#!/usr/bin/env python3
"""Copy the Docker build context (the repo minus .dockerignore) to a folder.

Usage:  python3 .ci/docker_context.py SRC_DIR DEST_DIR

.ci/run uses it to replay the Dockerfile's steps without a Docker engine, on
exactly the files `COPY . .` would put in the image. DEST_DIR must not exist.

Implements the .dockerignore rules Docker documents: one pattern per line,
`#` comments, Go filepath.Match syntax (`*`, `?`, `[...]`) plus `**` for any
number of directories, a leading `/` ignored, `!` re-includes, the last
matching line wins, and a pattern that matches a directory excludes everything
under it. Standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if pattern.startswith("/", i):
                    i += 1
                    out.append("(?:.*/)?")
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                out.append("[" + pattern[i + 1 : j] + "]")  # Go and re agree on [^...]
                i = j
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def load_patterns(dockerignore: Path) -> list[tuple[bool, re.Pattern[str]]]:
    """Return (is_exception, regex) per non-comment line of .dockerignore."""
    rules = []
    if not dockerignore.is_file():
        return rules
    for raw in dockerignore.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        if negate:
            line = line[1:].strip()
        line = os.path.normpath(line).replace(os.sep, "/").lstrip("/")
        if line in ("", "."):
            continue
        rules.append((negate, _pattern_regex(line)))
    return rules


def is_excluded(rel: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """True if the relative path `rel` (with '/' separators) is left out."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    excluded = False
    for negate, regex in rules:
        if any(regex.match(p) for p in prefixes):
            excluded = not negate
    return excluded


def copy_context(src: Path, dest: Path) -> int:
    src = src.resolve()
    rules = load_patterns(src / ".dockerignore")
    has_exceptions = any(neg for neg, _ in rules)
    dest.mkdir(parents=True, exist_ok=False)
    copied = 0
    for dirpath, dirnames, filenames in os.walk(src):
        reldir = os.path.relpath(dirpath, src).replace(os.sep, "/")
        reldir = "" if reldir == "." else reldir + "/"
        if not has_exceptions:  # safe to prune whole excluded directories
            dirnames[:] = [d for d in dirnames if not is_excluded(reldir + d, rules)]
        dirnames.sort()
        for name in sorted(filenames):
            rel = reldir + name
            if is_excluded(rel, rules):
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(os.path.join(dirpath, name), target, follow_symlinks=False)
            copied += 1
    return copied


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: docker_context.py SRC_DIR DEST_DIR", file=sys.stderr)
        return 2
    n = copy_context(Path(argv[1]), Path(argv[2]))
    print(f"docker_context: copied {n} files to {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
