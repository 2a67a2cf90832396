"""Transaction-level models of the Trainium2-class machine: the executable specification.

Nothing here imports ``hdl`` or ``verif``; a cluster study never loads Amaranth or cocotb.
"""

__version__ = "0.1.0"
