"""Softmax fused after a matmul: ``out = softmax(A @ B, axis=1)``, row blocks on all cores.

Per block of 128 rows (on the partitions) and N <= 512 columns (one PSUM bank): nc_matmul
accumulates ``A @ B`` over K into PSUM; the Vector engine takes each row's maximum and
negates it; the Scalar engine computes ``exp(s - max)`` straight from PSUM and sums each row
as it goes (``accum``); the Vector engine divides by the sums, in the output format; one DMA
stores the rows. Loads go through rotating buffers, so block i+1's loads overlap block i.
"""

from __future__ import annotations

import numpy as np

from ..chip import Kernel
from ..tensor import MAX_N

__all__ = ["matmul_softmax", "build_matmul_softmax", "softmax_reference", "engine_scores"]


def matmul_softmax(kernel: Kernel, a_t, b, out, *, bufs=2):
    """Record ``out = softmax(a_t.T @ b)`` over rows; ``a_t`` ``[K, M]``, ``b`` ``[K, N]``
    with N <= 512, ``out`` ``[M, N]``. Row blocks of 128 go round robin to the cores."""
    spec = kernel.spec
    k, m = a_t.shape
    n = b.shape[1]
    if n > MAX_N:
        raise ValueError(f"n must be at most {MAX_N} (one PSUM bank of FP32), not {n}")
    part, cols = spec.tensor.rows, spec.tensor.cols
    ksteps = [(k0, min(k0 + part, k)) for k0 in range(0, k, part)]
    cores = spec.chip.cores
    pools = {}
    for block, m0 in enumerate(range(0, m, cols)):
        m1 = min(m0 + cols, m)
        rows = m1 - m0
        core = kernel.core(block % cores)
        if core.index not in pools:
            s = core.sbuf
            pools[core.index] = {
                "a": [s.tile((part, cols), a_t.dtype) for _ in range(bufs * len(ksteps))],
                "b": [s.tile((part, n), b.dtype) for _ in range(bufs * len(ksteps))],
                "ps": [core.psum.tile((cols, n), "fp32") for _ in range(bufs)],
                "e": [s.tile((cols, n), "fp32") for _ in range(bufs)],
                "o": [s.tile((cols, n), out.dtype) for _ in range(bufs)],
                "mx": [s.tile((cols, 1), "fp32") for _ in range(bufs)],
                "sum": [s.tile((cols, 1), "fp32") for _ in range(bufs)],
                "n": 0,
            }
        pool = pools[core.index]
        slot = pool["n"] % bufs
        pool["n"] += 1
        ps = pool["ps"][slot][0:rows]
        for step, (k0, k1) in enumerate(ksteps):
            a_tile = pool["a"][slot * len(ksteps) + step][0 : k1 - k0, 0:rows]
            b_tile = pool["b"][slot * len(ksteps) + step][0 : k1 - k0]
            core.dma_copy(a_tile, a_t[k0:k1, m0:m1])
            core.dma_copy(b_tile, b[k0:k1])
            core.nc_matmul(ps, a_tile, b_tile, accumulate=step > 0)
        mx, total = pool["mx"][slot][0:rows], pool["sum"][slot][0:rows]
        e, o = pool["e"][slot][0:rows], pool["o"][slot][0:rows]
        core.tensor_reduce(mx, ps, "max")
        core.tensor_scalar(mx, mx, "multiply", -1.0)
        core.activation(e, ps, "exp", bias=mx, accum=total)
        core.tensor_scalar(o, e, "divide", total)
        core.dma_copy(out[m0:m1], o)


def build_matmul_softmax(
    m, n, k, dtype="bf16", *, preset="trn2", values=False, a=None, b=None, out_dtype="fp32"
):
    """A kernel recording ``softmax(A @ B)``; returns ``(kernel, out tensor)``."""
    kernel = Kernel(preset, values=values)
    a_t_data = None if a is None else np.ascontiguousarray(np.asarray(a).T)
    a_t = kernel.hbm_tensor("a_t", (k, m), dtype, data=a_t_data)
    bt = kernel.hbm_tensor("b", (k, n), dtype, data=b)
    out = kernel.hbm_tensor("out", (m, n), out_dtype)
    matmul_softmax(kernel, a_t, bt, out)
    return kernel, out


def engine_scores(a, b, part: int = 128) -> np.ndarray:
    """The FP32 scores ``a @ b`` exactly as the kernel's matmuls make them: per block of
    ``part`` rows, one nc_matmul per K step of ``part`` (:func:`tlm.tensor.matmul`, the
    numerics contract), each step's result added to the PSUM accumulator (from +0.0) in FP32;
    wider than one op's ``MAX_N`` columns, in column blocks (each output column's sum is the
    same whichever block it is in)."""
    from ..tensor import MAX_N, matmul

    a_t, b = np.asarray(a).T, np.asarray(b)
    k, m = a_t.shape
    n = b.shape[1]
    scores = np.zeros((m, n), np.float32)
    for m0 in range(0, m, part):  # row blocks: the engine's columns
        for n0 in range(0, n, MAX_N):  # column blocks: one op's moving columns at most
            cols = slice(n0, n0 + MAX_N)
            for k0 in range(0, k, part):
                scores[m0 : m0 + part, cols] += matmul(
                    a_t[k0 : k0 + part, m0 : m0 + part], b[k0 : k0 + part, cols]
                )
    return scores


def softmax_reference(a, b, scores=None) -> np.ndarray:
    """float64 ``softmax(a @ b)`` along rows, the reference the kernel is checked against;
    of ``scores`` instead of the float64 ``a @ b`` when given (:func:`engine_scores`: then
    only the kernel's FP32 exponentials, sums and divisions differ from it)."""
    s = np.asarray(a, np.float64) @ np.asarray(b, np.float64) if scores is None else scores
    s = np.asarray(s, np.float64)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
