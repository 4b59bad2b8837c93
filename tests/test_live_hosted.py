"""Observing from a hosted dashboard (engine.live.hosted, the Observed vs twin page): off unless the operator's
environment variable names the servers; an address outside that list is refused; a visitor never types one."""
from __future__ import annotations

import pytest

from engine import live


def test_off_when_the_operator_names_no_server():
    assert live.allowed_urls({}) == []
    assert live.allowed_urls({live.OBSERVE_URLS_ENV: "  "}) == []
    with pytest.raises(ValueError, match=f"observing from the dashboard is off.*{live.OBSERVE_URLS_ENV}"):
        live.check_allowed("http://127.0.0.1:8000", [])


def test_the_list_is_normalised_and_deduplicated():
    env = {live.OBSERVE_URLS_ENV: "http://LOCALHOST:8000/, http://localhost:8000 https://gpu.example/v1/"}
    assert live.allowed_urls(env) == ["http://localhost:8000", "https://gpu.example:443/v1"]
    assert live.check_allowed("http://localhost:8000/", live.allowed_urls(env)) == "http://localhost:8000"
    assert live.check_allowed("HTTPS://gpu.example:443/v1", live.allowed_urls(env)) == "https://gpu.example:443/v1"


@pytest.mark.parametrize("url", ["http://localhost:8001", "http://localhost:8000/admin", "http://127.0.0.1:8000",
                                 "http://localhost.evil.example:8000", "https://gpu.example/v1/x",
                                 "http://gpu.example/v1"])
def test_an_address_outside_the_list_is_refused(url):
    allowed = live.allowed_urls({live.OBSERVE_URLS_ENV: "http://localhost:8000,https://gpu.example/v1"})
    with pytest.raises(ValueError, match=r"^url: .* is not a server this dashboard may observe; allowed: "):
        live.check_allowed(url, allowed)


@pytest.mark.parametrize("bad", ["ftp://x:21", "localhost:8000", "http://", "http://u:p@host:80",
                                 "http://host:80/?q=1", "http://host:99999", "http://host:80/#f",
                                 "http://localhost:8000.evil.example"])
def test_a_malformed_url_names_the_field(bad):
    with pytest.raises(ValueError, match=r"^url: invalid value"):
        live.normalise_url(bad)
    with pytest.raises(ValueError, match=f"^{live.OBSERVE_URLS_ENV}: url: invalid value"):
        live.allowed_urls({live.OBSERVE_URLS_ENV: f"http://ok:1 {bad}"})
