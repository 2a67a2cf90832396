"""The server TLM in one piece: chips running their kernels and collectives over the system's
links in one simulation (:mod:`tlm.server.tensor_parallel`), and its trace
(:mod:`tlm.server.trace`). See docs/server.md.
"""

from .tensor_parallel import Group, TensorParallelStep, tensor_parallel_step

__all__ = ["Group", "TensorParallelStep", "tensor_parallel_step"]
