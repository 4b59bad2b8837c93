"""The all-reduce model (``presets.interconnect``, docs/model.md 5.7) against Vidur's profiled NCCL all-reduces.

A check, never a fit: the model's link bandwidths come from datasheets and its latency and bus efficiency are
stated assumptions; this module only reports how far they are from a published measurement, per GPU, group size
and message-size band (``SIZE_BANDS``), with the median signed error, the MAPE and the worst error.

What the measurement is (``network_profiles/vidur_all_reduce.csv``, microsoft/vidur @ 7d47513): NCCL's
``torch.distributed.all_reduce`` of fp16 buffers on DGX A100 / DGX H100 nodes (2, 4, 8 GPUs on one node), kernel
time from the PyTorch profiler (median), CUDA graphs off.  vLLM uses its own custom all-reduce (or NCCL's NVLS /
symmetric memory) for small messages on NVLink, under CUDA graphs: faster than these NCCL kernels, so the small
sizes are where this check says least about vLLM.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..presets.interconnect import NVLINK_LATENCY_US, PCIE_LATENCY_US, allreduce_seconds, gpu_link
from .refdata import _ref

ALLREDUCE_CSV = "network_profiles/vidur_all_reduce.csv"
#: Message sizes (bytes, [low, high)): a decode step of 8-256 tokens of a 4096-8192 hidden size moves 64 KiB-4 MiB.
SIZE_BANDS = ((0, 64 * 1024, "< 64 KiB"), (64 * 1024, 1 << 20, "64 KiB-1 MiB"), (1 << 20, 16 << 20, "1-16 MiB"),
              (16 << 20, 1 << 40, ">= 16 MiB"))


#: The measured NCCL all-reduce times below 1 MiB (the decode steps' sizes): the range of the median per GPU, group
#: size and size band, microseconds (tests/test_tensor_parallel.py recomputes it from the file).
MEASURED_SMALL_US = (20, 55)
#: What the assumed latency moves: Llama-3.1-70B on 4 H100s, mean TPOT at 40 us against 8 us (docs/model.md 5.7).
SENSITIVITY = "at 40 us, Llama-3.1-70B on 4 H100s decodes about 24 % slower"


def allreduce_caveat() -> str:
    """The all-reduce model's standing in words, for every answer at tensor_parallel_size > 1 (the calibration
    status, the plan's notes): assumed, not fitted; how far the measurement is; what it moves."""
    lo, hi = MEASURED_SMALL_US
    return (f"an assumed latency ({NVLINK_LATENCY_US:g} us per all-reduce on NVLink, {PCIE_LATENCY_US:g} us on "
            f"PCIe; not fitted, and not validated for vLLM's own all-reduce path); NCCL kernels profiled by Vidur "
            f"take {lo}-{hi} us at decode sizes (engine.calibration.allreduce_check); {SENSITIVITY} "
            "(docs/model.md 5.7)")


def allreduce_profiles(path=None) -> pd.DataFrame:
    """The measured all-reduces with the model's prediction and its relative error (predicted / measured - 1)."""
    df = pd.read_csv(_ref(ALLREDUCE_CSV, path))
    df["predicted_ms"] = [allreduce_seconds(float(b), int(w), gpu_link(g)) * 1e3
                          for g, w, b in zip(df["gpu"], df["num_workers"], df["size_bytes"])]
    df["error"] = df["predicted_ms"] / df["time_ms_median"] - 1.0
    df["size_band"] = ""
    for lo, hi, name in SIZE_BANDS:
        df.loc[(df["size_bytes"] >= lo) & (df["size_bytes"] < hi), "size_band"] = name
    return df


def allreduce_check(path=None) -> pd.DataFrame:
    """One row per (GPU, GPUs in the group, size band): runs, median signed error, MAPE, worst |error| and the size
    where it is, median measured and predicted time (ms)."""
    df = allreduce_profiles(path)
    rows = []
    order = {name: i for i, (_, _, name) in enumerate(SIZE_BANDS)}
    for (g, w, band), d in df.groupby(["gpu", "num_workers", "size_band"], sort=False):
        e = d["error"].to_numpy()
        k = int(np.argmax(np.abs(e)))
        rows.append({"gpu": g, "num_workers": int(w), "size_band": band, "n": len(d),
                     "median_error": float(np.median(e)), "mape": float(np.mean(np.abs(e))),
                     "worst_abs_error": float(abs(e[k])), "worst_at_bytes": int(d["size_bytes"].iloc[k]),
                     "measured_median_ms": float(d["time_ms_median"].median()),
                     "predicted_median_ms": float(d["predicted_ms"].median()), "_o": order[band]})
    out = pd.DataFrame(rows).sort_values(["gpu", "num_workers", "_o"]).drop(columns="_o")
    return out.reset_index(drop=True)
