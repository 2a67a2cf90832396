"""A NeuronCore as a kernel sees it: SBUF, PSUM, four engines, 16 DMA queues, and the
instructions of the NKI-style API (``dma_copy``, ``nc_matmul``, ``nc_transpose``,
``activation``, ``tensor_tensor``, ``tensor_scalar``, ``tensor_reduce``, ``tensor_copy``,
``sem_signal``, ``sem_wait``).

Each call checks its operands against the machine's rules, computes its values at once (in
functional mode, in program order), works out its cost, and appends an :class:`Instruction`
to its engine's queue. The timing simulation (:mod:`tlm.chip.timing`) runs the queues later.
"""

from __future__ import annotations

import functools

import numpy as np

from ..formats import format_of_dtype, get_format
from ..tensor import EngineConfig, matmul, matmul_cycles
from ..tensor.matmul import resolve_formats
from .errors import KernelError
from .instruction import ENGINES, Instruction, Semaphore
from .isa import ACTIVATIONS, ALU_OPS, REDUCE_OPS, stream_cycles
from .memory import Memory, Tile
from .view import View, dtype_name

__all__ = ["NeuronCore"]

#: Engine operands start on one of these partitions (a quadrant boundary of 32).
PARTITION_QUADRANT = 32


class NeuronCore:
    """One NeuronCore of a kernel's chip.

    Parameters
    ----------
    kernel : tlm.chip.Kernel
        The kernel recording the instructions.
    index : int
        Core number on the chip.
    """

    def __init__(self, kernel, index: int):
        spec = kernel.spec
        self.kernel = kernel
        self.spec = spec
        self.index = index
        c = spec.core
        self.sbuf = Memory(
            f"core{index}.sbuf",
            partitions=c.sbuf_partitions,
            partition_bytes=c.sbuf_partition_bytes,
            values=kernel.values,
        )
        self.psum = Memory(
            f"core{index}.psum",
            partitions=c.sbuf_partitions,
            partition_bytes=c.psum_partition_bytes,
            banks=c.psum_banks,
            values=kernel.values,
        )
        for memory in (self.sbuf, self.psum):
            memory.on_alloc = kernel._inherit
            memory.on_free = kernel._retire
        self.hbm_stack = kernel.chip.stacks[index // spec.cores_per_hbm_stack]
        self.dma_queues = tuple(f"dma{i}" for i in range(c.dma_engines))
        self._next_dma = 0
        self._last_stationary = None
        self._counts: dict[str, int] = {}

    # ---- recording helpers -------------------------------------------------------------

    def _label(self, op: str, name: str | None) -> str:
        n = self._counts.get(op, 0)
        self._counts[op] = n + 1
        label = f"core{self.index}.{op}#{n}"
        return f"{label} {name!r}" if name else label

    def _emit(self, label, op, queue, reads, writes, **timing) -> Instruction:
        inst = Instruction(
            index=len(self.kernel.program),
            core=self.index,
            queue=queue,
            op=op,
            label=label,
            **timing,
        )
        inst.deps = self.kernel._hazards(inst, reads, writes)
        allocs = {}
        for view in (*reads, *writes):
            if isinstance(view, Tile):
                allocs[view.alloc.id] = (view.alloc.id, view.memory.name, view.alloc.nbytes)
        inst.allocs = tuple(allocs.values())
        self.kernel.program.append(inst)
        return inst

    def _check_tile(self, label, role, view, kinds=("sbuf", "psum")):
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

    def _stream_timing(self, engine_name, label, views, free):
        if engine_name not in ("vector", "scalar", "gpsimd"):
            raise KernelError(
                label, f"engine must be vector, scalar or gpsimd, not {engine_name!r}"
            )
        engine = getattr(self.spec, engine_name)
        width = max(v.dtype.itemsize for v in views)
        cycles = stream_cycles(engine, free, width)
        seconds = cycles / engine.freq_hz
        return {"occupancy_s": seconds, "latency_s": seconds}

    def _kinds(self, engine_name):
        return ("sbuf",) if engine_name == "gpsimd" else ("sbuf", "psum")

    @staticmethod
    def _operand(value, label, role, partitions):
        """A scalar operand: a float, or a [P, 1] tile (one value per partition)."""
        if isinstance(value, Tile):
            shape = value.shape
            if len(shape) != 2 or shape[1] != 1 or shape[0] != partitions:
                raise KernelError(
                    label,
                    f"shape mismatch: {role} must be a [{partitions}, 1] tile, not {list(shape)}",
                )
            return value
        if isinstance(value, (int, float, np.floating)) and not isinstance(value, bool):
            return float(value)
        raise KernelError(label, f"{role} must be a number or a [P, 1] tile, not {value!r}")

    def _values(self, value):
        if isinstance(value, Tile):
            return None if value.values is None else value.values.astype(np.float32)
        return np.float32(value)

    # ---- DMA ---------------------------------------------------------------------------

    def dma_copy(self, dst, src, *, queue: int | None = None, name: str | None = None):
        """Copy ``src`` to ``dst`` (HBM <-> SBUF, or within either) on one DMA queue.

        The transfer is spread over up to ``dma_engines`` engines (one per partition row);
        its rate is shared max-min fairly with every other transfer on the core's DMA engines
        and on each HBM stack it touches, after a fixed cost per transfer.
        """
        label = self._label("dma_copy", name)
        for role, view in (("dst", dst), ("src", src)):
            if isinstance(view, Tile):
                self._check_tile(label, role, view, kinds=("sbuf",))
            elif not isinstance(view, View):
                raise KernelError(label, f"{role} must be an HBM tensor or an SBUF tile")
        if tuple(dst.shape) != tuple(src.shape):
            raise KernelError(
                label, f"shape mismatch: dst {list(dst.shape)} and src {list(src.shape)}"
            )
        if dst.dtype != src.dtype:
            raise KernelError(
                label,
                f"dtype mismatch: dst {dtype_name(dst.dtype)} and src {dtype_name(src.dtype)}; "
                "DMA copies bytes and does not convert",
            )
        if queue is None:
            queue = self._next_dma
            self._next_dma = (self._next_dma + 1) % len(self.dma_queues)
        elif (
            isinstance(queue, bool)
            or not isinstance(queue, int)
            or not (0 <= queue < len(self.dma_queues))
        ):
            raise KernelError(
                label, f"queue must be an integer in 0..{len(self.dma_queues) - 1}, not {queue!r}"
            )
        if self.kernel.values:
            dst.values[...] = src.values
        c = self.spec.core
        rows = min(
            [v.partitions[1] - v.partitions[0] for v in (dst, src) if isinstance(v, Tile)]
            or [c.dma_engines]
        )
        cap = min(rows, c.dma_engines) * c.dma_engine_bandwidth_Bps
        resources = [f"core{self.index}.dma"]
        for view in (src, dst):
            if not isinstance(view, Tile) and view.stack.name not in resources:
                resources.append(view.stack.name)
        return self._emit(
            label,
            "dma_copy",
            self.dma_queues[queue],
            [src],
            [dst],
            dma=(src.nbytes, tuple(resources), cap, c.dma_fixed_latency_s),
        )

    # ---- Tensor engine -----------------------------------------------------------------

    def nc_matmul(self, dst, stationary, moving, *, accumulate=False, name=None):
        """``dst[M, N] (+)= stationary[K, M].T @ moving[K, N]`` on the Tensor engine.

        Values come from :func:`tlm.tensor.matmul` (the RTL's numerics contract); with
        ``accumulate`` the result is added to ``dst`` in FP32 (PSUM accumulation). K <= 128
        (up to ``fp8_max_k`` for FP8 operands, double-row mode), M <= 128, N <= 512; ``dst``
        is an FP32 PSUM tile inside one bank.
        """
        label = self._label("nc_matmul", name)
        self._check_tile(label, "stationary", stationary, kinds=("sbuf",))
        self._check_tile(label, "moving", moving, kinds=("sbuf",))
        self._check_tile(label, "dst", dst, kinds=("psum",))
        try:
            s_fmt, m_fmt = _formats(stationary.dtype, moving.dtype)
        except ValueError as error:
            raise KernelError(label, f"dtype mismatch: {error}") from None
        t = self.spec.tensor
        fp8 = s_fmt.is_fp8 and m_fmt.is_fp8
        rows_per_pe = self.spec.fp8_rows_per_pe() if fp8 else 1
        s_shape, m_shape = tuple(stationary.shape), tuple(moving.shape)
        if len(dst.shape) != 2 or len(s_shape) != len(m_shape) or len(s_shape) not in (2, 3):
            raise KernelError(
                label,
                f"shape mismatch: stationary {list(s_shape)}, moving {list(m_shape)}, dst "
                f"{list(dst.shape)}; expected [K, M], [K, N], [M, N] (FP8 double row: "
                "[P, R, M], [P, R, N])",
            )
        if len(s_shape) == 3:
            if not fp8 or s_shape[1] > rows_per_pe:
                raise KernelError(
                    label,
                    f"shape mismatch: a [P, R, M] stationary (R={s_shape[1]}) needs FP8 "
                    f"operands and R <= {rows_per_pe} rows per PE; the operands are "
                    f"{s_fmt.name} and {m_fmt.name}",
                )
            if s_shape[1] != m_shape[1]:
                raise KernelError(
                    label, f"shape mismatch: stationary R={s_shape[1]}, moving R={m_shape[1]}"
                )
        (k, m), (k2, n) = (s_shape[0], s_shape[-1]), (m_shape[0], m_shape[-1])
        if stationary.partitions != moving.partitions:
            raise KernelError(
                label,
                f"illegal partitions: stationary on partitions {stationary.partitions} and "
                f"moving on {moving.partitions}; the contraction runs over the same partitions",
            )
        if k != k2:
            raise KernelError(label, f"shape mismatch: stationary K={k}, moving K={k2}")
        if k > t.rows or m > t.cols or n > 512:
            raise KernelError(
                label,
                f"shape mismatch: K={k} M={m} N={n}; allowed K <= {t.rows} partitions, "
                f"M <= {t.cols}, N <= 512 (one PSUM bank of FP32)",
            )
        rows = s_shape[1] if len(s_shape) == 3 else 1
        if tuple(dst.shape) != (m, n):
            raise KernelError(
                label, f"shape mismatch: dst is {list(dst.shape)}, the result is [{m}, {n}]"
            )
        if dst.dtype != np.float32:
            raise KernelError(
                label, f"dtype mismatch: dst is {dtype_name(dst.dtype)}; PSUM results are fp32"
            )
        if dst.partitions[0] != 0:
            raise KernelError(
                label,
                f"illegal partitions: dst starts at partition {dst.partitions[0]}, "
                "results leave the array on partitions 0..M-1",
            )
        if self.kernel.values:
            cfg = _value_engine(k * rows, t.cols, (s_fmt, m_fmt))
            sv, mv = stationary.values, moving.values
            if rows > 1:  # double row: k = r * P + p, the order of the [K, M] operand
                sv = sv.transpose(1, 0, 2).reshape(k * rows, m)
                mv = mv.transpose(1, 0, 2).reshape(k * rows, n)
            result = matmul(sv, mv, cfg=cfg)
            out = dst.values
            if accumulate:
                out += result
            else:
                out[...] = result
        k_eff = k  # double row: R rows per PE in the same cycles
        cfg = EngineConfig(t.rows, t.cols, m_fmt)  # the cost follows the moving format
        key = (stationary.alloc.id, stationary.ranges, self.kernel._version(stationary))
        mode = "reuse" if key == self._last_stationary else "back_to_back"
        self._last_stationary = key
        occupancy = matmul_cycles(k_eff, m, n, cfg=cfg, mode=mode) / t.freq_hz
        latency = matmul_cycles(k_eff, m, n, cfg=cfg, mode="alone") / t.freq_hz
        reads = [stationary, moving] + ([dst] if accumulate else [])
        return self._emit(
            label,
            "nc_matmul",
            "tensor",
            reads,
            [dst],
            occupancy_s=occupancy,
            latency_s=max(latency, occupancy),
            flops=2.0 * k * rows * m * n,
        )

    def nc_transpose(self, dst, src, *, name=None):
        """``dst[M, K] = src[K, M].T`` on the Tensor engine: a matmul against the identity,
        so the values are those of :func:`tlm.tensor.matmul` (FP32 in PSUM)."""
        label = self._label("nc_transpose", name)
        self._check_tile(label, "src", src, kinds=("sbuf",))
        self._check_tile(label, "dst", dst, kinds=("psum",))
        if len(src.shape) != 2 or len(dst.shape) != 2:
            raise KernelError(label, "shape mismatch: nc_transpose takes 2-D tiles")
        k, m = src.shape
        t = self.spec.tensor
        if k > t.rows or m > t.cols:
            raise KernelError(
                label, f"shape mismatch: src is [{k}, {m}]; allowed [<= {t.rows}, <= {t.cols}]"
            )
        if tuple(dst.shape) != (m, k):
            raise KernelError(
                label, f"shape mismatch: dst is {list(dst.shape)}, the transpose is [{m}, {k}]"
            )
        if dst.dtype != np.float32:
            raise KernelError(
                label, f"dtype mismatch: dst is {dtype_name(dst.dtype)}; PSUM results are fp32"
            )
        if self.kernel.values:
            identity = np.eye(k, dtype=np.float32).astype(src.dtype)
            fmt = format_of_dtype(src.dtype)
            dst.values[...] = matmul(
                src.values, identity, cfg=_value_engine(t.rows, t.cols, (fmt, fmt))
            )
        fmt = get_format(dtype_name(src.dtype))
        cfg = EngineConfig(t.rows, t.cols, fmt)
        self._last_stationary = None
        occupancy = matmul_cycles(k, m, k, cfg=cfg, mode="back_to_back") / t.freq_hz
        latency = matmul_cycles(k, m, k, cfg=cfg, mode="alone") / t.freq_hz
        return self._emit(
            label,
            "nc_transpose",
            "tensor",
            [src],
            [dst],
            occupancy_s=occupancy,
            latency_s=max(latency, occupancy),
        )

    # ---- Scalar engine -----------------------------------------------------------------

    def activation(self, dst, src, func, *, scale=1.0, bias=0.0, accum=None, name=None):
        """``dst = func(src * scale + bias)`` on the Scalar engine, FP32 inside.

        ``func`` is one of ``exp``, ``tanh``, ``gelu``, ``relu``, ``identity``; ``scale`` and
        ``bias`` are numbers or ``[P, 1]`` tiles; ``accum``, a ``[P, 1]`` FP32 tile, receives
        the sum of the results along the free dimensions.
        """
        label = self._label(f"activation.{func}", name)
        if func not in ACTIVATIONS:
            raise KernelError(label, f"func must be one of {', '.join(ACTIVATIONS)}, not {func!r}")
        self._check_tile(label, "src", src)
        self._check_tile(label, "dst", dst)
        self._check_partitions(label, {"dst": dst, "src": src})
        self._check_same_free(label, {"dst": dst, "src": src})
        p = src.partitions[1] - src.partitions[0]
        scale = self._operand(scale, label, "scale", p)
        bias = self._operand(bias, label, "bias", p)
        reads = [src] + [v for v in (scale, bias) if isinstance(v, Tile)]
        writes = [dst]
        if accum is not None:
            self._check_tile(label, "accum", accum)
            self._operand(accum, label, "accum", p)
            writes.append(accum)
        if self.kernel.values:
            x = src.values.astype(np.float32)
            with np.errstate(all="ignore"):
                y = ACTIVATIONS[func](x * self._values(scale) + self._values(bias))
            dst.values[...] = y.astype(dst.dtype)
            if accum is not None:
                accum.values[...] = y.reshape(p, -1).sum(axis=1, dtype=np.float32)[:, None]
        timing = self._stream_timing("scalar", label, [dst, src], src.free_size)
        return self._emit(label, "activation", "scalar", reads, writes, **timing)

    # ---- Vector (and GpSimd) engine ----------------------------------------------------

    def tensor_tensor(self, dst, a, b, op, *, engine="vector", name=None):
        """``dst = a op b`` elementwise (add, subtract, multiply, divide, max, min)."""
        label = self._label(f"tensor_tensor.{op}", name)
        if op not in ALU_OPS:
            raise KernelError(label, f"op must be one of {', '.join(ALU_OPS)}, not {op!r}")
        kinds = self._kinds(engine)
        for role, view in (("dst", dst), ("a", a), ("b", b)):
            self._check_tile(label, role, view, kinds)
        self._check_partitions(label, {"dst": dst, "a": a, "b": b})
        self._check_same_free(label, {"dst": dst, "a": a, "b": b})
        timing = self._stream_timing(engine, label, [dst, a, b], a.free_size)
        if self.kernel.values:
            x, y = a.values.astype(np.float32), b.values.astype(np.float32)
            with np.errstate(all="ignore"):
                dst.values[...] = ALU_OPS[op](x, y.reshape(x.shape)).astype(dst.dtype)
        return self._emit(label, "tensor_tensor", engine, [a, b], [dst], **timing)

    def tensor_scalar(
        self, dst, src, op0, operand0, op1=None, operand1=None, *, engine="vector", name=None
    ):
        """``dst = (src op0 operand0) op1 operand1``; operands are numbers or [P, 1] tiles."""
        label = self._label(f"tensor_scalar.{op0}", name)
        for role, op in (("op0", op0), ("op1", op1)):
            if op is not None and op not in ALU_OPS or (role == "op0" and op is None):
                raise KernelError(label, f"{role} must be one of {', '.join(ALU_OPS)}, not {op!r}")
        kinds = self._kinds(engine)
        self._check_tile(label, "dst", dst, kinds)
        self._check_tile(label, "src", src, kinds)
        self._check_partitions(label, {"dst": dst, "src": src})
        self._check_same_free(label, {"dst": dst, "src": src})
        p = src.partitions[1] - src.partitions[0]
        operand0 = self._operand(operand0, label, "operand0", p)
        reads = [src] + ([operand0] if isinstance(operand0, Tile) else [])
        if op1 is not None:
            operand1 = self._operand(operand1, label, "operand1", p)
            reads += [operand1] if isinstance(operand1, Tile) else []
        timing = self._stream_timing(engine, label, [dst, src], src.free_size)
        if self.kernel.values:
            x = src.values.astype(np.float32)
            with np.errstate(all="ignore"):
                y = ALU_OPS[op0](x, _per_partition(self._values(operand0), x.ndim))
                if op1 is not None:
                    y = ALU_OPS[op1](y, _per_partition(self._values(operand1), x.ndim))
            dst.values[...] = y.astype(dst.dtype)
        return self._emit(label, "tensor_scalar", engine, reads, [dst], **timing)

    def tensor_reduce(self, dst, src, op, *, engine="vector", name=None):
        """``dst[P, 1] = reduce(op, src[P, ...])`` over the free dimensions (add, max, min)."""
        label = self._label(f"tensor_reduce.{op}", name)
        if op not in REDUCE_OPS:
            raise KernelError(label, f"op must be one of {', '.join(REDUCE_OPS)}, not {op!r}")
        kinds = self._kinds(engine)
        self._check_tile(label, "dst", dst, kinds)
        self._check_tile(label, "src", src, kinds)
        self._check_partitions(label, {"dst": dst, "src": src})
        p = src.partitions[1] - src.partitions[0]
        self._operand(dst, label, "dst", p)
        timing = self._stream_timing(engine, label, [src], src.free_size)
        if self.kernel.values:
            x = src.values.astype(np.float32).reshape(p, -1)
            dst.values[...] = REDUCE_OPS[op](x, axis=1)[:, None].astype(dst.dtype)
        return self._emit(label, "tensor_reduce", engine, [src], [dst], **timing)

    def tensor_copy(self, dst, src, *, engine="vector", name=None):
        """``dst = src``, converting to ``dst``'s format (round to nearest even)."""
        label = self._label("tensor_copy", name)
        kinds = self._kinds(engine) if engine != "scalar" else ("sbuf", "psum")
        self._check_tile(label, "dst", dst, kinds)
        self._check_tile(label, "src", src, kinds)
        self._check_partitions(label, {"dst": dst, "src": src})
        self._check_same_free(label, {"dst": dst, "src": src})
        timing = self._stream_timing(engine, label, [dst, src], src.free_size)
        if self.kernel.values:
            dst.values[...] = src.values.astype(np.float32).reshape(dst.shape).astype(dst.dtype)
        return self._emit(label, "tensor_copy", engine, [src], [dst], **timing)

    # ---- semaphores --------------------------------------------------------------------

    def _sem_engine(self, label, engine):
        allowed = ENGINES + self.dma_queues
        if engine not in allowed:
            raise KernelError(
                label, f"engine must be one of {', '.join(ENGINES)}, dma0.., not {engine!r}"
            )

    def sem_signal(self, sem: Semaphore, *, engine: str, name=None):
        """Add one to ``sem`` when ``engine``'s queue reaches this point."""
        label = self._label("sem_signal", name)
        self._sem_engine(label, engine)
        if not isinstance(sem, Semaphore):
            raise KernelError(label, f"sem must be a Semaphore, not {sem!r}")
        inst = self._emit(label, "sem_signal", engine, [], [])
        inst.sem_signal = sem
        return inst

    def sem_wait(self, sem: Semaphore, value: int, *, engine: str, name=None):
        """Block ``engine``'s queue here until ``sem`` reaches ``value``."""
        label = self._label("sem_wait", name)
        self._sem_engine(label, engine)
        if not isinstance(sem, Semaphore):
            raise KernelError(label, f"sem must be a Semaphore, not {sem!r}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise KernelError(label, f"value must be a positive integer, not {value!r}")
        inst = self._emit(label, "sem_wait", engine, [], [])
        inst.sem_wait = (sem, value)
        return inst


def _value_engine(rows, cols, formats):
    """An engine of ``rows x cols`` elaborated with the operand ``formats`` (stationary,
    moving): the values of one op, whose formats the engine chooses per op."""
    return EngineConfig(rows, cols, list(dict.fromkeys(formats)))


@functools.cache
def _formats(s_dtype, m_dtype):
    """The formats of an nc_matmul's operands by their dtypes, checked against the mixing
    rules of :func:`tlm.tensor.matmul.resolve_formats`."""
    pair = (format_of_dtype(s_dtype), format_of_dtype(m_dtype))
    cfg = _value_engine(128, 128, pair)
    return resolve_formats(np.empty((0, 0), s_dtype), np.empty((0, 0), m_dtype), cfg)


def _per_partition(value, ndim):
    if isinstance(value, np.ndarray):
        return value.reshape(value.shape[0], *([1] * (ndim - 1)))
    return value
