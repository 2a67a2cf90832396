"""Synthesis figures of the RTL: Yosys to generic gates, cells, flops and logic depth.

``python -m hdl.synth`` (``make synth``) measures each block of :data:`BLOCKS`; see
docs/tensor_engine.md ("Synthesis figures") for the method and the conversion to a clock.
"""

from .blocks import BLOCKS, Block
from .clock import Clocking, clocking
from .depth import Netlist
from .measure import measure

__all__ = ["BLOCKS", "Block", "Clocking", "Netlist", "clocking", "measure"]
