"""A kernel: ordinary Python that records instructions on a chip's cores.

Examples
--------
>>> import numpy as np, ml_dtypes
>>> from tlm.chip import Kernel
>>> k = Kernel("trn2")
>>> x = k.hbm_tensor("x", (128, 64), "bf16", data=np.ones((128, 64), ml_dtypes.bfloat16))
>>> core = k.core(0)
>>> t = core.sbuf.tile((128, 64), "bf16")
>>> _ = core.dma_copy(t, x)
>>> y = core.sbuf.tile((128, 64), "fp32")
>>> _ = core.activation(y, t, "exp", scale=2.0)
>>> float(y.values[0, 0]) == float(np.exp(np.float32(2.0)))
True
>>> run = k.run()
>>> run.instructions, run.time_s > 0
(2, True)
"""

from __future__ import annotations

from ..core.instruction import Semaphore
from ..core.neuroncore import NeuronCore
from ..core.program import Program
from .chip import Chip
from .hbm import HbmTensor

__all__ = ["Kernel"]


class Kernel:
    """Records a program on a chip: HBM tensors, per-core instructions, semaphores.

    The kernel owns one :class:`~tlm.core.program.Program` (``program``) that every core it
    hands out records into, so hazards between cores through HBM are found too.

    Parameters
    ----------
    chip : str, ChipSpec or Chip
        The chip (a preset name is loaded).
    values : bool
        Functional mode (default): memories hold data and every instruction computes its
        values as it is recorded. ``False``: timing only, for shapes too large to hold.
    """

    def __init__(self, chip="trn2", *, values: bool = True):
        self.chip = chip if isinstance(chip, Chip) else Chip(chip)
        self.spec = self.chip.spec
        self.values = bool(values)
        self.program = Program(values=self.values)
        self._cores: dict[int, NeuronCore] = {}
        self.tensors: dict[str, HbmTensor] = {}

    def core(self, index: int) -> NeuronCore:
        """NeuronCore ``index`` (0 .. cores-1)."""
        n = self.spec.chip.cores
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise ValueError(f"core must be an integer in 0..{n - 1}, not {index!r}")
        if index not in self._cores:
            self._cores[index] = NeuronCore(self.program, self.spec, index)
        return self._cores[index]

    def hbm_tensor(self, name, shape, dtype, *, data=None, stack: int = 0) -> HbmTensor:
        """A tensor in HBM stack ``stack``, zero or ``data`` (functional mode)."""
        n = len(self.chip.stacks)
        if isinstance(stack, bool) or not isinstance(stack, int) or not 0 <= stack < n:
            raise ValueError(f"stack must be an integer in 0..{n - 1}, not {stack!r}")
        if name in self.tensors:
            raise ValueError(f"name {name!r} is already an HBM tensor of this kernel")
        tensor = HbmTensor(name, shape, dtype, self.chip.stacks[stack], data, self.values)
        self.tensors[name] = tensor
        return tensor

    def semaphore(self, name: str) -> Semaphore:
        """A semaphore kernels signal and wait on across engines."""
        return Semaphore(name)

    def run(self):
        """Simulate the recorded program; returns a :class:`tlm.chip.timing.Run`.

        Raises
        ------
        DeadlockError
            When queues still hold instructions that can never start (a semaphore wait that
            is never met), naming each blocked instruction and what it waits for.
        """
        from .timing import simulate

        return simulate(self)
