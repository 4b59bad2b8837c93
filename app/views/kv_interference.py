"""KV interference page (code: app/page_kv.py)."""
from app.page_kv import render

render()
