"""Reference data: Vidur's profiled linear operators (``kernel_profiles/vidur_linear_ops.csv``), the fit
of the dense-layer kernel model (``engine.kernels``) to them, its hold-out checks and its section of
the validation report.

A row of the file is one (GPU, model, tensor-parallel degree, num_tokens) measurement of one layer's
operators per worker; the dense part is the sum of its four projections.  Errors are per row:
``rel_error = predicted / measured - 1`` of that sum; MAPE = mean |rel_error|, worst = max |rel_error|
over the rows of a group.  The fit itself is per operator (soft-L1 least squares on log errors), so the
same constants serve ``dense_op_ms`` and ``dense_layer_ms``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from .. import kernels as K
from ..limits import write_csv
from ..presets import get_gpu, get_model, model_from_hf_config
from ..scenario import Scenario
from .refdata import _ref

KERNEL_CSV = "kernel_profiles/vidur_linear_ops.csv"
#: Vidur's device names -> GPU presets.  The README says "A100 80 GB" and "H100 80 GB"; the SXM parts
#: (the H100's measured weight streaming, ~3 TB/s, exceeds the PCIe card's 2 TB/s; its 4096-token GEMMs
#: reach 75 % of the SXM peak, which would be 98 % of the PCIe card's).
VIDUR_GPUS = {"a100": "a100-80gb", "h100": "h100-80gb"}
#: Vidur's models: Llama-2-7B is a preset; CodeLlama-34B is built from its config.json values
#: (codellama/CodeLlama-34b-Instruct-hf; the dense shapes are also the file's own columns, checked).
CODELLAMA_34B_CONFIG = {
    "_name_or_path": "codellama/CodeLlama-34b-Instruct-hf", "architectures": ["LlamaForCausalLM"],
    "model_type": "llama", "hidden_act": "silu", "hidden_size": 8192, "intermediate_size": 22016,
    "max_position_embeddings": 16384, "num_attention_heads": 64, "num_hidden_layers": 48,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "vocab_size": 32000,
}
VIDUR_MODELS = {"meta-llama/Llama-2-7b-hf": lambda: get_model("llama-2-7b"),
                "codellama/CodeLlama-34b-Instruct-hf": lambda: model_from_hf_config(CODELLAMA_34B_CONFIG,
                                                                                   "codellama-34b")}
#: engine.kernels.DENSE_OPS -> the file's time columns.
OP_COLUMNS = {"qkv_proj": "attn_pre_proj_median_ms", "o_proj": "attn_post_proj_median_ms",
              "gate_up_proj": "mlp_up_proj_median_ms", "down_proj": "mlp_down_proj_median_ms"}
TOKEN_RANGES = ((1, 16), (17, 64), (65, 512), (513, 4096))
#: Targets per (GPU, model) pair on the layer totals.
KERNEL_TARGETS = {"mape": 0.07, "worst": 0.20}
KERNEL_BOUNDS = {"eta_c": (0.05, 1.0), "tau_c_us": (0.0, 50.0), "eta_m": (0.05, 1.0), "tau_m_us": (0.01, 100.0),
                 "alpha": (0.05, 1.0), "gamma": (0.0, 1.0)}
KERNEL_START = {"eta_c": 0.75, "tau_c_us": 2.0, "eta_m": 0.85, "tau_m_us": 5.0, "alpha": 0.4, "gamma": 0.4}
#: soft-L1 scale on the log error (errors beyond ~10 % count linearly: kernel-selection outliers).
F_SCALE = 0.1


def load_kernel_profiles(path=None) -> pd.DataFrame:
    """The file as a DataFrame with ``row`` (its row number), ``gpu_preset``, ``model_key`` and ``tp``."""
    df = pd.read_csv(_ref(KERNEL_CSV, path))
    need = {"gpu", "model", "num_tokens", "num_tensor_parallel_workers", *OP_COLUMNS.values()}
    missing = need - set(df.columns)
    if missing:
        raise ValueError(f"data: {KERNEL_CSV} lacks column(s) {', '.join(sorted(missing))}")
    bad = set(df["gpu"]) - set(VIDUR_GPUS)
    if bad:
        raise ValueError(f"data: gpu {sorted(bad)!r} has no preset; allowed: {', '.join(VIDUR_GPUS)}")
    bad = set(df["model"]) - set(VIDUR_MODELS)
    if bad:
        raise ValueError(f"data: model {sorted(bad)!r} has no model; allowed: {', '.join(VIDUR_MODELS)}")
    df = df.reset_index(drop=True)
    df.insert(0, "row", np.arange(len(df)))
    df["gpu_preset"] = df["gpu"].map(VIDUR_GPUS)
    df["model_key"] = df["model"].map(lambda m: m.split("/")[-1])
    df["tp"] = df["num_tensor_parallel_workers"].astype(int)
    return df


def _check_shapes(model, rows: pd.DataFrame) -> None:
    r = rows.iloc[0]
    want = {"n_head": model.n_heads, "n_kv_head": model.n_kv_heads, "n_embd": model.hidden_size,
            "n_expanded_embd": model.intermediate_size}
    for col, v in want.items():
        if col in rows and int(r[col]) != v:
            raise ValueError(f"data: {r['model']} has {col} = {r[col]}, the model {model.name} {v}")
    if "use_gated_mlp" in rows and bool(r["use_gated_mlp"]) != (model.mlp == "gated"):
        raise ValueError(f"data: {r['model']} use_gated_mlp = {r['use_gated_mlp']}, the model {model.name} {model.mlp}")


def op_table(df: pd.DataFrame) -> pd.DataFrame:
    """One line per (row, operator): the GEMM's per-worker N, K, the GPU's peak rates, the measured ms."""
    parts = []
    for (gname, mname, tp), g in df.groupby(["gpu_preset", "model", "tp"], sort=False):
        gpu, model = get_gpu(gname), VIDUR_MODELS[mname]()
        _check_shapes(model, g)
        shapes = K.op_shapes(model, int(tp))
        for op in K.DENSE_OPS:
            n, k = shapes[op]
            parts.append(pd.DataFrame({
                "row": g["row"].to_numpy(), "gpu": g["gpu"].to_numpy(), "model": g["model_key"].to_numpy(),
                "tp": int(tp), "num_tokens": g["num_tokens"].to_numpy(), "op": op, "n": float(n), "k": float(k),
                "flops_per_s": gpu.fp16_tflops * 1e12, "bytes_per_s": gpu.hbm_gbps * 1e9,
                "measured_ms": g[OP_COLUMNS[op]].to_numpy(dtype=float)}))
    return pd.concat(parts, ignore_index=True).sort_values(["row", "op"], kind="stable").reset_index(drop=True)


def predict_ops_ms(ops: pd.DataFrame, params: dict | None = None) -> np.ndarray:
    """The kernel model's ms for each line of ``op_table`` (the jitted kernel, vectorised)."""
    return 1e3 * K.gemm_seconds_many(ops["num_tokens"].to_numpy(float), ops["n"].to_numpy(float),
                                     ops["k"].to_numpy(float), ops["flops_per_s"].to_numpy(float),
                                     ops["bytes_per_s"].to_numpy(float), K.param_array(params))


@dataclass
class KernelFit:
    values: dict[str, float]
    nfev: int
    status: str
    wall_s: float
    n_ops: int
    start: dict = field(default_factory=lambda: dict(KERNEL_START))


def fit_kernel_params(ops: pd.DataFrame | None = None, start: dict | None = None) -> KernelFit:
    """Fit ``engine.kernels.PARAM_NAMES`` to the measured operator times (all of the file by default)."""
    t0 = time.perf_counter()
    if ops is None:
        ops = op_table(load_kernel_profiles())
    names = K.PARAM_NAMES
    st = dict(KERNEL_START, **(start or {}))
    lo = np.array([KERNEL_BOUNDS[n][0] for n in names])
    hi = np.array([KERNEL_BOUNDS[n][1] for n in names])
    cols = [ops[c].to_numpy(float) for c in ("num_tokens", "n", "k", "flops_per_s", "bytes_per_s")]
    log_meas = np.log(ops["measured_ms"].to_numpy(float) * 1e-3)
    scale = np.array([1.0, 1e-6, 1.0, 1e-6, 1.0, 1.0])  # microseconds -> seconds

    def resid(p):
        return np.log(K.gemm_seconds_many(*cols, p * scale)) - log_meas

    r = least_squares(resid, np.array([st[n] for n in names]), bounds=(lo, hi), loss="soft_l1", f_scale=F_SCALE,
                      x_scale="jac")
    return KernelFit({n: float(v) for n, v in zip(names, r.x)}, int(r.nfev), r.message, time.perf_counter() - t0,
                     len(ops), st)


def roofline_ms(ops: pd.DataFrame, compute_eff: float, bw_eff: float) -> pd.Series:
    """Today's step-cost roofline (engine/costs.py) on the same operators, per row: max(sum of GEMM flops /
    (peak x compute_eff), weight bytes / (bandwidth x bw_eff)), as step_seconds counts the dense part."""
    flops = 2.0 * ops["num_tokens"] * ops["n"] * ops["k"]
    wbytes = K.DTYPE_BYTES * ops["n"] * ops["k"]
    g = pd.DataFrame({"row": ops["row"], "tc": flops / (ops["flops_per_s"] * compute_eff),
                      "tm": wbytes / (ops["bytes_per_s"] * bw_eff)}).groupby("row").sum()
    return 1e3 * np.maximum(g["tc"], g["tm"])


def fit_constant_roofline(ops: pd.DataFrame) -> dict[str, float]:
    """The best constant-efficiency roofline for these rows (compute_eff, bw_eff refitted on them; same
    loss as the kernel fit, on the layer totals): what shape-dependent efficiencies add beyond a refit."""
    meas = np.log(ops.groupby("row")["measured_ms"].sum().to_numpy())
    r = least_squares(lambda p: np.log(roofline_ms(ops, p[0], p[1]).to_numpy()) - meas, [0.6, 0.8],
                      bounds=([0.01, 0.01], [1.0, 1.0]), loss="soft_l1", f_scale=F_SCALE)
    return {"compute_eff": float(r.x[0]), "bw_eff": float(r.x[1])}


def layer_table(ops: pd.DataFrame, params: dict | None = None, roofline: dict | None = None) -> pd.DataFrame:
    """Per row of the file: measured and predicted dense-layer ms and their relative error; with
    ``roofline`` ({"label": (compute_eff, bw_eff)}) also those rooflines' ms and errors."""
    o = ops.assign(predicted_ms=predict_ops_ms(ops, params))
    t = o.groupby("row").agg(gpu=("gpu", "first"), model=("model", "first"), tp=("tp", "first"),
                             num_tokens=("num_tokens", "first"), measured_ms=("measured_ms", "sum"),
                             predicted_ms=("predicted_ms", "sum")).reset_index()
    t["rel_error"] = t["predicted_ms"] / t["measured_ms"] - 1
    for label, (ce, be) in (roofline or {}).items():
        t[f"{label}_ms"] = roofline_ms(ops, ce, be).reindex(t["row"]).to_numpy()
        t[f"{label}_error"] = t[f"{label}_ms"] / t["measured_ms"] - 1
    bins = [0] + [hi for _, hi in TOKEN_RANGES]
    t["tokens"] = pd.cut(t["num_tokens"], bins, labels=[f"{lo}-{hi}" for lo, hi in TOKEN_RANGES]).astype(str)
    return t


def error_summary(t: pd.DataFrame, by=("gpu", "model"), col: str = "rel_error") -> pd.DataFrame:
    """n, MAPE, p95 and worst |error| (and the worst row's num_tokens / tp) per group."""
    rows = []
    for key, g in t.groupby(list(by), sort=True):
        a = g[col].abs()
        w = g.loc[a.idxmax()]
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "n": len(g), "mape": a.mean(),
                     "p95": a.quantile(0.95), "worst": a.max(), "worst_at": f"tp {w['tp']}, {w['num_tokens']} tok"})
    return pd.DataFrame(rows)


#: Hold-out checks: (name, column, training value) -> fit on rows where column == value, predict the rest.
HOLD_OUTS = (("fit A100, predict H100", "gpu", "a100"), ("fit H100, predict A100", "gpu", "h100"),
             ("fit Llama-2-7B, predict CodeLlama-34B", "model", "Llama-2-7b-hf"),
             ("fit CodeLlama-34B, predict Llama-2-7B", "model", "CodeLlama-34b-Instruct-hf"))


def kernel_validation(path=None) -> dict:
    """The in-sample fit, today's roofline and a refitted constant roofline on the same rows, and the
    leave-one-GPU-out / leave-one-model-out checks."""
    ops = op_table(load_kernel_profiles(path))
    fit = fit_kernel_params(ops)
    default = {f: Scenario.__dataclass_fields__[f].default for f in ("compute_eff", "bw_eff")}
    const = fit_constant_roofline(ops)
    table = layer_table(ops, fit.values, {"roofline": (default["compute_eff"], default["bw_eff"]),
                                          "roofline_refit": (const["compute_eff"], const["bw_eff"])})
    op_err = ops.assign(rel_error=predict_ops_ms(ops, fit.values) / ops["measured_ms"] - 1)
    holds = []
    for name, col, value in HOLD_OUTS:
        f = fit_kernel_params(ops[ops[col] == value])
        held = ops[ops[col] != value]
        holds.append((name, f, layer_table(held, f.values)))
    return {"fit": fit, "ops": op_err, "table": table, "default_roofline": default, "const_roofline": const,
            "holdouts": holds}


def _cell(a: pd.Series) -> str:
    return f"{100 * a.abs().mean():.1f} / {100 * a.abs().max():.0f}"


def _grid(t: pd.DataFrame, col: str, key: str, order) -> pd.DataFrame:
    """MAPE / worst (%) per (gpu, model) and each value of ``key``."""
    out = []
    for (gpu, model), g in t.groupby(["gpu", "model"], sort=True):
        row = {"gpu": gpu, "model": model, "all": _cell(g[col])}
        for v in order:
            h = g[g[key] == v]
            row[str(v)] = _cell(h[col]) if len(h) else ""
        out.append(row)
    return pd.DataFrame(out)


def _md(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines)


def kernel_plot(t: pd.DataFrame, path: Path) -> bool:
    """Measured vs predicted dense-layer ms, log-log, one panel per GPU (today's roofline in grey)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # pragma: no cover - matplotlib is a dependency, but plots are optional
        return False
    gpus = sorted(t["gpu"].unique())
    fig, axes = plt.subplots(1, len(gpus), figsize=(5.2 * len(gpus), 4.6))
    for ax, gpu in zip(np.atleast_1d(axes), gpus):
        g = t[t["gpu"] == gpu]
        if "roofline_ms" in g:
            ax.scatter(g["measured_ms"], g["roofline_ms"], s=4, c="0.75", label="today's roofline (0.6 / 0.8)")
        for model, h in g.groupby("model"):
            ax.scatter(h["measured_ms"], h["predicted_ms"], s=5, label=f"kernel model, {model}")
        lo, hi = g["measured_ms"].min() / 1.5, g["measured_ms"].max() * 1.5
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        for f in (0.8, 1.2):
            ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.6, label="+-20 %" if f > 1 else None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured ms (one layer's q/k/v, o, gate/up, down)")
        ax.set_ylabel("predicted ms")
        ax.set_title(f"{gpu} ({VIDUR_GPUS[gpu]}), tp 1-8, 1-4096 tokens")
        ax.legend(fontsize=7, markerscale=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def kernel_section(out_dir: Path, plots: bool = True, suffix: str = "") -> tuple[list[str], dict]:
    """The report's section (markdown lines) and its results; writes kernel_errors{suffix}.csv (and the
    plot) into ``out_dir`` (docs/validation)."""
    res = kernel_validation()
    fit, t = res["fit"], res["table"]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(t, out_dir / f"kernel_errors{suffix}.csv", index=False)
    png = plots and kernel_plot(t, out_dir / "kernel_dense.png")
    d, c = res["default_roofline"], res["const_roofline"]
    summ = error_summary(t)
    L = ["## Dense-layer kernel model (`kernel_profiles/vidur_linear_ops.csv`)", "",
         "Data: microsoft/vidur @ 7d47513 (MIT), its profiler's per-layer operator times (median of repeats, fp16) on "
         f"an A100 80 GB and an H100 80 GB (presets `{VIDUR_GPUS['a100']}`, `{VIDUR_GPUS['h100']}`: the SXM parts, "
         "as the H100's weight streaming above 2 TB/s shows), Llama-2-7B and CodeLlama-34B, 1-4096 tokens, "
         f"tensor-parallel degree 1, 2, 4, 8 per worker: {len(t)} rows.  Predicted: `engine.dense_layer_ms` "
         "(docs/model.md, \"Dense-layer kernel model\"), the sum of the fused q/k/v, o, gate/up and down "
         "projections; each GPU enters only through its spec sheet (`fp16_tflops`, `hbm_gbps`).", "",
         f"Fitted on all rows ({fit.n_ops} operator times, soft-L1 least squares on the log error, {fit.nfev} "
         f"evaluations, {fit.wall_s:.1f} s); the same six constants for both GPUs and both models "
         "(`engine/kernels.py` ships them):", "",
         _md(pd.DataFrame([{"parameter": k, "value": v, "shipped": K.KERNEL_PARAMS[k]} for k, v in fit.values.items()])),
         "",
         "Errors are per row of the file (one GPU, model, tp and token count): relative error of the predicted "
         "layer total; **MAPE** = mean |error|, **worst** = max |error| over the rows of a group.  Measured times "
         "are rounded to 1 us (0.5 us for medians of even counts), so a 4-7 us operator carries up to ~10 % "
         "rounding by itself.", "",
         "### Targets (MAPE <= 7 %, worst <= 20 % per GPU/model pair)", ""]
    for _, r in summ.iterrows():
        ok = r["mape"] <= KERNEL_TARGETS["mape"] and r["worst"] <= KERNEL_TARGETS["worst"]
        over = int((t.loc[(t["gpu"] == r["gpu"]) & (t["model"] == r["model"]), "rel_error"].abs()
                    > KERNEL_TARGETS["worst"]).sum())
        L.append(f"- {r['gpu']} / {r['model']}: MAPE {100 * r['mape']:.1f} %, worst {100 * r['worst']:.1f} % "
                 f"({r['worst_at']}), p95 {100 * r['p95']:.1f} %, {over} of {r['n']} rows above 20 % -> "
                 f"**{'MET' if ok else 'NOT MET'}**"
                 + ("" if ok else f" ({'MAPE' if r['mape'] > KERNEL_TARGETS['mape'] else 'worst'} above target)"))
    worst = t.assign(abs_err=t["rel_error"].abs()).nlargest(10, "abs_err")
    L += ["", "The ten worst rows:", "",
          _md(worst[["gpu", "model", "tp", "num_tokens", "measured_ms", "predicted_ms", "rel_error"]]), "",
          "They sit where cuBLAS changes kernel or tile at a shape the model's single 128-token tile does not "
          "follow (e.g. on the H100, CodeLlama-34B tp 1 gate/up takes 0.73 ms at 328-384 tokens and 0.57 ms at "
          "392; Llama-2-7B tp 4-8 just past 256 tokens), and at the smallest kernels (H100, Llama-2-7B tp 8, "
          "1 token: four kernels of 4-12 us, under the model's compute floor of tau_c / eta_c per GEMM).", "",
          "### Against today's roofline on the same rows", "",
          f"Today's step cost prices these operators as max(flops / (peak x compute_eff), weight bytes / (bandwidth "
          f"x bw_eff)) with the scenario defaults compute_eff = {d['compute_eff']}, bw_eff = {d['bw_eff']} "
          f"(`roofline`); `roofline_refit` is the same constant-efficiency form with both efficiencies refitted to "
          f"these rows (compute_eff = {c['compute_eff']:.3f}, bw_eff = {c['bw_eff']:.3f}).  MAPE / worst (%):", ""]
    cmp_rows = []
    for (gpu, model), g in t.groupby(["gpu", "model"]):
        cmp_rows.append({"gpu": gpu, "model": model, "kernel model": _cell(g["rel_error"]),
                         "roofline (0.6 / 0.8)": _cell(g["roofline_error"]),
                         "roofline_refit": _cell(g["roofline_refit_error"])})
    L += [_md(pd.DataFrame(cmp_rows)), "", "By token range, all pairs (MAPE / worst %):", "",
          _md(pd.DataFrame([{"tokens": r, **{lab: _cell(t.loc[t["tokens"] == r, col]) for lab, col in
                                              (("kernel model", "rel_error"), ("roofline (0.6 / 0.8)", "roofline_error"),
                                               ("roofline_refit", "roofline_refit_error"))}}
                            for r in [f"{lo}-{hi}" for lo, hi in TOKEN_RANGES]])), "",
          "### In-sample, per token range and per tensor-parallel degree (MAPE / worst %)", "",
          _md(_grid(t, "rel_error", "tokens", [f"{lo}-{hi}" for lo, hi in TOKEN_RANGES])), "",
          _md(_grid(t, "rel_error", "tp", sorted(t["tp"].unique()))), "",
          "Per operator (in-sample, per row of the file; not a target): " + ", ".join(
              f"{op} {_cell(g['rel_error'])}" for op, g in res["ops"].groupby("op", sort=False)) + ".", "",
          "### Hold-out checks: fit on one GPU (model), predict the other", "",
          "Refitted on the training rows only, evaluated on the other GPU's (model's) rows.  The model's form was "
          "chosen (among about a dozen variants) by these same checks on this file, so they test the constants, "
          "not the choice of form.  MAPE / worst (%):", ""]
    for name, f, h in res["holdouts"]:
        L += [f"**{name}** (fitted: " + ", ".join(f"{k} {v:.4g}" for k, v in f.values.items()) + "):", "",
              _md(_grid(h, "rel_error", "tokens", [f"{lo}-{hi}" for lo, hi in TOKEN_RANGES])), ""]
    if png:
        L += ["![dense-layer kernel model](validation/kernel_dense.png)", ""]
    L += [f"Per-row errors: `validation/kernel_errors{suffix}.csv`.", ""]
    return L, res
