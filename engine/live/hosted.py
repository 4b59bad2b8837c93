"""Observing from a hosted dashboard: off unless the operator names the servers it may send traffic to.

Invariants:

* the allow-list is the operator's, never a visitor's: the environment variable ``LORA_WHATIF_OBSERVE_URLS`` (base
  URLs separated by commas or whitespace) read where the dashboard runs; unset or empty, observing is off;
* a URL is allowed only if its normalised base (scheme, host, port, path without a trailing slash; scheme and host
  lower-cased, the scheme's default port made explicit) equals one of the list's: no prefix or pattern matching;
* a hosted observation is bounded tighter than the CLI's (``HOSTED_LIMITS``).
"""
from __future__ import annotations

import os
from urllib.parse import urlsplit

OBSERVE_URLS_ENV = "LORA_WHATIF_OBSERVE_URLS"
#: The bounds of one observation started from the dashboard.
HOSTED_LIMITS = {"max_requests": 500, "duration_s": 60.0, "request_timeout_s": 30.0, "drain_timeout_s": 30.0}


def normalise_url(url: str) -> str:
    """``scheme://host:port/path`` of a base URL; ValueError naming it when it is not an http(s) URL."""
    text = str(url).strip()
    try:
        u = urlsplit(text)
        port = u.port
    except ValueError:
        raise ValueError(f"url: invalid value {text[:80]!r}; allowed: http://HOST[:PORT][/PATH]") from None
    if u.scheme.lower() not in ("http", "https") or not u.hostname or u.query or u.fragment or u.username:
        raise ValueError(f"url: invalid value {text[:80]!r}; allowed: http://HOST[:PORT][/PATH] (no query, fragment "
                         "or credentials)")
    scheme = u.scheme.lower()
    port = port or (443 if scheme == "https" else 80)
    host = u.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}{u.path.rstrip('/')}"


def allowed_urls(env: dict | None = None) -> list[str]:
    """The operator's allow-list (normalised, in order, duplicates dropped); [] when observing is off.  A malformed
    entry is a ValueError naming the variable and the entry (the operator's mistake, shown to the operator)."""
    raw = (os.environ if env is None else env).get(OBSERVE_URLS_ENV, "")
    out: list[str] = []
    for part in raw.replace(",", " ").split():
        try:
            n = normalise_url(part)
        except ValueError as e:
            raise ValueError(f"{OBSERVE_URLS_ENV}: {e}") from None
        if n not in out:
            out.append(n)
    return out


def check_allowed(url: str, allowed: list[str]) -> str:
    """``url`` normalised if the allow-list holds it; else a ValueError saying observing is off or naming the list."""
    n = normalise_url(url)
    if not allowed:
        raise ValueError(f"url: {url[:80]!r}: observing from the dashboard is off (the operator allows servers with "
                         f"the environment variable {OBSERVE_URLS_ENV})")
    if n not in allowed:
        raise ValueError(f"url: {url[:80]!r} is not a server this dashboard may observe; allowed: {', '.join(allowed)}")
    return n
