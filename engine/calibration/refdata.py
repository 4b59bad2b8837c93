"""Where the reference data live: ``shared/reference-data`` next to the checkout."""
from __future__ import annotations

from pathlib import Path

#: /work/shared/reference-data for a checkout at /work/main (this file is engine/calibration/refdata.py).
REF_DIR = Path(__file__).resolve().parents[3] / "shared" / "reference-data"


def _ref(name: str, path=None) -> Path:
    p = Path(path) if path else REF_DIR / name
    if not p.is_file():
        raise ValueError(f"data: no such file {str(p)!r}")
    return p

