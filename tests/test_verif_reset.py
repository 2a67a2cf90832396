"""Power-up and reset: the tensor engine and the router built without any initial value
(``verif.mutate.yosys.NO_INIT``: Icarus starts every register and memory at X, as silicon
starts unknown), then run under their benches, which drive reset and compare every output with
the model every cycle; an output bit at X or Z fails them by name (``verif.common.known``).

The planted reset bug (a register's reset taken away, so that it relies on its initial value)
passes the ordinary build, where the initial value hides it, and fails the power-up build:
this is what the power-up build adds. Benches run with fixed seeds (1, 2)."""

import re

import pytest

from tlm.tensor.config import EngineConfig
from verif.common.toolchain import have_simulator
from verif.mutate import yosys
from verif.mutate.grade import IDENTITY, Mutant, grade_mutant
from verif.mutate.targets import TARGETS, tensor_target

TENSOR = tensor_target(
    "power_up_tensor",
    EngineConfig(2, 2, "int8"),
    ops=4,
    max_n=8,
    patterns="always:always:always,random:random:random",
)


def design(target, folder):
    """``target``'s design in ``folder``, one per test (pytest-xdist runs them side by side)."""
    return yosys.prepare(target.verilog(), target.top, folder)


def run(target, il, mutation, tag, *, init):
    if not have_simulator("icarus"):
        pytest.fail("icarus is not installed: run `make setup`")
    return grade_mutant(target, il, Mutant(0, mutation), "icarus", il.parent / tag, init=init)


@pytest.mark.sim
@pytest.mark.parametrize("target", [TENSOR, TARGETS["router_4x4"]], ids=lambda t: t.block)
def test_reset_alone_makes_the_outputs_known(target, tmp_path):
    il = design(target, tmp_path)
    mutant = run(target, il, IDENTITY, "no-init", init=False)
    verilog = (il.parent / "no-init" / f"{target.top}.v").read_text()
    assert "initial" not in verilog and not re.search(r"^\s*reg\b[^;]*=", verilog, re.M)
    assert not mutant.kills, mutant.kills


@pytest.mark.sim
@pytest.mark.parametrize(
    "target,register,output",
    [(TENSOR, "count", "res_stream__valid"), (TARGETS["router_4x4"], "drops", "drops")],
    ids=["tensor_engine-count", "link_router-drops"],
)
def test_a_register_without_reset_is_caught_at_power_up(target, register, output, tmp_path):
    """The result queue's count (its valid reads it) and the router's drop counters."""
    il = design(target, tmp_path)
    mutation = yosys.reset_removed(il, target.top, register)
    kill = run(target, il, mutation, f"no-init-{register}", init=False).kills[0]
    assert f"cycle 0: {output} is " in kill.message, kill
    assert "after reset (X or Z)" in kill.message, kill


@pytest.mark.sim
def test_the_ordinary_build_hides_a_missing_reset(tmp_path):
    """With initial values the queue's count starts at 0 without its reset: the ordinary
    build passes the bug the power-up build catches. (The router's drops, and most registers
    of either block, are caught even so: before the bench drives reset its inputs are Z for a
    cycle, and a register without reset keeps the X it took.)"""
    il = design(TENSOR, tmp_path)
    mutation = yosys.reset_removed(il, TENSOR.top, "count")
    assert not run(TENSOR, il, mutation, "init-count", init=True).kills


def test_reset_removed_names_a_register_it_cannot_find(tmp_path):
    il = design(TENSOR, tmp_path)
    with pytest.raises(ValueError, match="register must be a register of tensor_engine reset"):
        yosys.reset_removed(il, "tensor_engine", "no_such_register")
