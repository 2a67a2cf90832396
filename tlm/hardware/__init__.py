"""Accelerators as the cluster models see them: peak dense FLOP/s per format, HBM, scale-up
and scale-out bandwidth, power and price, from TOML files validated on load.

Two kinds of file live here. An NVIDIA file (``a100``, ``h100``) gives every figure itself,
each ``{value, source, note, alternatives}`` as in the chip presets (:mod:`tlm.presets.schema`).
A Trainium file (``trn1``, ``trn2``, ``trn3``) names its chip preset (``chip = "trn2"``) and
its system preset (``system = "trn2-ultraserver"``) and gives only the server and the cloud
instance: the chip's figures (published peaks, HBM, NeuronLink, ``[cost]``) are read from
:mod:`tlm.presets`, the scale-up group and the EFA NIC from :mod:`tlm.system`, never copied.
See ``docs/cluster.md``.

Examples
--------
>>> from tlm.hardware import load_hardware
>>> h100 = load_hardware("h100")
>>> h100.peak_flops("fp8") / 1e12, h100.power_w, h100.scale_up_chips
(1979.0, 700.0, 8)
>>> trn2 = load_hardware("trn2")           # the chip preset's figures, not a copy
>>> trn2.peak_flops("bf16") / 1e12, trn2.hbm_bytes / 2**30, trn2.scale_up_chips
(667.0, 96.0, 64)
>>> trn2.sources["power_w"]
'tlm/presets/trn2.toml cost.power_w: SEEDS'
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..datafile import read_text
from ..presets.schema import Figure, FigureSection
from .prices import PRICE_KINDS, PRICES_FILE, Price, PriceError, load_prices

__all__ = ["HARDWARE", "Hardware", "HardwareError", "load_hardware"]

#: Hardware files shipped with the package.
HARDWARE = ("trn1", "trn2", "trn3", "trn3-gen2", "a100", "h100")
_ALLOWED = f"one of {', '.join(HARDWARE)}, or a hardware file path ending in .toml"


class HardwareError(ValueError):
    """A hardware name or file that does not validate."""


class ChipSection(FigureSection):
    dense_bf16_flops: Figure
    dense_fp8_flops: Figure | None = None
    sparse_bf16_flops: Figure | None = None
    sparse_fp8_flops: Figure | None = None
    hbm_bytes: Figure
    hbm_bandwidth_Bps: Figure
    power_w: Figure
    capex_usd: Figure
    gemm_efficiency: Figure | None = Field(
        None, description="fraction of the dense peak large matrix products reach, (0, 1]"
    )
    gemm_call_s: Figure | None = Field(
        None, description="what each GEMM kernel costs beyond its roofline, seconds >= 0"
    )

    @model_validator(mode="after")
    def _gemm(self):
        e, c = self.gemm_efficiency, self.gemm_call_s
        if e is not None and not 0 < e.value <= 1:
            raise ValueError(f"gemm_efficiency must be in (0, 1], not {e.value!r}")
        if c is not None and not c.value >= 0:
            raise ValueError(f"gemm_call_s must be seconds >= 0, not {c.value!r}")
        return self


class ScaleUpSection(FigureSection):
    _integers = ("group_chips",)
    bandwidth_Bps: Figure = Field(description="per chip, both directions summed")
    group_chips: Figure
    latency_s: Figure | None = Field(None, description="per step of a collective, in the group")


class ScaleOutSection(FigureSection):
    nic_bandwidth_Bps: Figure = Field(description="per chip, each direction")
    latency_s: Figure | None = Field(None, description="per message, chip to chip across nodes")


class ServerSection(FigureSection):
    _integers = ("chips",)
    chips: Figure
    host_power_w: Figure
    host_capex_usd: Figure


class CloudSection(BaseModel):
    """The cloud instance a hardware is rented as: its name in the price file (the shipped
    ``tlm/hardware/prices.toml``, or ``prices``, a price file's path relative to this file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance: str = Field(min_length=1)
    prices: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_prices_here(cls, data):
        for key in ("usd_per_hour", "instance_chips"):
            if isinstance(data, dict) and key in data:
                raise ValueError(
                    f"{key} = {data[key]!r} is not a hardware file's: prices and chips per "
                    f"instance live in {PRICES_FILE} (or the file [cloud] prices names); "
                    "name the instance only"
                )
        return data


class HardwareFile(BaseModel):
    """A whole hardware file; a Trainium file names ``chip`` and ``system`` and leaves out
    ``[chip]``, ``[scale_up]`` and ``[scale_out]``; every ``source`` is a key of ``sources``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str = Field(min_length=1)
    description: str = ""
    chip: str | None = None
    system: str | None = None
    sources: dict[str, str]
    chip_figures: ChipSection | None = Field(None, alias="chip_section")
    scale_up: ScaleUpSection | None = None
    scale_out: ScaleOutSection | None = None
    server: ServerSection
    cloud: CloudSection

    @model_validator(mode="after")
    def _check(self):
        own = [s for s in ("chip_section", "scale_up", "scale_out") if self._get(s) is not None]
        if self.chip is not None:
            if own:
                raise ValueError(
                    f"a file naming chip preset {self.chip!r} takes its figures from it; "
                    f"remove [{own[0].replace('_section', '')}]"
                )
            if self.system is None:
                raise ValueError("system must name the system preset of chip " + repr(self.chip))
        elif len(own) < 3:
            missing = {"chip_section", "scale_up", "scale_out"} - set(own)
            raise ValueError(
                f"[{sorted(missing)[0].replace('_section', '')}] is required without a chip preset"
            )
        for section in ("chip_section", "scale_up", "scale_out", "server"):
            block = self._get(section)
            if block is None:
                continue
            for name in type(block).model_fields:
                figure = getattr(block, name)
                if not isinstance(figure, Figure):
                    continue
                for option in (figure, *figure.alternatives.values()):
                    for key in option.source.replace(",", " ").split():
                        if key not in self.sources:
                            raise ValueError(
                                f"{section.replace('_section', '')}.{name} cites source {key!r}, "
                                f"which is not in [sources] ({', '.join(sorted(self.sources))})"
                            )
        return self

    def _get(self, section):
        return self.chip_figures if section == "chip_section" else getattr(self, section)


@dataclass(frozen=True)
class Hardware:
    """One accelerator with its server and cloud instance: plain numbers, units in the names.

    ``sources`` maps each figure's name to where it came from (the file and the source keys).
    Equal and hashable by content (what it is loaded from does not matter), so the figures
    derived from it are cached on it (``functools.cache``).
    """

    name: str
    description: str
    chip_preset: str | None
    dense_flops: dict
    hbm_bytes: float
    hbm_bandwidth_Bps: float
    power_w: float
    capex_usd: float
    scale_up_bandwidth_Bps: float
    scale_up_chips: int
    scale_out_bandwidth_Bps: float
    server_chips: int
    host_power_w: float
    host_capex_usd: float
    instance: str
    instance_chips: int
    #: The price in force (:attr:`price`'s), per instance-hour.
    instance_usd_per_hour: float
    sources: dict
    #: Per step of a collective inside the scale-up group, and per message across nodes
    #: (files with their own [scale_up]/[scale_out]; a Trainium file's come from its system).
    scale_up_latency_s: float | None = None
    scale_out_latency_s: float | None = None
    #: The system preset a Trainium file names (``trn2-ultraserver``); None for the others.
    system: str | None = None
    #: A chip without a TLM (a GPU): the fraction of its dense peak large GEMMs reach and
    #: what each kernel costs beyond that (:meth:`tlm.costs.OpCosts.for_hardware`; None: its
    #: defaults, ASSUMED), fitted on the training validation (tools/calibrate_training.py).
    gemm_efficiency: float | None = None
    gemm_call_s: float | None = None
    #: Published peaks with structured sparsity, per format (``bf16``, ``fp8``), where the chip
    #: has them; data only (no sparse operand is modelled).
    sparse_flops: dict = field(default_factory=dict)
    #: The hourly price in force, with its kind, source and date (:mod:`tlm.hardware.prices`;
    #: on-demand as loaded, another kind by :meth:`priced`); None only for a hand-made value.
    price: Price | None = None
    #: Every kind of price published for the instance (its :data:`PRICE_KINDS`), by kind.
    prices: tuple = field(default=(), repr=False)

    def __hash__(self) -> int:
        known = self.__dict__.get("_hash")
        if known is None:  # worked out once: the fields never change
            known = hash(
                tuple(
                    tuple(sorted(v.items())) if isinstance(v, dict) else v
                    for v in (getattr(self, f.name) for f in fields(self))
                )
            )
            object.__setattr__(self, "_hash", known)
        return known

    def __getstate__(self) -> dict:  # the hash of str fields differs between processes
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def priced(self, kind: str) -> Hardware:
        """This hardware at its instance's ``kind`` price (``on_demand``, ``capacity_block``).

        Raises
        ------
        HardwareError
            ``price: KIND ...``: a kind not in :data:`PRICE_KINDS` or not published for the
            instance, naming the kinds that are.
        """
        if self.price is not None and kind == self.price.kind:
            return self
        for p in self.prices:
            if p.kind == kind:
                sources = dict(self.sources)
                sources["instance_usd_per_hour"] = p.cited
                return replace(self, price=p, instance_usd_per_hour=p.usd_per_hour,
                               sources=sources)  # fmt: skip
        if kind not in PRICE_KINDS:
            raise HardwareError(f"price must be one of {', '.join(PRICE_KINDS)}, not {kind!r}")
        raise HardwareError(
            f"price: {kind!r} is not published for {self.instance} ({self.name}); "
            f"one of {', '.join(p.kind for p in self.prices)}"
        )

    def peak_flops(self, fmt: str = "bf16") -> float:
        """Dense peak FLOP/s of one chip in ``fmt`` (``bf16``, ``fp16`` as bf16, ``fp8``)."""
        key = "bf16" if fmt == "fp16" else ("fp8" if fmt.startswith("fp8") else fmt)
        if key not in self.dense_flops:
            allowed = ", ".join(sorted({*self.dense_flops, "fp16"}))
            raise ValueError(f"fmt must be one of {allowed} for {self.name}, not {fmt!r}")
        return self.dense_flops[key]


def _read(name) -> tuple[str, str]:
    if isinstance(name, Path) or str(name).endswith(".toml"):
        path = Path(name)
        return str(path), read_text(path, HardwareError)
    if name in HARDWARE:
        text = resources.files(__package__).joinpath(f"{name}.toml").read_text()
        return f"tlm/hardware/{name}.toml", text
    raise HardwareError(f"hardware must be {_ALLOWED}, not {name!r}")


def load_hardware(name: str | Path) -> Hardware:
    """Load and validate a hardware file by name (``"h100"``) or path.

    Raises
    ------
    HardwareError
        Naming the file and what does not validate.
    """
    return _load_hardware(name)


def _load_hardware(name: str | Path) -> Hardware:
    where, text = _read(name)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise HardwareError(f"{where}: not valid TOML: {error}") from None
    if "chip" in raw and isinstance(raw["chip"], dict):
        raw["chip_section"] = raw.pop("chip")
    try:
        data = HardwareFile.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]).replace("chip_section", "chip")
        msg = first["msg"].removeprefix("Value error, ")
        raise HardwareError(f"{where}: {loc + ': ' if loc else ''}{msg}") from None
    sources = {}

    def own(section: str, block, field: str, key: str | None = None):
        figure = getattr(block, field)
        sources[key or field] = f"{where} {section}.{field}: {figure.source}"
        return figure.value

    server, cloud = data.server, data.cloud
    common = dict(
        server_chips=int(own("server", server, "chips", "server_chips")),
        host_power_w=float(own("server", server, "host_power_w")),
        host_capex_usd=float(own("server", server, "host_capex_usd")),
        **_cloud(cloud, where, sources),
    )
    if data.chip is None:
        c, up, out = data.chip_figures, data.scale_up, data.scale_out
        flops = {"bf16": float(own("chip", c, "dense_bf16_flops"))}
        if c.dense_fp8_flops is not None:
            flops["fp8"] = float(own("chip", c, "dense_fp8_flops"))
        figures = dict(
            dense_flops=flops,
            hbm_bytes=float(own("chip", c, "hbm_bytes")),
            hbm_bandwidth_Bps=float(own("chip", c, "hbm_bandwidth_Bps")),
            power_w=float(own("chip", c, "power_w")),
            capex_usd=float(own("chip", c, "capex_usd")),
            scale_up_bandwidth_Bps=float(
                own("scale_up", up, "bandwidth_Bps", "scale_up_bandwidth_Bps")
            ),
            scale_up_chips=int(own("scale_up", up, "group_chips", "scale_up_chips")),
            scale_out_bandwidth_Bps=float(
                own("scale_out", out, "nic_bandwidth_Bps", "scale_out_bandwidth_Bps")
            ),
        )
        for name in ("gemm_efficiency", "gemm_call_s"):
            if getattr(c, name) is not None:
                figures[name] = float(own("chip", c, name))
        figures["sparse_flops"] = {
            fmt: float(own("chip", c, f"sparse_{fmt}_flops"))
            for fmt in ("bf16", "fp8")
            if getattr(c, f"sparse_{fmt}_flops") is not None
        }
        for block, section in ((up, "scale_up"), (out, "scale_out")):
            if block.latency_s is not None:
                key = f"{section}_latency_s"
                figures[key] = float(own(section, block, "latency_s", key))
    else:
        figures = _from_presets(data, where, sources)
    return Hardware(
        name=data.name,
        description=data.description,
        chip_preset=data.chip,
        system=data.system,
        sources=sources,
        **figures,
        **common,
    )


def _cloud(cloud: CloudSection, where: str, sources: dict) -> dict:
    """The instance's chips and prices from the price file, on-demand in force."""
    path = None
    if cloud.prices is not None:
        path = str(Path(where).parent / cloud.prices)
    try:
        book = load_prices(path)
    except PriceError as error:
        raise HardwareError(f"{where}: cloud.prices: {error}") from None
    try:
        inst = book.instance(cloud.instance)
    except PriceError as error:
        raise HardwareError(f"{where}: cloud.{error}") from None
    sources["instance_chips"] = f"{book.where} instances.{inst.instance}.chips: {inst.chips_source}"
    on_demand = inst.price("on_demand")
    sources["instance_usd_per_hour"] = on_demand.cited
    return dict(
        instance=inst.instance,
        instance_chips=inst.chips,
        instance_usd_per_hour=on_demand.usd_per_hour,
        price=on_demand,
        prices=inst.prices,
    )


def _from_presets(data: HardwareFile, where: str, sources: dict) -> dict:
    """A Trainium file's chip figures, read from its chip and system presets."""
    from ..presets import PresetError, load_preset
    from ..system import SystemSpecError, load_system

    try:
        spec = load_preset(data.chip)
        system = load_system(data.system, chip=data.chip)
    except (PresetError, SystemSpecError) as error:
        raise HardwareError(f"{where}: {error}") from None
    if spec.cost is None:
        raise HardwareError(
            f"{where}: chip preset {data.chip!r} has no [cost] section (power_w, capex_usd)"
        )
    chip_file = f"tlm/presets/{data.chip}.toml"
    system_file = f"tlm/system/{data.system}.toml"

    def cite(name, key, file=chip_file, source=None):
        sources[name] = f"{file} {key}: {source or spec.sources[key]}"

    cite("dense_bf16_flops", "published.dense_bf16_flops")
    cite("dense_fp8_flops", "published.dense_fp8_flops")
    cite("dense_fp32_flops", "published.dense_fp32_flops")
    sparse = {}
    for fmt in ("bf16", "fp8"):
        key = f"sparse_{fmt}_flops"
        if getattr(spec.published, key, None) is not None:
            sparse[fmt] = float(getattr(spec.published, key))
            cite(key, f"published.{key}")
    cite("hbm_bytes", "chip.hbm_stack_capacity_bytes")
    cite("hbm_bandwidth_Bps", "chip.hbm_bandwidth_Bps")
    cite("power_w", "cost.power_w")
    cite("capex_usd", "cost.capex_usd")
    cite("scale_up_bandwidth_Bps", "chip.neuronlink_bandwidth_Bps")
    sources["scale_up_chips"] = f"{system_file}: the chips of one node"
    efa = system.file.efa
    cite(
        "scale_out_bandwidth_Bps",
        "efa.nic_bandwidth_Bps",
        system_file,
        efa.nic_bandwidth_Bps.source,
    )
    return dict(
        dense_flops={
            "bf16": float(spec.published.dense_bf16_flops),
            "fp8": float(spec.published.dense_fp8_flops),
            "fp32": float(spec.published.dense_fp32_flops),
        },
        sparse_flops=sparse,
        hbm_bytes=float(spec.hbm_capacity_bytes),
        hbm_bandwidth_Bps=float(spec.chip.hbm_bandwidth_Bps),
        power_w=float(spec.cost.power_w),
        capex_usd=float(spec.cost.capex_usd),
        scale_up_bandwidth_Bps=float(spec.chip.neuronlink_bandwidth_Bps),
        scale_up_chips=int(system.chips_per_node),
        scale_out_bandwidth_Bps=float(efa.nic_bandwidth_Bps.value),
    )
