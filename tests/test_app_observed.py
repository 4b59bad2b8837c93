"""The Observed vs twin page: a shipped reference-server run replayed request by request, an uploaded run bounded
and checked file by file, and observing a server only from the operator's allow-list (a visitor picks, never types)."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import goto
from streamlit.testing.v1 import AppTest

from app import page_observed
from engine import calibration as C
from engine import live

MAIN = str(Path(__file__).resolve().parents[1] / "app" / "main.py")
TIMEOUT = 180


def _open(source: int | None = None) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=TIMEOUT)
    goto(at, "observed")
    at.run()
    if source is not None:
        at.radio(key="obs_source").set_value(page_observed.SOURCES[source]).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_shipped_run_is_replayed_with_its_charts():
    at = _open()
    assert not at.error, [e.value for e in at.error]
    metrics = at.dataframe[0].value
    assert list(metrics["metric"][:3]) == ["Request throughput (req/s)", "Output throughput (tok/s)", "Mean TTFT (ms)"]
    assert (metrics["measured"] > 0).all() and metrics["twin"].notna().all()
    assert len(at.main.get("vega_lite_chart")) >= 3, "the TTFT CDF and the running / waiting time series"


def test_observing_is_off_without_the_operators_list(monkeypatch):
    monkeypatch.delenv(live.OBSERVE_URLS_ENV, raising=False)
    at = _open(source=2)
    assert any(live.OBSERVE_URLS_ENV in i.value and "off" in i.value for i in at.info)
    assert not at.text_input and not at.button, "no address to type, nothing to press"


def test_observing_offers_only_the_operators_servers(monkeypatch):
    monkeypatch.setenv(live.OBSERVE_URLS_ENV, "http://127.0.0.1:9, http://127.0.0.1:10")
    at = _open(source=2)
    assert not at.text_input, "a visitor never types an address"
    assert at.selectbox(key="obs_url").options == ["http://127.0.0.1:9", "http://127.0.0.1:10"]


def test_an_upload_names_what_is_wrong():
    with pytest.raises(ValueError, match="upload: 'x.csv' is not a file of an observed run; allowed: run.json"):
        page_observed.upload_files([("x.csv", b"a\n")])
    with pytest.raises(ValueError, match="upload: requests.csv missing"):
        page_observed.upload_files([("run.json", b"{}")])
    with pytest.raises(ValueError, match="upload: 'run.json' given twice"):
        page_observed.upload_files([("run.json", b"{}"), ("a/run.json", b"{}")])
    big = b"h\n" + b"1\n" * (page_observed.MAX_UPLOAD_REQUESTS + 1)
    with pytest.raises(ValueError, match="requests.csv: 20,001 rows; allowed: at most 20,000"):
        page_observed.upload_files([("run.json", b"{}"), ("requests.csv", big)])
    ok = page_observed.upload_files([("run.json", b"{}"), ("requests.csv", b"h\n1\n")])
    assert ok["timeseries.csv"].startswith(b"t_s,running,waiting"), "an empty time series stands in"


def test_an_uploaded_run_replays_as_the_shipped_one(tmp_path):
    d = C.unpack_reference_runs(tmp_path, run_ids={"m2-light"})["m2-light"]
    files = page_observed.upload_files([(n, (d / n).read_bytes()) for n in page_observed.RUN_FILES])
    with_upload = C.replay_observed(page_observed.write_run(files, tmp_path / "up"))
    direct = C.replay_observed(d)
    assert with_upload["metrics"].equals(direct["metrics"])
    reqs = direct["requests"]
    assert len(reqs) == len(reqs.dropna(subset=["simulated_ttft_ms"])) > 40
