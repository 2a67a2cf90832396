"""NeuronLink router and torus networks: flit format, coordinates and routing, cycle model."""

from .topology import Torus

__all__ = ["FlitFormat", "FlitKind", "LinkConfig", "Torus"]


def __getattr__(name):
    # the router's configuration and flit format are imported when first asked for: a
    # system's routes (tlm.link.routing, topology) are part of every estimate's start-up
    if name == "LinkConfig":
        from .config import LinkConfig

        return LinkConfig
    if name in ("FlitFormat", "FlitKind"):
        from . import flit

        return getattr(flit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
