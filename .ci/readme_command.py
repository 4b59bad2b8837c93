#!/usr/bin/env python3
"""Print the shell command that README.md documents after a marker line.

Usage:  python3 .ci/readme_command.py MARKER [README]

The README documents each command as

    <!-- test-command -->
    ```bash
    pip install -r requirements-dev.txt && python -m pytest
    ```

i.e. the marker on a line of its own, then a fenced code block holding exactly
one line. The command is that line: the first non-blank, non-fence line after
the marker. The marker must occur exactly once. Anything else is an error
(exit 2), so CI never runs a half-parsed command.

.ci/run and tests/test_packaging.py both use this file, so the rule lives in
one place. Standard library only; runs on any Python 3.8+.
"""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_README = Path(__file__).resolve().parent.parent / "README.md"


class ReadmeCommandError(ValueError):
    """README.md does not follow the marker + one-line fence convention."""


def _is_fence(line: str) -> bool:
    return line.strip().startswith("```")


def extract_command(text: str, marker: str) -> str:
    """Return the one-line command in the fenced block right after `marker`."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines) if line.strip() == marker]
    if not hits:
        raise ReadmeCommandError(f"marker {marker!r} not found on a line of its own")
    if len(hits) > 1:
        raise ReadmeCommandError(
            f"marker {marker!r} occurs {len(hits)} times (lines "
            + ", ".join(str(i + 1) for i in hits)
            + "); it must occur exactly once"
        )
    i = hits[0] + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines) or not _is_fence(lines[i]):
        raise ReadmeCommandError(f"no ``` fence directly after marker {marker!r}")
    i += 1
    if i >= len(lines) or not lines[i].strip() or _is_fence(lines[i]):
        raise ReadmeCommandError(f"empty code block after marker {marker!r}")
    command = lines[i].strip()
    if i + 1 >= len(lines) or not _is_fence(lines[i + 1]):
        raise ReadmeCommandError(
            f"the code block after marker {marker!r} must hold exactly one line"
        )
    return command


def command_from_readme(marker: str, readme: Path | str = DEFAULT_README) -> str:
    return extract_command(Path(readme).read_text(encoding="utf-8"), marker)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    readme = Path(argv[2]) if len(argv) == 3 else DEFAULT_README
    try:
        print(command_from_readme(argv[1], readme))
    except (OSError, ReadmeCommandError) as exc:
        print(f"readme_command.py: {readme}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
