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

from pydantic import BaseModel, Field, create_model

from ..hardware import HARDWARE
from ..hardware.prices import PRICE_KINDS, PRICES_FILE, price_footing

__all__ = [
    "HARDWARE_ALLOWED",
    "DEPRECATED",
    "PRICE_ALLOWED",
    "PriceFooting",
    "hardware_field",
    "price_field",
    "priced",
    "with_price_footing",
]

#: What a ``--hardware`` input allows, in words.
HARDWARE_ALLOWED = f"one of {', '.join(HARDWARE)}, or a hardware file path ending in .toml"
#: What a ``--price`` input allows, in words.
PRICE_ALLOWED = f"one of {', '.join(PRICE_KINDS)} (where the instance has one, {PRICES_FILE})"
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


def price_field():
    """A ``price`` input: which of the instance's hourly prices the costs use."""
    return Field(
        "on_demand",
        description="which hourly price of the hardware's cloud instance the costs use",
        json_schema_extra={"allowed": PRICE_ALLOWED},
    )


def priced(hw, kind: str):
    """``hw`` at its instance's ``kind`` price; a kind the instance lacks is an
    :class:`~tlm.studies.protocol.InputError` on ``price`` naming the kinds it has."""
    from ..hardware import HardwareError
    from .protocol import InputError

    if kind not in PRICE_KINDS:
        raise InputError("price", kind, PRICE_ALLOWED)
    try:
        return hw.priced(kind)
    except HardwareError:
        have = ", ".join(p.kind for p in hw.prices) or "none"
        allowed = f"one of {have} for {hw.instance} ({PRICES_FILE})"
        raise InputError("price", kind, allowed) from None


class PriceFooting(BaseModel):
    """The footing of a study's costs, in its JSON: the instance, the kind of price, the price,
    its source and date (:func:`tlm.hardware.prices.price_footing`, the one definition)."""

    price_instance: str = Field(description="the cloud instance priced")
    price_kind: str = Field(description="on_demand or capacity_block")
    price_per_hour_usd: float = Field(description="per instance-hour")
    price_source: str = Field(description="a key of the price file's sources; ASSUMED: unpublished")
    price_as_of: str = Field(description="the date the price was published or read")

    @staticmethod
    def of(hw) -> dict:
        """The footing fields of ``hw``'s price in force."""
        return price_footing(hw)


def with_price_footing(cls):
    """``cls`` (a results or row model) with :class:`PriceFooting`'s fields after its own, so
    tables and JSON show the figures first and the price they rest on last."""
    fields = {k: (f.annotation, f) for k, f in PriceFooting.model_fields.items()}
    out = create_model(cls.__name__, __base__=cls, __module__=cls.__module__, **fields)
    out.__doc__ = cls.__doc__
    out.of = staticmethod(price_footing)
    return out
