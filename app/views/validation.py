"""Validation page (code: app/page_validation.py)."""
from app.page_validation import render

render()
