"""The instructions of a NeuronCore as data: their operands, rules, values and costs.

Each op is an :class:`OpSpec`: the roles of its operands (what each may be, which memories it
may live in, whether the op reads or writes it), the queue it runs on, the arguments that
choose among named functions, its own rules (shapes, dtypes) beyond the common ones, a value
function (functional mode) and a cost function (what the timing simulation needs).
:class:`tlm.core.neuroncore.NeuronCore` records every op through one path: check the arguments
and operands, work out the cost, compute the values, emit the instruction.

The functions here take the recording core and the :class:`Call` being recorded; they raise
:class:`KernelError` naming the call's label and the rule.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..formats import MX_BLOCK, MX_FORMATS, format_of_dtype, get_format
from ..tensor import MAX_N, EngineConfig, matmul, matmul_cycles
from ..tensor.matmul import resolve_formats
from .errors import KernelError
from .instruction import ENGINES, Semaphore
from .isa import ACTIVATIONS, ALU_OPS, REDUCE_OPS, stream_cycles
from .memory import Tile
from .view import dtype_name

__all__ = ["Operand", "Choice", "OpSpec", "Call", "OPS", "REACH"]

#: Memories each streaming engine reads and writes (GpSimd has no path to PSUM).
REACH = {"vector": ("sbuf", "psum"), "scalar": ("sbuf", "psum"), "gpsimd": ("sbuf",)}

#: Operand kinds: an SBUF/PSUM tile; a tile or an HBM view (DMA); a number or a [P, 1] tile
#: (one value per partition); a [P, 1] tile.
KINDS = ("tile", "view", "scalar", "column")


@dataclass(frozen=True)
class Operand:
    """One operand role of an op.

    Parameters
    ----------
    role : str
        The argument's name (``"dst"``, ``"src"``, ``"scale"`` ...); errors name it.
    kind : str
        One of :data:`KINDS`.
    writes : bool
        The op writes it (else reads it).
    memories : tuple of str, optional
        Where a tile may live (``"sbuf"``, ``"psum"``); default: where the op's engine
        reaches (:data:`REACH`).
    when : str, optional
        The argument that brings this operand: present only when that argument is not
        ``None`` (``accum``; ``operand1`` with ``op1``).
    update_if : str, optional
        The boolean argument that makes a write a read-modify-write (``accumulate``).
    """

    role: str
    kind: str = "tile"
    writes: bool = False
    memories: tuple[str, ...] | None = None
    when: str | None = None
    update_if: str | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")


@dataclass(frozen=True)
class Choice:
    """An argument naming one of a table's entries (a function, an ALU op)."""

    arg: str
    table: dict
    optional: bool = False


@dataclass(frozen=True)
class OpSpec:
    """An op of the kernel API, as data.

    Parameters
    ----------
    name : str
        The op (``Instruction.op``).
    queue : str or callable
        The queue it runs on, or ``queue(core, call) -> str`` checking the call's choice.
    operands : tuple of Operand
        In the order they are checked.
    lanes : tuple of str
        Roles whose partitions are engine lanes: each starts on a quadrant and all have the
        same count (listed in this order in the message).
    same_free : tuple of str
        Roles that must have the same number of elements per partition.
    choices : tuple of Choice
        Arguments naming table entries, checked first.
    label_arg : str, optional
        The argument appended to the label (``activation.exp``).
    check : callable, optional
        ``check(core, call)``: the op's own rules; may leave sizes in ``call.facts``.
    value : callable, optional
        ``value(core, call)``: writes the results (functional mode only).
    cost : callable, optional
        ``cost(core, call) -> dict`` of :class:`Instruction` fields: ``occupancy_s``,
        ``latency_s``, ``flops``, ``dma``, ``sem_wait``, ``sem_signal``.
    streams : tuple of str
        For streaming engines: the roles whose widths set the rate.
    """

    name: str
    queue: str | Callable
    operands: tuple[Operand, ...] = ()
    lanes: tuple[str, ...] = ()
    same_free: tuple[str, ...] = ()
    choices: tuple[Choice, ...] = ()
    label_arg: str | None = None
    check: Callable | None = None
    value: Callable | None = None
    cost: Callable | None = None
    streams: tuple[str, ...] = ()

    def __post_init__(self):
        roles = [o.role for o in self.operands]
        for label, listed in (("lanes", self.lanes), ("same_free", self.same_free)):
            for role in listed:
                if role not in roles:
                    raise ValueError(f"{self.name}: {label} names {role!r}, not an operand")
        per_lane = [o.role for o in self.operands if o.kind in ("scalar", "column")]
        if (per_lane or self.same_free) and not self.lanes:
            raise ValueError(f"{self.name}: [P, 1] operands and same_free need lanes")


@dataclass
class Call:
    """One call of an op being recorded.

    Attributes
    ----------
    op : OpSpec
    label : str
        ``core0.nc_matmul#12 'name'``: errors and traces name the instruction by it.
    args : dict
        Every argument of the call by name, operands included.
    queue : str
        The queue it runs on, once checked.
    operands : dict
        The present operands by role, once checked.
    facts : dict
        What the op's check works out (sizes, formats) for its value and cost.
    """

    op: OpSpec
    label: str
    args: dict
    queue: str = ""
    operands: dict = field(default_factory=dict)
    facts: dict = field(default_factory=dict)

    def fail(self, rule: str) -> KernelError:
        return KernelError(self.label, rule)

    def number(self, role):
        """A scalar operand's values: its tile's as FP32 (``[P, 1]``), or the number."""
        value = self.operands[role]
        if isinstance(value, Tile):
            return None if value.values is None else value.values.astype(np.float32)
        return np.float32(value)


# ---- queues ------------------------------------------------------------------------------


def _stream_queue(core, call):
    engine = call.args["engine"]
    if engine not in REACH:
        raise call.fail(f"engine must be vector, scalar or gpsimd, not {engine!r}")
    return engine


def _dma_queue(core, call):
    """The queue given, else the core's next in round robin (advanced once recorded)."""
    queue, n = call.args["queue"], len(core.dma_queues)
    if queue is None:
        return core.dma_queues[core.next_dma]
    if isinstance(queue, bool) or not isinstance(queue, int) or not 0 <= queue < n:
        raise call.fail(f"queue must be an integer in 0..{n - 1}, not {queue!r}")
    return core.dma_queues[queue]


def _sem_queue(core, call):
    engine = call.args["engine"]
    if engine not in ENGINES + core.dma_queues:
        raise call.fail(f"engine must be one of {', '.join(ENGINES)}, dma0.., not {engine!r}")
    return engine


# ---- streaming engines (Vector, Scalar, GpSimd) ------------------------------------------


def _stream_cost(core, call):
    """``stream_cycles`` at the engine's clock; the widest operand sets the rate."""
    engine = getattr(core.spec, call.queue)
    views = [call.operands[role] for role in call.op.streams]
    width = max(v.dtype.itemsize for v in views)
    cycles = stream_cycles(engine, max(v.free_size for v in views), width)
    seconds = cycles / engine.freq_hz
    return {"occupancy_s": seconds, "latency_s": seconds}


def _per_partition(value, ndim):
    if isinstance(value, np.ndarray):
        return value.reshape(value.shape[0], *([1] * (ndim - 1)))
    return value


def _activation_value(core, call):
    src, dst, accum = (call.operands.get(r) for r in ("src", "dst", "accum"))
    x = src.values.astype(np.float32)
    with np.errstate(all="ignore"):
        y = ACTIVATIONS[call.args["func"]](x * call.number("scale") + call.number("bias"))
    dst.values[...] = y.astype(dst.dtype)
    if accum is not None:
        p = src.partitions[1] - src.partitions[0]
        accum.values[...] = y.reshape(p, -1).sum(axis=1, dtype=np.float32)[:, None]


def _tensor_tensor_value(core, call):
    dst, a, b = (call.operands[r] for r in ("dst", "a", "b"))
    x, y = a.values.astype(np.float32), b.values.astype(np.float32)
    with np.errstate(all="ignore"):
        dst.values[...] = ALU_OPS[call.args["op"]](x, y.reshape(x.shape)).astype(dst.dtype)


def _tensor_scalar_value(core, call):
    dst, src = call.operands["dst"], call.operands["src"]
    x = src.values.astype(np.float32)
    op1 = call.args["op1"]
    with np.errstate(all="ignore"):
        y = ALU_OPS[call.args["op0"]](x, _per_partition(call.number("operand0"), x.ndim))
        if op1 is not None:
            y = ALU_OPS[op1](y, _per_partition(call.number("operand1"), x.ndim))
    dst.values[...] = y.astype(dst.dtype)


def _tensor_reduce_value(core, call):
    dst, src = call.operands["dst"], call.operands["src"]
    p = src.partitions[1] - src.partitions[0]
    x = src.values.astype(np.float32).reshape(p, -1)
    dst.values[...] = REDUCE_OPS[call.args["op"]](x, axis=1)[:, None].astype(dst.dtype)


def _tensor_copy_value(core, call):
    dst, src = call.operands["dst"], call.operands["src"]
    dst.values[...] = src.values.astype(np.float32).reshape(dst.shape).astype(dst.dtype)


# ---- DMA -----------------------------------------------------------------------------------


def _dma_check(core, call):
    dst, src = call.operands["dst"], call.operands["src"]
    if tuple(dst.shape) != tuple(src.shape):
        raise call.fail(f"shape mismatch: dst {list(dst.shape)} and src {list(src.shape)}")
    if dst.dtype != src.dtype:
        raise call.fail(
            f"dtype mismatch: dst {dtype_name(dst.dtype)} and src {dtype_name(src.dtype)}; "
            "DMA copies bytes and does not convert"
        )


def _dma_value(core, call):
    call.operands["dst"].values[...] = call.operands["src"].values


def _dma_cost(core, call):
    """A transfer spread over up to ``dma_engines`` engines (one per partition row), through
    the core's DMA engines and every HBM stack it touches, after a fixed cost."""
    dst, src = call.operands["dst"], call.operands["src"]
    c = core.spec.core
    rows = min(
        [v.partitions[1] - v.partitions[0] for v in (dst, src) if isinstance(v, Tile)]
        or [c.dma_engines]
    )
    cap = min(rows, c.dma_engines) * c.dma_engine_bandwidth_Bps
    resources = [f"core{core.index}.dma"]
    for view in (src, dst):
        if not isinstance(view, Tile) and view.stack.name not in resources:
            resources.append(view.stack.name)
    return {"dma": (src.nbytes, tuple(resources), cap, c.dma_fixed_latency_s)}


# ---- Tensor engine -------------------------------------------------------------------------


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


def _fp32_result(call, dst):
    if dst.dtype != np.float32:
        raise call.fail(f"dtype mismatch: dst is {dtype_name(dst.dtype)}; PSUM results are fp32")


@functools.cache
def _mx_formats(s_dtype, m_dtype):
    """The MX formats of an nc_matmul's element operands by their dtypes."""
    by_dtype = {f.dtype: f for f in MX_FORMATS.values()}
    pair = tuple(by_dtype.get(d) for d in (s_dtype, m_dtype))
    if None in pair:
        allowed = ", ".join(f"{f.dtype} ({f.name})" for f in MX_FORMATS.values())
        raise ValueError(
            f"MX elements (with scales) must be one of {allowed}, not stationary {s_dtype} "
            f"and moving {m_dtype}"
        )
    return pair


def _matmul_formats(core, call):
    """(stationary, moving) formats: MX when scales come with both operands."""
    stationary, moving = call.operands["stationary"], call.operands["moving"]
    scales = [call.operands.get(r) for r in ("stationary_scales", "moving_scales")]
    if (scales[0] is None) != (scales[1] is None):
        raise call.fail("MX operands need stationary_scales and moving_scales, or neither")
    try:
        if scales[0] is None:
            return _formats(stationary.dtype, moving.dtype)
        pair = _mx_formats(stationary.dtype, moving.dtype)
    except ValueError as error:
        raise call.fail(f"dtype mismatch: {error}") from None
    try:
        core.spec.check_format(pair[0])
    except ValueError as error:
        raise call.fail(f"format: {error}") from None
    for role, tile in zip(("stationary_scales", "moving_scales"), scales, strict=True):
        if dtype_name(tile.dtype) != "e8m0":
            raise call.fail(f"dtype mismatch: {role} is {dtype_name(tile.dtype)}, not e8m0")
    return pair


def _matmul_check(core, call):
    dst, stationary, moving = (call.operands[r] for r in ("dst", "stationary", "moving"))
    s_fmt, m_fmt = _matmul_formats(core, call)
    t = core.spec.tensor
    mx = s_fmt.kind == "mx"
    fp8 = mx or (s_fmt.is_fp8 and m_fmt.is_fp8)
    rows_per_pe = core.spec.rows_per_pe(s_fmt) if fp8 else 1
    s_shape, m_shape = tuple(stationary.shape), tuple(moving.shape)
    if len(dst.shape) != 2 or len(s_shape) != len(m_shape) or len(s_shape) not in (2, 3):
        raise call.fail(
            f"shape mismatch: stationary {list(s_shape)}, moving {list(m_shape)}, dst "
            f"{list(dst.shape)}; expected [K, M], [K, N], [M, N] (FP8 double row: "
            "[P, R, M], [P, R, N])"
        )
    if len(s_shape) == 3:
        if not fp8 or s_shape[1] > rows_per_pe:
            raise call.fail(
                f"shape mismatch: a [P, R, M] stationary (R={s_shape[1]}) needs FP8 or MX "
                f"operands and R <= {rows_per_pe} rows per PE; the operands are "
                f"{s_fmt.name} and {m_fmt.name}"
            )
        if s_shape[1] != m_shape[1]:
            raise call.fail(f"shape mismatch: stationary R={s_shape[1]}, moving R={m_shape[1]}")
    (k, m), (k2, n) = (s_shape[0], s_shape[-1]), (m_shape[0], m_shape[-1])
    if stationary.partitions != moving.partitions:
        raise call.fail(
            f"illegal partitions: stationary on partitions {stationary.partitions} and "
            f"moving on {moving.partitions}; the contraction runs over the same partitions"
        )
    if k != k2:
        raise call.fail(f"shape mismatch: stationary K={k}, moving K={k2}")
    if k > t.rows or m > t.cols or n > MAX_N:
        raise call.fail(
            f"shape mismatch: K={k} M={m} N={n}; allowed K <= {t.rows} partitions, "
            f"M <= {t.cols}, N <= {MAX_N} (one PSUM bank of FP32)"
        )
    if tuple(dst.shape) != (m, n):
        raise call.fail(f"shape mismatch: dst is {list(dst.shape)}, the result is [{m}, {n}]")
    _fp32_result(call, dst)
    if dst.partitions[0] != 0:
        raise call.fail(
            f"illegal partitions: dst starts at partition {dst.partitions[0]}, "
            "results leave the array on partitions 0..M-1"
        )
    rows = s_shape[1] if len(s_shape) == 3 else 1
    if mx:
        blocks = k * rows // MX_BLOCK
        if k % MX_BLOCK:
            raise call.fail(
                f"shape mismatch: K={k} partitions; MX operands take a multiple of {MX_BLOCK} "
                f"(one E8M0 scale per {MX_BLOCK} elements along K)"
            )
        for role, cols in (("stationary_scales", m), ("moving_scales", n)):
            shape = tuple(call.operands[role].shape)
            if shape != (blocks, cols):
                raise call.fail(
                    f"shape mismatch: {role} is {list(shape)}; expected [{blocks}, {cols}] "
                    f"(one scale per {MX_BLOCK} elements of K={k * rows})"
                )
    call.facts.update(k=k, m=m, n=n, rows=rows, formats=(s_fmt, m_fmt))


def _matmul_value(core, call):
    f = call.facts
    k, m, n, rows = f["k"], f["m"], f["n"], f["rows"]
    dst, stationary, moving = (call.operands[r] for r in ("dst", "stationary", "moving"))
    cfg = _value_engine(k * rows, core.spec.tensor.cols, f["formats"])
    sv, mv = stationary.values, moving.values
    if rows > 1:  # double row: k = r * P + p, the order of the [K, M] operand
        sv = sv.transpose(1, 0, 2).reshape(k * rows, m)
        mv = mv.transpose(1, 0, 2).reshape(k * rows, n)
    if f["formats"][0].kind == "mx":  # (elements, scales) pairs
        sv = (sv, call.operands["stationary_scales"].values)
        mv = (mv, call.operands["moving_scales"].values)
    result = matmul(sv, mv, cfg=cfg)
    if call.args["accumulate"]:
        dst.values[...] += result
    else:
        dst.values[...] = result


@functools.cache
def _cost_engine(rows, cols, fmt):
    """The engine a cost is worked out on (one per format: configs are immutable, and making
    one per matmul was a tenth of the time to record a GEMM)."""
    return EngineConfig(rows, cols, fmt)


def _tensor_cost(core, k, m, n, fmt, mode):
    """Occupancy and latency of a ``k x m`` stationary against ``n`` moving columns."""
    t = core.spec.tensor
    cfg = _cost_engine(t.rows, t.cols, fmt)
    occupancy = matmul_cycles(k, m, n, cfg=cfg, mode=mode) / t.freq_hz
    latency = matmul_cycles(k, m, n, cfg=cfg, mode="alone") / t.freq_hz
    return {"occupancy_s": occupancy, "latency_s": max(latency, occupancy)}


def _matmul_cost(core, call):
    """``reuse`` when the stationary is the one the previous matmul loaded and unchanged, else
    ``back_to_back``; double row runs R rows per PE in the cycles of one, so K stays K. The
    cost follows the moving format."""
    f = call.facts
    stationary = call.operands["stationary"]
    key = (stationary.alloc.id, stationary.ranges, core.program.version(stationary))
    mode = "reuse" if key == core.last_stationary else "back_to_back"
    core.last_stationary = key
    cost = _tensor_cost(core, f["k"], f["m"], f["n"], f["formats"][1], mode)
    return {**cost, "flops": 2.0 * f["k"] * f["rows"] * f["m"] * f["n"]}


def _transpose_check(core, call):
    dst, src = call.operands["dst"], call.operands["src"]
    if len(src.shape) != 2 or len(dst.shape) != 2:
        raise call.fail("shape mismatch: nc_transpose takes 2-D tiles")
    k, m = src.shape
    t = core.spec.tensor
    if k > t.rows or m > t.cols:
        raise call.fail(f"shape mismatch: src is [{k}, {m}]; allowed [<= {t.rows}, <= {t.cols}]")
    if tuple(dst.shape) != (m, k):
        raise call.fail(f"shape mismatch: dst is {list(dst.shape)}, the transpose is [{m}, {k}]")
    _fp32_result(call, dst)
    call.facts.update(k=k, m=m)


def _transpose_value(core, call):
    dst, src = call.operands["dst"], call.operands["src"]
    k, t = call.facts["k"], core.spec.tensor
    identity = np.eye(k, dtype=np.float32).astype(src.dtype)
    fmt = format_of_dtype(src.dtype)
    dst.values[...] = matmul(src.values, identity, cfg=_value_engine(t.rows, t.cols, (fmt, fmt)))


def _transpose_cost(core, call):
    """A matmul of ``src`` against the identity: a new stationary every time."""
    k, m = call.facts["k"], call.facts["m"]
    core.last_stationary = None
    fmt = get_format(dtype_name(call.operands["src"].dtype))
    return _tensor_cost(core, k, m, k, fmt, "back_to_back")


# ---- semaphores ----------------------------------------------------------------------------


def _sem_check(core, call):
    sem = call.args["sem"]
    if not isinstance(sem, Semaphore):
        raise call.fail(f"sem must be a Semaphore, not {sem!r}")
    if call.op.name == "sem_wait":
        value = call.args["value"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise call.fail(f"value must be a positive integer, not {value!r}")


def _sem_signal_cost(core, call):
    return {"sem_signal": call.args["sem"]}


def _sem_wait_cost(core, call):
    return {"sem_wait": (call.args["sem"], call.args["value"])}


# ---- the table -----------------------------------------------------------------------------

_SBUF, _PSUM = ("sbuf",), ("psum",)


def _streaming(name, operands, *, lanes, same_free=None, streams=None, **kw):
    """A Vector/Scalar/GpSimd op: its lanes are partitions, its cost a stream."""
    return OpSpec(
        name,
        kw.pop("queue", _stream_queue),
        operands,
        lanes=lanes,
        same_free=lanes if same_free is None else same_free,
        cost=_stream_cost,
        streams=lanes if streams is None else streams,
        **kw,
    )


#: Every op of the kernel API by name.
OPS = {
    op.name: op
    for op in (
        OpSpec(
            "dma_copy",
            _dma_queue,
            (
                Operand("dst", "view", writes=True, memories=_SBUF),
                Operand("src", "view", memories=_SBUF),
            ),
            check=_dma_check,
            value=_dma_value,
            cost=_dma_cost,
        ),
        OpSpec(
            "nc_matmul",
            "tensor",
            (
                Operand("stationary", memories=_SBUF),
                Operand("moving", memories=_SBUF),
                Operand("stationary_scales", memories=_SBUF, when="stationary_scales"),
                Operand("moving_scales", memories=_SBUF, when="moving_scales"),
                Operand("dst", writes=True, memories=_PSUM, update_if="accumulate"),
            ),
            check=_matmul_check,
            value=_matmul_value,
            cost=_matmul_cost,
        ),
        OpSpec(
            "nc_transpose",
            "tensor",
            (Operand("src", memories=_SBUF), Operand("dst", writes=True, memories=_PSUM)),
            check=_transpose_check,
            value=_transpose_value,
            cost=_transpose_cost,
        ),
        _streaming(
            "activation",
            (
                Operand("src"),
                Operand("dst", writes=True),
                Operand("scale", "scalar"),
                Operand("bias", "scalar"),
                Operand("accum", "column", writes=True, when="accum"),
            ),
            queue="scalar",
            lanes=("dst", "src"),
            choices=(Choice("func", ACTIVATIONS),),
            label_arg="func",
            value=_activation_value,
        ),
        _streaming(
            "tensor_tensor",
            (Operand("dst", writes=True), Operand("a"), Operand("b")),
            lanes=("dst", "a", "b"),
            choices=(Choice("op", ALU_OPS),),
            label_arg="op",
            value=_tensor_tensor_value,
        ),
        _streaming(
            "tensor_scalar",
            (
                Operand("dst", writes=True),
                Operand("src"),
                Operand("operand0", "scalar"),
                Operand("operand1", "scalar", when="op1"),
            ),
            lanes=("dst", "src"),
            choices=(Choice("op0", ALU_OPS), Choice("op1", ALU_OPS, optional=True)),
            label_arg="op0",
            value=_tensor_scalar_value,
        ),
        _streaming(
            "tensor_reduce",
            (Operand("dst", "column", writes=True), Operand("src")),
            lanes=("dst", "src"),
            same_free=(),
            streams=("src",),
            choices=(Choice("op", REDUCE_OPS),),
            label_arg="op",
            value=_tensor_reduce_value,
        ),
        _streaming(
            "tensor_copy",
            (Operand("dst", writes=True), Operand("src")),
            lanes=("dst", "src"),
            value=_tensor_copy_value,
        ),
        OpSpec("sem_signal", _sem_queue, check=_sem_check, cost=_sem_signal_cost),
        OpSpec("sem_wait", _sem_queue, check=_sem_check, cost=_sem_wait_cost),
    )
}
