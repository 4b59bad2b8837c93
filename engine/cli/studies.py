"""CLI commands of the studies: ``reproduce`` and ``findings`` (placeholder until engine/studies lands)."""
from ..reproduce import add_commands  # noqa: F401
