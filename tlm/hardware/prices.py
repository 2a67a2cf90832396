"""Cloud instance prices: the one price file (``tlm/hardware/prices.toml``), read once.

Every hourly price a study uses comes from here: per instance its accelerators, its on-demand
price and, where AWS publishes one, its Capacity Block price (USD per instance-hour), each with
its source, the date it was published or read (``as_of``) and its region. A hardware file
names its instance (``[cloud] instance``); :func:`tlm.hardware.load_hardware` prices it
on-demand and :meth:`tlm.hardware.Hardware.priced` at another kind. :func:`price_footing` is
the one definition of what a study's JSON says about the price it used.

Examples
--------
>>> book = load_prices()
>>> p5 = book.instance("p5.48xlarge")
>>> p5.chips, p5.price("on_demand").usd_per_hour, str(p5.price("on_demand").as_of)
(8, 55.04, '2026-11-09')
>>> p5.price("capacity_block").usd_per_hour, p5.price("capacity_block").source
(39.33, 'CAPACITY_BLOCKS')
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..datafile import parse_data_file, read_text

__all__ = [
    "PRICE_KINDS",
    "InstancePrices",
    "Price",
    "PriceBook",
    "PriceError",
    "load_prices",
    "price_footing",
]

#: The kinds of price an instance may have: on-demand always, a capacity block where published.
PRICE_KINDS = ("on_demand", "capacity_block")
#: Where the shipped price file is, as errors and footings name it.
PRICES_FILE = "tlm/hardware/prices.toml"


class PriceError(ValueError):
    """A price file, instance or kind of price that does not validate."""


class _PriceOption(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(gt=0, description="USD per instance-hour")
    source: str = Field(min_length=1)
    as_of: datetime.date
    region: str = Field(min_length=1)
    note: str = ""

    @field_validator("value", mode="before")
    @classmethod
    def _number(cls, value):
        if isinstance(value, bool):
            raise ValueError(f"must be USD per hour > 0, not {value!r}")
        return value


class _PriceFigure(_PriceOption):
    alternatives: dict[str, _PriceOption] = {}


class _Chips(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    value: int = Field(gt=0, strict=True)
    source: str = Field(min_length=1)
    note: str = ""


class _Instance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    chips: _Chips
    on_demand: _PriceFigure
    capacity_block: _PriceFigure | None = None


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sources: dict[str, str]
    instances: dict[str, _Instance] = Field(min_length=1)

    @model_validator(mode="after")
    def _sources(self):
        for name, inst in self.instances.items():
            cited = [("chips", inst.chips.source)]
            for kind in PRICE_KINDS:
                figure = getattr(inst, kind)
                if figure is not None:
                    cited.append((kind, figure.source))
                    cited += [(f"{kind}.alternatives.{a}", o.source)
                              for a, o in figure.alternatives.items()]  # fmt: skip
            for where, key in cited:
                if key not in self.sources:
                    raise ValueError(
                        f"instances.{name}.{where}.source: {key!r} is not in [sources] "
                        f"({', '.join(sorted(self.sources))})"
                    )
        return self


@dataclass(frozen=True)
class Price:
    """One hourly price of one instance: value, footing and date."""

    instance: str
    kind: str
    usd_per_hour: float
    source: str
    as_of: datetime.date
    region: str
    note: str
    #: The text of ``source`` in the file's [sources].
    citation: str = field(repr=False, compare=False)
    #: The price file it comes from (``tlm/hardware/prices.toml`` for the shipped one).
    file: str = PRICES_FILE

    @property
    def cited(self) -> str:
        """Where it comes from, as :attr:`tlm.hardware.Hardware.sources` says it:
        ``FILE instances.INSTANCE.KIND: SOURCE``."""
        return f"{self.file} instances.{self.instance}.{self.kind}: {self.source}"


@dataclass(frozen=True)
class InstancePrices:
    """An instance's accelerators and its prices (``alternatives``: the replaced ones, by
    ``kind.name``)."""

    instance: str
    chips: int
    chips_source: str
    prices: tuple  # of Price, one per kind published
    alternatives: tuple  # of (name, Price)

    @property
    def kinds(self) -> tuple:
        return tuple(p.kind for p in self.prices)

    def price(self, kind: str = "on_demand") -> Price:
        """The ``kind`` price (:data:`PRICE_KINDS`).

        Raises
        ------
        PriceError
            ``price: KIND is not published for INSTANCE; one of ...``.
        """
        for p in self.prices:
            if p.kind == kind:
                return p
        raise PriceError(
            f"price: {kind!r} is not published for {self.instance}; one of {', '.join(self.kinds)}"
        )


@dataclass(frozen=True)
class PriceBook:
    """Every instance of a price file."""

    where: str
    instances: tuple  # of InstancePrices

    def names(self) -> tuple:
        return tuple(i.instance for i in self.instances)

    def instance(self, name: str) -> InstancePrices:
        """An instance's prices.

        Raises
        ------
        PriceError
            ``instance: NAME is not in FILE; one of ...``.
        """
        for i in self.instances:
            if i.instance == name:
                return i
        raise PriceError(
            f"instance: {name!r} is not in {self.where}; one of {', '.join(self.names())}"
        )


def _price(instance, kind, option, sources, file) -> Price:
    return Price(
        instance=instance,
        kind=kind,
        usd_per_hour=float(option.value),
        source=option.source,
        as_of=option.as_of,
        region=option.region,
        note=option.note,
        citation="; ".join(sources[k] for k in option.source.replace(",", " ").split()),
        file=file,
    )


@functools.cache
def load_prices(path: str | None = None) -> PriceBook:
    """The price file at ``path`` (None: the shipped ``tlm/hardware/prices.toml``), validated.

    Raises
    ------
    PriceError
        One line naming the file, the key, the bad value and what is allowed.
    """
    if path is None:
        where, text = PRICES_FILE, resources.files(__package__).joinpath("prices.toml").read_text()
    else:
        where = str(path)
        text = read_text(Path(path), PriceError)
    data = parse_data_file(text, where, _PriceFile, PriceError)
    out = []
    for name, inst in data.instances.items():
        prices, alternatives = [], []
        for kind in PRICE_KINDS:
            figure = getattr(inst, kind)
            if figure is None:
                continue
            prices.append(_price(name, kind, figure, data.sources, where))
            alternatives += [
                (f"{kind}.{a}", _price(name, kind, o, data.sources, where))
                for a, o in figure.alternatives.items()
            ]
        out.append(
            InstancePrices(
                instance=name,
                chips=inst.chips.value,
                chips_source=inst.chips.source,
                prices=tuple(prices),
                alternatives=tuple(alternatives),
            )
        )
    return PriceBook(where=where, instances=tuple(out))


def price_footing(hw) -> dict:
    """What a study's JSON says about the price behind its costs: ``price_instance``,
    ``price_kind`` (on_demand or capacity_block), ``price_per_hour_usd`` (per instance),
    ``price_source`` (a key of the price file's [sources], ``ASSUMED`` where unpublished) and
    ``price_as_of`` (ISO date). The one definition every study uses."""
    p = hw.price
    return dict(
        price_instance=p.instance,
        price_kind=p.kind,
        price_per_hour_usd=p.usd_per_hour,
        price_source=p.source,
        price_as_of=p.as_of.isoformat(),
    )


def price_table(book: PriceBook | None = None) -> list[str]:
    """The price file as a markdown table (docs/cluster.md's, written by ``tools/prices.py``):
    one row per price, in force or replaced (``alternative``), its source key and date."""
    book = load_prices() if book is None else book
    lines = [
        "| instance | chips | price | $/h | $/chip-hour | region | as of | source | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for inst in book.instances:
        rows = [(p.kind.replace("_", "-"), p) for p in inst.prices]
        rows += [(f"{n.split('.')[0].replace('_', '-')}, {n.split('.')[1].replace('_', ' ')}", p)
                 for n, p in inst.alternatives]  # fmt: skip
        for label, p in rows:
            lines.append(
                f"| {inst.instance} | {inst.chips} | {label} | {p.usd_per_hour:,.2f} | "
                f"{p.usd_per_hour / inst.chips:,.3f} | {p.region} | {p.as_of.isoformat()} | "
                f"{p.source} | {p.note} |"
            )
    return lines
