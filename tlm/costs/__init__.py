"""Operator costs on one chip, one definition for training and inference (issues 13 and 14):
GEMMs from the chip TLM's calibration (:mod:`.calibrate`, data in ``tlm/costs/data/``) or the
stated roofline, HBM traffic, Vector/Scalar engine work. See ``docs/costs.md``.

>>> from tlm.costs import OpCosts
>>> trn3 = OpCosts.for_preset("trn3")
>>> trn3.gemm_basis(4096, 4096, 4096), trn3.gemm_basis(4096, 4096, 4096, fmt="fp32")
(np.int8(0), np.int8(2))
"""

from .opcosts import (
    BASIS,
    DEFAULT_EFFICIENCY,
    FORMAT_TABLE,
    MEASURED_GEMM,
    VECTOR_OPS,
    VECTOR_TILE_ELEMENTS,
    CostsError,
    OpCosts,
)

__all__ = [
    "BASIS",
    "DEFAULT_EFFICIENCY",
    "FORMAT_TABLE",
    "MEASURED_GEMM",
    "VECTOR_OPS",
    "VECTOR_TILE_ELEMENTS",
    "CostsError",
    "OpCosts",
]
