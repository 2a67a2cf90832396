"""Instructions of the kernel API: values against numpy, timing behaviour, traces, CLI."""

import doctest
import importlib
import itertools
import json
import math

import ml_dtypes
import numpy as np
import pytest

from tlm.chip import Kernel
from tlm.chip.trace import write_chrome_trace, write_vcd
from tlm.core.isa import ACTIVATIONS
from tlm.kernels import build_gemm
from tlm.tensor import matmul

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

MODULES = ["tlm.presets", "tlm.chip.kernel", "tlm.chip.chip", "tlm.core.memory"]


@pytest.mark.parametrize("name", MODULES)
def test_module_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def loaded(kernel, core, array, dtype="fp32"):
    """An SBUF tile holding ``array`` (through a DMA from HBM)."""
    h = kernel.hbm_tensor(f"h{len(kernel.tensors)}", array.shape, dtype, data=array)
    t = core.sbuf.tile(array.shape, dtype)
    core.dma_copy(t, h)
    return t


#: The Scalar engine's functions written again, independently of ``tlm.core.isa``: float64
#: through ``math``; GELU is its tanh approximation.
REFERENCE_ACTIVATIONS = {
    "identity": lambda v: v,
    "exp": math.exp,
    "tanh": math.tanh,
    "relu": lambda v: max(v, 0.0),
    "gelu": lambda v: 0.5 * v * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3))),
}


def test_reference_activations_cover_the_model():
    assert set(REFERENCE_ACTIVATIONS) == set(ACTIVATIONS)


@pytest.mark.parametrize("func", sorted(REFERENCE_ACTIVATIONS))
def test_activation_values(seed, func):
    rng = np.random.default_rng(seed)
    kernel = Kernel("trn2")
    core = kernel.core(1)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    bias = rng.standard_normal((128, 1)).astype(np.float32)
    src, b = loaded(kernel, core, x), loaded(kernel, core, bias)
    out = core.sbuf.tile((128, 64), "fp32")
    half = core.sbuf.tile((128, 64), "bf16")
    acc = core.sbuf.tile((128, 1), "fp32")
    core.activation(out, src, func, scale=0.5, bias=b, accum=acc)
    core.activation(half, src, func, scale=0.5, bias=b)
    v = x.astype(np.float64) * 0.5 + bias.astype(np.float64)  # exact in float64
    want = np.vectorize(REFERENCE_ACTIVATIONS[func], otypes=[np.float64])(v)
    # FP32 arithmetic, not float64: the input in * scale + bias rounds once (2**-24 of |v|,
    # scaled by the function's slope: at most max(1.13, |f(v)|) for these functions) and
    # numpy's float32 function rounds a few times more (the GELU formula: x**3, the products,
    # 1 + tanh, which cancels for negative inputs, so an error of |v| units, not |f(v)|).
    # Measured worst over 200 seeds: 5.2 units (exp); allowed: 8 units of 2**-24 of
    # |f(v)| + |v| (1 + |f(v)|). GELU's 0.044715 as 0.0447 is 9e-6 off, its erf form 5e-4.
    tol = 8 * 2.0**-24 * (np.abs(want) + np.abs(v) * (1 + np.abs(want)))
    err = np.abs(out.values - want)
    worst = np.unravel_index(np.argmax(err / tol), err.shape)
    assert (err <= tol).all(), (
        f"seed {seed}: {func}({float(v[worst])}) = {float(out.values[worst])}, "
        f"want {float(want[worst])} within {tol[worst]:.3g}"
    )
    # the bf16 result is the FP32 one rounded to nearest even
    np.testing.assert_array_equal(half.values, out.values.astype(ml_dtypes.bfloat16))
    # accum: an FP32 sum of the 64 results, each off by at most tol, the sum rounding at most
    # 2**-24 of the running sum per addition
    bound = tol.sum(axis=1) + 64 * 2.0**-24 * np.abs(want).sum(axis=1)
    assert (np.abs(acc.values[:, 0] - want.sum(axis=1)) <= bound).all(), f"seed {seed}"


def test_vector_ops_values(seed):
    rng = np.random.default_rng(seed)
    kernel = Kernel("trn2")
    core = kernel.core(0)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    s = rng.standard_normal((64, 1)).astype(np.float32)
    ta, tb, ts = loaded(kernel, core, a), loaded(kernel, core, b), loaded(kernel, core, s)
    out = core.sbuf.tile((64, 32), "fp32")
    red = core.sbuf.tile((64, 1), "fp32")
    core.tensor_tensor(out, ta, tb, "max")
    np.testing.assert_array_equal(out.values, np.maximum(a, b))
    core.tensor_scalar(out, ta, "multiply", ts, "subtract", 2.0)
    np.testing.assert_array_equal(out.values, a * s - np.float32(2.0))
    core.tensor_reduce(red, ta, "max", engine="gpsimd")
    np.testing.assert_array_equal(red.values[:, 0], a.max(axis=1))
    half = core.sbuf.tile((64, 32), "bf16")
    core.tensor_copy(half, ta, engine="scalar")
    np.testing.assert_array_equal(half.values, a.astype(ml_dtypes.bfloat16))


def test_transpose_and_matmul_values(seed):
    rng = np.random.default_rng(seed)
    kernel = Kernel("trn2")
    core = kernel.core(0)
    x = rng.standard_normal((96, 40)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((96, 100)).astype(ml_dtypes.bfloat16)
    tx, tw = loaded(kernel, core, x, "bf16"), loaded(kernel, core, w, "bf16")
    pt = core.psum.tile((40, 96), "fp32")
    core.nc_transpose(pt, tx)
    np.testing.assert_array_equal(pt.values, x.astype(np.float32).T)
    pm = core.psum.tile((40, 100), "fp32")
    core.nc_matmul(pm, tx, tw)
    core.nc_matmul(pm, tx, tw, accumulate=True)
    once = matmul(x, w)
    np.testing.assert_array_equal(pm.values, once + once)


def test_dma_overlaps_compute_and_queues_share_bandwidth():
    kernel = Kernel("trn2", values=False)
    core = kernel.core(0)
    h = [kernel.hbm_tensor(f"h{i}", (128, 8192), "bf16") for i in range(4)]
    tiles = [core.sbuf.tile((128, 8192), "bf16") for _ in range(4)]
    loads = [core.dma_copy(t, x) for t, x in zip(tiles, h, strict=True)]
    work = core.sbuf.tile((128, 8192), "fp32")
    busy = core.tensor_scalar(work, work, "add", 1.0)  # independent of the loads
    run = kernel.run()
    assert busy.start_s == 0.0 and busy.end_s > loads[0].start_s  # overlapped
    # four transfers at once share the core's 16 engines: each takes ~4x one alone
    alone = Kernel("trn2", values=False)
    c = alone.core(0)
    one = c.dma_copy(c.sbuf.tile((128, 8192), "bf16"), alone.hbm_tensor("x", (128, 8192), "bf16"))
    alone.run()
    fixed = kernel.spec.core.dma_fixed_latency_s
    ratio = (loads[0].end_s - fixed) / (one.end_s - fixed)
    assert ratio == pytest.approx(4.0, rel=1e-6)
    assert run.hbm_bytes["hbm0"] == 4 * 128 * 8192 * 2


def test_two_cores_contend_for_their_hbm_stack():
    def load_time(cores):
        kernel = Kernel("trn2", values=False)
        insts = []
        for ci in cores:
            core = kernel.core(ci)
            stack = kernel.chip.stack_of_core(ci).index
            for q in range(16):
                x = kernel.hbm_tensor(f"x{ci}.{q}", (128, 4096), "bf16", stack=stack)
                insts.append(core.dma_copy(core.sbuf.tile((128, 4096), "bf16"), x))
        return kernel.run().time_s

    one, pair, apart = load_time([0]), load_time([0, 1]), load_time([0, 2])
    nbytes = 16 * 128 * 4096 * 2
    fixed = 2e-6
    assert one == pytest.approx(fixed + nbytes / (16 * 27.2e9))  # the core's DMA engines
    # cores 0 and 1 share stack 0: 725 GB/s < 2 x 435 GB/s, the stack is the limit
    assert pair == pytest.approx(fixed + 2 * nbytes / (2.9e12 / 4))
    assert apart == pytest.approx(one)  # cores 0 and 2 use different stacks


def test_trace_and_vcd(tmp_path):
    kernel, _, _ = build_gemm(4096, 2048, 256, "bf16")  # two blocks per core
    run = kernel.run()
    trace = json.loads(write_chrome_trace(run, tmp_path / "t.json").read_text())
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"tensor", "vector", "scalar", "dma0", "dma15"} <= names
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == run.instructions
    text = write_vcd(run, tmp_path / "t.vcd").read_text()
    for var in ("tensor_busy", "dma0_depth", "sbuf_bytes_per_partition"):
        assert var in text


def test_hazards_follow_overlapping_elements():
    kernel = Kernel("trn2", values=False)
    core = kernel.core(0)
    t = core.sbuf.tile((128, 2, 512), "bf16", name="t")
    h = kernel.hbm_tensor("h", (128, 512), "bf16")
    other = core.sbuf.tile((128, 512), "fp32", name="other")
    w0 = core.dma_copy(t[:, 0], h)
    w1 = core.dma_copy(t[:, 1], h)
    r = core.tensor_copy(other, other, engine="vector")
    read = core.tensor_reduce(core.sbuf.tile((128, 1), "fp32"), t[:, :, 0:64], "max")
    assert read.deps == [w0, w1]  # reads both rows
    w2 = core.dma_copy(t[:, 0], h)  # rewrites row 0: waits for the read (write after read)
    assert read in w2.after_reads and w0 in w2.deps
    w3 = core.dma_copy(t[:, 1], h)  # row 1: the read still counts there
    assert read in w3.after_reads and w1 in w3.deps and w2 not in w3.deps + w3.after_reads
    assert r not in w3.deps + w3.after_reads  # other tiles do not matter


def test_reused_bytes_wait_for_the_freed_tiles_last_access():
    kernel = Kernel("trn2", values=False)
    core = kernel.core(0)
    old = core.sbuf.tile((128, 1024), "fp32", name="old")
    reader = core.tensor_scalar(core.sbuf.tile((128, 1024), "fp32"), old, "add", 1.0)
    core.sbuf.free(old)
    new = core.sbuf.tile((128, 512), "bf16", name="new")
    assert new.alloc.offset == 0  # the freed bytes
    writer = core.dma_copy(new, kernel.hbm_tensor("h", (128, 512), "bf16"))
    assert reader in writer.after_reads


def test_accumulation_chain_pipelines_in_order():
    """A chain of matmuls accumulating into one PSUM tile issues back to back (each waits for
    the queue, not for the last one's result), each result visible no earlier than the last
    one's, and a read of the bank waits for the last."""
    kernel = Kernel("trn2", values=False)
    core = kernel.core(0)
    s = [core.sbuf.tile((128, 128), "bf16") for _ in range(4)]
    m = core.sbuf.tile((128, 512), "bf16")
    p = core.psum.tile((128, 512), "fp32")
    chain = [core.nc_matmul(p, t, m, accumulate=i > 0) for i, t in enumerate(s)]
    read = core.tensor_copy(core.sbuf.tile((128, 512), "fp32"), p)
    kernel.run()
    for before, inst in itertools.pairwise(chain):
        assert inst.start_s == before.end_s < before.done_s  # issued under the last's latency
        assert inst.done_s >= before.done_s
        assert inst.done_s - inst.start_s == pytest.approx(inst.latency_s)
    assert read.deps == [chain[-1]] and read.start_s == chain[-1].done_s


def test_a_write_after_a_matmul_read_waits_for_the_read_not_the_result():
    """The Tensor engine has read its operands when its queue is free again (``end_s``); the
    result comes out of the pipeline later (``done_s``). A load into the moving operand's
    buffer waits for the first, a read of the result for the second."""
    kernel = Kernel("trn2", values=False)
    core = kernel.core(0)
    s, m = core.sbuf.tile((128, 128), "bf16"), core.sbuf.tile((128, 512), "bf16")
    p = core.psum.tile((128, 512), "fp32")
    mm = core.nc_matmul(p, s, m)
    load = core.dma_copy(m, kernel.hbm_tensor("h", (128, 512), "bf16"))
    read = core.tensor_copy(core.sbuf.tile((128, 512), "fp32"), p)
    assert (load.deps, load.after_reads, read.deps) == ([], [mm], [mm])
    kernel.run()
    assert load.start_s == mm.end_s < mm.done_s == read.start_s
