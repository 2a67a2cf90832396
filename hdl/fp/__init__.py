"""Floating-point arithmetic blocks for the tensor engine (numerics: docs/numerics.md)."""

from .mul import FloatMultiplier

__all__ = ["FloatMultiplier"]
