"""Bad kernels stop with an error naming the instruction and the rule; each message asserted."""

import re

import pytest

from tlm.chip import DeadlockError, Kernel, KernelError


@pytest.fixture
def core():
    return Kernel("trn2").core(0)


def raises(text):
    return pytest.raises(KernelError, match=re.escape(text))


def test_sbuf_overflow(core):
    core.sbuf.tile((128, 100 * 1024), "bf16", name="big")  # 200 KiB of 224
    with raises(
        "core0.sbuf.tile 'more': SBUF overflow: 32768 bytes per partition requested, "
        "204800 of 229376 in use"
    ):
        core.sbuf.tile((128, 16 * 1024), "bf16", name="more")


def test_psum_bank_overflow(core):
    with raises(
        "core0.psum.tile 'wide': PSUM bank overflow: a tile of 4096 bytes per "
        "partition does not fit one 2048-byte bank"
    ):
        core.psum.tile((128, 1024), "fp32", name="wide")


def test_psum_overflow(core):
    for i in range(8):
        core.psum.tile((128, 512), "fp32", name=f"bank{i}")
    with raises(
        "core0.psum.tile 'ninth': PSUM overflow: 2048 bytes per partition requested, "
        "16384 of 16384 in use"
    ):
        core.psum.tile((128, 512), "fp32", name="ninth")


def test_too_many_partitions(core):
    with raises(
        "core0.sbuf.tile 'tall': illegal partitions: 129 partitions requested, SBUF has 128"
    ):
        core.sbuf.tile((129, 4), "bf16", name="tall")


def test_engine_access_off_a_quadrant(core):
    x = core.sbuf.tile((128, 64), "fp32", name="x")
    y = core.sbuf.tile((128, 64), "fp32", name="y")
    with raises(
        "core0.tensor_copy#0 'odd': illegal partitions: src starts at partition 16; "
        "engine accesses start at a multiple of 32"
    ):
        core.tensor_copy(y[0:16], x[16:32], name="odd")


def test_partition_counts_differ(core):
    x = core.sbuf.tile((128, 64), "fp32")
    y = core.sbuf.tile((64, 64), "fp32")
    with raises("core0.tensor_tensor.add#0: partition counts differ (dst 64, a 128, b 128)"):
        core.tensor_tensor(y, x, x, "add")


def test_matmul_partitions_differ(core):
    s = core.sbuf.tile((128, 128), "bf16")
    m = core.sbuf.tile((128, 512), "bf16")
    p = core.psum.tile((128, 512), "fp32")
    with raises(
        "core0.nc_matmul#0: illegal partitions: stationary on partitions (0, 64) and "
        "moving on (64, 128)"
    ):
        core.nc_matmul(p[0:128], s[0:64], m[64:128])


def test_matmul_shape_mismatch(core):
    s = core.sbuf.tile((128, 128), "bf16")
    m = core.sbuf.tile((128, 512), "bf16")
    p = core.psum.tile((128, 256), "fp32")
    with raises("core0.nc_matmul#0: shape mismatch: dst is [128, 256], the result is [128, 512]"):
        core.nc_matmul(p, s, m)


def test_matmul_dtype_mismatch(core):
    s = core.sbuf.tile((128, 128), "bf16")
    m = core.sbuf.tile((128, 512), "fp16")
    p = core.psum.tile((128, 512), "fp32")
    with raises(
        "core0.nc_matmul#0: dtype mismatch: stationary is bf16 and moving is fp16: "
        "only the two FP8 formats may be mixed"
    ):
        core.nc_matmul(p, s, m)


def test_matmul_result_must_go_to_psum(core):
    s = core.sbuf.tile((128, 128), "bf16")
    m = core.sbuf.tile((128, 512), "bf16")
    with raises("core0.nc_matmul#0: dst must be in PSUM, not SBUF"):
        core.nc_matmul(m, s, m)


def test_gpsimd_cannot_reach_psum(core):
    p = core.psum.tile((128, 512), "fp32")
    x = core.sbuf.tile((128, 512), "fp32")
    with raises("core0.tensor_copy#0: src must be in SBUF, not PSUM"):
        core.tensor_copy(x, p, engine="gpsimd")


def test_dma_shape_and_dtype_mismatch():
    kernel = Kernel("trn2")
    core = kernel.core(0)
    h = kernel.hbm_tensor("h", (128, 64), "bf16")
    with raises("core0.dma_copy#0: shape mismatch: dst [128, 32] and src [128, 64]"):
        core.dma_copy(core.sbuf.tile((128, 32), "bf16"), h)
    with raises("core0.dma_copy#1: dtype mismatch: dst fp32 and src bf16; DMA copies bytes"):
        core.dma_copy(core.sbuf.tile((128, 64), "fp32"), h)


def test_semaphore_deadlock():
    kernel = Kernel("trn2")
    core = kernel.core(0)
    a, b = kernel.semaphore("a"), kernel.semaphore("b")
    core.sem_wait(a, 1, engine="vector", name="wait a")
    core.sem_signal(b, engine="vector")
    core.sem_wait(b, 1, engine="scalar", name="wait b")
    core.sem_signal(a, engine="scalar")
    with pytest.raises(
        DeadlockError,
        match=re.escape(
            "core0.sem_wait#0 'wait a': semaphore deadlock: waits for semaphore 'a' to reach 1; "
            "it stays at 0 (also blocked: core0.sem_wait#1 'wait b' waits for semaphore 'b' to "
            "reach 1; it stays at 0)"
        ),
    ):
        kernel.run()


def test_semaphores_order_engines_when_met():
    kernel = Kernel("trn2")
    core = kernel.core(0)
    s = kernel.semaphore("s")
    x = core.sbuf.tile((128, 4096), "fp32")
    y = core.sbuf.tile((128, 4096), "fp32")
    slow = core.tensor_scalar(x, x, "add", 1.0)
    core.sem_signal(s, engine="vector")
    waiter = core.sem_wait(s, 1, engine="scalar")
    after = core.activation(y, y, "exp")
    kernel.run()
    assert waiter.start_s >= slow.end_s
    assert after.start_s >= slow.end_s


def test_bad_arguments_name_themselves():
    kernel = Kernel("trn2")
    with pytest.raises(ValueError, match="core must be an integer in 0..7, not 8"):
        kernel.core(8)
    with pytest.raises(ValueError, match="stack must be an integer in 0..3, not 4"):
        kernel.hbm_tensor("x", (4, 4), "bf16", stack=4)
    with pytest.raises(ValueError, match="dtype must be one of fp8_e4m3"):
        kernel.hbm_tensor("y", (4, 4), "int4")
    core = kernel.core(0)
    x = core.sbuf.tile((128, 4), "fp32")
    with raises(
        "core0.activation.sigmoid#0: func must be one of identity, exp, tanh, relu, "
        "gelu, not 'sigmoid'"
    ):
        core.activation(x, x, "sigmoid")
