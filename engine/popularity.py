"""Adapter popularity: the probability of each adapter (index 0 the most popular).

Depends on no other engine module (it reads a scenario's ``num_adapters``,
``popularity``, ``zipf_s`` and ``power_alpha`` fields), so that both the
workload and the policies (hot-set pins) can use it without an import cycle.
"""
from __future__ import annotations

import numpy as np


def popularity(sc) -> np.ndarray:
    """Probability of each adapter (Zipf: index 0 is the most popular)."""
    n = sc.num_adapters
    if sc.popularity == "zipf":
        w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** sc.zipf_s
        return w / w.sum()
    # S-LoRA: adapter = floor(n * X), X ~ Power(alpha), P(X <= x) = x**alpha
    edges = (np.arange(n + 1, dtype=np.float64) / n) ** sc.power_alpha
    return np.diff(edges)
