"""Collectives as schedules, run by engines: values (real buffers), analytic (alpha-beta), flow,
flit.

* :mod:`~tlm.collectives.schedule` - the data: steps of transfers between ranks;
* one module per algorithm: :mod:`~tlm.collectives.ring`, :mod:`~tlm.collectives.mesh`,
  :mod:`~tlm.collectives.mesh1`, :mod:`~tlm.collectives.rdh`,
  :mod:`~tlm.collectives.kangaring`, :mod:`~tlm.collectives.hierarchical`,
  :mod:`~tlm.collectives.rings` (a ring per torus dimension); ``auto`` and the registry in
  :mod:`~tlm.collectives.algorithms`;
* the Neuron runtime's part: :mod:`~tlm.collectives.runtime` (ranks on cores, DMA queues,
  the costs per operation and per step);
* engines: :mod:`~tlm.collectives.values` (under :mod:`~tlm.collectives.numerics`),
  :mod:`~tlm.collectives.analytic`, :mod:`~tlm.collectives.flow` (links shared max-min
  fairly, steps overlapping) and :mod:`~tlm.collectives.flit` (packets on the cycle-exact
  torus model, :mod:`~tlm.collectives.packets`).

See docs/collectives.md.

>>> from tlm.collectives import ALGORITHMS
>>> list(ALGORITHMS)
['ring', 'mesh', 'mesh1', 'rdh', 'kangaring', 'hierarchical', 'rings']
"""

from .algorithms import ALGORITHMS, ALGOS, CollectiveError, build, choose, unfit
from .analytic import Analytic
from .numerics import COLLECTIVE_FORMATS, REDUCTIONS
from .schedule import OPS, REDUCING, Schedule, Step, Transfer

__all__ = [
    "ALGORITHMS",
    "ALGOS",
    "COLLECTIVE_FORMATS",
    "OPS",
    "REDUCING",
    "REDUCTIONS",
    "Analytic",
    "CollectiveError",
    "Schedule",
    "Step",
    "Transfer",
    "build",
    "choose",
    "unfit",
]
