"""Hardware and model presets for the multi-LoRA serving simulator.

Pure Python (no numba, no streamlit): this package only holds public spec-sheet
figures (gpus.py, models.py), named scenarios (scenarios.py) and a few
closed-form size helpers (LoRA adapter bytes, KV-cache bytes per token,
base-weight bytes) that the engine and the UI build on.

Conventions
-----------
* ``memory_gib`` is the vendor's nominal capacity read as GiB (2**30 bytes),
  which is how NVIDIA's "24 GB" / "80 GB" marketing sizes map onto the device
  (e.g. an RTX 3090 exposes 24576 MiB).  The memory a process can actually
  allocate is somewhat lower (driver/context, ECC reservation on data-centre
  parts); that margin is the simulator's business, not this table's.
* ``hbm_gbps`` and ``pcie_gbps`` are decimal GB/s (1e9 bytes/s), as vendors
  quote them.
* ``fp16_tflops`` is the DENSE (no 2:4 structured sparsity) FP16/BF16
  tensor-core peak.  Where NVIDIA quotes two figures (GeForce cards: "with FP16
  accumulate" and "with FP32 accumulate"), we take the FP32-accumulate one,
  because that is what PyTorch/cuBLAS fp16/bf16 GEMMs use in LLM serving.
  Data-centre parts (A100, H100, H200, L4) run FP32 accumulate at full rate,
  so they quote a single figure; their datasheets print the sparse figure with
  an asterisk and we halve it.
* ``pcie_gbps`` is a practical host->device copy rate (pinned memory), not the
  raw link rate: PCIe 4.0 x16 is 31.5 GB/s raw per direction and measures
  about 25 GB/s; PCIe 5.0 x16 is 63 GB/s raw and measures about 50 GB/s.
  (Datasheets quote 64 / 128 GB/s, which is bidirectional.)
"""


from .gpus import (
           GPU,
           GPUS,
           get_gpu,
           gpu_from_dict,
           gpu_to_dict,
           is_preset_gpu,
           register_gpu,
)
from .hf import (
           FAMILIES,
           HF_PRESET_CONFIGS,
           count_params,
           model_from_hf_config,
           register_device_definition,
           register_model_definition,  # importing hf adds its presets
)
from .models import (
           MLP_KINDS,
           MODELS,
           TARGET_MODULES,
           Model,
           adapter_bytes,
           get_model,
           is_preset_model,
           kv_bytes_per_token,
           model_from_dict,
           model_modules,
           model_to_dict,
           module_shape,
           register_model,
           weight_bytes,
)
from .scenarios import DESCRIPTIONS, HINTS, SCENARIOS
from .servers import (
           ASSUMED,
           BUILTIN_PROFILES,
           PROFILES,
           SERVERS,
           ServerProfile,
           follow_profile,
           preset_fields,
           profile_fields,
           profile_from_dict,
           profile_to_dict,
           register_profile,
)
from .units import GIB, MIB

__all__ = ["GPU", "GPUS", "get_gpu", "gpu_from_dict", "gpu_to_dict", "is_preset_gpu", "register_device_definition", "register_gpu", "Model", "MODELS", "MLP_KINDS", "TARGET_MODULES", "get_model", "module_shape",
           "model_modules", "adapter_bytes", "kv_bytes_per_token", "weight_bytes", "register_model", "register_model_definition",
           "is_preset_model", "model_to_dict", "model_from_dict", "model_from_hf_config", "count_params",
           "FAMILIES", "HF_PRESET_CONFIGS", "SCENARIOS", "DESCRIPTIONS", "HINTS", "GIB", "MIB", "ASSUMED",
           "PROFILES", "SERVERS", "ServerProfile", "follow_profile", "preset_fields", "profile_fields",
           "BUILTIN_PROFILES", "register_profile", "profile_to_dict", "profile_from_dict"]
