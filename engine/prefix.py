"""A shared prompt prefix and the servers' prefix cache keyed by adapter (docs/model.md 3.7).

Workload: a share ``prefix_share`` of the requests start with the same system prompt of ``prefix_tokens`` tokens
(the same text under every adapter): such a request's prompt is ``prefix_tokens`` + its drawn prompt.  Which
requests have it is drawn from the workload's own stream (``workload.STREAM_PREFIX``), so turning it on changes no
other draw.

Server: ``prefix_caching`` "auto" is the strategy's default (``Policy.prefix_caching``: on for vllm, vLLM V1's
prefix caching, and sglang, its radix cache; off for every other strategy), "on" or "off".  The cache is keyed by
adapter (the LoRA id is part of vLLM's block hash; SGLang's radix tree is per adapter), so requests of different
adapters never share cached blocks.  The loop's mechanics are in engine/loop.py (``_pc_*``, IP_PCACHE).

This module: the resolved switch, the draw, and the checks ``Scenario.validate`` makes (one-line errors naming
the field, its value and what is allowed).
"""
from __future__ import annotations

import numpy as np

from .policies import STRATEGIES


def has_prefix(sc) -> bool:
    """Does the workload have a shared prefix (prefix_tokens > 0 on a share > 0 of the requests)?"""
    return sc.prefix_tokens > 0 and sc.prefix_share > 0


def prefix_len(sc) -> int:
    """Tokens the prefix adds to a prompt that has it (0 without a prefix)."""
    return sc.prefix_tokens if has_prefix(sc) else 0


def caching_on(sc) -> bool:
    """Does the server cache prefixes (``prefix_caching``; "auto": the strategy's default)?"""
    if sc.prefix_caching == "auto":
        pol = STRATEGIES.get(sc.strategy)
        return bool(pol is not None and pol.prefix_caching)
    return sc.prefix_caching == "on"


def caching_runs(sc) -> bool:
    """Is the prefix cache simulated: caching on and a prefix in the workload (else the loop runs as without it)?"""
    return caching_on(sc) and has_prefix(sc)


def draw_prefix(sc, rng: np.random.Generator, n: int) -> np.ndarray:
    """Prefix tokens of each of ``n`` requests: ``prefix_tokens`` with probability ``prefix_share``, else 0.
    Sequential (the first n of a longer draw are a shorter draw); no draw at all without a prefix."""
    if not has_prefix(sc):
        return np.zeros(n, np.int64)
    return np.where(rng.random(n) < sc.prefix_share, sc.prefix_tokens, 0).astype(np.int64)


def check(sc) -> None:
    """The checks relating the prefix fields to the others (``Scenario.validate`` calls it before the memory
    checks, so that a prefix too long for the KV cache or the token budget is named as such)."""
    def bad(name: str, allowed: str) -> None:
        v = getattr(sc, name)
        raise ValueError(f"{name}: invalid value {v!r}; allowed: {allowed}")

    if not has_prefix(sc):
        if sc.prefix_caching == "on" and sc.kv_allocator == "contiguous":
            bad("prefix_caching", "'off' or 'auto' with kv_allocator 'contiguous' (servers cache prefixes in paged "
                "KV blocks)")
        return
    if sc.trace:
        bad("prefix_tokens", f"0 with trace {sc.trace!r} (a trace's prompts are replayed as recorded)")
    p = sc.prefix_tokens
    longest = sc.length_bounds(sc.prompt_tokens)[1] + sc.length_bounds(sc.output_tokens)[1]
    fit = sc.max_fitting_request_tokens()
    if longest <= fit < longest + p:
        bad("prefix_tokens", f"at most {fit - longest} (the longest request, {longest} tokens plus the prefix, must "
            f"fit in the KV cache: {fit} tokens at this memory), or prefix_share 0")
    pmax = sc.length_bounds(sc.prompt_tokens)[1]
    if not sc.chunked_prefill_on() and pmax <= sc.max_batched_tokens < pmax + p:
        bad("prefix_tokens", f"at most {sc.max_batched_tokens - pmax} (the longest prompt, {pmax} tokens plus the "
            f"prefix, must fit in max_batched_tokens {sc.max_batched_tokens} without chunked prefill), or "
            "chunked_prefill 'on'")
    if not caching_on(sc):
        return
    why = f"prefix_caching {sc.prefix_caching!r}" + (f" (on for strategy {sc.strategy!r})"
                                                      if sc.prefix_caching == "auto" else "")
    if sc.kv_allocator == "contiguous":
        bad("prefix_caching", f"'off' with kv_allocator 'contiguous' and a shared prefix ({why}: servers cache "
            "prefixes in paged KV blocks)")
    mem = STRATEGIES[sc.strategy].memory_mode or sc.memory_mode
    if mem == "unified":
        bad("prefix_caching", f"'off' with memory_mode 'unified' and a shared prefix ({why}: the unified pool has "
            "no prefix cache in this model)")
    if sc.num_replicas > 1:
        bad("prefix_caching", f"'off' with num_replicas {sc.num_replicas} and a shared prefix ({why}: a fleet "
            "does not simulate the prefix cache yet)")


def check_upload(sc, trace) -> None:
    """An uploaded trace replays its prompts as recorded: a scenario with a prefix takes one only with the
    per-request prefixes stated (``Workload.prefix``, the API's way: each 0 or ``prefix_tokens``, inside its
    prompt); a trace read from a CSV file has none."""
    if trace is None or not has_prefix(sc):
        return
    if trace.prefix is None:
        raise ValueError(f"prefix_tokens: invalid value {sc.prefix_tokens!r} with an uploaded trace; allowed: 0 "
                         "(a trace's prompts are replayed as recorded)")
    p = np.asarray(trace.prefix)
    if p.shape != np.shape(trace.prompt_tokens) or ((p != 0) & (p != sc.prefix_tokens)).any() or (
            p >= np.asarray(trace.prompt_tokens)).any():
        raise ValueError(f"trace: invalid prefix; allowed: for each request 0 or prefix_tokens ({sc.prefix_tokens}), "
                         "less than its prompt_tokens (which include it)")
