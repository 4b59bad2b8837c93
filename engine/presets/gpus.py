"""GPU presets: public spec-sheet figures (memory, HBM bandwidth, dense FP16 peak, PCIe).

Conventions are in the package docstring (engine/presets/__init__.py).
"""

from dataclasses import dataclass

from .units import unknown

# Practical host->device bandwidth of an x16 link, GB/s (see module docstring).
_PCIE4_X16_GBPS = 25.0
_PCIE5_X16_GBPS = 50.0
# PCIe 3.0 x16 (T4): 15.75 GB/s raw per direction; the same ~0.8 practical share as the 4.0
# figure (25 of 31.5) gives 12.5 GB/s.  ASSUMED (scaled, not a measurement of ours).
_PCIE3_X16_GBPS = 12.5


@dataclass(frozen=True)
class GPU:
    name: str  # key, e.g. "rtx3090"
    label: str  # human label, e.g. "NVIDIA RTX 3090 24 GB"
    memory_gib: float  # total device memory in GiB (2**30 bytes)
    hbm_gbps: float  # peak memory bandwidth, GB/s (1e9 bytes/s)
    fp16_tflops: float  # dense FP16/BF16 tensor-core peak (FP32 accumulate), TFLOP/s
    pcie_gbps: float  # practical host->device bandwidth of its PCIe link, GB/s
    source: str  # URL/citation of the spec sheet the numbers come from




# ---------------------------------------------------------------------------
# GPUs
# ---------------------------------------------------------------------------

_AMPERE_GA102_WP = (
    "NVIDIA Ampere GA102 GPU Architecture whitepaper v2, Appendix A, Table 9 "
    "(GeForce RTX 3090): "
    "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"
)
_ADA_WP = (
    "NVIDIA Ada GPU Architecture whitepaper, Appendix A, Table 2 "
    "(GeForce RTX 4090): "
    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
)
_L40S_DS = (
    "NVIDIA L40S GPU datasheet (48 GB GDDR6 with ECC, 864 GB/s, PCIe Gen4 x16; "
    "BF16/FP16 tensor 362.05 TFLOPS dense, 733 with sparsity): "
    "https://www.nvidia.com/en-us/data-center/l40s/"
)
_L4_DS = (
    "NVIDIA L4 Tensor Core GPU datasheet: "
    "https://www.nvidia.com/en-us/data-center/l4/"
)
_A10G_SRC = (
    "AWS EC2 G5 instance page (A10G: 24 GB GDDR6, 600 GB/s): "
    "https://aws.amazon.com/ec2/instance-types/g5/ ; dense FP16 tensor figure "
    "(70 TFLOPS) as tabulated in Baseten, 'NVIDIA A10 vs A10G for ML model "
    "inference': https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/"
)
_A100_DS = (
    "NVIDIA A100 Tensor Core GPU datasheet (SXM column): "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_H100_DS = (
    "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column): "
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
)
_H200_DS = (
    "NVIDIA H200 Tensor Core GPU product page/datasheet (H200 SXM column): "
    "https://www.nvidia.com/en-us/data-center/h200/"
)
_H100_64_SRC = (
    "BSC MareNostrum 5 ACC partition (4x NVIDIA Hopper H100 64 GB HBM2 per "
    "node, SXM): https://www.bsc.es/marenostrum/marenostrum-5 ; compute taken "
    "from the H100 SXM datasheet "
    "(https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet); "
    "bandwidth is an ASSUMPTION, not a published NVIDIA figure: 4 HBM2e "
    "stacks x 1024 bit x 3.2 Gb/s = 1638.4 GB/s (~1.6 TB/s)"
)

_A40_DS = (
    "NVIDIA A40 datasheet (48 GB GDDR6 with ECC, 696 GB/s, PCIe Gen4 x16; BF16 tensor with FP32 "
    "accumulate 149.7 TFLOPS dense, 299.4 with sparsity): "
    "https://images.nvidia.com/content/Solutions/data-center/a40/nvidia-a40-datasheet.pdf"
)
_A10_DS = (
    "NVIDIA A10 Tensor Core GPU datasheet (24 GB GDDR6, 600 GB/s, PCIe Gen4 x16; BF16/FP16 tensor "
    "125 TFLOPS dense, 250 with sparsity): "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf"
)
_T4_DS = (
    "NVIDIA T4 Tensor Core GPU datasheet (16 GB GDDR6, 320+ GB/s, PCIe Gen3 x16; mixed precision "
    "FP16/FP32 65 TFLOPS, no sparsity on Turing): "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf"
)
_A100_PCIE_DS = (
    "NVIDIA A100 Tensor Core GPU datasheet (PCIe columns: 40 GB HBM2 1,555 GB/s, 80 GB HBM2e "
    "1,935 GB/s; BF16/FP16 tensor 312 TFLOPS dense, 624 with sparsity; PCIe Gen4): "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
)
_H100_PCIE_DS = (
    "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe column: 80 GB HBM2e, 2 TB/s, BF16/FP16 tensor "
    "1,513 TFLOPS with sparsity, PCIe Gen5 x16): "
    "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
)
_B200_SRC = (
    "NVIDIA HGX platform page (HGX B200, 8 GPUs: FP16/BF16 tensor 36 PFLOPS with sparsity, i.e. "
    "4.5 sparse / 2.25 dense PFLOPS per GPU; 1.4 TB HBM3e): https://www.nvidia.com/en-us/data-center/hgx/ ; "
    "NVIDIA DGX B200 datasheet (1,440 GB GPU memory = 180 GB per GPU, 64 TB/s HBM3e = 8 TB/s per GPU): "
    "https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet ; host link PCIe Gen5 x16 as in "
    "the MLPerf Inference v6.0 system description 'NVIDIA B200-SXM-180GB' (Nebius): "
    "https://github.com/mlcommons/inference_results_v6.0/blob/main/closed/Nebius/systems/nebius_b200_n1.json"
)

GPUS: dict[str, GPU] = {
    "rtx3090": GPU(
        name="rtx3090",
        label="NVIDIA RTX 3090 24 GB",
        memory_gib=24.0,  # 24 GB GDDR6X
        hbm_gbps=936.0,  # 384-bit GDDR6X @ 19.5 Gb/s
        # GA102 whitepaper: FP16 tensor with FP16 accumulate = 142 dense / 284
        # sparse; with FP32 accumulate = 71 dense / 142 sparse (GeForce runs
        # FP32 accumulate at half rate).  We use the FP32-accumulate dense one.
        fp16_tflops=71.0,
        pcie_gbps=_PCIE4_X16_GBPS,  # PCIe 4.0 x16
        source=_AMPERE_GA102_WP,
    ),
    "rtx4090": GPU(
        name="rtx4090",
        label="NVIDIA RTX 4090 24 GB",
        memory_gib=24.0,  # 24 GB GDDR6X
        hbm_gbps=1008.0,  # 384-bit GDDR6X @ 21 Gb/s
        # Ada whitepaper: FP16 tensor with FP16 accumulate = 330.3 dense /
        # 660.6 sparse; with FP32 accumulate = 165.2 dense / 330.4 sparse.
        # FP32-accumulate dense figure used.
        fp16_tflops=165.2,
        pcie_gbps=_PCIE4_X16_GBPS,  # PCIe 4.0 x16
        source=_ADA_WP,
    ),
    "l4": GPU(
        name="l4",
        label="NVIDIA L4 24 GB (PCIe)",
        memory_gib=24.0,  # 24 GB GDDR6
        hbm_gbps=300.0,
        # Datasheet: FP16/BF16 tensor 242 TFLOPS *with sparsity* -> 121 dense.
        fp16_tflops=121.0,
        pcie_gbps=_PCIE4_X16_GBPS,  # PCIe 4.0 x16 (datasheet: 64 GB/s bidir.)
        source=_L4_DS,
    ),
    "l40s": GPU(
        name="l40s",
        label="NVIDIA L40S 48 GB (PCIe)",
        memory_gib=48.0,  # 48 GB GDDR6
        hbm_gbps=864.0,
        # Datasheet: FP16/BF16 tensor 733 TFLOPS *with sparsity* -> 362 dense (a data-centre
        # part: the datasheet gives one figure, not a GeForce-style half-rate FP32-accumulate one).
        fp16_tflops=362.05,
        pcie_gbps=_PCIE4_X16_GBPS,  # PCIe 4.0 x16
        source=_L40S_DS,
    ),
    "a10g": GPU(
        name="a10g",
        label="NVIDIA A10G 24 GB (AWS G5, PCIe)",
        memory_gib=24.0,  # 24 GB GDDR6 (AWS)
        hbm_gbps=600.0,  # AWS: 600 GB/s, same as the NVIDIA A10
        # The A10G is an AWS-only GA102 variant; NVIDIA publishes no datasheet
        # for it.  AWS quotes memory and bandwidth; the dense FP16 tensor peak
        # (70 TFLOPS, FP32 accumulate, GeForce-style half rate) comes from
        # Baseten's A10 vs A10G comparison.  For reference, the NVIDIA A10
        # datasheet gives 125 dense / 250 sparse.  Least certain figure here.
        fp16_tflops=70.0,
        pcie_gbps=_PCIE4_X16_GBPS,  # PCIe 4.0 x16
        source=_A10G_SRC,
    ),
    "a100-40gb": GPU(
        name="a100-40gb",
        label="NVIDIA A100 40 GB (SXM4)",
        memory_gib=40.0,  # 40 GB HBM2
        hbm_gbps=1555.0,  # SXM4, 40 GB HBM2
        fp16_tflops=312.0,  # datasheet 312 dense / 624 sparse
        pcie_gbps=_PCIE4_X16_GBPS,  # host link is PCIe 4.0 x16
        source=_A100_DS,
    ),
    "a100-80gb": GPU(
        name="a100-80gb",
        label="NVIDIA A100 80 GB (SXM4)",
        memory_gib=80.0,  # 80 GB HBM2e
        hbm_gbps=2039.0,  # SXM4 80 GB (the PCIe card is 1935 GB/s)
        fp16_tflops=312.0,  # datasheet 312 dense / 624 sparse
        pcie_gbps=_PCIE4_X16_GBPS,  # host link is PCIe 4.0 x16
        source=_A100_DS,
    ),
    "h100-80gb": GPU(
        name="h100-80gb",
        label="NVIDIA H100 80 GB (SXM5)",
        memory_gib=80.0,  # 80 GB HBM3
        hbm_gbps=3350.0,  # SXM5 (the H100 PCIe card is 2000 GB/s, HBM2e)
        # Datasheet: FP16/BF16 tensor 1979 TFLOPS with sparsity -> 989.4 dense
        # (Hopper whitepaper gives 989.4 dense for SXM5).
        fp16_tflops=989.4,
        pcie_gbps=_PCIE5_X16_GBPS,  # host link is PCIe 5.0 x16
        source=_H100_DS,
    ),
    "h100-64gb": GPU(
        name="h100-64gb",
        label="NVIDIA H100 64 GB (SXM, HBM2e; e.g. MareNostrum 5)",
        memory_gib=64.0,  # 64 GB HBM2e (4 stacks x 16 GB)
        # ASSUMPTION: NVIDIA publishes no datasheet for this HPC-only SKU.
        # 4 HBM2e stacks at the same 3.2 Gb/s pin rate as the 5-stack H100
        # PCIe (5 x 1024 bit x 3.2 Gb/s ~ 2.0 TB/s) give 1638.4 GB/s.
        hbm_gbps=1638.4,
        # ASSUMPTION: same GH100 SXM5 silicon/clocks as the 80 GB SXM part.
        fp16_tflops=989.4,
        pcie_gbps=_PCIE5_X16_GBPS,  # PCIe 5.0 x16 host link
        source=_H100_64_SRC,
    ),
    "h200": GPU(
        name="h200",
        label="NVIDIA H200 141 GB (SXM)",
        memory_gib=141.0,  # "141 GB" HBM3e, read as GiB like the others
        hbm_gbps=4800.0,  # 4.8 TB/s
        # Datasheet: FP16/BF16 tensor 1979 TFLOPS with sparsity -> 989.4 dense
        # (same GH100 compute as H100 SXM).
        fp16_tflops=989.4,
        pcie_gbps=_PCIE5_X16_GBPS,  # host link is PCIe 5.0 x16
        source=_H200_DS,
    ),
    # ---- added for the capacity planner (no calibration run uses them)
    "a40": GPU(
        name="a40",
        label="NVIDIA A40 48 GB (PCIe)",
        memory_gib=48.0,  # 48 GB GDDR6 with ECC
        hbm_gbps=696.0,
        # Datasheet: BF16 tensor *with FP32 accumulate* 149.7 dense / 299.4 sparse (a data-centre
        # GA102: full-rate FP32 accumulate, unlike the GeForce RTX 3090's half rate).
        fp16_tflops=149.7,
        pcie_gbps=_PCIE4_X16_GBPS,  # PCIe 4.0 x16 (datasheet: 64 GB/s bidir.)
        source=_A40_DS,
    ),
    "a10": GPU(
        name="a10",
        label="NVIDIA A10 24 GB (PCIe)",
        memory_gib=24.0,  # 24 GB GDDR6
        hbm_gbps=600.0,
        # Datasheet: BF16/FP16 tensor 250 TFLOPS *with sparsity* -> 125 dense (the AWS-only A10G
        # above is tabulated at 70: a different part with the same memory system).
        fp16_tflops=125.0,
        pcie_gbps=_PCIE4_X16_GBPS,  # PCIe 4.0 x16
        source=_A10_DS,
    ),
    "t4": GPU(
        name="t4",
        label="NVIDIA T4 16 GB (PCIe)",
        memory_gib=16.0,  # 16 GB GDDR6
        hbm_gbps=320.0,  # datasheet "320+ GB/s" (256-bit GDDR6 at 10 Gb/s = 320 GB/s)
        # Datasheet: mixed precision (FP16 multiply, FP32 accumulate) 65 TFLOPS; Turing has no 2:4
        # sparsity, so this is the dense figure.
        fp16_tflops=65.0,
        pcie_gbps=_PCIE3_X16_GBPS,  # PCIe 3.0 x16 (ASSUMED practical rate, see above)
        source=_T4_DS,
    ),
    "a100-40gb-pcie": GPU(
        name="a100-40gb-pcie",
        label="NVIDIA A100 40 GB (PCIe)",
        memory_gib=40.0,  # 40 GB HBM2
        hbm_gbps=1555.0,  # PCIe 40 GB: same as the SXM4 40 GB part
        fp16_tflops=312.0,  # datasheet 312 dense / 624 sparse
        pcie_gbps=_PCIE4_X16_GBPS,  # PCIe 4.0 x16
        source=_A100_PCIE_DS,
    ),
    "a100-80gb-pcie": GPU(
        name="a100-80gb-pcie",
        label="NVIDIA A100 80 GB (PCIe)",
        memory_gib=80.0,  # 80 GB HBM2e
        hbm_gbps=1935.0,  # PCIe 80 GB (the SXM4 80 GB part is 2039 GB/s)
        fp16_tflops=312.0,  # datasheet 312 dense / 624 sparse
        pcie_gbps=_PCIE4_X16_GBPS,  # PCIe 4.0 x16
        source=_A100_PCIE_DS,
    ),
    "h100-pcie": GPU(
        name="h100-pcie",
        label="NVIDIA H100 80 GB (PCIe)",
        memory_gib=80.0,  # 80 GB HBM2e
        hbm_gbps=2000.0,  # 2 TB/s
        # Datasheet: BF16/FP16 tensor 1,513 TFLOPS with sparsity -> 756 dense (1,513 / 2 = 756.5,
        # rounded down to the 756 quoted in docs/presets.md; the 0.07 % is far inside compute_eff).
        fp16_tflops=756.0,
        pcie_gbps=_PCIE5_X16_GBPS,  # PCIe 5.0 x16
        source=_H100_PCIE_DS,
    ),
    "b200": GPU(
        name="b200",
        label="NVIDIA B200 180 GB (SXM)",
        # HGX/DGX B200 list 180 GB per GPU (1,440 GB / 8; early announcements said 192 GB, the
        # HBM3e stacks' raw capacity): 180 taken, read as GiB like the others.
        memory_gib=180.0,
        hbm_gbps=8000.0,  # 8 TB/s (64 TB/s / 8)
        # HGX B200: FP16/BF16 tensor 36 PFLOPS with sparsity for 8 GPUs -> 4.5 PFLOPS sparse,
        # 2.25 PFLOPS = 2250 TFLOPS dense per GPU (the 1000 W HGX part; the GB200 part is rated higher).
        fp16_tflops=2250.0,
        # Blackwell's own interface is PCIe Gen6-capable, but HGX B200 hosts (x86 CPUs) link at
        # PCIe 5.0 x16 (MLPerf system description), so the Gen5 practical rate applies.
        pcie_gbps=_PCIE5_X16_GBPS,
        source=_B200_SRC,
    ),
}


def get_gpu(name: str) -> GPU:
    try:
        return GPUS[name]
    except KeyError:
        raise unknown("gpu", name, GPUS) from None


# ---------------------------------------------------------------------------
# Registry: built-in GPUs vs devices added at run time (a measured CPU: engine.live.device)
# ---------------------------------------------------------------------------

_PRESET_GPUS: set[str] = set(GPUS)
#: Devices one process may register (each a measured machine): a bound on what uploads can add.
MAX_REGISTERED_GPUS = 256
_NUM_FIELDS = ("memory_gib", "hbm_gbps", "fp16_tflops", "pcie_gbps")


def is_preset_gpu(name: str) -> bool:
    """True for a built-in GPU (its name alone identifies it); False for a registered device."""
    return name in _PRESET_GPUS


def register_gpu(gpu: GPU) -> GPU:
    """Add ``gpu`` to GPUS under its name (a no-op for the same definition; a ValueError for a name taken by a
    different one, or past ``MAX_REGISTERED_GPUS``)."""
    if not isinstance(gpu, GPU):
        raise ValueError(f"gpu: invalid value {gpu!r}; allowed: an engine.presets.GPU")
    old = GPUS.get(gpu.name)
    if old is not None:
        if old != gpu:
            kind = "preset" if is_preset_gpu(gpu.name) else "registered"
            raise ValueError(f"gpu: name {gpu.name!r} is already a {kind} device with a different definition; "
                             "allowed: a new name, or exactly the same definition")
        return old
    if len(GPUS) - len(_PRESET_GPUS) >= MAX_REGISTERED_GPUS:
        raise ValueError(f"gpu: {MAX_REGISTERED_GPUS} devices are registered already; allowed: at most that many")
    GPUS[gpu.name] = gpu
    return gpu


def gpu_to_dict(gpu: GPU) -> dict:
    return {f: getattr(gpu, f) for f in ("name", "label", *_NUM_FIELDS, "source")}


def gpu_from_dict(d: object, where: str = "device_definition") -> GPU:
    """A GPU from its dict (``gpu_to_dict``); ValueError naming the key."""
    import math
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(d).__name__}")
    want = ("name", "label", *_NUM_FIELDS, "source")
    extra = sorted(set(d) - set(want))
    if extra:
        raise ValueError(f"{where}.{str(extra[0])[:40]}: unknown key; allowed: {', '.join(want)}")
    kw: dict = {}
    for k in ("name", "label", "source"):
        v = d.get(k, "")
        if not isinstance(v, str) or (k == "name" and not v) or len(v) > 2000:
            raise ValueError(f"{where}.{k}: invalid value; allowed: a string (name: non-empty), at most 2000 characters")
        kw[k] = v
    for k, hi in zip(_NUM_FIELDS, (1e5, 1e6, 1e5, 1e4)):
        v = d.get(k)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 < v <= hi
        if not ok:
            raise ValueError(f"{where}.{k}: invalid value {str(v)[:40]!r}; allowed: a number in (0, {hi:g}]")
        kw[k] = float(v)
    return GPU(**kw)
