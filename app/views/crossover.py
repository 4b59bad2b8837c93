"""Crossover page (code: app/page_crossover.py)."""
from app.page_crossover import render

render()
