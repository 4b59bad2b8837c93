"""Dense-layer kernel model: the GPU time of one transformer layer's linear projections.

One layer's dense part is four GEMMs per tensor-parallel worker, y[M, N] = x[M, K] W[K, N] with
M = tokens in the forward pass (docs/model.md, "Dense-layer kernel model"):

    qkv_proj      K = hidden                   N = (n_heads + 2 n_kv_heads) head_dim / tp
    o_proj        K = n_heads head_dim / tp    N = hidden
    gate_up_proj  K = hidden                   N = 2 intermediate / tp  (intermediate / tp if plain)
    down_proj     K = intermediate / tp        N = hidden

Each GEMM is a roofline whose two sides are spec-sheet ideal times with shape-dependent efficiency:

    M~   = M if M <= 128 else 128 ceil(M / 128)         (tile quantization of the token dimension)
    x_c  = 2 M~ N K / peak_flops                        ideal compute time
    x_m  = 2 (N K + M K + M N) / hbm_bandwidth          ideal memory time (fp16 weights, in, out)
    t_c  = (x_c + tau_c) / eta_c                        compute side: peak share, fill/drain time
    t_m  = x_m / (eta_m (1 - exp(-(x_m / tau_m)^alpha)))  memory side: achieved bandwidth ramps up
    t    = max(t_c, t_m) + gamma min(t_c, t_m)          partial overlap of the two

Six parameters (``PARAM_NAMES``), the same for every GPU and model: two shares of the spec sheet
(``eta_c``, ``eta_m``), two time constants in microseconds (``tau_c_us``, ``tau_m_us``), the ramp's
shape ``alpha`` and the overlap ``gamma``.  ``KERNEL_PARAMS`` holds them as fitted by
``engine.calibration.kernel_fit`` on Vidur's profiled linear operators (A100 and H100, Llama-2-7B and
CodeLlama-34B; docs/validation.md); the reference data are not needed at run time.

``gemm_seconds`` is the jitted scalar kernel (floats in, seconds out) and ``dense_layer_seconds``
its sum over a layer's operators, for the step cost to call with dimensions it laid out once
(``dense_dims``); ``dense_layer_ms`` and ``dense_op_ms`` are the validated Python entry points.
"""
from __future__ import annotations

import math
from numbers import Integral

import numpy as np
from numba import njit

from .presets import GPU, GPUS, MODELS, Model, get_gpu, get_model

#: The dense operators of one layer, in execution order (Vidur's attn_pre_proj, attn_post_proj,
#: mlp_up_proj, mlp_down_proj).
DENSE_OPS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
#: Order of the parameter array the jitted kernels take (``param_array``).
PARAM_NAMES = ("eta_c", "tau_c_us", "eta_m", "tau_m_us", "alpha", "gamma")
#: Fitted by engine.calibration.kernel_fit.fit_kernel_params() on
#: engine/data/reference/kernel_profiles/vidur_linear_ops.csv (all 4,176 rows; soft-L1 least squares on
#: the log error of each operator's time); tests/test_kernels.py checks that a refit reproduces them.
KERNEL_PARAMS: dict[str, float] = {
    "eta_c": 0.7763,     # achieved share of the dense FP16 peak (large GEMMs)
    "tau_c_us": 4.017,   # compute fill/drain time per GEMM, microseconds
    "eta_m": 0.8991,     # achieved share of the HBM bandwidth (long weight streams)
    "tau_m_us": 5.923,   # ideal memory time at which the bandwidth ramp is 1 - 1/e of full, microseconds
    "alpha": 0.4098,     # shape of that ramp
    "gamma": 0.3324,     # share of the shorter side not hidden under the longer one
}
#: Rows of the token tile: GEMMs over more than TILE_M tokens run whole tiles of TILE_M rows.
TILE_M = 128.0
#: Bytes per weight / activation element (the simulator's 16-bit convention, docs/model.md 2).
DTYPE_BYTES = 2.0


@njit(cache=True, nogil=True, _nrt=False)
def gemm_seconds(m, n, k, flops_per_s, bytes_per_s, eta_c, tau_c_s, eta_m, tau_m_s, alpha, gamma):
    """Seconds of one fp16 GEMM y[m, n] = x[m, k] W[k, n] (module docstring); all arguments floats."""
    mp = m
    if m > TILE_M:
        mp = math.ceil(m / TILE_M) * TILE_M
    x_c = 2.0 * mp * n * k / flops_per_s
    x_m = DTYPE_BYTES * (n * k + m * k + m * n) / bytes_per_s
    t_c = (x_c + tau_c_s) / eta_c
    ramp = -math.expm1(-((x_m / tau_m_s) ** alpha))
    t_m = x_m / (eta_m * ramp)
    if t_c >= t_m:
        return t_c + gamma * t_m
    return t_m + gamma * t_c


@njit(cache=True, nogil=True, _nrt=False)
def dense_layer_seconds(m, n_dims, k_dims, flops_per_s, bytes_per_s, params):
    """Seconds of one layer's dense operators at ``m`` tokens: the sum of ``gemm_seconds`` over the
    per-worker dimensions ``n_dims[i]``, ``k_dims[i]`` (float arrays, ``dense_dims``) with the
    parameter array ``params`` (``param_array``)."""
    t = 0.0
    for i in range(n_dims.shape[0]):
        t += gemm_seconds(m, n_dims[i], k_dims[i], flops_per_s, bytes_per_s, params[0], params[1], params[2],
                          params[3], params[4], params[5])
    return t


@njit(cache=True, nogil=True)
def gemm_seconds_many(m, n, k, flops_per_s, bytes_per_s, params):
    """``gemm_seconds`` over arrays of equal length (the fitter's vectorised form)."""
    out = np.empty(m.shape[0])
    for i in range(m.shape[0]):
        out[i] = gemm_seconds(m[i], n[i], k[i], flops_per_s[i], bytes_per_s[i], params[0], params[1], params[2],
                              params[3], params[4], params[5])
    return out


def param_array(params: dict | None = None) -> np.ndarray:
    """The parameters in ``PARAM_NAMES`` order, time constants in seconds (what the kernels take)."""
    p = dict(KERNEL_PARAMS)
    if params is not None:
        unknown = set(params) - set(PARAM_NAMES)
        if unknown:
            raise ValueError(f"params: unknown name(s) {', '.join(sorted(unknown))}; allowed: {', '.join(PARAM_NAMES)}")
        p.update(params)
    for name in PARAM_NAMES:
        v = p[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"params.{name}: invalid value {v!r}; allowed: a finite number >= 0")
    for name in ("eta_c", "eta_m", "tau_m_us", "alpha"):
        if p[name] <= 0:
            raise ValueError(f"params.{name}: invalid value {p[name]!r}; allowed: a positive number")
    if p["alpha"] > 1 or p["gamma"] > 1:
        raise ValueError("params.alpha, params.gamma: allowed: at most 1 (the time would not grow with the shape)")
    return np.array([p["eta_c"], p["tau_c_us"] * 1e-6, p["eta_m"], p["tau_m_us"] * 1e-6, p["alpha"], p["gamma"]],
                    dtype=np.float64)


def _gpu(gpu) -> GPU:
    if isinstance(gpu, GPU):
        return gpu
    if isinstance(gpu, str):
        return get_gpu(gpu)
    raise ValueError(f"gpu: invalid value {gpu!r}; allowed: a GPU preset name ({', '.join(GPUS)}) or an "
                     f"engine.presets.GPU")


def _model(model) -> Model:
    if isinstance(model, Model):
        return model
    if isinstance(model, str):
        return get_model(model)
    raise ValueError(f"model: invalid value {model!r}; allowed: a model preset name ({', '.join(MODELS)}) or an "
                     f"engine.presets.Model (e.g. from engine.model_from_hf_config)")


def _positive_int(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, Integral) or v < 1:
        raise ValueError(f"{name}: invalid value {v!r}; allowed: a positive integer")
    return int(v)


def op_shapes(model, tp: int = 1) -> dict[str, tuple[int, int]]:
    """Per-worker (N, K) of each dense operator (module docstring) under tensor parallelism ``tp``.

    Megatron-style sharding as vLLM and Vidur do it: q/k/v and gate/up split their outputs, o and down
    their inputs.  ``tp`` must divide n_heads and the intermediate size; with fewer KV heads than
    workers each worker keeps one (replicated) KV head, so ``tp`` must then be a multiple of n_kv_heads.
    """
    m = _model(model)
    tp = _positive_int("tp", tp)
    if m.n_heads % tp:
        raise ValueError(f"tp: invalid value {tp}; allowed: a divisor of {m.name}'s n_heads ({m.n_heads})")
    if m.n_kv_heads % tp and tp % m.n_kv_heads:
        raise ValueError(f"tp: invalid value {tp}; allowed: a divisor or a multiple of {m.name}'s n_kv_heads "
                         f"({m.n_kv_heads})")
    if m.intermediate_size % tp:
        raise ValueError(f"tp: invalid value {tp}; allowed: a divisor of {m.name}'s intermediate_size "
                         f"({m.intermediate_size})")
    h, hd, i = m.hidden_size, m.head_dim, m.intermediate_size // tp
    q = m.n_heads // tp * hd
    kv = max(m.n_kv_heads // tp, 1) * hd
    up = 2 * i if m.mlp == "gated" else i
    return {"qkv_proj": (q + 2 * kv, h), "o_proj": (h, q), "gate_up_proj": (up, h), "down_proj": (h, i)}


def dense_dims(model, tp: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(n_dims, k_dims): float arrays over ``DENSE_OPS``, what ``dense_layer_seconds`` takes."""
    s = op_shapes(model, tp)
    return (np.array([float(s[o][0]) for o in DENSE_OPS]), np.array([float(s[o][1]) for o in DENSE_OPS]))


def dense_op_ms(gpu, model, op: str, num_tokens: int, tp: int = 1, params: dict | None = None) -> float:
    """Predicted milliseconds of one dense operator (``DENSE_OPS``) of one layer, per tensor-parallel
    worker, for a forward pass over ``num_tokens`` tokens; ``params`` overrides ``KERNEL_PARAMS``."""
    if op not in DENSE_OPS:
        raise ValueError(f"op: unknown value {op!r}; allowed: {', '.join(DENSE_OPS)}")
    g = _gpu(gpu)
    n_tok = _positive_int("num_tokens", num_tokens)
    n, k = op_shapes(model, tp)[op]
    p = param_array(params)
    return 1e3 * gemm_seconds(float(n_tok), float(n), float(k), g.fp16_tflops * 1e12, g.hbm_gbps * 1e9,
                              p[0], p[1], p[2], p[3], p[4], p[5])


def dense_layer_ms(gpu, model, num_tokens: int, tp: int = 1, params: dict | None = None) -> float:
    """Predicted milliseconds of ONE transformer layer's dense projections (q/k/v, o, gate/up, down;
    attention, norms and activations excluded) for a forward pass over ``num_tokens`` tokens, per
    tensor-parallel worker at degree ``tp``.

    ``gpu``: a preset name (``engine.presets.GPUS``) or a ``GPU``; ``model``: a preset or registered
    name, or a ``Model`` (e.g. from ``engine.model_from_hf_config``).  Only the spec sheet's
    ``fp16_tflops`` and ``hbm_gbps`` are read.  ValueError for bad inputs.
    """
    g = _gpu(gpu)
    n_tok = _positive_int("num_tokens", num_tokens)
    n_dims, k_dims = dense_dims(model, tp)
    return 1e3 * dense_layer_seconds(float(n_tok), n_dims, k_dims, g.fp16_tflops * 1e12, g.hbm_gbps * 1e9,
                                     param_array(params))
