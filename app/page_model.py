"""Model page: renders docs/model.md (the simulator's model, assumptions and equations)."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from app import page_findings

MODEL_MD = Path(__file__).resolve().parent.parent / "docs" / "model.md"


def render() -> None:
    if not MODEL_MD.is_file():
        st.title("Model")
        st.info("The model description (docs/model.md) is not written yet. It will explain the arrival "
                "process, adapter popularity, GPU memory and PCIe transfer model, the batching window, each "
                "strategy and the metrics.", icon=":material/edit_note:")
        return
    text = MODEL_MD.read_text(encoding="utf-8")
    title, rest = page_findings.split_title(text)
    if title is None:
        st.title("Model")
    else:
        st.markdown(title)
    page_findings.render_doc(rest)  # section by section, with its table of contents in the sidebar
