"""Floating-point arithmetic blocks for the tensor engine (numerics: docs/numerics.md)."""

from .add import Float32Adder
from .mul import FloatMultiplier

__all__ = ["FloatMultiplier", "Float32Adder"]
