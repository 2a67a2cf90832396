"""One recorded instruction, and the semaphores engines synchronise through."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Instruction", "Semaphore", "ENGINES"]

#: Compute engines of a NeuronCore, each with its own instruction queue; DMA queues are
#: ``dma0`` .. ``dma15``.
ENGINES = ("tensor", "vector", "scalar", "gpsimd")


@dataclass(eq=False)
class Instruction:
    """An instruction in a queue of one core.

    ``deps`` are earlier instructions whose completion this one waits for (read after write,
    write after read, write after write on overlapping memory): the kernel finds them, and the
    engine waits on their completion semaphores. ``occupancy_s`` is how long the queue is busy,
    ``latency_s`` when the result is visible (>= occupancy; the tensor engine pipelines).
    ``after`` is the last earlier instruction of the same Tensor engine queue that writes PSUM
    elements this one reads or writes: the array delivers results in issue order, so an
    accumulating matmul follows it into the pipeline without waiting for its result, and its
    own result is visible no earlier than that one's. ``after_reads`` are earlier instructions
    that read what this one writes: it waits until they have read it, when their queue is
    free again (``end_s``), not for their results (write after read).
    """

    index: int
    core: int
    queue: str
    op: str
    label: str
    deps: list = field(default_factory=list)
    after: Instruction | None = None
    after_reads: list = field(default_factory=list)
    occupancy_s: float = 0.0
    latency_s: float = 0.0
    flops: float = 0.0
    dma: tuple | None = None  # (nbytes, resources, cap_Bps, fixed_latency_s)
    sem_wait: tuple | None = None  # (Semaphore, value)
    sem_signal: Semaphore | None = None
    allocs: tuple = ()  # (allocation id, memory name, bytes per partition) touched
    # filled by the simulation
    start_s: float | None = None
    end_s: float | None = None
    done_s: float | None = None


class Semaphore:
    """A counting semaphore: ``sem_signal`` adds one, ``sem_wait(value)`` blocks an engine's
    queue until the count reaches ``value``."""

    def __init__(self, name: str):
        self.name = name
        self.value = 0
        self.waiters: list = []  # (value, simpy event)

    def __repr__(self):
        return f"Semaphore({self.name!r})"
