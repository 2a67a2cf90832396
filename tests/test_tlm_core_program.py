"""A program and a NeuronCore on their own: instructions, dependencies, reuse of freed memory,
and no import of the chip package."""

import doctest
import importlib
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tlm.core
from tlm.core import NeuronCore, Program

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["tlm.core.program", "tlm.core.neuroncore"])
def test_module_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_a_core_records_without_the_chip_package():
    # A fresh interpreter: a core, a few instructions and their dependencies, and the chip
    # package never loaded (the core imports only tlm.core, tlm.tensor, tlm.presets).
    script = textwrap.dedent(
        """
        import sys
        from tlm.core import NeuronCore, Program, Semaphore

        program = Program()
        core = NeuronCore(program, "trn2", 3)
        x = core.sbuf.tile((128, 64), "fp32", name="x")
        y = core.sbuf.tile((128, 64), "fp32", name="y")
        a = core.tensor_scalar(x, x, "add", 1.0)              # writes x
        b = core.activation(y, x, "exp")                      # reads x: RAW on a
        c = core.tensor_copy(x, y, engine="gpsimd")           # writes x: WAR on b, WAW on a
        d = core.sem_signal(Semaphore("s"), engine="vector")  # no memory: no dependency
        deps = [[dep.index for dep in inst.deps] for inst in program]
        assert deps == [[], [0], [0, 1], []], deps
        assert [i.queue for i in program] == ["vector", "scalar", "gpsimd", "vector"]
        assert c.label == "core3.tensor_copy#0" and d.sem_signal.name == "s"
        assert float(x.values[0, 0]) == float(y.values[0, 0]) > 2.7
        assert "tlm.chip" not in sys.modules, sorted(m for m in sys.modules if "chip" in m)
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_core_modules_do_not_import_the_chip():
    # The import direction: tlm.chip builds on tlm.core, never the reverse.
    for info in pkgutil.iter_modules(tlm.core.__path__):
        text = (Path(tlm.core.__path__[0]) / f"{info.name}.py").read_text()
        assert "..chip" not in text and "tlm.chip import" not in text, info.name


def test_dependencies_through_overlapping_elements_only():
    core = NeuronCore(Program(values=False), "trn2")
    t = core.sbuf.tile((128, 256), "fp32")
    left = core.tensor_copy(t[:, 0:128], t[:, 128:256])
    right = core.tensor_copy(t[:, 128:256], t[:, 0:128])  # WAR on left's read, RAW on its write
    top = core.tensor_scalar(t[0:64, 0:128], t[0:64, 0:128], "add", 1.0)
    bottom = core.tensor_scalar(t[64:128, 0:128], t[64:128, 0:128], "add", 1.0)
    assert right.deps == [left]
    # each half: RAW and WAW on left's write, WAR on right's read; not on the other half
    assert (top.deps, top.after_reads) == ([left], [right])
    assert (bottom.deps, bottom.after_reads) == ([left], [right])
    after = core.tensor_copy(t[0:32, 0:8], t[0:32, 200:208])  # top's write hides left's
    assert (after.deps, after.after_reads) == ([right, top], [])
    assert core.program.version(t) == 5


def test_a_tile_on_freed_bytes_waits_for_their_last_accesses():
    program = Program(values=False)
    core = NeuronCore(program, "trn2")
    old = core.sbuf.tile((128, 64), "fp32")
    reader = core.tensor_reduce(core.sbuf.tile((128, 1), "fp32"), old, "max")
    core.sbuf.free(old)
    new = core.sbuf.tile((128, 64), "fp32")  # first fit: the same bytes
    assert new.alloc.offset == old.alloc.offset
    writer = core.tensor_copy(new, new)
    assert (writer.deps, writer.after_reads) == ([], [reader])  # until reader has read
    assert program.version(new) == 1 and program.version(old) == 0


def test_stationary_reuse_follows_versions():
    core = NeuronCore(Program(values=False), "trn2")
    s = core.sbuf.tile((128, 128), "bf16")
    m = core.sbuf.tile((128, 64), "bf16")  # N < K: reuse costs N cycles, a new one K
    p = core.psum.tile((128, 64), "fp32")
    first = core.nc_matmul(p, s, m)
    again = core.nc_matmul(p, s, m, accumulate=True)
    core.tensor_scalar(s, s, "multiply", 2.0)  # a new version of the stationary
    reloaded = core.nc_matmul(p, s, m, accumulate=True)
    assert again.occupancy_s < first.occupancy_s
    assert reloaded.occupancy_s == first.occupancy_s
    # accumulating reads the bank the previous matmul writes: in order behind it in the
    # tensor queue, not waiting for its result
    assert (again.deps, again.after) == ([], first)
    assert (reloaded.deps, reloaded.after) == ([core.program.instructions[2]], again)


def test_two_cores_share_one_program():
    program = Program(values=False)
    a, b = NeuronCore(program, "trn2", 0), NeuronCore(program, "trn2", 1)
    a.tensor_copy(a.sbuf.tile((128, 8), "fp32"), a.sbuf.tile((128, 8), "fp32"))
    b.tensor_copy(b.sbuf.tile((128, 8), "fp32"), b.sbuf.tile((128, 8), "fp32"))
    assert [(i.index, i.core) for i in program] == [(0, 0), (1, 1)]
    assert len(program) == 2


def test_bad_arguments_name_themselves():
    with pytest.raises(TypeError, match=r"^program must be a Program, not None$"):
        NeuronCore(None, "trn2")
    with pytest.raises(TypeError, match=r"^spec must be a ChipSpec or a preset name, not 3$"):
        NeuronCore(Program(), 3)
    with pytest.raises(ValueError, match=r"^index must be a non-negative integer, not -1$"):
        NeuronCore(Program(), "trn2", -1)


def test_every_api_call_is_an_op_described_as_data():
    from tlm.core.ops import OPS, Operand, OpSpec

    api = {name for name in dir(NeuronCore) if not name.startswith("_")} - {"dma_queues"}
    assert api == set(OPS)
    with pytest.raises(ValueError, match=r"^bad: lanes names 'x', not an operand$"):
        OpSpec("bad", "vector", (Operand("dst", writes=True),), lanes=("x",))
    with pytest.raises(ValueError, match=r"^bad: \[P, 1\] operands and same_free need lanes$"):
        OpSpec("bad", "vector", (Operand("bias", "scalar"),))
    with pytest.raises(ValueError, match=r"^kind must be one of tile, view, scalar, column"):
        Operand("dst", "hbm")
