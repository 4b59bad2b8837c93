"""Sweeps page (code: app/page_sweeps.py)."""
from app.page_sweeps import render

render()
