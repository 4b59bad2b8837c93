"""LoRA What-If dashboard (Streamlit). Entry point: ``streamlit run app/main.py``.

The dashboard only orchestrates the engine's public API (``engine.Scenario``,
``engine.simulate``, ...); it holds no model logic of its own.
"""
