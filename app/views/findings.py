"""Findings page (code: app/page_findings.py)."""
from app.page_findings import render

render()
