"""A NeuronCore as a kernel sees it: SBUF, PSUM, four engines, 16 DMA queues, and the
instructions of the NKI-style API (``dma_copy``, ``nc_matmul``, ``nc_transpose``,
``activation``, ``tensor_tensor``, ``tensor_scalar``, ``tensor_reduce``, ``tensor_copy``,
``sem_signal``, ``sem_wait``).

Every call goes through one path, whatever the op (:mod:`tlm.core.ops` describes each): check
its arguments and operands against the machine's rules, work out its cost, compute its values
(functional mode, in program order), and record an :class:`Instruction` in the core's
:class:`Program`, which finds what it waits for. A timing simulation
(:mod:`tlm.chip.timing`) runs the program's queues later.

Examples
--------
A core on its own, without a chip:

>>> from tlm.core import NeuronCore, Program
>>> core = NeuronCore(Program(), "trn2")
>>> x = core.sbuf.tile((128, 64), "fp32")
>>> y = core.sbuf.tile((128, 64), "bf16")
>>> first = core.tensor_scalar(x, x, "add", 1.0)
>>> second = core.activation(y, x, "exp")
>>> second.deps == [first], float(y.values[0, 0])
(True, 2.71875)
"""

from __future__ import annotations

import numpy as np

from ..presets import ChipSpec, load_preset
from .errors import KernelError
from .instruction import Instruction, Semaphore
from .memory import Memory, Tile
from .ops import OPS, REACH, Call
from .program import Program
from .view import View

__all__ = ["NeuronCore"]

#: Engine operands start on one of these partitions (a quadrant boundary of 32).
PARTITION_QUADRANT = 32


class NeuronCore:
    """One NeuronCore, recording its instructions into a program.

    Parameters
    ----------
    program : Program
        Where the instructions go (shared by the cores of one chip); its mode (functional or
        timing only) is the core's.
    spec : ChipSpec or str
        The machine's figures (a preset name is loaded).
    index : int
        Core number on the chip: names the core's memories and instructions.

    Attributes
    ----------
    sbuf, psum : Memory
    dma_queues : tuple of str
        ``"dma0"`` ... one per DMA engine.
    next_dma : int
        The DMA queue ``dma_copy`` takes next when given none (round robin).
    last_stationary : tuple or None
        What the Tensor engine holds: the stationary of the last matmul (allocation, box,
        version), or ``None``.
    """

    def __init__(self, program: Program, spec: ChipSpec | str, index: int = 0):
        if not isinstance(program, Program):
            raise TypeError(f"program must be a Program, not {program!r}")
        spec = load_preset(spec) if isinstance(spec, str) else spec
        if not isinstance(spec, ChipSpec):
            raise TypeError(f"spec must be a ChipSpec or a preset name, not {spec!r}")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"index must be a non-negative integer, not {index!r}")
        self.program = program
        self.spec = spec
        self.index = index
        c = spec.core
        self.sbuf = Memory(
            f"core{index}.sbuf",
            partitions=c.sbuf_partitions,
            partition_bytes=c.sbuf_partition_bytes,
            values=program.values,
        )
        self.psum = Memory(
            f"core{index}.psum",
            partitions=c.sbuf_partitions,
            partition_bytes=c.psum_partition_bytes,
            banks=c.psum_banks,
            values=program.values,
        )
        for memory in (self.sbuf, self.psum):
            program.track(memory)
        self.dma_queues = tuple(f"dma{i}" for i in range(c.dma_engines))
        self.next_dma = 0
        self.last_stationary = None
        self._counts: dict[str, int] = {}

    # ---- the one recording path --------------------------------------------------------

    def _label(self, op: str, name: str | None) -> str:
        n = self._counts.get(op, 0)
        self._counts[op] = n + 1
        label = f"core{self.index}.{op}#{n}"
        return f"{label} {name!r}" if name else label

    def _record(self, op_name: str, name: str | None, **args) -> Instruction:
        """Check a call of ``OPS[op_name]``, cost it, compute its values, record it."""
        op = OPS[op_name]
        key = op.name if op.label_arg is None else f"{op.name}.{args[op.label_arg]}"
        call = Call(op, self._label(key, name), args)
        for choice in op.choices:
            value = args[choice.arg]
            if value is None and choice.optional:
                continue
            if not isinstance(value, str) or value not in choice.table:
                raise call.fail(
                    f"{choice.arg} must be one of {', '.join(choice.table)}, not {value!r}"
                )
        call.queue = op.queue if isinstance(op.queue, str) else op.queue(self, call)
        present = [o for o in op.operands if o.when is None or args[o.when] is not None]
        for operand in present:  # where each operand lives
            view, role = args[operand.role], operand.role
            memories = operand.memories or REACH[call.queue]
            if operand.kind in ("tile", "column"):
                self._check_tile(call.label, role, view, memories)
            elif operand.kind == "view":
                if isinstance(view, Tile):
                    self._check_tile(call.label, role, view, memories)
                elif not isinstance(view, View):
                    raise call.fail(f"{role} must be an HBM tensor or an SBUF tile")
            call.operands[role] = view
        if op.lanes:  # partitions are lanes
            lanes = {role: call.operands[role] for role in op.lanes}
            self._check_partitions(call.label, lanes)
            if op.same_free:
                same = {role: call.operands[role] for role in op.same_free}
                self._check_same_free(call.label, same)
            start, stop = lanes[op.lanes[0]].partitions
            for operand in present:  # one value per lane
                if operand.kind in ("scalar", "column"):
                    memories = operand.memories or REACH[call.queue]
                    call.operands[operand.role] = self._per_lane(
                        call, operand, memories, stop - start
                    )
        if op.check is not None:
            op.check(self, call)
        fields = op.cost(self, call) if op.cost is not None else {}
        if self.program.values and op.value is not None:
            op.value(self, call)
        reads, writes = [], []
        for operand in present:
            view = call.operands[operand.role]
            if not isinstance(view, View):
                continue  # a number
            if not operand.writes:
                reads.append(view)
                continue
            writes.append(view)
            if operand.update_if is not None and args[operand.update_if]:
                reads.append(view)
        return self.program.record(
            core=self.index,
            queue=call.queue,
            op=op.name,
            label=call.label,
            reads=reads,
            writes=writes,
            **fields,
        )

    # ---- the rules every op shares -------------------------------------------------------

    def _check_tile(self, label, role, view, kinds):
        if not isinstance(view, Tile):
            where = "HBM" if isinstance(view, View) else type(view).__name__
            allowed = " or ".join(k.upper() for k in kinds)
            raise KernelError(label, f"{role} must be a tile in {allowed}, not {where}")
        if view.memory.name.split(".")[0] != f"core{self.index}":
            raise KernelError(
                label, f"{role} is in {view.memory.name}, not in core{self.index}'s memories"
            )
        if view.memory.kind not in kinds:
            allowed = " or ".join(k.upper() for k in kinds)
            raise KernelError(label, f"{role} must be in {allowed}, not {view.memory.kind.upper()}")
        if view.alloc.freed:
            raise KernelError(label, f"{role} {view.name!r} was freed")

    def _check_partitions(self, label, roles: dict):
        counts = {}
        for role, view in roles.items():
            start, stop = view.partitions
            if start % PARTITION_QUADRANT:
                raise KernelError(
                    label,
                    f"illegal partitions: {role} starts at partition {start}; engine accesses "
                    f"start at a multiple of {PARTITION_QUADRANT}",
                )
            counts[role] = stop - start
        if len(set(counts.values())) > 1:
            text = ", ".join(f"{r} {n}" for r, n in counts.items())
            raise KernelError(
                label, f"partition counts differ ({text}); an engine maps partition to lane"
            )

    def _check_same_free(self, label, roles: dict):
        sizes = {role: view.free_size for role, view in roles.items()}
        if len(set(sizes.values())) > 1:
            text = ", ".join(f"{r} {tuple(v.shape)}" for r, v in roles.items())
            raise KernelError(label, f"shape mismatch: {text}")

    def _per_lane(self, call, operand, memories, partitions):
        """A scalar operand (a number, or a ``[P, 1]`` tile: one value per partition) or a
        ``[P, 1]`` tile (``column``); a number comes back as a float."""
        value, role = call.args[operand.role], operand.role
        if operand.kind == "scalar" and not isinstance(value, Tile):
            if isinstance(value, (int, float, np.floating)) and not isinstance(value, bool):
                return float(value)
            raise call.fail(f"{role} must be a number or a [P, 1] tile, not {value!r}")
        if operand.kind == "scalar":
            self._check_tile(call.label, role, value, memories)
        shape = value.shape
        if len(shape) != 2 or shape[1] != 1 or shape[0] != partitions:
            raise call.fail(
                f"shape mismatch: {role} must be a [{partitions}, 1] tile, not {list(shape)}"
            )
        return value

    # ---- DMA ---------------------------------------------------------------------------

    def dma_copy(self, dst, src, *, queue: int | None = None, name: str | None = None):
        """Copy ``src`` to ``dst`` (HBM <-> SBUF, or within either) on one DMA queue.

        The transfer is spread over up to ``dma_engines`` engines (one per partition row);
        its rate is shared max-min fairly with every other transfer on the core's DMA engines
        and on each HBM stack it touches, after a fixed cost per transfer. Without ``queue``
        the core's queues are taken in turn.
        """
        inst = self._record("dma_copy", name, dst=dst, src=src, queue=queue)
        if queue is None:
            self.next_dma = (self.next_dma + 1) % len(self.dma_queues)
        return inst

    # ---- Tensor engine -----------------------------------------------------------------

    def nc_matmul(
        self,
        dst,
        stationary,
        moving,
        *,
        accumulate=False,
        stationary_scales=None,
        moving_scales=None,
        name=None,
    ):
        """``dst[M, N] (+)= stationary[K, M].T @ moving[K, N]`` on the Tensor engine.

        Values come from :func:`tlm.tensor.matmul` (the RTL's numerics contract); with
        ``accumulate`` the result is added to ``dst`` in FP32 (PSUM accumulation). K <= 128
        (up to ``fp8_max_k`` for FP8 operands, double-row mode), M <= 128,
        N <= :data:`tlm.tensor.MAX_N`; ``dst`` is an FP32 PSUM tile inside one bank.

        MX operands (chips with MX, trn3): ``stationary`` and ``moving`` hold the elements
        (``float8_e4m3fn``: mxfp8, ``float8_e5m2``: mxfp8_e5m2; ``[K, M]`` or ``[P, R, M]``
        with R up to the chip's MX rows per PE) and ``stationary_scales`` /
        ``moving_scales`` their E8M0 scales, ``[K / 32, M]`` and ``[K / 32, N]`` in K order
        (``k = r P + p``).
        """
        return self._record(
            "nc_matmul",
            name,
            dst=dst,
            stationary=stationary,
            moving=moving,
            accumulate=accumulate,
            stationary_scales=stationary_scales,
            moving_scales=moving_scales,
        )

    def nc_transpose(self, dst, src, *, name=None):
        """``dst[M, K] = src[K, M].T`` on the Tensor engine: a matmul against the identity,
        so the values are those of :func:`tlm.tensor.matmul` (FP32 in PSUM)."""
        return self._record("nc_transpose", name, dst=dst, src=src)

    # ---- Scalar engine -----------------------------------------------------------------

    def activation(self, dst, src, func, *, scale=1.0, bias=0.0, accum=None, name=None):
        """``dst = func(src * scale + bias)`` on the Scalar engine, FP32 inside.

        ``func`` is one of ``exp``, ``tanh``, ``gelu``, ``relu``, ``identity``; ``scale`` and
        ``bias`` are numbers or ``[P, 1]`` tiles; ``accum``, a ``[P, 1]`` FP32 tile, receives
        the sum of the results along the free dimensions.
        """
        return self._record(
            "activation", name, dst=dst, src=src, func=func, scale=scale, bias=bias, accum=accum
        )

    # ---- Vector (and GpSimd) engine ----------------------------------------------------

    def tensor_tensor(self, dst, a, b, op, *, engine="vector", name=None):
        """``dst = a op b`` elementwise (add, subtract, multiply, divide, max, min)."""
        return self._record("tensor_tensor", name, dst=dst, a=a, b=b, op=op, engine=engine)

    def tensor_scalar(
        self, dst, src, op0, operand0, op1=None, operand1=None, *, engine="vector", name=None
    ):
        """``dst = (src op0 operand0) op1 operand1``; operands are numbers or [P, 1] tiles."""
        return self._record(
            "tensor_scalar",
            name,
            dst=dst,
            src=src,
            op0=op0,
            operand0=operand0,
            op1=op1,
            operand1=operand1,
            engine=engine,
        )

    def tensor_reduce(self, dst, src, op, *, engine="vector", name=None):
        """``dst[P, 1] = reduce(op, src[P, ...])`` over the free dimensions (add, max, min)."""
        return self._record("tensor_reduce", name, dst=dst, src=src, op=op, engine=engine)

    def tensor_copy(self, dst, src, *, engine="vector", name=None):
        """``dst = src``, converting to ``dst``'s format (round to nearest even)."""
        return self._record("tensor_copy", name, dst=dst, src=src, engine=engine)

    # ---- semaphores --------------------------------------------------------------------

    def sem_signal(self, sem: Semaphore, *, engine: str, name=None):
        """Add one to ``sem`` when ``engine``'s queue reaches this point."""
        return self._record("sem_signal", name, sem=sem, engine=engine)

    def sem_wait(self, sem: Semaphore, value: int, *, engine: str, name=None):
        """Block ``engine``'s queue here until ``sem`` reaches ``value``."""
        return self._record("sem_wait", name, sem=sem, value=value, engine=engine)
