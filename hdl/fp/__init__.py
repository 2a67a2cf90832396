"""Floating-point arithmetic blocks for the tensor engine (numerics: docs/numerics.md)."""

from .add import Float32Adder
from .mac import FloatMac
from .mul import FloatMultiplier

__all__ = ["FloatMultiplier", "Float32Adder", "FloatMac"]
