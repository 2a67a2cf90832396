"""Power, energy and cost of a training run, vectorised over chip counts, step times and steps.

The step time is an input (the step-time model comes later), so these functions answer now:
given N chips of a :class:`~tlm.hardware.Hardware` taking ``step_time_s`` per step,

- **power**: the chips, their servers' hosts (CPUs, memory, NICs, fans; the hardware file's
  ``host_power_w``), the scale-out network (switch ports of a folded Clos, :func:`clos_tiers`,
  :func:`switch_ports_per_chip`) and the facility's overhead (cooling and power delivery, as
  ``(PUE - 1)`` times the IT power; PUE 1.2 by default, analysts' figure for a modern AI hall);
- **energy** per step and per run (wall time = steps x step time / goodput);
- **cost** as owned hardware (chips, hosts and switch ports bought, spread evenly over the
  amortisation years, plus the energy at ``usd_per_kwh``) and as cloud instance-hours.

The network: each chip's scale-out bandwidth needs ``nic_Bps / port_Bps`` switch ports at the
leaf; a folded Clos of ``T`` tiers of radix-``k`` switches reaches ``2 (k/2)^T`` endpoint ports,
and each endpoint port costs ``1 + 2 (T - 1) / oversubscription`` switch ports (its leaf port,
and a port at each end of every link above the leaf, thinned by the oversubscription at the
leaf). Port power and price include the optics. Every default is ASSUMED (docs/cluster.md).

Examples
--------
>>> from tlm.hardware import load_hardware
>>> from tlm.cluster.cost import power, run_cost
>>> h100 = load_hardware("h100")
>>> p = power(h100, 16384)
>>> int(p.tiers), round(float(p.total_w) / 1e6, 1)    # 3 tiers; MW at the meter
(3, 27.5)
>>> c = run_cost(h100, 16384, step_time_s=10.0, steps=1000)
>>> round(float(c.cloud_usd)), round(float(c.owned_usd))
(313116, 65173)
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..elementwise import (
    all_,
    as_int,
    broadcast_shape,
    ceil,
    first,
    maximum,
    number,
    shaped,
    where,
)
from ..hardware import Hardware

__all__ = [
    "Fabric",
    "DEFAULT_FABRIC",
    "DEFAULT_PUE",
    "DEFAULT_USD_PER_KWH",
    "DEFAULT_AMORTISATION_YEARS",
    "Power",
    "RunCost",
    "clos_tiers",
    "switch_ports_per_chip",
    "power",
    "run_cost",
]

_YEAR_S = 365.25 * 86400
#: Power usage effectiveness: facility power / IT power. 1.2: analysts' estimate for a modern
#: AI hall (shared/TRN2_FACTS.md); ASSUMED.
DEFAULT_PUE = 1.2
#: Electricity price, US industrial average order of magnitude: ASSUMED $0.08 per kWh.
DEFAULT_USD_PER_KWH = 0.08
#: Years over which owned hardware is paid off: ASSUMED 4 (accelerator generations turn over
#: in 2-3 years; servers are commonly depreciated over 4-6).
DEFAULT_AMORTISATION_YEARS = 4.0


@dataclass(frozen=True)
class Fabric:
    """The scale-out fabric: a folded Clos of identical switches (every figure ASSUMED).

    Attributes
    ----------
    port_Bps : float
        One switch port's bandwidth, each direction (400 Gb/s).
    radix : int
        Ports per switch (64: a 25.6 Tb/s switch of 400 Gb/s ports).
    oversubscription : float
        Down- to up-link bandwidth at the leaves (1: non-blocking).
    port_power_w : float
        Power of one port with its share of the switch and its optic (25 W).
    port_capex_usd : float
        Price of one port with its share of the switch, its optic and cable ($2,000).
    """

    port_Bps: float = 50e9
    radix: int = 64
    oversubscription: float = 1.0
    port_power_w: float = 25.0
    port_capex_usd: float = 2000.0

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"{f.name} must be a positive number, not {value!r}")
        if self.radix < 4 or self.radix % 2 or self.radix != int(self.radix):
            raise ValueError(f"radix must be an even integer >= 4, not {self.radix!r}")
        if self.oversubscription < 1:
            raise ValueError(f"oversubscription must be >= 1, not {self.oversubscription!r}")


DEFAULT_FABRIC = Fabric()


def _positive(name, value):
    """``value`` as floats (a float for a scalar), each > 0, else a ValueError."""
    a = number(value)
    if not all_(a > 0):
        bad = first(a[~(a > 0)]) if np.ndim(a) else first(a)
        raise ValueError(f"{name} must be a positive number (or an array of them), not {bad!r}")
    return a


def clos_tiers(endpoint_ports, radix):
    """Tiers of the smallest folded Clos of radix-``radix`` switches with ``endpoint_ports``
    leaf-facing ports: the least ``T`` with ``2 (radix/2)^T >= endpoint_ports`` (1 tier: a
    single switch of ``radix`` ports); int64, an array or (for a scalar) a numpy integer.

    >>> clos_tiers([64, 65, 2048, 2049, 65536, 65537], 64).tolist()
    [1, 2, 2, 3, 3, 4]
    """
    e = _positive("endpoint_ports", endpoint_ports)
    half = radix / 2
    tiers = ceil(np.log(maximum(e / 2, 1.0)) / np.log(half) - 1e-9)
    tiers = maximum(tiers, 1)
    return as_int(where(e <= radix, 1, maximum(tiers, 2)))


def switch_ports_per_chip(hw: Hardware, chips, fabric: Fabric = DEFAULT_FABRIC):
    """Switch ports each chip's scale-out traffic needs, and the Clos tiers (arrays; scalars
    for a scalar ``chips``).

    >>> from tlm.hardware import load_hardware
    >>> ports, tiers = switch_ports_per_chip(load_hardware("h100"), 16384)
    >>> float(ports), int(tiers)            # 400 Gb/s per GPU over 400 Gb/s ports, 3 tiers
    (5.0, 3)
    """
    n = _positive("chips", chips)
    lanes = hw.scale_out_bandwidth_Bps / fabric.port_Bps
    tiers = clos_tiers(maximum(n * lanes, 1.0), fabric.radix)
    per_port = 1 + 2 * (tiers - 1) / fabric.oversubscription
    return lanes * per_port, tiers


@dataclass(frozen=True)
class Power:
    """Power of a cluster, watts, per configuration (arrays of one shape)."""

    chips: np.ndarray
    servers: np.ndarray
    tiers: np.ndarray
    switch_ports: np.ndarray
    chip_w: np.ndarray
    host_w: np.ndarray
    network_w: np.ndarray
    it_w: np.ndarray
    facility_overhead_w: np.ndarray
    total_w: np.ndarray


def power(
    hw: Hardware, chips, *, fabric: Fabric = DEFAULT_FABRIC, pue=DEFAULT_PUE, spare_servers=0
) -> Power:
    """Power drawn by ``chips`` chips of ``hw`` training (at their rated power), their hosts,
    their switch ports and the facility (vectorised over ``chips``, ``pue`` and
    ``spare_servers``; hot spares idle: only their hosts are counted).
    """
    n = _positive("chips", chips)
    pue = number(pue)
    if not all_(pue >= 1):
        raise ValueError(f"pue must be a number >= 1, not {first(pue)!r}")
    spares = number(spare_servers)
    if not all_(spares >= 0):
        raise ValueError(f"spare_servers must be >= 0, not {first(spares)!r}")
    servers = ceil(n / hw.server_chips)
    per_chip, tiers = switch_ports_per_chip(hw, n, fabric)
    ports = per_chip * n
    chip_w = n * hw.power_w
    host_w = (servers + spares) * hw.host_power_w
    network_w = ports * fabric.port_power_w
    it = chip_w + host_w + network_w
    overhead = it * (pue - 1)
    shape = broadcast_shape(it, overhead)
    b = lambda x: shaped(x, shape).copy()  # noqa: E731
    return Power(
        chips=b(n),
        servers=b(servers),
        tiers=shaped(tiers, shape, np.int64).copy(),
        switch_ports=b(ports),
        chip_w=b(chip_w),
        host_w=b(host_w),
        network_w=b(network_w),
        it_w=b(it),
        facility_overhead_w=b(overhead),
        total_w=b(it + overhead),
    )


@dataclass(frozen=True)
class RunCost:
    """Energy and cost of a run, per configuration (arrays of one shape)."""

    power: Power
    step_energy_j: np.ndarray
    run_wall_s: np.ndarray
    run_energy_j: np.ndarray
    capex_usd: np.ndarray
    owned_hardware_usd: np.ndarray
    energy_usd: np.ndarray
    owned_usd: np.ndarray
    instances: np.ndarray
    cloud_usd: np.ndarray


def run_cost(
    hw: Hardware,
    chips,
    *,
    step_time_s,
    steps,
    goodput=1.0,
    fabric: Fabric = DEFAULT_FABRIC,
    pue=DEFAULT_PUE,
    usd_per_kwh=DEFAULT_USD_PER_KWH,
    amortisation_years=DEFAULT_AMORTISATION_YEARS,
    spare_servers=0,
) -> RunCost:
    """Energy and cost of ``steps`` steps of ``step_time_s`` on ``chips`` chips of ``hw``.

    Parameters
    ----------
    step_time_s, steps : float or array
        One training step's time and the run's steps.
    goodput : float or array
        Useful fraction of wall time (:func:`tlm.cluster.goodput.goodput`); the run's wall time
        is ``steps x step_time_s / goodput`` and every cost is paid over it.
    pue, usd_per_kwh, amortisation_years : float or array
        Facility power / IT power; electricity price; years the owned hardware is paid over.
    spare_servers : int or array
        Hot spare servers (bought, and their hosts powered, with the job's).

    Notes
    -----
    Owned cost: the capex of chips, hosts and switch ports (spares included) times the run's
    share of the amortisation period, plus the energy; it leaves out buildings, staff and the
    cost of money. Cloud cost: whole instances at the hourly price in force
    (:attr:`Hardware.instance_usd_per_hour`: on-demand, or :meth:`Hardware.priced`'s) over the
    wall time.
    """
    n = _positive("chips", chips)
    t = _positive("step_time_s", step_time_s)
    s = _positive("steps", steps)
    g = number(goodput)
    if not all_((g > 0) & (g <= 1)):
        raise ValueError(f"goodput must be a fraction in (0, 1], not {first(g)!r}")
    kwh = _positive("usd_per_kwh", usd_per_kwh)
    years = _positive("amortisation_years", amortisation_years)
    p = power(hw, n, fabric=fabric, pue=pue, spare_servers=spare_servers)
    wall = s * t / g
    spares = number(spare_servers)
    capex = (
        (n + spares * hw.server_chips) * hw.capex_usd
        + (p.servers + spares) * hw.host_capex_usd
        + p.switch_ports * fabric.port_capex_usd
    )
    hardware = capex * wall / (years * _YEAR_S)
    energy_j = p.total_w * wall
    energy_usd = energy_j / 3.6e6 * kwh
    instances = ceil(n / hw.instance_chips)
    cloud = instances * hw.instance_usd_per_hour * wall / 3600.0
    shape = broadcast_shape(hardware, energy_usd, cloud)
    b = lambda x: shaped(x, shape).copy()  # noqa: E731
    return RunCost(
        power=p,
        step_energy_j=b(p.total_w * t),
        run_wall_s=b(wall),
        run_energy_j=b(energy_j),
        capex_usd=b(capex),
        owned_hardware_usd=b(hardware),
        energy_usd=b(energy_usd),
        owned_usd=b(hardware + energy_usd),
        instances=b(instances),
        cloud_usd=b(cloud),
    )
