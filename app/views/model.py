"""Model page (code: app/page_model.py)."""
from app.page_model import render

render()
