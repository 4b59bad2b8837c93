"""CLI commands of the calibration: ``calibrate`` and ``validate`` (placeholder until engine/calibration lands)."""
from ..calibrate import add_commands  # noqa: F401
