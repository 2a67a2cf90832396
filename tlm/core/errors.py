"""Errors a kernel stops with: each names the instruction and the rule it broke."""

from __future__ import annotations

__all__ = ["KernelError", "DeadlockError"]


class KernelError(ValueError):
    """An instruction broke a rule of the machine (capacity, partitions, shapes, dtypes).

    Parameters
    ----------
    instruction : str
        The instruction as written in the kernel, e.g. ``"core0.nc_matmul#12"``.
    rule : str
        The rule, with the values that broke it.
    """

    def __init__(self, instruction: str, rule: str):
        self.instruction = instruction
        self.rule = rule
        super().__init__(f"{instruction}: {rule}")


class DeadlockError(KernelError):
    """Queues still hold instructions when nothing can move: a semaphore wait never met."""
