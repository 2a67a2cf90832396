"""Re-export of :mod:`tlm.elementwise` for tlm/inference; to go once it imports from there."""

from ..elementwise import maximum, power, where, zeros_like  # noqa: F401
