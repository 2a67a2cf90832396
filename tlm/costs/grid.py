"""The calibration grid and its data file, shared by the calibrator and the reader.

:mod:`tlm.costs.calibrate` runs the chip TLM over this grid and writes the file;
:class:`tlm.costs.OpCosts` reads it back. The file ``tlm/costs/data/<preset>.json`` holds,
per format of :data:`FORMATS` and core count of :data:`CORES`, the seconds of every shape of
:data:`AXES` in ``(m, n, k)`` C order; :data:`DATA_VERSION` names its layout.

Examples
--------
>>> from tlm.costs.grid import AXES, data_path
>>> AXES["m"][-1], AXES["n"][-1], AXES["k"][-1]
(4096, 8192, 4096)
>>> data_path("trn2").name
'trn2.json'
"""

from __future__ import annotations

from importlib import resources

import numpy as np

__all__ = ["AXES", "CORES", "DATA_VERSION", "FORMATS", "data_path", "grid_times"]

#: Version of the data file's layout (bump when the keys change).
DATA_VERSION = 1

#: The grid of M, N and K: powers of two from 1 to 4096 (8192 for N: a GEMM of few rows
#: reaches the kernel's full 1024-column blocks on every core only from N = 8192). Beyond the
#: grid the tiles run in steady state (see ``docs/costs.md``); below 1 nothing is a shape.
AXES = {
    "m": tuple(2**i for i in range(13)),
    "n": tuple(2**i for i in range(14)),
    "k": tuple(2**i for i in range(13)),
}

#: The tables of a data file: the format's key and the format the kernel is run in. FP16 runs
#: at BF16's rate and FP8 E5M2 at E4M3's (same operand width and tensor-engine cost), so they
#: share those tables (a test checks it against the TLM).
FORMATS = {"bf16": "bf16", "fp8": "fp8_e4m3"}

#: How many cores each table uses: ``all`` (one GEMM on the whole chip) and ``one`` (one GEMM
#: on one core: how the products of a batched call run side by side).
CORES = ("all", "one")


def data_path(preset: str):
    """Where the package keeps ``preset``'s calibration (it may not exist)."""
    return resources.files(__package__).joinpath("data", f"{preset}.json")


def grid_times(data: dict, fmt: str, cores: str) -> np.ndarray:
    """``tables[fmt][cores]`` as an array ``[len(m), len(n), len(k)]`` of seconds."""
    axes = data["axes"]
    shape = (len(axes["m"]), len(axes["n"]), len(axes["k"]))
    return np.asarray(data["tables"][fmt][cores], dtype=float).reshape(shape)
