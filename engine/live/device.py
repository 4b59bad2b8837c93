"""This machine's CPU as a device preset, its figures measured by a short micro-benchmark (never typed).

* ``hbm_gbps``: the memory bandwidth of one thread, from timing a copy of a 256 MiB array (read + write bytes);
* ``fp16_tflops``: the peak of one thread, from timing a 512 x 512 float32 matrix product (numpy's BLAS, held to
  one thread where threadpoolctl can): the CPU server runs its kernels on the threads vLLM gives it (one on a
  2-core machine: it reserves a core for the front end) and computes in bf16/fp32;
* ``pcie_gbps``: the rate of a 16 MiB copy (an adapter load into vLLM's slot tensors is a host memory copy);
* ``memory_gib``: the machine's RAM (``os.sysconf``).

Each figure is the best of ``repeats`` timings (the least disturbed by other work); the label and source say how
it was measured, when, and the load average beside it.
"""
from __future__ import annotations

import hashlib
import os
import platform
import time
from contextlib import nullcontext
from datetime import UTC, datetime

import numpy as np

from ..presets import GPU, register_gpu


def _best(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure(repeats: int = 5) -> dict:
    """The micro-benchmark's figures (see the module docstring)."""
    try:
        from threadpoolctl import threadpool_limits
        one = threadpool_limits(1)
    except ImportError:
        one = nullcontext()
    big = np.ones(256 << 17, np.float64)  # 256 MiB
    dst = np.empty_like(big)
    small = np.ones(2 << 20, np.float64)  # 16 MiB
    sdst = np.empty_like(small)
    a = np.random.default_rng(0).random((512, 512), dtype=np.float32)
    with one:
        np.copyto(dst, big)
        t_bw = _best(lambda: np.copyto(dst, big), repeats)
        t_pcie = _best(lambda: np.copyto(sdst, small), repeats * 4)
        a @ a
        t_mm = _best(lambda: a @ a, repeats)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"hbm_gbps": 2 * big.nbytes / t_bw / 1e9, "pcie_gbps": 2 * small.nbytes / t_pcie / 1e9,
            "fp16_tflops": 2 * 512**3 / t_mm / 1e12, "memory_gib": float(ram), "cpus": os.cpu_count() or 1,
            "processor": platform.processor() or platform.machine(), "loadavg": os.getloadavg()[0],
            "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}


def cpu_device(figures: dict | None = None, register: bool = True) -> GPU:
    """This CPU as a GPU preset (``gpu`` field), named ``cpu-<digest of its figures>``; registered unless told not."""
    f = figures or measure()
    tag = hashlib.sha256(repr(sorted((k, round(v, 3) if isinstance(v, float) else v)
                                     for k, v in f.items())).encode()).hexdigest()[:8]
    g = GPU(name=f"cpu-{tag}",
            label=f"CPU {f['processor']} ({f['cpus']} cores; measured {f['hbm_gbps']:.1f} GB/s, "
                  f"{f['fp16_tflops'] * 1e3:.1f} GFLOP/s on one thread)",
            memory_gib=round(f["memory_gib"], 2), hbm_gbps=round(f["hbm_gbps"], 3),
            fp16_tflops=round(f["fp16_tflops"], 6), pcie_gbps=round(f["pcie_gbps"], 3),
            source=f"measured by engine.live.device on {f['when']} (load average {f['loadavg']:.2f}): a 256 MiB "
                   "copy (bandwidth), a 512x512 float32 matmul on one thread (peak), a 16 MiB copy (adapter load)")
    return register_gpu(g) if register else g
