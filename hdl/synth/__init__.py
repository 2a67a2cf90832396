"""Synthesis figures of the RTL: Yosys to generic gates, cells, flops and logic depth.

``python -m hdl.synth`` (``make synth``) measures each block of :data:`BLOCKS` and the area
proxy per format set (:mod:`.area`); ``python -m hdl.synth.power`` (``make power``) the
relative dynamic-power proxy per format (:mod:`.power`, :mod:`.toggles`). See
docs/tensor_engine.md ("Synthesis figures", "Area and power proxies") for the methods.
"""

from .blocks import BLOCKS, Block
from .clock import Clocking, clocking
from .depth import Netlist
from .measure import measure

__all__ = ["BLOCKS", "Block", "Clocking", "Netlist", "clocking", "measure"]
