"""Markdown pieces of the generated validation report: a table from a DataFrame, a share as a percentage."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd


def _md_table(df: pd.DataFrame, floatfmt: str = ".3g") -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            if isinstance(v, (float, np.floating)):
                cells.append("" if math.isnan(v) else ("inf" if math.isinf(v) else format(v, floatfmt)))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:.1f} %"
