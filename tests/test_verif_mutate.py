"""The mutation grader (``verif/mutate``) can fail: mutations planted in a small tensor
engine are killed by its bench at the cycle they show, the identity survives it, the
equivalence check tells a masked mutation from an observable one, and ``make mutate`` names
a bad variable. The bench runs with fixed seeds (1), so the kills are the same every run."""

import os
import subprocess
import sys

import pytest

from tlm.tensor.config import EngineConfig
from verif.common.runner import ROOT
from verif.common.toolchain import have_simulator
from verif.mutate import yosys
from verif.mutate.grade import IDENTITY, grade
from verif.mutate.report import summary
from verif.mutate.targets import tensor_target

#: A 2x2 int8 engine and a short run of its bench: two pattern triples of four ops.
TARGET = tensor_target(
    "test_tensor",
    EngineConfig(2, 2, "int8"),
    ops=4,
    max_n=8,
    patterns="always:always:always,random:random:random",
)

#: Mutations named by what they touch (Yosys numbers the cells): the result's valid inverted,
#: and a PE's partial sum with its low bit stuck at 1.
PLANTED = (
    "-mode inv -module tensor_engine -wire res_stream__valid",
    "-mode const1 -module tensor_engine_pe -wire p_out -wirebit 0",
)


@pytest.fixture
def design(tmp_path):
    """The target's design in a folder of its own (pytest-xdist runs tests side by side)."""
    return yosys.prepare(TARGET.verilog(), TARGET.top, tmp_path)


def named(design, where):
    (mutation,) = yosys.sample(design, 1, 1, where)
    return mutation


@pytest.mark.sim
def test_planted_mutations_are_killed_and_the_identity_survives(design):
    if not have_simulator("icarus"):
        pytest.fail("icarus is not installed: run `make setup`")
    mutations = [named(design, where) for where in PLANTED]
    mutants = grade(TARGET, mutations, "icarus", design.parent, equiv_timeout_s=60)
    identity, *planted = mutants
    assert identity.mutation == IDENTITY and identity.status == "identity", identity
    for mutant in planted:
        assert mutant.status == "killed", mutant
        (kill,) = mutant.kills
        assert kill.bench == "tensor.random_ops" and kill.seed == 1
        assert kill.cycle is not None and kill.cycle < 100, kill
    figures = summary(mutants)
    assert figures["killed"] == 2 and figures["survived"] == 0 and figures["identity_ok"]


#: A register of the low bits of ``x``: bit 3 of ``x`` is masked, bit 0 is not.
MASKED = """module masked(input clk, input rst, input [3:0] a, input [3:0] b, output reg [1:0] q);
  wire [3:0] x = a ^ b;
  always @(posedge clk) q <= rst ? 2'd0 : x[1:0];
endmodule
"""


def test_equivalence_tells_masked_from_observable(tmp_path):
    folder = tmp_path
    (folder / "masked.v").write_text(MASKED)
    design = yosys.prepare(folder / "masked.v", "masked", folder)
    masked = named(design, "-mode inv -wire x -wirebit 3")
    shown = named(design, "-mode inv -wire x -wirebit 0")
    assert yosys.equivalence(design, masked, folder / "m", timeout_s=60).verdict == ("proven")
    check = yosys.equivalence(design, shown, folder / "s", timeout_s=60)
    assert check.verdict == "differs" and check.witness, check


#: A counter (its +1 feeds the register) and an output that is logic alone.
COUNTER = """module counter(input clk, input rst, input a, input b, output reg [3:0] count,
               output y);
  always @(posedge clk) count <= rst ? 4'd0 : count + 4'd1;
  assign y = a & b;
endmodule
"""


@pytest.mark.parametrize("mode", ["const1", "const0"])
@pytest.mark.parametrize("kind,bit,changed", [("$add", 2, "count.d"), ("$and", 0, "y")])
def test_a_bit_stuck_at_either_value_is_never_proven(tmp_path, mode, kind, bit, changed):
    """A bit of the counter's +1 (a register's next state) or of the output ``y`` tied to 1
    or 0 changes what the module gives: the check says ``differs`` and names it. Tied to 1
    it was ``proven``: ``miter -ignore_gold_x`` masks a bit where gold's ``$eqx`` with x is
    true, and ``sat`` without ``-enable_undef`` reads the constant x as 0, so every bit where
    the design gave 0 was ignored (the float target's m002, a status counter's +1)."""
    (tmp_path / "counter.v").write_text(COUNTER)
    design = yosys.prepare(tmp_path / "counter.v", "counter", tmp_path)
    cell = next(
        line.split()[2]
        for line in design.read_text().splitlines()
        if line.startswith(f"  cell {kind} ")
    )
    mutation = named(design, f"-mode {mode} -module counter -cell {cell} -port Y -portbit {bit}")
    check = yosys.equivalence(design, mutation, tmp_path / "c", timeout_s=60)
    assert check.verdict == "differs" and changed in check.witness, (mutation, check)


#: A register read whole: a mutation of one bit of its output splits the wire it drives.
REGISTER = """module reg4(input clk, input [3:0] a, output [3:0] o);
  reg [3:0] r;
  always @(posedge clk) r <= a;
  assign o = r ^ 4'b0101;
endmodule
"""


def test_a_register_output_bit_mutated_is_uncut_not_an_error(tmp_path):
    """Yosys's ``expose -evert-dff`` keeps a flip-flop whose output no longer drives one whole
    wire (the mutation's select sits on one bit of it), and ``sat`` then stops on it: the
    check says ``uncut`` (left to the benches) instead of raising."""
    (tmp_path / "reg4.v").write_text(REGISTER)
    design = yosys.prepare(tmp_path / "reg4.v", "reg4", tmp_path)
    mutation = named(design, "-mode const0 -wire r -wirebit 2")
    assert "-port Q" in mutation, mutation
    assert yosys.equivalence(design, mutation, tmp_path / "q", timeout_s=60).verdict == "uncut"


#: A named wire ``n`` that reaches no output and no register: ``gated`` masks it.
INNER = """module inner(input clk, input [1:0] a, input [1:0] b, output reg q);
  wire n = a[0] & b[0];
  wire gated = n & a[1] & ~a[1];
  always @(posedge clk) q <= gated | b[1];
endmodule
"""


def test_a_named_wire_masked_before_any_register_is_proven(tmp_path):
    """The cut check compares outputs, next states and submodules' inputs, not every named
    wire: inverting the AND that drives ``n`` changes ``n`` and nothing the module gives."""
    (tmp_path / "inner.v").write_text(INNER)
    design = yosys.prepare(tmp_path / "inner.v", "inner", tmp_path)
    driver = next(
        line.split()[2]
        for line in design.read_text().splitlines()
        if line.startswith("  cell $and")
    )
    mutation = named(design, f"-mode inv -module inner -cell {driver} -port Y -portbit 0")
    assert "-wire n " in mutation, mutation
    check = yosys.equivalence(design, mutation, tmp_path / "n", timeout_s=60)
    assert check.verdict == "proven", check


def test_a_bad_make_variable_is_one_line_naming_it():
    for args, variable in [
        (["--mutants=0"], "MUTANTS"),
        (["--mutants="], "MUTANTS"),
        (["--seed=x"], "MUTATE_SEED"),
        (["--target=tensor"], "MUTATE_TARGETS"),
        (["--sim=vcs"], "SIM"),
        (["--sim-timeout=0"], "MUTATE_SIM_TIMEOUT"),
        (["--sim-timeout=inf"], "MUTATE_SIM_TIMEOUT"),
        (["--sim-timeout=soon"], "MUTATE_SIM_TIMEOUT"),
    ]:
        result = subprocess.run(
            [sys.executable, "-m", "verif.mutate", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert result.returncode == 2, (args, result)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {variable} ("), lines


def test_a_hung_bench_run_is_stopped_and_counts_as_a_kill(tmp_path, monkeypatch):
    """A mutant that hangs the simulator (a run that never returns: here a child process that
    sleeps, as cocotb's runner waits on the simulator's) is stopped at the deadline, its
    process killed, and counted as a kill that says so; without a deadline it would hang
    ``make mutate``."""
    import verif.mutate.grade as grade_module

    pid_file = tmp_path / "pid"

    def hang(*args, **kwargs):  # cocotb's runner waits on its simulator with subprocess.run
        code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
        subprocess.run([sys.executable, "-c", code + "time.sleep(60)"], check=True)

    monkeypatch.setattr(grade_module, "run", hang)
    bench = TARGET.benches[0]
    kill = grade_module._run(None, bench, 7, tmp_path, tmp_path / "sim.log", 2.0)
    assert kill is not None and kill.seed == 7 and kill.cycle is None
    assert kill.message == "hung: no result within 2 s (wall clock)"
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # the hung process is gone, not left running
        os.kill(pid, 0)
    # a run that returns in time is no kill
    monkeypatch.setattr(grade_module, "run", lambda *a, **k: None)
    assert grade_module._run(None, bench, 7, tmp_path, tmp_path / "sim.log", 0.5) is None


def test_survivors_file_is_valid():
    """Every classified survivor names its target, mutation, class and reason (a proof names
    a formal property that exists)."""
    from verif.mutate.survivors import load
    from verif.mutate.targets import TARGETS

    for target, mutation in load():
        assert target in TARGETS and mutation.startswith("mutate -mode "), (target, mutation)


def test_dead_survivor_entries_are_named_in_one_line(tmp_path):
    """An entry of survivors.toml whose mutant was killed, proven by the cut check, or whose
    cell the design no longer has is listed with why, in one line; a classified survivor and
    an entry the run did not sample (its cell still there) are not."""
    from verif.mutate.grade import Kill, Mutant
    from verif.mutate.survivors import cells, unmatched, unmatched_line

    design = tmp_path / "design.il"
    design.write_text(
        "module \\top\n  cell $xor $xor$d.v:2$1\n  cell $and $and$d.v:3$2\n"
        "  cell \\sub u0\nend\nmodule \\sub\n  cell $not $not$d.v:9$3\nend\n"
    )
    assert cells(design) == {
        ("top", "$xor$d.v:2$1"),
        ("top", "$and$d.v:3$2"),
        ("top", "u0"),
        ("sub", "$not$d.v:9$3"),
    }

    def mutation(mode, module, cell):
        return f"mutate -mode {mode} -module {module} -cell {cell} -port Y -src d.v:1.1-1.2"

    killed = mutation("inv", "top", "$xor$d.v:2$1")
    proven = mutation("const0", "top", "$and$d.v:3$2")
    argued = mutation("const1", "sub", "$not$d.v:9$3")
    stale = mutation("inv", "sub", "$not$d.v:8$7")
    unsampled = mutation("cnot0", "top", "u0")
    entries = {
        (t, m): {"class": "equivalent", "reason": "r"}
        for t, m in [("t", killed), ("t", proven), ("t", argued), ("t", stale)]
        + [("t", unsampled), ("other", stale)]
    }
    mutants = [
        Mutant(1, killed, kills=[Kill("b.random", 1, 5, "mismatch")], status="killed"),
        Mutant(2, proven, status="equivalent"),
        Mutant(3, argued, status="equivalent", classified=entries["t", argued]),
    ]
    dead = unmatched(entries, "t", mutants, cells(design))
    assert dead == [
        (killed, "killed by b.random"),
        (proven, "proven equivalent by the cut check"),
        (stale, "no cell $not$d.v:8$7 in sub"),
    ]
    line = unmatched_line({"t": dead})
    assert "\n" not in line and line.startswith("[mutate] survivors.toml: 3 entries match")
    assert "`-mode inv -module sub -cell $not$d.v:8$7 -port Y` (no cell" in line
    assert unmatched_line({"t": []}) is None


# The checks behind survivors.toml's arguments for the float target's m021, m022 and m023
# and the router's m011.

#: The binary32 adder's alignment and sum (``hdl/fp/add.py``, ALIGN 31) restated: ``any54``
#: is output 54 of the negation's prefix OR, ``cut`` the same without the total's bits
#: ``CUT`` (m021 ties the OR of bits 26 and 27 in that output's tree to 0).
ADDER_SUM = """module sum(input [24:0] mx, input [24:0] my, input sx, input sy, input [9:0] d,
           output ok);
  wire near = d <= 10'd31;
  wire [4:0] shift = near ? d[4:0] : 5'd31;
  wire [55:0] x = {mx, 31'b0} >> (5'd31 - shift);
  wire [55:0] y = near ? {31'b0, my} : {55'b0, my != 25'd0};
  wire [57:0] total = ({2'b0, x} ^ {58{sx}}) + ({2'b0, y} ^ {58{sy}}) + sx + sy;
  wire any54 = |total[54:0];
  wire cut = |{total[54:HI], LO};
  assign ok = !total[57] || any54 == cut;
endmodule
"""


@pytest.mark.parametrize("hi,lo,proven", [(28, "total[25:0]", True), (2, "1'b0", False)])
def test_adder_output_54_never_rests_on_bits_26_and_27(tmp_path, hi, lo, proven):
    """m021: no negative sum of two significands of at most 25 bits (one aligned up to 31
    places, the other or its sticky bit) has its lowest one at 26 or 27 and zeros from 28 to
    54; the same proof finds a sum whose lowest one is at 0 or 1 with zeros above to 54
    (2**55 - 2), so it can fail."""
    (tmp_path / "sum.v").write_text(ADDER_SUM.replace("HI", str(hi)).replace("LO", lo))
    log = yosys._yosys(
        "read_verilog sum.v\nprep -top sum\nsat -prove ok 1\n", tmp_path, "sum", timeout_s=120
    )
    assert ("SUCCESS!" in log) == proven and ("FAIL!" in log) != proven, log[-2000:]


@pytest.mark.sim
def test_float_pe_csa_carry_bit_3_is_always_zero(tmp_path):
    """m022: bit 3 of the multiplier's registered third carry-save term (``mul_csa_t[47]``)
    is 0 in every state of the float target's PE, by induction from the zero initial state:
    partial products of 11-bit significands leave that carry zero below bit 10."""
    from verif.mutate.targets import TARGETS

    target = TARGETS["tensor_float_2x2"]
    design = yosys.prepare(target.verilog(), target.top, tmp_path)
    script = (
        f"read_rtlil {design.name}\nhierarchy -top tensor_engine_pe\n"
        "sat -tempinduct -prove mul_csa_t[47] 0 -set-init-zero\n"
    )
    log = yosys._yosys(script, tmp_path, "csa", timeout_s=300)
    assert "Induction step proven: SUCCESS!" in log, log[-2000:]


#: The invariant behind router_4x4's m011, added to ``link_router``: requester 5 (``in3_vc0``)
#: pops its front flit only while its FIFO holds one, and holds at most its depth, 2.
POPS_NONEMPTY = """  wire [1:0] inv_occ = in3_vc0_wr - in3_vc0_rd;
  (* keep *) wire inv_ok = !(pops[5] && in3_vc0_rd == in3_vc0_wr) && inv_occ <= 2'd2;
"""


@pytest.mark.sim
def test_router_pops_only_a_nonempty_buffer(tmp_path):
    """m011: the router reads the copy of ``two`` whose ``nonempty`` m011 ties to 1 only while
    ``pops[5]``; Yosys proves, by induction from the initial state on the flattened router,
    that the FIFO is then never empty (about 20 s)."""
    from verif.mutate.targets import TARGETS

    text = TARGETS["router_4x4"].verilog().read_text()
    end = text.index("\nendmodule", text.index("module link_router(")) + 1
    (tmp_path / "router.v").write_text(text[:end] + POPS_NONEMPTY + text[end:])
    script = (
        "read_verilog router.v\nhierarchy -check -top link_router\nproc\nflatten\nopt_clean\n"
        "sat -tempinduct -prove inv_ok 1 -set-init-zero -maxsteps 1\n"
    )
    log = yosys._yosys(script, tmp_path, "pops", timeout_s=300)
    assert "Induction step proven: SUCCESS!" in log, log[-2000:]


def _rounded_products(width: int):
    """``(kept, up)`` of :func:`hdl.fp.mul.product` for every product of two normalised
    ``width``-bit significands at every right shift ``under`` (0..25), as numpy arrays."""
    import numpy as np

    sig = np.arange(1 << (width - 1), 1 << width, dtype=np.int64)
    prod = (sig[:, None] * sig[None, :]).ravel()
    top = (prod >> (2 * width - 1)) & 1
    full = max(2 * width, 26)
    norm = np.where(top == 1, prod, prod << 1) << (full - 2 * width)
    for under in range(26):
        shifted = (norm >> under) >> (full - 25)
        kept, guard = shifted >> 1, shifted & 1
        sticky = (norm & ((1 << (full - 25 + under)) - 1)) != 0
        yield kept, (guard == 1) & (sticky | (kept & 1 == 1))


def test_float_target_products_never_round_into_output_20s_corner():
    """m023: no product of two 11-bit significands (the float target's widest) rounds up with
    kept bits 0-5 and 8-20 set and bit 6 or 7 clear, at any shift; the same search finds the
    corner of m020 (bits 0-10 set, 11 clear), which the bench kills, so it can find one."""
    ones = sum(1 << i for i in [*range(6), *range(8, 21)])
    m023 = m020 = 0
    for kept, up in _rounded_products(11):
        m023 += int((up & (kept & ones == ones) & ((kept >> 6) & 3 != 3)).sum())
        m020 += int((up & (kept & 0x7FF == 0x7FF) & ((kept >> 11) & 1 == 0)).sum())
    assert m023 == 0 and m020 > 0, (m023, m020)
