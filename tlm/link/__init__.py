"""NeuronLink router and torus networks: flit format, coordinates and routing, cycle model."""

from .config import LinkConfig
from .flit import FlitFormat, FlitKind
from .topology import Torus

__all__ = ["FlitFormat", "FlitKind", "LinkConfig", "Torus"]
