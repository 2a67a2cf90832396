"""Tensor engine RTL: processing element, systolic array, skew lines and the engine."""

from .array import Column, SystolicArray
from .engine import TensorEngine
from .pe import ProcessingElement

__all__ = ["ProcessingElement", "Column", "SystolicArray", "TensorEngine"]
