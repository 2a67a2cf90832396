"""Skew and de-skew lines: lane i of a vector delayed by its own number of cycles."""

from __future__ import annotations

from amaranth.hdl import Module, Shape, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["Skew", "Pipe"]


class Skew(wiring.Component):
    """Delay lane ``i`` of an ``n``-lane vector by ``i`` cycles (``reverse=False``) or by
    ``n - 1 - i`` cycles (``reverse=True``), advancing only when ``adv`` is high.

    The zero-delay lane passes through combinationally. Each other lane is a small circular
    buffer: written at ``ptr + delay`` and read at ``ptr``, where ``ptr`` counts advancing
    cycles. Buffers are not reset (they start at zero); they carry data only. Control that
    must be reset travels in a :class:`Pipe` beside them. A triangle of registers would cost
    Amaranth a net per bit (about half a million at 128 lanes of 32 bits) and seconds per
    thousand; buffers keep generation of the 128x128 engine within a few seconds.

    Parameters
    ----------
    shape : shape-castable
        Shape of one lane.
    n : int
        Number of lanes, 1 or more.
    reverse : bool
        Longest delay on lane 0 instead of lane ``n - 1``.
    """

    def __init__(self, shape, n: int, *, reverse: bool = False):
        if not isinstance(n, int) or n < 1:
            self._MustUse__silence = True  # never elaborated: no "unused" warning on top
            raise ValueError(f"n must be a positive integer, not {n!r}")
        self.lane_shape = shape
        self.n = n
        self.reverse = reverse
        layout = data.ArrayLayout(shape, n)
        super().__init__({"adv": In(1), "i": In(layout), "o": Out(layout)})

    def delay(self, lane: int) -> int:
        return self.n - 1 - lane if self.reverse else lane

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self.lane_shape).width
        depth = 1 << max(0, (self.n - 1).bit_length())  # > the longest delay, a power of 2
        ptr = Signal(range(depth))
        if self.n > 1:
            with m.If(self.adv):
                m.d.sync += ptr.eq(ptr + 1)
        for lane in range(self.n):
            delay = self.delay(lane)
            if delay == 0:
                m.d.comb += self.o[lane].eq(self.i[lane])
                continue
            mem = m.submodules[f"lane{lane}"] = Memory(shape=width, depth=depth, init=[])
            wp = mem.write_port()
            rp = mem.read_port(domain="comb")
            m.d.comb += [
                wp.addr.eq(ptr + delay),
                wp.data.eq(Value.cast(self.i[lane])),
                wp.en.eq(self.adv),
                rp.addr.eq(ptr),
                self.o[lane].eq(rp.data),
            ]
        return m


class Pipe(wiring.Component):
    """A reset-able shift register: ``o[s]`` is ``i`` as it was ``s`` advancing cycles ago
    (``o[0]`` is ``i`` itself), for ``s`` in ``0 .. stages - 1``.

    Parameters
    ----------
    shape : shape-castable
        Shape of the value carried.
    stages : int
        Number of taps, 1 or more.
    """

    def __init__(self, shape, stages: int):
        if not isinstance(stages, int) or stages < 1:
            self._MustUse__silence = True
            raise ValueError(f"stages must be a positive integer, not {stages!r}")
        self.stages = stages
        super().__init__({"adv": In(1), "i": In(shape), "o": Out(data.ArrayLayout(shape, stages))})

    def elaborate(self, platform):
        m = Module()
        width = len(Value.cast(self.i))
        m.d.comb += self.o[0].eq(self.i)
        if self.stages > 1:
            regs = Signal((self.stages - 1) * width)
            with m.If(self.adv):
                m.d.sync += regs.eq(Value.cast(self.o)[: (self.stages - 1) * width])
            m.d.comb += Value.cast(self.o)[width:].eq(regs)
        return m
