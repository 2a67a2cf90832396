"""Gate-level toggles of the PEs: the synthesised PE netlist simulated at zero delay on the
port values the RTL's PEs saw, every instance at once (bit ``i`` of each net's value is PE
``i``), each net's toggles weighed by its fanout.

The check that makes it trustworthy: every output bit of every PE, every cycle, equals the RTL's
(:func:`pe_toggles` raises otherwise).
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from pathlib import Path

from .toggles import value_changes

__all__ = ["GateModule", "pe_toggles", "sample_scopes"]

_COMB = {
    "$_NOT_": "M ^ {A}",
    "$_BUF_": "{A}",
    "$_AND_": "{A} & {B}",
    "$_NAND_": "M ^ ({A} & {B})",
    "$_OR_": "{A} | {B}",
    "$_NOR_": "M ^ ({A} | {B})",
    "$_XOR_": "{A} ^ {B}",
    "$_XNOR_": "M ^ {A} ^ {B}",
    "$_ANDNOT_": "{A} & (M ^ {B})",
    "$_ORNOT_": "{A} | (M ^ {B})",
    "$_MUX_": "({B} & {S}) | ({A} & (M ^ {S}))",
}


class GateModule:
    """One module of a Yosys JSON netlist of generic gates and flip-flops (no instances),
    compiled to Python for a bit-parallel, zero-delay, cycle-by-cycle simulation.

    Parameters
    ----------
    module : dict
        ``netlist["modules"][name]``.
    """

    def __init__(self, module: dict):
        self.ports = {n: (p["direction"], p["bits"]) for n, p in module["ports"].items()}
        self.init = {}
        for info in module["netnames"].values():
            init = info.get("attributes", {}).get("init")
            if isinstance(init, str) and set(init) <= {"0", "1"}:
                for bit, v in zip(info["bits"], reversed(init), strict=False):
                    if isinstance(bit, int):
                        self.init[bit] = int(v)
        comb, self.flops = [], []
        self.fanout = defaultdict(int)
        for cell in module["cells"].values():
            kind, conn = cell["type"], cell["connections"]
            for pin, bits in conn.items():
                if cell["port_directions"][pin] == "input" and pin != "C":
                    for b in bits:
                        self.fanout[b] += 1
            if kind in _COMB:
                comb.append((kind, conn))
            elif re.fullmatch(r"\$_S?DFFC?E?_P[PN01]*_", kind):
                self.flops.append(_flop(kind, conn))
            else:
                raise ValueError(f"cell {kind!r} is not a generic gate or posedge flop")
        for direction, bits in self.ports.values():
            if direction == "output":
                for b in bits:
                    self.fanout[b] += 1  # the next PE's input
        self.nets = sorted(b for b in self.fanout if isinstance(b, int))
        self._eval = self._compile(comb)

    def _compile(self, comb):
        driven = {conn["Y"][0]: (kind, conn) for kind, conn in comb}
        order, state = [], {}

        def visit(bit):  # depth-first topological order (iterative: deep adder chains)
            stack = [(bit, False)]
            while stack:
                b, done = stack.pop()
                if done:
                    state[b] = 2
                    order.append(driven[b])
                    continue
                if state.get(b) or b not in driven:
                    continue
                state[b] = 1
                stack.append((b, True))
                kind, conn = driven[b]
                for pin in ("A", "B", "S"):
                    if pin in conn:
                        src = conn[pin][0]
                        if state.get(src) == 1:
                            raise ValueError("combinational loop")
                        stack.append((src, False))

        for b in driven:
            visit(b)
        lines = ["def evaluate(v, M):"]
        for kind, conn in order:
            refs = {p: _ref(bits[0]) for p, bits in conn.items() if p != "Y"}
            lines.append(f"    v[{conn['Y'][0]}] = {_COMB[kind].format(**refs)}")
        lines.append("    return v")
        scope = {}
        exec("\n".join(lines), scope)  # noqa: S102 - code generated from the netlist above
        return scope["evaluate"]

    def width(self) -> int:
        """Largest bit number (the size of a value vector)."""
        bits = [b for _, bs in self.ports.values() for b in bs if isinstance(b, int)]
        bits += [b for f in self.flops for b in f[1:] if isinstance(b, int)]
        return max([*bits, *self.nets, 1]) + 1

    def run(self, inputs: list[dict[str, list[int]]], lanes: int):
        """Simulate ``lanes`` instances over the cycles of ``inputs`` (per cycle: port name ->
        the value of each instance). Yields per cycle the outputs (port -> value per instance),
        the weighted toggles (sum of fanout x bits changed, all instances) and the bit toggles,
        both against the previous cycle's settled values (0 for the first cycle)."""
        mask = (1 << lanes) - 1
        size = self.width() + 2
        state = {f[1]: mask if self.init.get(f[1]) else 0 for f in self.flops}
        prev = None
        for cycle in inputs:
            v = [0] * size
            for name, (direction, bits) in self.ports.items():
                if direction != "input":
                    continue
                per_lane = cycle.get(name, [0] * lanes)
                for i, b in enumerate(bits):
                    if isinstance(b, int):
                        word = 0
                        for lane, value in enumerate(per_lane):
                            word |= ((value >> i) & 1) << lane
                        v[b] = word
            for q, word in state.items():
                v[q] = word
            v[_ONE] = mask
            self._eval(v, mask)
            weighted = toggles = 0
            if prev is not None:
                for b in self.nets:
                    d = v[b] ^ prev[b]
                    if d:
                        n = d.bit_count()
                        toggles += n
                        weighted += n * self.fanout[b]
            outputs = {}
            for name, (direction, bits) in self.ports.items():
                if direction == "output":
                    outputs[name] = [
                        sum(((v[_bit(b)] >> lane) & 1) << i for i, b in enumerate(bits))
                        for lane in range(lanes)
                    ]
            yield outputs, weighted, toggles
            state = {f[1]: _next(f, v, mask) for f in self.flops}
            prev = v


_ZERO, _ONE = -1, -2  # positions of the constants in a value vector (v[-1] = 0, v[-2] = mask)


def _bit(b):
    return b if isinstance(b, int) else (_ONE if b == "1" else _ZERO)


def _ref(b) -> str:
    return f"v[{_bit(b)}]"


def _flop(kind: str, conn: dict) -> tuple:
    """(kind, Q, D, E, R, enable polarity, reset polarity, reset value, reset needs enable)."""
    m = re.fullmatch(r"\$_(S?)DFF(C?)(E?)_P([PN01]*)_", kind)
    sync, ce, enable, pins = m.groups()
    pins = list(pins)
    r_pol = r_val = e_pol = None
    if sync:
        r_pol, r_val = pins.pop(0), int(pins.pop(0))
    if enable:
        e_pol = pins.pop(0)
    q, d = conn["Q"][0], _bit(conn["D"][0])
    e = _bit(conn["E"][0]) if enable else None
    r = _bit(conn["R"][0]) if sync else None
    return (kind, q, d, e, r, e_pol, r_pol, r_val, bool(ce))


def _next(f, v, mask) -> int:
    _, q, d, e, r, e_pol, r_pol, r_val, ce = f
    nxt = v[d]
    if e is not None:
        en = v[e] if e_pol == "P" else mask ^ v[e]
        nxt = (nxt & en) | (v[q] & (mask ^ en))
    else:
        en = mask
    if r is not None:
        rs = v[r] if r_pol == "P" else mask ^ v[r]
        if ce:
            rs &= en
        nxt = (nxt & (mask ^ rs)) | (rs if r_val else 0)
    return nxt


def sample_scopes(path: Path, pattern: str, names: list[str]):
    """Values just before each rising clock edge of the variables ``names`` in every scope of
    the VCD whose full name matches ``pattern``: ``(scopes, cycles)``, ``cycles[c][name]`` a
    list over ``scopes``. The clock is the top scope's ``clk``."""
    want: dict[str, list[tuple[int, str]]] = defaultdict(list)  # id -> [(scope index, name)]
    scopes: list[str] = []
    path_now: list[str] = []
    clock = None
    changes: dict[str, list[tuple[int, int]]] = defaultdict(list)
    with open(path) as stream:
        for line in stream:
            words = line.split()
            if not words:
                continue
            if words[0] == "$scope":
                path_now.append(words[2])
                full = ".".join(path_now)
                if re.fullmatch(pattern, full):
                    scopes.append(full)
            elif words[0] == "$upscope":
                path_now.pop()
            elif words[0] == "$var":
                code, ref = words[3], words[4]
                full = ".".join(path_now)
                if ref == "clk" and clock is None:
                    clock = code
                if scopes and scopes[-1] == full and ref in names:
                    want[code].append((len(scopes) - 1, ref))
            elif words[0] == "$enddefinitions":
                break
        for time, code, bits in value_changes(stream):
            if code in want or code == clock:
                try:
                    changes[code].append((time, int(bits, 2)))
                except ValueError:
                    changes[code].append((time, 0))
    edges = [t for t, v in changes[clock] if v == 1 and t > 0]
    cycles = [{n: [0] * len(scopes) for n in names} for _ in edges]
    for code, users in want.items():
        times = [t for t, _ in changes[code]]
        for c, edge in enumerate(edges):
            i = bisect.bisect_left(times, edge) - 1  # the last change strictly before the edge
            value = changes[code][i][1] if i >= 0 else 0
            for scope, name in users:
                cycles[c][name][scope] = value
    return scopes, cycles


def pe_toggles(vcd: Path, netlist: dict, module: str = "pe") -> dict:
    """Gate-level toggles of every PE of the engine whose run the VCD holds, simulating
    ``module`` of ``netlist`` on each PE's port values; raises ``AssertionError`` when an output
    differs from the RTL's in any cycle."""
    gates = GateModule(netlist["modules"][module])
    ins = [n for n, (d, _) in gates.ports.items() if d == "input" and n != "clk"]
    outs = [n for n, (d, _) in gates.ports.items() if d == "output"]
    scopes, cycles = sample_scopes(vcd, r".*\.pe\d+_\d+", ins + outs)
    weighted = toggles = 0
    runs = gates.run([{n: c[n] for n in ins} for c in cycles], len(scopes))
    for c, (outputs, w, t) in enumerate(runs):
        for name in outs:
            if outputs[name] != cycles[c][name]:
                lane = next(
                    i
                    for i, (a, b) in enumerate(zip(outputs[name], cycles[c][name], strict=True))
                    if a != b
                )
                raise AssertionError(
                    f"gate-level {name} of {scopes[lane]} differs from the RTL in cycle {c}"
                )
        weighted += w
        toggles += t
    return {
        "pes": len(scopes),
        "cycles": len(cycles),
        "gates": sum(1 for _ in gates.nets),
        "toggles": toggles,
        "weighted_toggles": weighted,
    }
