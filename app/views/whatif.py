"""What-if page (code: app/page_whatif.py)."""
from app.page_whatif import render

render()
