"""hdl/synth/toggles.py: bit toggles per net of a VCD, on a file written by hand."""

from hdl.synth.toggles import count_toggles

#: Two scopes sharing net ``!`` (a port seen from both sides); ``\bus.lo`` is a field of
#: ``bus`` (left out); ``%`` a string (no bits). Initial values at #0 count nothing.
VCD = r"""$timescale 1 ns $end
$scope module top $end
$var wire 1 ! clk $end
$var wire 4 " bus $end
$var wire 2 # \bus.lo $end
$var string 1 % state $end
$scope module child $end
$var wire 1 ! clk $end
$var wire 3 $ q [2:0] $end
$upscope $end
$upscope $end
$enddefinitions $end
#0
$dumpvars
0!
b0110 "
b10 #
bxxx $
sIDLE %
$end
#5
1!
b0011 "
b11 #
b101 $
sBUSY %
#10
0!
b1100 "
b00 #
b001 $
#15
1!
bx100 "
b110 $
#20
0!
b0100 "
"""


def test_counts_bit_toggles_per_net(tmp_path):
    """bus: 0110 -> 0011 (2) -> 1100 (4) -> x (none) -> 0100 (none: from x); q: from x
    (none) 101 -> 001 (1) -> 110 (3); clk: 4 edges after #0; the field and the string are
    not nets."""
    path = tmp_path / "hand.vcd"
    path.write_text(VCD)
    nets = count_toggles(path)
    assert {n.name: (n.width, n.toggles) for n in nets.values()} == {
        "top.clk": (1, 4),
        "top.bus": (4, 6),
        "top.child.q": (3, 4),
    }
    assert nets['"'].changes == 2


def test_start_leaves_out_earlier_changes(tmp_path):
    path = tmp_path / "hand.vcd"
    path.write_text(VCD)
    nets = count_toggles(path, start=10)
    assert {n.name: n.toggles for n in nets.values()} == {
        "top.clk": 3,
        "top.bus": 4,
        "top.child.q": 4,
    }
