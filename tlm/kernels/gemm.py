"""Tiled GEMM on all cores of a chip: ``C[M, N] = A[M, K] @ B[K, N]``, BF16, FP8 or MXFP8 inputs.

The input ``a_t`` is A transposed (``[K, M]``, contraction on the partitions, as nc_matmul
takes its stationary). C is cut into blocks of up to ``block_m x block_n`` (512 x 1024: 4 x 2
PSUM banks of 128 x 512 FP32); blocks go round robin to the cores. For each block a core
streams K in steps of 128 rows (256 for FP8, double-row mode): one DMA for the A^T slice, one
for the B slice, into rotating SBUF buffers (``bufs`` of each, so the next steps' loads run
while this step computes), then one nc_matmul per PSUM bank, accumulating over K. At the end
of a block the banks are copied out to SBUF (alternately on the Vector and Scalar engines, in
the output format) and stored to HBM, each bank as soon as its last matmul is done.

MXFP8 inputs (chips with MX) are elements and E8M0 scales (``[K / 32, M]``, ``[K / 32, N]``):
each K step also loads the two scale slices, one DMA each, and the matmuls take them; K
steps are the chip's MX rows per PE times 128.

Inputs are replicated on every HBM stack and each core reads and writes its local stack, as a
sharded deployment lays weights and activations out; so the two cores of a stack share its
bandwidth and no stack serves all eight cores.
"""

from __future__ import annotations

import math

import numpy as np

from ..chip import Kernel
from ..core.view import as_dtype
from ..formats import MX_BLOCK, MX_FORMATS
from ..tensor import MAX_N

__all__ = ["gemm", "build_gemm", "gemm_blocks", "assemble"]


def gemm_blocks(m, n, cores, block_m=512, block_n=1024):
    """The output blocks ``(m0, m1, n0, n1)`` and their cores: smaller blocks (down to 128 x
    512, N halved first) while there are fewer blocks than cores and the halved ones still
    fit on the cores in one round. (Halving past that point gives the busiest core two
    half blocks where it had one: the same products, twice the loads and block boundaries.)
    """
    bm, bn = block_m, block_n
    while math.ceil(m / bm) * math.ceil(n / bn) < cores and (bn > 512 or bm > 128):
        half = (bm, bn // 2) if bn > 512 else (bm // 2, bn)
        if math.ceil(m / half[0]) * math.ceil(n / half[1]) > cores:
            break
        bm, bn = half
    blocks = [
        (m0, min(m0 + bm, m), n0, min(n0 + bn, n))
        for m0 in range(0, m, bm)
        for n0 in range(0, n, bn)
    ]
    return [(blk, i % cores) for i, blk in enumerate(blocks)]


def gemm(
    kernel: Kernel,
    a_t,
    b,
    c,
    *,
    cores=None,
    bufs=4,
    block_m=512,
    block_n=1024,
    stores=None,
    scales=None,
):
    """Record the GEMM ``c = a_t.T @ b`` on ``cores`` of ``kernel``'s chip.

    Parameters
    ----------
    kernel : Kernel
    a_t, b : list of HbmTensor
        ``a_t[s]`` ``[K, M]`` and ``b[s]`` ``[K, N]``: the inputs on HBM stack ``s``.
    c : list of HbmTensor
        ``c[s]`` ``[M, N]`` on stack ``s``: each core writes its blocks to its local stack.
    cores : int, optional
        How many cores to use, 1 .. the chip's (default: all).
    bufs : int
        SBUF buffers per input stream, >= 2 (2 = double buffering; more hides the DMA fixed
        cost).
    stores : dict, optional
        Filled with ``{block index: [store instructions]}``: when they are done the block is
        in HBM (the server model starts a block's all-reduce then).
    scales : (list of HbmTensor, list of HbmTensor), optional
        MX operands: the E8M0 scales of ``a_t`` and ``b`` on each stack, ``[K / 32, M]`` and
        ``[K / 32, N]`` (K a multiple of 32).

    Returns
    -------
    list of ((m0, m1, n0, n1), core)
        The blocks and the core that computed each.
    """
    spec = kernel.spec
    cores = spec.chip.cores if cores is None else cores
    _check_counts(spec, cores, bufs)
    k, m = a_t[0].shape
    n = b[0].shape[1]
    fp8 = a_t[0].dtype.itemsize == 1 and b[0].dtype.itemsize == 1
    mx = scales is not None
    if mx:
        by_dtype = {f.dtype: f for f in MX_FORMATS.values()}
        r = spec.rows_per_pe(by_dtype[a_t[0].dtype])  # rows per PE (MX)
    else:
        r = spec.fp8_rows_per_pe() if fp8 else 1  # rows per PE (FP8 double row)
    part = spec.tensor.rows
    kstep = part * r
    rows, bank_n = spec.tensor.cols, MAX_N  # a matmul's N: one PSUM bank of FP32
    blocks = gemm_blocks(m, n, cores, block_m, block_n)
    last_block = {ci: index for index, (_, ci) in enumerate(blocks)}
    state = {}
    for index, ((m0, m1, n0, n1), ci) in enumerate(blocks):
        core = kernel.core(ci)
        stack = kernel.chip.stack_of_core(ci).index
        if ci not in state:
            state[ci] = {
                "a": [
                    core.sbuf.tile((part, r, block_m), a_t[0].dtype, name=f"a{i}")
                    for i in range(bufs)
                ],
                "b": [
                    core.sbuf.tile((part, r, block_n), b[0].dtype, name=f"b{i}")
                    for i in range(bufs)
                ],
                "o": [
                    core.sbuf.tile((rows, bank_n), c[0].dtype, name=f"o{i}")
                    for i in range(2 * spec.core.psum_banks)
                ],
                "sa": [
                    core.sbuf.tile((part * r // MX_BLOCK, block_m), "e8m0", name=f"sa{i}")
                    for i in range(bufs if mx else 0)
                ],
                "sb": [
                    core.sbuf.tile((part * r // MX_BLOCK, block_n), "e8m0", name=f"sb{i}")
                    for i in range(bufs if mx else 0)
                ],
                "ps": {},
                "step": 0,
                "out": 0,
                "loads": 0,
                "stores": 0,
                "queues": spec.core.dma_engines,
            }
        st = state[ci]
        tm = math.ceil((m1 - m0) / rows)
        tn = math.ceil((n1 - n0) / bank_n)
        for i in range(tm):
            for j in range(tn):
                if (i, j) not in st["ps"]:
                    st["ps"][(i, j)] = core.psum.tile((rows, bank_n), "fp32", name=f"ps{i}{j}")
        for kt, k0 in enumerate(range(0, k, kstep)):
            k1 = min(k0 + kstep, k)
            slot = st["step"] % bufs
            st["step"] += 1
            # up to r pieces of `part` rows (r = 1 unless FP8 double row)
            steps = [(q, min(q + part, k1)) for q in range(k0, k1, part)]
            sc = None
            if mx:  # this step's scales: rows k0/32 .. k1/32 of each operand's
                kb = (k0 // MX_BLOCK, k1 // MX_BLOCK)
                sc = (
                    st["sa"][slot][0 : kb[1] - kb[0], 0 : m1 - m0],
                    st["sb"][slot][0 : kb[1] - kb[0], 0 : n1 - n0],
                )
                core.dma_copy(sc[0], scales[0][stack][slice(*kb), m0:m1], queue=_load_q(st))
                core.dma_copy(sc[1], scales[1][stack][slice(*kb), n0:n1], queue=_load_q(st))
            if len(steps) > 1 and steps[-1][1] - steps[-1][0] != part:
                _ragged(
                    core,
                    st,
                    slot,
                    steps,
                    a_t[stack],
                    b[stack],
                    m0,
                    m1,
                    n0,
                    n1,
                    rows,
                    bank_n,
                    tm,
                    tn,
                    first=kt == 0,
                    scales=sc,
                    k0=k0,
                )
                continue
            p = steps[0][1] - steps[0][0]
            a_tile = st["a"][slot][0:p, 0 : len(steps), 0 : m1 - m0]
            b_tile = st["b"][slot][0:p, 0 : len(steps), 0 : n1 - n0]
            for row, (q0, q1) in enumerate(steps):
                core.dma_copy(a_tile[:, row], a_t[stack][q0:q1, m0:m1], queue=_load_q(st))
                core.dma_copy(b_tile[:, row], b[stack][q0:q1, n0:n1], queue=_load_q(st))
            if len(steps) == 1:
                a_tile, b_tile = a_tile[:, 0], b_tile[:, 0]
            for i in range(tm):
                mi0, mi1 = i * rows, min((i + 1) * rows, m1 - m0)
                for j in range(tn):
                    nj0, nj1 = j * bank_n, min((j + 1) * bank_n, n1 - n0)
                    core.nc_matmul(
                        st["ps"][(i, j)][0 : mi1 - mi0, 0 : nj1 - nj0],
                        _cols(a_tile, mi0, mi1),
                        _cols(b_tile, nj0, nj1),
                        accumulate=kt > 0,
                        **_mx_scales(sc, mi0, mi1, nj0, nj1),
                    )
        for i in range(tm):
            mi0, mi1 = i * rows, min((i + 1) * rows, m1 - m0)
            for j in range(tn):
                nj0, nj1 = j * bank_n, min((j + 1) * bank_n, n1 - n0)
                src = st["ps"][(i, j)][0 : mi1 - mi0, 0 : nj1 - nj0]
                out = st["o"][st["out"] % len(st["o"])][0 : mi1 - mi0, 0 : nj1 - nj0]
                if st["out"] % 2:
                    core.activation(out, src, "identity")
                else:
                    core.tensor_copy(out, src, engine="vector")
                st["out"] += 1
                store = core.dma_copy(
                    c[stack][m0 + mi0 : m0 + mi1, n0 + nj0 : n0 + nj1],
                    out,
                    queue=_store_q(st, last=index == last_block[ci]),
                )
                if stores is not None:
                    stores.setdefault(index, []).append(store)
    return blocks


def _check_counts(spec, cores, bufs):
    """``cores`` in 1..the chip's cores; ``bufs`` >= 2 (one buffer loads while one computes)."""
    n = spec.chip.cores
    if isinstance(cores, bool) or not isinstance(cores, int) or not 1 <= cores <= n:
        raise ValueError(f"cores must be an integer in 1..{n} for {spec.name}, not {cores!r}")
    if isinstance(bufs, bool) or not isinstance(bufs, int) or bufs < 2:
        raise ValueError(f"bufs must be an integer >= 2, not {bufs!r}")


#: DMA queues kept for stores: a store waits for its block's last matmul, and a load queued
#: behind it on the same queue would wait too (head-of-line blocking) and stall the next block.
STORE_QUEUES = 2


def _load_q(st):
    st["loads"] += 1
    return (st["loads"] - 1) % (st["queues"] - STORE_QUEUES)


def _store_q(st, last):
    """A store queue; the core's last block has no loads after it and uses every queue."""
    st["stores"] += 1
    if last:
        return (st["stores"] - 1) % st["queues"]
    return st["queues"] - STORE_QUEUES + (st["stores"] - 1) % STORE_QUEUES


def _cols(tile, start, stop):
    """Columns ``start:stop`` of the last dimension of a 2-D or 3-D tile."""
    return tile[:, start:stop] if len(tile.shape) == 2 else tile[:, :, start:stop]


def _mx_scales(sc, mi0, mi1, nj0, nj1, rows=None):
    """The scale operands of a matmul on columns ``mi0:mi1`` and ``nj0:nj1`` (and the scale
    rows ``rows`` of one piece), or none without MX."""
    if sc is None:
        return {}
    rows = slice(None) if rows is None else slice(*rows)
    return {"stationary_scales": sc[0][rows, mi0:mi1], "moving_scales": sc[1][rows, nj0:nj1]}


def _ragged(core, st, slot, steps, a_t, b, m0, m1, n0, n1, rows, bank_n, tm, tn, first, scales, k0):
    """The last K step of an FP8 or MX GEMM whose K is not a multiple of 128: one single-row
    matmul per 128-row piece (MX: with its pieces' scale rows)."""
    for row, (q0, q1) in enumerate(steps):
        a_tile = st["a"][slot][0 : q1 - q0, row, 0 : m1 - m0]
        b_tile = st["b"][slot][0 : q1 - q0, row, 0 : n1 - n0]
        core.dma_copy(a_tile, a_t[q0:q1, m0:m1], queue=_load_q(st))
        core.dma_copy(b_tile, b[q0:q1, n0:n1], queue=_load_q(st))
        for i in range(tm):
            mi0, mi1 = i * rows, min((i + 1) * rows, m1 - m0)
            for j in range(tn):
                nj0, nj1 = j * bank_n, min((j + 1) * bank_n, n1 - n0)
                blocks = ((q0 - k0) // MX_BLOCK, (q1 - k0) // MX_BLOCK)
                core.nc_matmul(
                    st["ps"][(i, j)][0 : mi1 - mi0, 0 : nj1 - nj0],
                    a_tile[:, mi0:mi1],
                    b_tile[:, nj0:nj1],
                    accumulate=not (first and row == 0),
                    **_mx_scales(scales, mi0, mi1, nj0, nj1, blocks),
                )


def assemble(blocks, c, spec) -> np.ndarray:
    """C from the per-stack outputs: each block from the stack its core wrote to."""
    out = np.zeros(c[0].shape, c[0].dtype)
    for (m0, m1, n0, n1), ci in blocks:
        out[m0:m1, n0:n1] = c[ci // spec.cores_per_hbm_stack].values[m0:m1, n0:n1]
    return out


def build_gemm(
    m,
    n,
    k,
    dtype="bf16",
    *,
    preset="trn2",
    choose=None,
    values=False,
    a=None,
    b=None,
    out_dtype=None,
    cores=None,
    bufs=4,
    stores=None,
):
    """A kernel recording ``C = A @ B`` (``A`` ``[m, k]``, ``B`` ``[k, n]``) on a chip.

    Parameters
    ----------
    m, n, k : int
        Sizes, any positive integers.
    dtype : str
        Input format: ``bf16``, ``fp16``, ``fp8_e4m3``, ``fp8_e4m3fn``, ``fp8_e5m2``, ``fp32``;
        ``mxfp8``, ``mxfp8_e5m2`` on chips with MX (K a multiple of 32; MXFP4 is not here:
        the chip's memories hold a byte per element and do not pack 4-bit values).
    values : bool
        Functional mode: then ``a`` and ``b`` (numpy arrays of ``dtype``; for MX, floats
        that the kernel quantises, blocks of 32 along K) are required.
    out_dtype : str, optional
        Format of C (default: ``bf16``, or ``fp32`` for FP32 inputs).
    cores : int, optional
        How many cores to use, 1 .. the chip's (default: all).
    bufs : int
        SBUF buffers per input stream, >= 2 (see :func:`gemm`).
    stores : dict, optional
        Filled with each block's store instructions (see :func:`gemm`).

    Raises
    ------
    ValueError
        Naming the argument, its value and what is allowed (sizes, ``cores``, ``bufs``,
        the shapes of ``a`` and ``b``).

    Returns
    -------
    (Kernel, blocks, list of HbmTensor)
        The kernel, its blocks and the per-stack outputs (see :func:`assemble`).
    """
    for label, size in (("m", m), ("n", n), ("k", k)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"{label} must be a positive integer, not {size!r}")
    mx = MX_FORMATS.get(dtype) if isinstance(dtype, str) else None
    if mx is not None and mx.element.bits < 8:
        raise ValueError(
            f"dtype {dtype} is not one the GEMM kernel takes: the chip model's memories hold a "
            "byte per element and do not pack 4-bit values (MXFP8 runs; trnsim tensor and "
            "tlm.costs price MXFP4)"
        )
    if mx is not None and k % MX_BLOCK:
        raise ValueError(
            f"k must be a multiple of {MX_BLOCK} for {dtype} (one E8M0 scale per "
            f"{MX_BLOCK} elements of K), not {k}"
        )
    in_dtype = mx.dtype if mx is not None else as_dtype(dtype)
    if out_dtype is None:
        out_dtype = "fp32" if in_dtype == np.float32 else "bf16"
    kernel = Kernel(preset if choose is None else _chip(preset, choose), values=values)
    if mx is not None:
        kernel.spec.check_format(mx)
    _check_counts(kernel.spec, kernel.spec.chip.cores if cores is None else cores, bufs)
    if values and (a is None or b is None):
        raise ValueError("values=True needs the operands a [m, k] and b [k, n]")
    for label, array, shape in (("a", a, (m, k)), ("b", b, (k, n))):
        if array is not None and np.shape(array) != shape:
            raise ValueError(
                f"{label} must have shape [{shape[0]}, {shape[1]}], not {list(np.shape(array))}"
            )
    a_t_data = None if a is None else np.ascontiguousarray(np.asarray(a).T)
    stacks = range(len(kernel.chip.stacks))
    scales = None
    if mx is not None:
        sa = sb = None
        if values:
            a_t_data, sa = mx.quantize(a_t_data, axis=0)
            b, sb = mx.quantize(b, axis=0)
        scales = (
            [kernel.hbm_tensor(f"sa@{s}", (k // 32, m), "e8m0", data=sa, stack=s) for s in stacks],
            [kernel.hbm_tensor(f"sb@{s}", (k // 32, n), "e8m0", data=sb, stack=s) for s in stacks],
        )
    a_t = [kernel.hbm_tensor(f"a_t@{s}", (k, m), in_dtype, data=a_t_data, stack=s) for s in stacks]
    bs = [kernel.hbm_tensor(f"b@{s}", (k, n), in_dtype, data=b, stack=s) for s in stacks]
    c = [kernel.hbm_tensor(f"c@{s}", (m, n), out_dtype, stack=s) for s in stacks]
    blocks = gemm(kernel, a_t, bs, c, cores=cores, bufs=bufs, stores=stores, scales=scales)
    return kernel, blocks, c


def _chip(preset, choose):
    from ..chip import Chip

    return Chip(preset, choose)
