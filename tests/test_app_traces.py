"""The shipped Azure traces in the dashboard: the preset replays the trace, its controls show, the
generated-traffic controls hide, and the run matches the engine's replay."""
from pathlib import Path

from conftest import kpi_tables
from streamlit.testing.v1 import AppTest

from engine import Scenario, simulate

APP = str(Path(__file__).resolve().parents[1] / "app" / "main.py")


def test_trace_preset_replays_the_trace():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"preset": "azure-code-2023", "duration_s": "120", "strategy": ["naive"], "wi_reps": "1"})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="trace").value == "azure-code-2023"
    assert at.slider(key="trace_time_scale").value == 1.0
    assert not [s for s in at.sidebar.get("slider") if s.key == "arrival_rate_rps"]
    # the comparison table is the engine's replay of the trace (the first row: naive; first column after the name)
    sc = Scenario.from_preset("azure-code-2023", duration_s=120.0, strategy="naive")
    s = simulate(sc).summary
    from app.page_whatif import fmt_value
    assert fmt_value(s["ttft_p50_ms"], "ms") in kpi_tables(at)[0]["TTFT p50"].iloc[0]
    assert any("Splitwise" in c.value for c in at.caption)  # the example traces are attributed
    # speeding the trace up changes the run
    at.slider(key="trace_time_scale").set_value(2.0)
    at.run()
    assert not at.exception
    s2 = simulate(sc.replace(trace_time_scale=2.0)).summary
    assert fmt_value(s2["ttft_p50_ms"], "ms") in kpi_tables(at)[0]["TTFT p50"].iloc[0]


def test_example_trace_download_replays_the_scenario():
    """The What-if page's example file (runner.example_trace_csv), uploaded back, repeats the replay."""
    import io

    from app import runner
    from engine import read_trace
    sc = Scenario.from_preset("azure-conv-2023", duration_s=120.0, strategy="naive")
    data = runner.example_trace_csv("azure-conv-2023", sc)
    plain = sc.replace(trace="")
    replay = simulate(plain, trace=read_trace(io.BytesIO(data), plain)).summary
    direct = simulate(sc).summary
    assert replay["requests"] == direct["requests"] and replay["ttft_p50_ms"] == direct["ttft_p50_ms"]
