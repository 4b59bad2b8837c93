"""GPU-to-GPU interconnects: what a tensor-parallel group's all-reduces run over (docs/model.md 5.7).

One ``Link`` per GPU preset: NVLink on the SXM parts (A100, H100, H200, B200), PCIe on the others (the
PCIe cards' optional two-GPU NVLink bridges are not assumed).  ``gbps`` is the vendor's per-GPU NVLink
bandwidth in ONE direction (datasheets quote both directions added: A100 600 GB/s, H100/H200 900 GB/s,
B200 1.8 TB/s), or, for PCIe, the GPU's practical host link rate (``GPU.pcie_gbps``: peer-to-peer
traffic crosses the same x16 link).

ASSUMED (not measured by us, not fitted): the share of ``gbps`` an all-reduce achieves as bus bandwidth
(``BUS_EFFICIENCY``, 0.8) and the fixed time of one all-reduce (``latency_us``): 8 us over NVLink, the
order of NCCL's NVLS all-reduce of small messages on H100s with CUDA graphs (about 6 us on two GPUs,
more on eight: NVIDIA/nccl issue #1259) and of vLLM's custom all-reduce; 25 us over PCIe (NCCL's ring;
vLLM turns its custom all-reduce off on more than two PCIe GPUs).  GeForce cards (RTX 3090 / 4090)
have no peer-to-peer over PCIe in NVIDIA's drivers, so their traffic goes through host memory: slower
than this table says.  engine.calibration.allreduce_check compares the resulting all-reduce times with
Vidur's profiled NCCL all-reduces (never used to set them).
"""
from __future__ import annotations

from dataclasses import dataclass

from .gpus import get_gpu

#: Share of the link bandwidth an all-reduce achieves as bus bandwidth (ASSUMED; module docstring).
BUS_EFFICIENCY = 0.8
#: Fixed time of one all-reduce, microseconds (ASSUMED; module docstring).
NVLINK_LATENCY_US = 8.0
PCIE_LATENCY_US = 25.0


@dataclass(frozen=True)
class Link:
    kind: str          # "nvlink" or "pcie"
    gbps: float        # per GPU, one direction, GB/s (1e9 bytes/s)
    latency_us: float  # fixed time of one all-reduce
    source: str


_A100 = "NVIDIA A100 datasheet: third-generation NVLink 600 GB/s (both directions) per GPU on SXM4"
_H100 = "NVIDIA H100 datasheet: fourth-generation NVLink 900 GB/s (both directions) per GPU on SXM5"
_H200 = "NVIDIA H200 datasheet: NVLink 900 GB/s (both directions) per GPU"
_B200 = "NVIDIA HGX B200 platform page: fifth-generation NVLink 1.8 TB/s (both directions) per GPU"
_H100_64 = "ASSUMED: the H100 SXM's NVLink 4 (MareNostrum 5's 4-GPU nodes); no NVIDIA datasheet for this SKU"

#: NVLink parts (per-direction GB/s); every other GPU talks over PCIe.
NVLINK_GBPS: dict[str, tuple[float, str]] = {
    "a100-40gb": (300.0, _A100), "a100-80gb": (300.0, _A100),
    "h100-80gb": (450.0, _H100), "h100-64gb": (450.0, _H100_64),
    "h200": (450.0, _H200), "b200": (900.0, _B200),
}


def gpu_link(gpu: str) -> Link:
    """The interconnect of a tensor-parallel group of ``gpu`` (a GPU preset name)."""
    if gpu in NVLINK_GBPS:
        gbps, src = NVLINK_GBPS[gpu]
        return Link("nvlink", gbps, NVLINK_LATENCY_US, src)
    g = get_gpu(gpu)
    return Link("pcie", g.pcie_gbps, PCIE_LATENCY_US,
                f"{g.label}: no NVLink assumed; peer traffic over its PCIe link ({g.pcie_gbps:g} GB/s practical)")


def allreduce_terms(tp: int, link: Link) -> tuple[float, float]:
    """(seconds, seconds per byte) of one all-reduce over ``tp`` GPUs: the latency, and 2 (tp - 1) / tp / bus
    bandwidth (the ring's traffic, NCCL's bus-bandwidth convention); (0, 0) for one GPU."""
    if tp <= 1:
        return 0.0, 0.0
    return link.latency_us / 1e6, 2.0 * (tp - 1) / tp / (link.gbps * 1e9 * BUS_EFFICIENCY)


def allreduce_seconds(nbytes: float, tp: int, link: Link) -> float:
    """One all-reduce of ``nbytes`` over ``tp`` GPUs (``allreduce_terms``): latency + bytes x seconds per byte."""
    lat, per_byte = allreduce_terms(tp, link)
    return lat + nbytes * per_byte
