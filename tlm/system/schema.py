"""The schema of a system preset file, validated on load with pydantic.

A system file describes one *node* (a server or an UltraServer): its chips and the links between
them - a torus (``[torus]``, one ``[[torus.dimension]]`` table of link figures per ring) or a
switch every chip hangs off (``[switch]``) - and how N such nodes are joined by EFA (``[efa]``).
A torus may say how its links move flits (``[flit]``: bytes per flit, the link clock, the
longest packet), for the flit engine (:mod:`tlm.collectives.flit`); then every link's
bandwidth times its whole number of cycles per flit must be ``bytes_per_flit x clock_hz``.
Every figure is a table ``{value, source, note}`` (the chip presets' :class:`~tlm.presets.schema.
Figure`); ``source`` names keys of the file's ``[sources]`` table, ``ASSUMED`` where no public
page gives the figure. Units are in the key names (``_Bps``, ``_s``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..presets.schema import Figure

__all__ = [
    "SystemFile",
    "TorusSection",
    "TorusDimension",
    "SwitchSection",
    "EfaSection",
    "FlitSection",
    "flit_intervals",
]


class _Strict(BaseModel):
    # validators built when first used: loading a file builds the file's model, its sections
    # inside it, and importing the schema builds none
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ShapeFigure(_Strict):
    """A torus shape (ring size per dimension) and its source."""

    value: list[int] = Field(min_length=1, max_length=4)
    source: str = Field(min_length=1)
    note: str = ""


def _at_least(name: str, figure: Figure, low: float, strict: bool = True, integer=False):
    value = figure.value
    bad = isinstance(value, bool) or (value <= low if strict else value < low)
    if bad or (integer and value != int(value)):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind} {'>' if strict else '>='} {low}, not {value!r}")


class TorusDimension(_Strict):
    """The links of one ring of the torus: each directed link's bandwidth and latency."""

    bandwidth_Bps: Figure
    latency_s: Figure

    @model_validator(mode="after")
    def _check(self):
        _at_least("bandwidth_Bps", self.bandwidth_Bps, 0)
        _at_least("latency_s", self.latency_s, 0, strict=False)
        return self


class TorusSection(_Strict):
    """Chips on a torus (``tlm.link.topology.Torus``), one ``dimension`` table per ring."""

    shape: ShapeFigure
    dimension: list[TorusDimension] = Field(min_length=1, max_length=4)

    @model_validator(mode="after")
    def _check(self):
        if len(self.dimension) != len(self.shape.value):
            raise ValueError(
                f"dimension must have one table per ring of shape {self.shape.value}, "
                f"not {len(self.dimension)}"
            )
        return self


class SwitchSection(_Strict):
    """Chips through a switch: every chip has a port up to its switch and one down from it.

    One level by default (every chip of the node on one switch). Two levels when
    ``leaf_chips`` is given: each group of ``leaf_chips`` chips (a server) hangs off its own
    first-level switch, and every first-level switch has an uplink up to and one down from each
    of ``spines`` second-level switches, of ``uplink_bandwidth_Bps`` each direction; chips of
    different groups meet through one spine (the destination's local number modulo
    ``spines`` picks which).
    """

    chips: Figure
    port_bandwidth_Bps: Figure = Field(description="each direction of a chip's port")
    latency_s: Figure = Field(description="chip to switch (and switch to chip)")
    leaf_chips: Figure | None = Field(None, description="chips per first-level switch")
    spines: Figure | None = Field(None, description="second-level switches")
    uplink_bandwidth_Bps: Figure | None = Field(
        None, description="each direction of one first-level switch's link to one spine"
    )
    uplink_latency_s: Figure | None = Field(None, description="first- to second-level switch")

    @model_validator(mode="after")
    def _check(self):
        _at_least("chips", self.chips, 1, integer=True)
        _at_least("port_bandwidth_Bps", self.port_bandwidth_Bps, 0)
        _at_least("latency_s", self.latency_s, 0, strict=False)
        tier = ("leaf_chips", "spines", "uplink_bandwidth_Bps", "uplink_latency_s")
        given = [name for name in tier if getattr(self, name) is not None]
        if given and len(given) != len(tier):
            missing = ", ".join(name for name in tier if name not in given)
            raise ValueError(
                f"a two-level switch needs all of {', '.join(tier)}; missing {missing}"
            )
        if given:
            _at_least("leaf_chips", self.leaf_chips, 1, integer=True)
            _at_least("spines", self.spines, 1, integer=True)
            _at_least("uplink_bandwidth_Bps", self.uplink_bandwidth_Bps, 0)
            _at_least("uplink_latency_s", self.uplink_latency_s, 0, strict=False)
            if int(self.chips.value) % int(self.leaf_chips.value):
                raise ValueError(
                    f"leaf_chips must divide chips ({int(self.chips.value)}), not "
                    f"{int(self.leaf_chips.value)}"
                )
        return self

    @property
    def two_level(self) -> bool:
        return self.leaf_chips is not None


class EfaSection(_Strict):
    """How N nodes are joined: a NIC per chip up to the node's leaf switch, leaves joined by a
    spine whose uplinks carry the leaf's NIC bandwidth divided by ``oversubscription``."""

    nic_bandwidth_Bps: Figure
    nic_latency_s: Figure = Field(description="chip to leaf (and leaf to chip)")
    spine_latency_s: Figure = Field(description="leaf to spine (and spine to leaf)")
    oversubscription: Figure = Field(description="leaf down-bandwidth / up-bandwidth, >= 1")

    @model_validator(mode="after")
    def _check(self):
        _at_least("nic_bandwidth_Bps", self.nic_bandwidth_Bps, 0)
        _at_least("nic_latency_s", self.nic_latency_s, 0, strict=False)
        _at_least("spine_latency_s", self.spine_latency_s, 0, strict=False)
        _at_least("oversubscription", self.oversubscription, 1, strict=False)
        return self


class FlitSection(_Strict):
    """How the torus links move flits, for the flit engine: a link carries one flit of
    ``bytes_per_flit`` bytes every cycle of ``clock_hz`` (or every ``k`` cycles, a link at
    ``1/k`` of that rate: :func:`flit_intervals`); a packet is a head flit and up to
    ``max_packet_flits - 1`` data flits."""

    bytes_per_flit: Figure = Field(description="data bytes one flit carries on a link")
    clock_hz: Figure = Field(description="link clock: flits per second on a full-rate link")
    max_packet_flits: Figure = Field(description="longest packet, head included")

    @model_validator(mode="after")
    def _check(self):
        _at_least("bytes_per_flit", self.bytes_per_flit, 1, strict=False, integer=True)
        _at_least("clock_hz", self.clock_hz, 0)
        n = self.max_packet_flits.value
        if isinstance(n, bool) or n not in (2, 4, 8, 16, 32, 64):
            raise ValueError(
                f"max_packet_flits must be a power of two in 2..64 (the length field's range), "
                f"not {n!r}"
            )
        return self


def flit_intervals(torus: TorusSection, flit: FlitSection) -> tuple[int, ...]:
    """Cycles per flit on the links of each torus dimension: ``bytes_per_flit x clock_hz``
    over the dimension's ``bandwidth_Bps``, which must be a whole number >= 1.

    Raises
    ------
    ValueError
        Naming the dimension whose bandwidth does not fit.
    """
    rate = flit.bytes_per_flit.value * flit.clock_hz.value
    out = []
    for d, dim in enumerate(torus.dimension):
        bw = dim.bandwidth_Bps.value
        ratio = rate / bw
        k = round(ratio)
        if k < 1 or abs(ratio - k) > 1e-9 * ratio:
            raise ValueError(
                f"flit.bytes_per_flit x flit.clock_hz ({rate:g} B/s) must equal "
                f"torus.dimension.{d}.bandwidth_Bps ({bw:g} B/s) times a whole number of "
                f"cycles per flit (1 at the full flit rate), not {ratio:.6g} times: change "
                f"one of them"
            )
        out.append(int(k))
    return tuple(out)


class CollectiveSection(_Strict):
    """Costs of the collective runtime that are not links."""

    step_fixed_s: Figure = Field(description="fixed cost of each step of a schedule")

    @model_validator(mode="after")
    def _check(self):
        _at_least("step_fixed_s", self.step_fixed_s, 0, strict=False)
        return self


class SystemFile(_Strict):
    """A whole system file; exactly one of ``torus`` and ``switch``; every ``source`` is a key
    of ``sources``."""

    name: str = Field(min_length=1)
    description: str = ""
    chip: Literal["trn1", "trn2", "trn3"]
    sources: dict[str, str]
    torus: TorusSection | None = None
    switch: SwitchSection | None = None
    efa: EfaSection
    collective: CollectiveSection
    flit: FlitSection | None = None

    @model_validator(mode="after")
    def _check(self):
        if (self.torus is None) == (self.switch is None):
            raise ValueError("a system must have exactly one of [torus] and [switch]")
        if self.flit is not None:
            if self.torus is None:
                raise ValueError("[flit] describes torus links: a system with [switch] has none")
            flit_intervals(self.torus, self.flit)
        for where, figure in self.figures().items():
            for key in figure.source.replace(",", " ").split():
                if key not in self.sources:
                    known = ", ".join(sorted(self.sources))
                    raise ValueError(
                        f"{where} cites source {key!r}, which is not in [sources] ({known})"
                    )
        return self

    def figures(self) -> dict:
        """Every figure of the file by dotted name (``torus.dimension.0.bandwidth_Bps``)."""
        out = {}
        if self.torus is not None:
            out["torus.shape"] = self.torus.shape
            for d, dim in enumerate(self.torus.dimension):
                out[f"torus.dimension.{d}.bandwidth_Bps"] = dim.bandwidth_Bps
                out[f"torus.dimension.{d}.latency_s"] = dim.latency_s
        for section in ("switch", "efa", "collective", "flit"):
            block = getattr(self, section)
            if block is not None:
                for name in type(block).model_fields:
                    if getattr(block, name) is not None:
                        out[f"{section}.{name}"] = getattr(block, name)
        return out
