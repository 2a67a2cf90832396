"""What serving tokens costs: power, energy per token and dollars per million tokens of a
fleet of replicas, from the hardware files (every figure with its source).

A replica of ``chips`` chips is priced as its share of full servers - a fleet fills its
servers with replicas, so a 2-GPU replica pays a quarter of an 8-GPU server's host power and
instance-hour: power per chip is :func:`tlm.cluster.cost.power` of one whole server (chips at
their rated power, the host, its switch ports, the facility's PUE) divided by the server's
chips; the cloud price per chip is the instance's hourly price over its chips (the price in
force: :attr:`tlm.hardware.Hardware.price`, from ``tlm/hardware/prices.toml``). Chips are
counted at rated power whatever their load (an upper bound for an idle fleet; stated).

One definition of price-performance: a configuration's cost per million output tokens is one
replica's chips over the output tokens per second it **sustains within the SLO** -
``max_rate_cost_per_million_tokens_usd`` in ``trnsim infer-search`` (the rate of its batch
slots as a queue, :mod:`tlm.inference.queueing`) and in ``trnsim serve --find-max-rate`` (the
rate simulated). The plain
``cost_per_million_tokens_usd`` of both is a fleet at a given load, its idle capacity included;
compare hardware per dollar by the first.

Examples
--------
>>> from tlm.hardware import load_hardware
>>> e = token_economics(load_hardware("h100"), chips=8, output_tokens_per_s=1000.0)
>>> round(e["cost_per_hour_usd"], 2), round(e["cost_per_million_tokens_usd"], 2)
(55.04, 15.29)
"""

from __future__ import annotations

import numpy as np

from ..cluster.cost import DEFAULT_PUE, DEFAULT_USD_PER_KWH, power
from ..hardware import Hardware

__all__ = ["token_economics", "ECONOMICS_FIELDS"]

#: The figures :func:`token_economics` returns.
ECONOMICS_FIELDS = (
    "power_w",
    "energy_per_token_j",
    "cost_per_hour_usd",
    "cost_per_million_tokens_usd",
    "energy_cost_per_million_tokens_usd",
)


def token_economics(
    hw: Hardware,
    chips,
    output_tokens_per_s,
    *,
    pue: float = DEFAULT_PUE,
    usd_per_kwh: float = DEFAULT_USD_PER_KWH,
) -> dict:
    """Power, energy per output token and dollars per million output tokens of ``chips``
    chips of ``hw`` producing ``output_tokens_per_s`` (numpy arrays broadcast; floats for
    scalars).

    Returns
    -------
    dict
        ``power_w`` (facility power, W), ``energy_per_token_j``, ``cost_per_hour_usd`` (cloud
        instance-hours, the chips' share), ``cost_per_million_tokens_usd`` (cloud) and
        ``energy_cost_per_million_tokens_usd`` (the electricity alone, at ``usd_per_kwh``).

    Raises
    ------
    ValueError
        ``chips`` or ``output_tokens_per_s`` not positive.
    """
    chips = np.asarray(chips, dtype=float)
    rate = np.asarray(output_tokens_per_s, dtype=float)
    if not (chips > 0).all():
        raise ValueError(f"chips must be positive, not {chips.min()!r}")
    if not (rate > 0).all():
        raise ValueError(f"output_tokens_per_s must be positive, not {rate.min()!r}")
    per_chip_w = float(power(hw, hw.server_chips, pue=pue).total_w) / hw.server_chips
    watts = chips * per_chip_w
    usd_h = chips * hw.instance_usd_per_hour / hw.instance_chips
    out = {
        "power_w": watts,
        "energy_per_token_j": watts / rate,
        "cost_per_hour_usd": usd_h,
        "cost_per_million_tokens_usd": usd_h / (rate * 3600.0) * 1e6,
        "energy_cost_per_million_tokens_usd": watts / rate / 3.6e6 * usd_per_kwh * 1e6,
    }
    if np.ndim(chips) == 0 and np.ndim(rate) == 0:
        return {k: float(v) for k, v in out.items()}
    return out
