"""The ``--hardware`` input: a hardware file (:mod:`tlm.hardware`), one meaning for
every study that runs on one (``infer``, ``infer-search``, ``serve``, ``train``,
``train-search``, ``cost``).

A hardware file names an accelerator, its server, scale-up domain, network and cloud
instance (the Trainium files name their chip preset); a chip preset (``--preset``,
:mod:`tlm.presets`) is the chip alone, the input of the studies on a chip (``tensor``,
``gemm``, ``collective``, ``tp-step``, ``model``). In the studies that take ``--hardware``,
``--preset`` is a deprecated name of it for one release (:data:`DEPRECATED`).

Examples
--------
>>> HARDWARE_ALLOWED
'one of trn1, trn2, trn3, trn3-gen2, a100, h100, or a hardware file path ending in .toml'
"""

from __future__ import annotations

from pydantic import Field

from ..hardware import HARDWARE

__all__ = ["HARDWARE_ALLOWED", "DEPRECATED", "hardware_field"]

#: What a ``--hardware`` input allows, in words.
HARDWARE_ALLOWED = f"one of {', '.join(HARDWARE)}, or a hardware file path ending in .toml"
#: The hardware input's old name (:attr:`tlm.studies.protocol.Inputs.deprecated`).
DEPRECATED = {"preset": "hardware"}


def hardware_field(default: str = "trn2"):
    """A ``hardware`` input: a hardware file's name or path."""
    return Field(
        default,
        description="the hardware: its accelerator, server, scale-up domain and cloud instance "
        "(tlm/hardware; the Trainium files name their chip preset)",
        json_schema_extra={"allowed": HARDWARE_ALLOWED},
    )
