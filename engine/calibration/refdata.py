"""Where the reference data live: ``engine/data/reference`` inside the package (``engine/data/README.md``).

Read through the package's own path, so a checkout or an installed copy finds them whatever the current
directory; nothing here reads outside the repository (tests/test_data_manifest.py)."""
from __future__ import annotations

from pathlib import Path

#: engine/data/reference (this file is engine/calibration/refdata.py).
REF_DIR = Path(__file__).resolve().parents[1] / "data" / "reference"


def _ref(name: str, path=None) -> Path:
    p = Path(path) if path else REF_DIR / name
    if not p.is_file():
        raise ValueError(f"data: no such file {str(p)!r}")
    return p
