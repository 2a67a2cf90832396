"""The chip: cores, HBM stacks, DMA, and NeuronLink ports, built from a preset."""

from __future__ import annotations

from dataclasses import dataclass

from ..presets import ChipSpec, load_preset
from .hbm import HbmStack

__all__ = ["Chip", "LinkPort"]


@dataclass(frozen=True)
class LinkPort:
    """A NeuronLink port: an endpoint the server and UltraServer models connect to.

    The chip model only places them; moving data over them belongs to the network models.
    """

    index: int
    bandwidth_Bps: float


class Chip:
    """A chip of ``spec.chip.cores`` NeuronCores, its HBM stacks and NeuronLink ports.

    Parameters
    ----------
    preset : str or ChipSpec
        A preset name (``"trn2"``) or a loaded spec.
    choose : dict, optional
        Alternatives to pick when loading a preset by name.

    Examples
    --------
    >>> chip = Chip("trn2")
    >>> len(chip.stacks), chip.stacks[1].cores, len(chip.links)
    (4, (2, 3), 4)
    """

    def __init__(self, preset: str | ChipSpec = "trn2", choose: dict | None = None):
        spec = preset if isinstance(preset, ChipSpec) else load_preset(preset, choose)
        self.spec = spec
        c = spec.chip
        per_stack = spec.cores_per_hbm_stack
        self.stacks = [
            HbmStack(
                i,
                c.hbm_stack_capacity_bytes,
                c.hbm_bandwidth_Bps / c.hbm_stacks,
                range(i * per_stack, (i + 1) * per_stack),
            )
            for i in range(c.hbm_stacks)
        ]
        self.links = [
            LinkPort(i, c.neuronlink_bandwidth_Bps / c.neuronlink_ports)
            for i in range(c.neuronlink_ports)
        ]

    def stack_of_core(self, core: int) -> HbmStack:
        """The HBM stack local to ``core``."""
        return self.stacks[core // self.spec.cores_per_hbm_stack]
