"""GPU rental prices for the planner's cost figures, in US$ per GPU-hour (on demand).

INDICATIVE, NOT QUOTES: prices vary 2-4x between providers and change monthly.
Every planner entry point takes ``gpu_prices_usd_per_hour`` to override them;
use your own contract price for decisions.  Sources (read 2026-12-01, public
pages, mid-points of the ranges they give):

* a100-80gb 1.30, h100-80gb 3.00, h200 4.00: the "specialty provider" on-demand
  ranges of the Mercatus cloud GPU pricing guide, May 2026 (A100 80GB
  $1.10-1.50, H100 SXM5 $2.50-3.50, H200 SXM5 $3.50-4.50),
  https://www.mercatus-ai.com/blog/cloud-gpu-pricing
* a100-40gb 1.00: ASSUMED (about 3/4 of the 80 GB part, as providers price it).
* h100-64gb 2.50: ASSUMED (an HPC part, not rented publicly; priced below the 80 GB H100).
* a10g 1.01: AWS EC2 g5.xlarge on-demand, us-east-1 (1 A10G), https://aws.amazon.com/ec2/instance-types/g5/
* l40s 0.90: ASSUMED (specialty providers list it between an A10G and an A100 80GB).
* l4 0.70: ASSUMED, Google Cloud g2-standard-4 (1 L4) list price order of magnitude.
* rtx4090 0.60, rtx3090 0.30: ASSUMED, community GPU marketplaces' typical asks.

Added with the A40 ... B200 presets (2026-12, from stored copies of public pages, not live quotes):

* t4 0.53: AWS EC2 g4dn.xlarge on-demand, us-east-1 ($0.526/h, 1 T4), https://aws.amazon.com/ec2/instance-types/g4/
* h100-pcie 2.49: Lambda's 1x H100 on-demand rate ($2.49/h for 1 GPU; its 1x H100 is the PCIe card), "Cloud GPU Pricing
  Explained", https://computespec.pages.dev/learn/pricing/cloud-gpu-pricing-explained
* b200 5.00: ASSUMED, between the lowest on-demand B200 SXM rate tracked across 26 providers
  ($3.75/h, packet.ai, June 2026, https://packet.ai/blog/gpu-pricing-models-compared) and the
  hyperscalers' $8-14/h quoted there.
* a100-80gb-pcie 1.20, a100-40gb-pcie 0.90: ASSUMED (a little below the SXM parts above, as
  providers price the PCIe cards).
* a10 0.75: ASSUMED (specialty providers' single-A10 on-demand rates; a little below the AWS A10G).
* a40 0.45: ASSUMED (community/specialty marketplaces list the A40 between an RTX 4090 and an L40S).
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from .. import presets

GPU_PRICES_USD_PER_HOUR: dict[str, float] = {
    "rtx3090": 0.30,
    "rtx4090": 0.60,
    "l4": 0.70,
    "l40s": 0.90,
    "a10g": 1.01,
    "a100-40gb": 1.00,
    "a100-80gb": 1.30,
    "h100-80gb": 3.00,
    "h100-64gb": 2.50,
    "h200": 4.00,
    "a40": 0.45,
    "a10": 0.75,
    "t4": 0.53,
    "a100-40gb-pcie": 0.90,
    "a100-80gb-pcie": 1.20,
    "h100-pcie": 2.49,
    "b200": 5.00,
}


def price_table(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """The price presets with the user's overrides; raises ValueError naming a bad GPU or price."""
    out = dict(GPU_PRICES_USD_PER_HOUR)
    for gpu, p in (overrides or {}).items():
        if gpu not in presets.GPUS:
            raise ValueError(f"gpu_prices_usd_per_hour: unknown gpu {gpu!r}; allowed: {', '.join(presets.GPUS)}")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p <= 0:
            raise ValueError(f"gpu_prices_usd_per_hour: {gpu}: invalid price {p!r}; allowed: a positive number (US$/h)")
        out[gpu] = float(p)
    return out


def cost_per_mtok_usd(price_usd_per_hour: float, output_tok_s: float) -> float:
    """US$ per million output tokens when the GPU produces ``output_tok_s`` tokens/s while rented."""
    if not (output_tok_s > 0):
        return math.nan
    return price_usd_per_hour / (output_tok_s * 3600.0) * 1e6
