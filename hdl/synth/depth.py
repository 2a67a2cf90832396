"""Longest paths, in gate levels, between the registers of a synthesised netlist.

Reads Yosys's JSON netlist of a design synthesised to generic gates with its hierarchy kept,
and measures each module once: a module instantiated 16,384 times costs one analysis. Each
combinational cell is one level; flip-flops start and end paths. A module's *model* holds what
its parent needs: the paths from internal registers to each output bit, from each input bit to
internal registers, and through it from input to output bits.

Register names are grouped by the module that holds them (``engine_pe.p_reg``), so a stage is
reported once however many times its module is placed. Ports of the top module are treated as
registers (``in:NAME``, ``out:NAME``): every block measured here is fed by and feeds registers.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from dataclasses import dataclass, field

__all__ = ["ModuleModel", "Netlist", "is_flop"]

#: Yosys's internal flip-flop and latch cells (after ``synth``, one bit each).
FLOP_PREFIXES = ("$_DFF", "$_SDFF", "$_ALDFF", "$_DLATCH", "$_SR_", "$_FF_")
#: Pins of a flip-flop that start a path; every other pin but the clock ends one.
FLOP_OUTPUTS = {"Q"}
FLOP_CLOCKS = {"C"}


def is_flop(cell_type: str) -> bool:
    """Whether a Yosys cell type is a flip-flop or latch."""
    return cell_type.startswith(FLOP_PREFIXES)


def _merge(into: dict, items, add: int):
    for label, depth in items:
        depth += add
        if into.get(label, -1) < depth:
            into[label] = depth


@dataclass
class ModuleModel:
    """What a module looks like from its parent, and the stages inside it.

    ``out_arr[(port, bit)]`` maps each start of a path reaching that output bit to its levels:
    a register label, or ``("in", port, bit)`` for an input bit of this module (a path
    through it). ``in_req[(port, bit)]`` maps each register a path from that input bit reaches
    to its levels. ``stages[(start, end)]`` is the longest path between two registers inside.
    ``cells`` counts primitive cells by type, with every instance below expanded.
    """

    out_arr: dict = field(default_factory=dict)
    in_req: dict = field(default_factory=lambda: defaultdict(dict))
    stages: dict = field(default_factory=dict)
    cells: dict = field(default_factory=lambda: defaultdict(int))


class Netlist:
    """A Yosys JSON netlist (``write_json``), analysed module by module on demand.

    Parameters
    ----------
    data : dict
        The parsed JSON.

    Examples
    --------
    >>> net = Netlist(json.loads(Path("pe.json").read_text()))  # doctest: +SKIP
    >>> net.top_stages("pe")[0]                                  # doctest: +SKIP
    ('pe.a_reg', 'pe.p_reg', 329)
    """

    def __init__(self, data: dict):
        self.modules = data["modules"]
        self._models: dict[str, ModuleModel] = {}

    def model(self, name: str) -> ModuleModel:
        """The :class:`ModuleModel` of module ``name`` (computed once)."""
        if name not in self._models:
            if name not in self.modules:
                raise ValueError(f"module {name!r} is not in the netlist")
            self._models[name] = self._analyse(name)
        return self._models[name]

    def _register_names(self, name: str, mod: dict) -> dict:
        """Bit -> register name, without bit index or Amaranth's ``$N`` suffix. Public names
        come first, then names of a whole register before its fields and ports: ``a_reg``
        before ``a_reg.data`` and the port ``a_out`` it drives."""
        names = {}
        ports = mod["ports"].keys()

        def rank(item):
            net, info = item
            bare = net.lstrip("\\")
            return (
                info.get("hide_name", 0),
                bare.startswith("$"),
                net in ports,
                bare.count("."),
                bare,
            )

        for net, info in sorted(mod["netnames"].items(), key=rank):
            base = re.sub(r"(\$\d+)?(\[\d+\])?$", "", net.lstrip("\\"))
            for bit in info["bits"]:
                if isinstance(bit, int):
                    names.setdefault(bit, f"{name}.{base}")
        return names

    def _analyse(self, name: str) -> ModuleModel:
        mod = self.modules[name]
        model = ModuleModel()
        reg_name = self._register_names(name, mod)
        arr: dict = {}  # bit -> {start: levels of the longest path from it}
        users = defaultdict(list)  # bit -> evaluators reading it
        # (bits read, ("gate", bits out, bits in) or ("inst", [bit out], child's starts, pins))
        evaluators = []
        captures = []  # (bits, {end: levels from these bits to that end})

        for port, info in mod["ports"].items():
            if info["direction"] == "input":
                for i, bit in enumerate(info["bits"]):
                    if isinstance(bit, int):
                        arr[bit] = {("in", port, i): 0}

        def add_evaluator(inputs, payload):
            inputs = [b for b in inputs if isinstance(b, int)]
            for b in inputs:
                users[b].append(len(evaluators))
            evaluators.append((inputs, payload))

        for cname, cell in mod["cells"].items():
            ctype, conns = cell["type"], cell["connections"]
            if ctype in self.modules:
                child = self.model(ctype)
                for kind, count in child.cells.items():
                    model.cells[kind] += count
                for key, levels in child.stages.items():
                    if model.stages.get(key, -1) < levels:
                        model.stages[key] = levels
                child_ports = self.modules[ctype]["ports"]
                for port, bits in conns.items():
                    if child_ports[port]["direction"] == "input":
                        for i, bit in enumerate(bits):
                            req = child.in_req.get((port, i))
                            if req:
                                captures.append(([bit], req))
                for port, bits in conns.items():
                    if child_ports[port]["direction"] != "output":
                        continue
                    for i, bit in enumerate(bits):
                        starts = child.out_arr.get((port, i), {})
                        deps = [conns[s[1]][s[2]] for s in starts if isinstance(s, tuple)]
                        add_evaluator(deps, ("inst", [bit], starts, conns))
                continue
            if not ctype.startswith("$_"):
                raise ValueError(f"{name}: cell {cname} of type {ctype} is not a generic gate")
            model.cells[ctype] += 1
            dirs = cell["port_directions"]
            if is_flop(ctype):
                label = None
                for pin in FLOP_OUTPUTS & conns.keys():
                    for bit in conns[pin]:
                        if isinstance(bit, int):
                            label = reg_name.get(bit, f"{name}.{cname}")
                            arr[bit] = {label: 0}
                label = label or f"{name}.{cname}"
                for pin, bits in conns.items():
                    if dirs[pin] == "input" and pin not in FLOP_CLOCKS:
                        captures.append((bits, {label: 0}))
                continue
            ins = [b for pin, bits in conns.items() if dirs[pin] == "input" for b in bits]
            outs = [b for pin, bits in conns.items() if dirs[pin] == "output" for b in bits]
            add_evaluator(ins, ("gate", outs, ins))

        # Kahn's order over nets: an evaluator runs once all the bits it reads are known.
        known = set(arr)
        waits = {}  # evaluator -> bits it reads not yet known
        ready = deque()
        for idx, (inputs, _) in enumerate(evaluators):
            waits[idx] = sum(1 for b in inputs if b not in known)
            if waits[idx] == 0:
                ready.append(idx)
        # bits no evaluator drives (undriven, inout) are known with no start
        driven = {b for _, payload in evaluators for b in payload[1]}
        for b in list(users):
            if b not in known and b not in driven:
                known.add(b)
                arr[b] = {}
                for idx in users[b]:
                    waits[idx] -= 1
                    if waits[idx] == 0:
                        ready.append(idx)
        done = 0
        while ready:
            idx = ready.popleft()
            done += 1
            inputs, payload = evaluators[idx]
            if payload[0] == "gate":
                _, outs, ins = payload
                merged: dict = {}
                for b in ins:
                    if isinstance(b, int):
                        _merge(merged, arr[b].items(), 1)
                produced = outs
                for b in outs:
                    if isinstance(b, int):
                        arr[b] = merged
            else:
                _, produced, starts, conns = payload
                merged = {}
                for start, levels in starts.items():
                    if isinstance(start, tuple):
                        src = conns[start[1]][start[2]]
                        if isinstance(src, int):
                            _merge(merged, arr[src].items(), levels)
                    elif merged.get(start, -1) < levels:
                        merged[start] = levels
                if isinstance(produced[0], int):
                    arr[produced[0]] = merged
            for b in produced:
                if isinstance(b, int) and b not in known:
                    known.add(b)
                    for user in users[b]:
                        waits[user] -= 1
                        if waits[user] == 0:
                            ready.append(user)
        if done != len(evaluators):
            raise ValueError(f"{name}: combinational loop ({len(evaluators) - done} cells)")

        for bits, ends in captures:
            for bit in bits:
                if not isinstance(bit, int):
                    continue
                for start, d in arr.get(bit, {}).items():
                    for end, r in ends.items():
                        if isinstance(start, tuple):
                            req = model.in_req[start[1:]]
                            if req.get(end, -1) < d + r:
                                req[end] = d + r
                        elif model.stages.get((start, end), -1) < d + r:
                            model.stages[(start, end)] = d + r
        for port, info in mod["ports"].items():
            if info["direction"] == "output":
                for i, bit in enumerate(info["bits"]):
                    model.out_arr[(port, i)] = (
                        dict(arr.get(bit, {})) if isinstance(bit, int) else {}
                    )
        return model

    def top_stages(self, top: str) -> list[tuple[str, str, int]]:
        """Every register-to-register stage of module ``top`` as ``(start, end, levels)``,
        longest first; the top's ports count as registers (``in:NAME``, ``out:NAME``)."""
        model = self.model(top)
        stages = dict(model.stages)

        def keep(start, end, levels):
            if stages.get((start, end), -1) < levels:
                stages[(start, end)] = levels

        for (port, _), ends in model.in_req.items():
            for end, levels in ends.items():
                keep(f"in:{port}", end, levels)
        for (port, _), starts in model.out_arr.items():
            for start, levels in starts.items():
                keep(f"in:{start[1]}" if isinstance(start, tuple) else start, f"out:{port}", levels)
        return sorted(
            ((s, e, d) for (s, e), d in stages.items()), key=lambda t: (-t[2], t[0], t[1])
        )
