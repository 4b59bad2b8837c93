"""Benchmark of the LoRA What-If engine: ``python -m bench [--json]`` from the repo root.

It measures three things and prints PASS/MISS against the targets (it always exits 0):

1. the default dashboard scenario, every strategy: warm wall time of ``simulate``;
2. a stable scenario of about 1,000,000 requests, strategies naive and batch;
3. the speedup of the jitted engine over the same code run with ``NUMBA_DISABLE_JIT=1``.

See bench/README.md.
"""
