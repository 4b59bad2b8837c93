"""Observe a live OpenAI-compatible server (vLLM, SGLang) under a scenario's traffic, LoRA-aware.

Invariants:

* the traffic is the engine's own request stream for the scenario (``engine.workload.generate``: arrival times,
  adapter indices drawn by its popularity, prompt and output lengths), so a replay simulates exactly what was sent;
  adapter index k is the server's k-th adapter name (``adapter_names``); a closed loop keeps ``concurrency``
  requests in flight;
* a prompt of N tokens is N words of the reference server's tokenizer (``assets.word``): exact on the reference
  server; on another server the prompt length the server reports (``usage.prompt_tokens``) is recorded beside
  the length sent;
* every request sent is one row of ``requests.csv``, whatever happened to it: ``status`` ok, or http_<code>,
  timeout, error (with the server's message); nothing is dropped;
* times are seconds from the run's start on one monotonic clock: ``send_s`` when the request left, ``first_token_s``
  when the first streamed chunk with a token arrived, ``token_times_ms`` every token chunk's arrival (ms from
  send), ``end_s`` when the stream ended;
* bounded: at most ``max_requests`` requests (and the scenario's ``duration_s`` of sending), each at most
  ``request_timeout_s``, the whole run at most ``duration_s + drain_timeout_s``; requests still open then are
  recorded as timeout;
* ``/metrics`` is scraped every ``metrics_period_s`` (running / waiting requests, the running and waiting adapters
  of ``vllm:lora_requests_info``, KV usage, preemptions, prefix-cache queries and hits) into ``timeseries.csv``.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import platform
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

from ..limits import write_csv
from ..scenario import Scenario
from ..workload import Workload, generate
from .assets import word

#: The format tag of an observed run's ``run.json`` (read by ``engine.calibration`` as a tool run).
FORMAT = "lora-whatif-observed"
FORMAT_VERSION = 1
#: Columns of ``requests.csv``, in order.
REQUEST_COLUMNS = ("request_id", "adapter", "adapter_index", "send_s", "first_token_s", "end_s", "prompt_tokens",
                   "prefix_tokens",
                   "output_tokens", "prompt_tokens_reported", "output_tokens_reported", "token_chunks", "ttft_ms",
                   "e2e_ms", "tpot_ms", "status", "http_status", "error", "token_times_ms")
#: Columns of ``timeseries.csv``.
TIMESERIES_COLUMNS = ("t_s", "running", "waiting", "running_adapters", "waiting_adapters", "n_running_adapters",
                      "n_waiting_adapters", "max_lora", "kv_usage", "preemptions", "prefix_queries", "prefix_hits",
                      "scrape_ms")
#: Hard caps of one observation.
MAX_REQUESTS = 100_000
MAX_DURATION_S = 3600.0


@dataclass
class Observation:
    """An observed run: one row per request, one row per scrape, and what is known of the run."""

    requests: pd.DataFrame
    timeseries: pd.DataFrame
    info: dict
    out_dir: Path | None = None

    def summary(self) -> dict:
        return self.info["summary"]


@dataclass
class _Req:
    i: int
    adapter: str
    adapter_index: int
    prompt_tokens: int
    output_tokens: int
    prefix_tokens: int = 0
    send_s: float = math.nan
    first_s: float = math.nan
    end_s: float = math.nan
    chunks: list = field(default_factory=list)
    prompt_reported: int = -1
    output_reported: int = -1
    status: str = "not_sent"
    http_status: int = 0
    error: str = ""


def prompt_text(i: int, n: int, prefix: int, seed: int, vocab_size: int) -> str:
    """Request ``i``'s prompt: ``prefix`` shared words (the same for every request), then ``n - prefix`` words of
    its own (drawn from (seed, i), so two requests share no block by chance)."""
    shared = [word(k, vocab_size) for k in range(prefix)]
    rng = np.random.default_rng([seed, 0x0B5E, i])
    own = [word(int(k), vocab_size) for k in rng.integers(0, vocab_size - 1, size=max(n - prefix, 0))]
    return " ".join(shared + own)


def _one_line(e: BaseException | str, limit: int = 300) -> str:
    s = " ".join(str(e).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def server_models(url: str, timeout_s: float = 10.0) -> tuple[str, list[str], dict]:
    """(base model id, adapter ids, the /v1/models payload) of the server at ``url``; a ValueError in one line
    for an unreachable server or an answer that is not a model list."""
    try:
        r = httpx.get(url.rstrip("/") + "/v1/models", timeout=timeout_s)
    except httpx.HTTPError as e:
        raise ValueError(f"observe: cannot reach {url} ({type(e).__name__}: {_one_line(e) or 'no answer'}); "
                         "is the server running at that address?") from None
    if r.status_code != 200:
        raise ValueError(f"observe: {url}/v1/models answered HTTP {r.status_code}: {_one_line(r.text, 200)}")
    try:
        data = r.json()["data"]
        ids = [(m["id"], m.get("parent")) for m in data]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"observe: {url}/v1/models did not answer an OpenAI model list") from None
    bases = [i for i, p in ids if not p]
    adapters = [i for i, p in ids if p]
    if not bases:
        raise ValueError(f"observe: {url}/v1/models lists no base model")
    return bases[0], adapters, r.json()


def _natural(name: str):
    import re
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def resolve_adapters(sc: Scenario, available: list[str], names: list[str] | None) -> list[str]:
    """The adapter name of each of the scenario's ``num_adapters`` indices: ``names`` if given (each must be one the
    server lists), else the server's adapters in natural order (l0, l1, ..., l10)."""
    if names:
        missing = [n for n in names if n not in available]
        if missing:
            raise ValueError(f"observe: adapter {missing[0]!r} is not served at this URL; the server lists "
                             f"{', '.join(sorted(available, key=_natural)[:20]) or 'no adapters'}")
        chosen = list(names)
    else:
        chosen = sorted(available, key=_natural)
    if len(chosen) < sc.num_adapters:
        raise ValueError(f"num_adapters: {sc.num_adapters} adapters in the scenario, but "
                         f"{'--adapters names' if names else 'the server lists'} {len(chosen)}; allowed: at most "
                         f"{len(chosen)} (or serve more adapters)")
    return chosen[: sc.num_adapters]


def parse_metrics(text: str) -> dict:
    """The values ``timeseries.csv`` keeps from one ``/metrics`` page (vLLM's names; absent ones are NaN)."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {k: math.nan for k in ("running", "waiting", "kv_usage", "preemptions", "prefix_queries", "prefix_hits",
                                 "max_lora", "n_running_adapters", "n_waiting_adapters")}
    out.update(running_adapters="", waiting_adapters="")
    want = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
            "vllm:kv_cache_usage_perc": "kv_usage", "vllm:num_preemptions": "preemptions",
            "vllm:prefix_cache_queries": "prefix_queries", "vllm:prefix_cache_hits": "prefix_hits"}
    lora_latest = -math.inf
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            name = s.name[:-6] if s.name.endswith("_total") else s.name
            if name in want:
                k = want[name]
                out[k] = (0.0 if math.isnan(out[k]) else out[k]) + float(s.value)
            elif s.name == "vllm:lora_requests_info" and s.value > lora_latest:  # the newest series is the current one
                lora_latest = s.value
                run = [a for a in s.labels.get("running_lora_adapters", "").split(",") if a]
                wait = [a for a in s.labels.get("waiting_lora_adapters", "").split(",") if a]
                out.update(running_adapters=" ".join(run), waiting_adapters=" ".join(wait), n_running_adapters=len(run),
                           n_waiting_adapters=len(wait), max_lora=float(s.labels.get("max_lora", "nan") or "nan"))
    return out


class _Run:
    def __init__(self, url, sc, wl, names, base_model, vocab_size, max_requests, request_timeout_s, drain_timeout_s,
                 metrics_period_s, progress):
        self.url = url.rstrip("/")
        self.sc, self.wl, self.names, self.base = sc, wl, names, base_model
        self.vocab = vocab_size
        self.max_requests = max_requests
        self.req_timeout, self.drain_timeout, self.period = request_timeout_s, drain_timeout_s, metrics_period_s
        self.progress = progress
        self.reqs: list[_Req] = []
        self.scrapes: list[dict] = []
        self.t0 = 0.0
        self.done_sending = False

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def _make(self, i: int) -> _Req:
        a = int(self.wl.adapter[i])
        name = self.names[a] if self.names else self.base
        pfx = int(self.wl.prefix[i]) if self.wl.prefix is not None else 0
        return _Req(i, name, a if self.names else -1, int(self.wl.prompt_tokens[i]), int(self.wl.output_tokens[i]), pfx)

    async def _send(self, client: httpx.AsyncClient, rq: _Req) -> None:
        body = {"model": rq.adapter, "prompt": prompt_text(rq.i, rq.prompt_tokens, rq.prefix_tokens, self.sc.seed,
                                                           self.vocab),
                "max_tokens": rq.output_tokens, "min_tokens": rq.output_tokens, "ignore_eos": True, "stream": True,
                "temperature": 0.0, "stream_options": {"include_usage": True}}
        rq.send_s = self.now()
        try:
            async with asyncio.timeout(self.req_timeout):
                async with client.stream("POST", self.url + "/v1/completions", json=body) as resp:
                    rq.http_status = resp.status_code
                    if resp.status_code != 200:
                        text = (await resp.aread()).decode(errors="replace")
                        try:
                            text = json.loads(text).get("error", {}).get("message", text) if text.startswith("{") else text
                        except (ValueError, AttributeError):
                            pass
                        rq.status, rq.error = f"http_{resp.status_code}", _one_line(text, 200)
                        rq.end_s = self.now()
                        return
                    async for line in resp.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        payload = line[5:].strip()
                        if payload == "[DONE]":
                            break
                        t = self.now()
                        try:
                            obj = json.loads(payload)
                        except ValueError:
                            continue
                        if "error" in obj and not obj.get("choices"):
                            rq.status, rq.error = "error", _one_line(obj["error"].get("message", obj["error"])
                                                                     if isinstance(obj["error"], dict) else obj["error"])
                            rq.end_s = t
                            return
                        ch = obj.get("choices") or []
                        if ch and ch[0].get("text"):
                            if math.isnan(rq.first_s):
                                rq.first_s = t
                            rq.chunks.append(t)
                        u = obj.get("usage")
                        if u:
                            rq.prompt_reported = int(u.get("prompt_tokens", -1))
                            rq.output_reported = int(u.get("completion_tokens", -1))
            rq.end_s = self.now()
            rq.status = "ok" if rq.chunks else "error"
            if not rq.chunks:
                rq.error = "the stream ended without a token"
        except TimeoutError:
            rq.status, rq.error, rq.end_s = "timeout", f"no end within {self.req_timeout:g} s", self.now()
        except asyncio.CancelledError:
            rq.status, rq.error, rq.end_s = "timeout", "still open when the run's time ran out", self.now()
            raise
        except httpx.HTTPError as e:
            rq.status, rq.error, rq.end_s = "error", f"{type(e).__name__}: {_one_line(e, 200)}", self.now()
        finally:
            if self.progress is not None and rq.status != "not_sent":
                self.progress.update(1)

    async def _scrape(self, client: httpx.AsyncClient) -> None:
        while True:
            t = self.now()
            try:
                r = await client.get(self.url + "/metrics", timeout=max(self.period, 1.0))
                row = parse_metrics(r.text) if r.status_code == 200 else {}
            except (httpx.HTTPError, ValueError):
                row = {}
            if row:
                self.scrapes.append({"t_s": t, **row, "scrape_ms": (self.now() - t) * 1e3})
            await asyncio.sleep(max(self.period - (self.now() - t), 0.0))

    async def run(self) -> None:
        sc, wl = self.sc, self.wl
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.req_timeout, connect=10.0), limits=limits) as client:
            self.t0 = time.perf_counter()
            scraper = asyncio.create_task(self._scrape(client))
            tasks: list[asyncio.Task] = []
            n = min(len(wl), self.max_requests)
            deadline = sc.duration_s + self.drain_timeout
            try:
                if sc.arrival_process == "closed":
                    nxt = iter(range(n))

                    async def client_loop():
                        for i in nxt:
                            if self.now() >= sc.duration_s:
                                return
                            rq = self._make(i)
                            self.reqs.append(rq)
                            await self._send(client, rq)
                    tasks = [asyncio.create_task(client_loop()) for _ in range(sc.concurrency)]
                    await asyncio.wait(tasks, timeout=deadline)
                else:
                    for i in range(n):
                        delay = float(wl.arrival_s[i]) - self.now()
                        if delay > 0:
                            await asyncio.sleep(delay)
                        rq = self._make(i)
                        self.reqs.append(rq)
                        tasks.append(asyncio.create_task(self._send(client, rq)))
                    self.done_sending = True
                    if tasks:
                        await asyncio.wait(tasks, timeout=max(deadline - self.now(), 1.0))
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                scraper.cancel()
                await asyncio.gather(scraper, return_exceptions=True)


def _request_frame(reqs: list[_Req]) -> pd.DataFrame:
    rows = []
    for r in reqs:
        ttft = (r.first_s - r.send_s) * 1e3
        e2e = (r.end_s - r.send_s) * 1e3
        n_out = r.output_reported if r.output_reported >= 0 else len(r.chunks)
        tpot = (r.chunks[-1] - r.first_s) * 1e3 / (n_out - 1) if r.status == "ok" and n_out > 1 else math.nan
        rows.append({"request_id": r.i, "adapter": r.adapter, "adapter_index": r.adapter_index, "send_s": r.send_s,
                     "first_token_s": r.first_s, "end_s": r.end_s, "prompt_tokens": r.prompt_tokens,
                     "prefix_tokens": r.prefix_tokens,
                     "output_tokens": r.output_tokens, "prompt_tokens_reported": r.prompt_reported,
                     "output_tokens_reported": r.output_reported, "token_chunks": len(r.chunks),
                     "ttft_ms": ttft, "e2e_ms": e2e, "tpot_ms": tpot, "status": r.status, "http_status": r.http_status,
                     "error": r.error,
                     "token_times_ms": " ".join(f"{(t - r.send_s) * 1e3:.3f}" for t in r.chunks)})
    return pd.DataFrame(rows, columns=list(REQUEST_COLUMNS))


def summarize_requests(df: pd.DataFrame) -> dict:
    """Counts by status and the headline metrics of the ok requests (vLLM bench's definitions: throughput over
    the span from the run's start to the last end)."""
    ok = df[df["status"] == "ok"]
    counts = df["status"].value_counts().to_dict()
    out = {"sent": int(len(df)), "ok": int(len(ok)), "failed": int(len(df) - len(ok)),
           "by_status": {str(k): int(v) for k, v in counts.items()}}
    if len(ok):
        span = float(ok["end_s"].max())
        out.update(duration_s=span, request_throughput=len(ok) / span,
                   output_throughput=float(ok["output_tokens_reported"].clip(lower=0).sum()) / span)
        for m in ("ttft", "tpot", "e2e"):
            v = ok[f"{m}_ms"].dropna().to_numpy()
            if len(v):
                out.update({f"mean_{m}_ms": float(v.mean()), f"median_{m}_ms": float(np.median(v)),
                            f"p90_{m}_ms": float(np.percentile(v, 90)), f"p99_{m}_ms": float(np.percentile(v, 99))})
    return out


def observe(url: str, scenario: Scenario, out_dir=None, adapters: list[str] | None = None, max_requests: int = 2000,
            request_timeout_s: float = 120.0, drain_timeout_s: float = 120.0, metrics_period_s: float = 0.25,
            vocab_size: int = 1024, server: dict | None = None, device: dict | None = None,
            progress: bool = False) -> Observation:
    """Drive the server at ``url`` with ``scenario``'s traffic and record it (see the module docstring).

    ``adapters``: the names of the scenario's adapter indices (default: the server's, in natural order);
    ``server``: what is known of the server beyond what it reports (the reference server's ``description()``);
    ``device``: the machine the server ran on, measured (``engine.live.device``; ``presets.gpu_to_dict``);
    ``out_dir``: where ``requests.csv``, ``timeseries.csv`` and ``run.json`` go (None: not written).
    """
    sc = scenario.validate()
    if sc.num_replicas > 1:
        raise ValueError(f"num_replicas: {sc.num_replicas}; allowed: 1 (observe one server at a time)")
    if not isinstance(max_requests, int) or not 1 <= max_requests <= MAX_REQUESTS:
        raise ValueError(f"max_requests: invalid value {max_requests!r}; allowed: 1 to {MAX_REQUESTS:,}")
    if sc.duration_s > MAX_DURATION_S:
        raise ValueError(f"duration_s: {sc.duration_s:g} s; allowed: at most {MAX_DURATION_S:g} s of observation")
    for k, v, lo, hi in (("request_timeout_s", request_timeout_s, 0.1, 3600), ("drain_timeout_s", drain_timeout_s,
                         0.0, 3600), ("metrics_period_s", metrics_period_s, 0.05, 60)):
        if not (isinstance(v, (int, float)) and lo <= v <= hi):
            raise ValueError(f"{k}: invalid value {v!r}; allowed: {lo:g} to {hi:g} s")
    if sc.trace:
        raise ValueError(f"trace: {sc.trace!r}; allowed: '' (observe sends the scenario's drawn stream; replay a "
                         "shipped trace in the simulator)")
    base, available, models = server_models(url)
    names = resolve_adapters(sc, available, adapters)
    wl: Workload = generate(sc, n_closed=max_requests) if sc.arrival_process == "closed" else generate(sc)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=min(len(wl), max_requests), unit="req", desc="observe", leave=True)
    load0 = os.getloadavg()
    started = datetime.now(UTC)
    cpu0 = os.times()
    run = _Run(url, sc, wl, names, base, vocab_size, max_requests, request_timeout_s, drain_timeout_s,
               metrics_period_s, bar)
    try:
        asyncio.run(run.run())
    finally:
        if bar is not None:
            bar.close()
    cpu1 = os.times()
    req = _request_frame(run.reqs)
    ts = pd.DataFrame(run.scrapes, columns=list(TIMESERIES_COLUMNS))
    info = {"format": FORMAT, "format_version": FORMAT_VERSION, "url": url, "started_at": started.isoformat(),
            "base_model": base, "adapters": names, "served_adapters": available,
            "server_reported": {"models": models.get("data", []), "metrics": _server_flags(run.scrapes, url)},
            "server": server or {}, "device": device, "scenario": sc.to_dict(),
            "bounds": {"max_requests": max_requests, "request_timeout_s": request_timeout_s,
                       "drain_timeout_s": drain_timeout_s, "metrics_period_s": metrics_period_s},
            "client": {"loadavg_before": list(load0), "loadavg_after": list(os.getloadavg()),
                       "cpu_s": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
                       "wall_s": run.now() if run.t0 else 0.0},
            "machine": {"platform": platform.platform(), "python": platform.python_version(),
                        "cpus": os.cpu_count(), "processor": platform.processor()},
            "summary": summarize_requests(req)}
    obs = Observation(req, ts, info)
    if out_dir is not None:
        obs.out_dir = write_observation(obs, out_dir)
    return obs


def _server_flags(scrapes: list[dict], url: str) -> dict:
    """What the server reports of its flags in /metrics (max_lora; vLLM's cache_config_info labels)."""
    out: dict = {}
    ml = [s["max_lora"] for s in scrapes if not math.isnan(s.get("max_lora", math.nan))]
    if ml:
        out["max_lora"] = int(ml[-1])
    try:
        from prometheus_client.parser import text_string_to_metric_families
        text = httpx.get(url.rstrip("/") + "/metrics", timeout=5.0).text
        for fam in text_string_to_metric_families(text):
            if fam.name == "vllm:cache_config_info" and fam.samples:
                out["cache_config"] = dict(fam.samples[0].labels)
    except (httpx.HTTPError, ValueError):
        pass
    return out


def write_observation(obs: Observation, out_dir) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(obs.requests, out / "requests.csv", index=False)
    write_csv(obs.timeseries, out / "timeseries.csv", index=False)
    (out / "run.json").write_text(json.dumps(obs.info, indent=2, default=str) + "\n")
    return out
