"""The CLI reads the dashboard's scenario.json (which adds the compared strategies and replications)."""
import json

from app.exports import scenario_json
from engine import Scenario
from engine.cli import main


def test_run_accepts_the_dashboard_export(tmp_path, capsys):
    sc = Scenario.from_preset("default", duration_s=60.0, strategy="batch")
    data = scenario_json(sc, ["naive", "batch"], 3)
    f = tmp_path / "scenario.json"
    f.write_bytes(data if isinstance(data, bytes) else data.encode())
    assert set(json.loads(f.read_text())) >= {"strategies", "replications"}
    assert main(["run", "--scenario", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["requests"] > 0
    for bad, needle in [("[1, 2]", "expected a JSON object, got list"), ("{", "not valid JSON"),
                        ('{"gpu": "tpu"}', "gpu: invalid value 'tpu'"),
                        ('{"replications": 1.5}', "replications: expected an integer, got 1.5")]:
        f.write_text(bad)
        assert main(["run", "--scenario", str(f)]) == 2
        assert needle in capsys.readouterr().err
    assert main(["plan", "--scenario", str(tmp_path / "nope.json"), "--slo", "ttft_p99_ms=5"]) == 2
    assert "cannot read" in capsys.readouterr().err
