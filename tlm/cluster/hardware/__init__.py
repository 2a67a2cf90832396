"""Re-export of :mod:`tlm.hardware` for tlm/inference; to go once it imports from there."""

from ...hardware import HARDWARE, Hardware, HardwareError, load_hardware  # noqa: F401
