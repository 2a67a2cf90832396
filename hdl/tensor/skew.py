"""Skew and de-skew lines: lane i of a vector delayed by its own number of cycles."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Shape, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..hier import place

__all__ = ["Skew", "Pipe", "DelayLane", "lane_depth"]


def lane_depth(n: int) -> int:
    """Buffer depth of an ``n``-lane skew: a power of two above the longest delay."""
    return 1 << max(0, (n - 1).bit_length())


class DelayLane(wiring.Component):
    """One lane of a :class:`Skew`: ``o`` is ``i`` as it was ``delay`` advancing cycles ago
    (``1 <= delay < depth``), from a circular buffer written at ``ptr + delay`` and read at
    ``ptr``, where ``ptr`` counts advancing cycles. The buffer is not reset (it starts at zero).

    Parameters
    ----------
    width : int
        Bits per value.
    depth : int
        Buffer entries, a power of two above the longest delay used.
    """

    def __init__(self, width: int, depth: int):
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            self._MustUse__silence = True
            raise ValueError(f"depth must be a power of two of at least 2, not {depth!r}")
        self.width = width
        self.depth = depth
        super().__init__({"adv": In(1), "delay": In(range(depth)), "i": In(width), "o": Out(width)})

    def elaborate(self, platform):
        m = Module()
        ptr = Signal(range(self.depth))
        with m.If(self.adv):
            m.d.sync += ptr.eq(ptr + 1)
        m.submodules.buffer = mem = Memory(shape=self.width, depth=self.depth, init=[])
        wp = mem.write_port()
        rp = mem.read_port(domain="comb")
        m.d.comb += [
            wp.addr.eq(ptr + self.delay),
            wp.data.eq(self.i),
            wp.en.eq(self.adv),
            rp.addr.eq(ptr),
            self.o.eq(rp.data),
        ]
        return m


class Skew(wiring.Component):
    """Delay lane ``i`` of an ``n``-lane vector by ``i * step`` cycles (``reverse=False``) or
    by ``(n - 1 - i) * step`` cycles (``reverse=True``), advancing only when ``adv`` is high.

    The zero-delay lane passes through combinationally (unless ``through=False``: it is
    then left at zero in ``o``, and ``o`` depends on registers only); every other lane is a
    :class:`DelayLane` (data only: control that must be reset travels in a :class:`Pipe`
    beside it). A triangle of registers would cost Amaranth a net per bit (about half a
    million at 128 lanes of 32 bits); one lane module, described once and placed per lane,
    keeps generation of the 128x128 engine within seconds.

    Parameters
    ----------
    shape : shape-castable
        Shape of one lane.
    n : int
        Number of lanes, 1 or more.
    reverse : bool
        Longest delay on lane 0 instead of lane ``n - 1``.
    lane_module : str or None
        Verilog module name of the :class:`DelayLane` (width and depth of this skew) in
        hierarchical generation; ``None`` for submodules.
    step : int
        Cycles between the delays of neighbouring lanes, 1 or more.
    through : bool
        Whether ``o`` carries the zero-delay lane (``i`` of that lane, combinationally).
        A user that reads that lane from ``i`` instead keeps every input of the module out
        of ``o``: Verilator evaluates logic that depends on the model's inputs (here, on
        any bit of ``o``) on every evaluation, logic that depends on registers only once
        per clock edge.
    """

    def __init__(
        self,
        shape,
        n: int,
        *,
        reverse: bool = False,
        lane_module: str | None = None,
        step: int = 1,
        through: bool = True,
    ):
        for name, value in (("n", n), ("step", step)):
            if not isinstance(value, int) or value < 1:
                self._MustUse__silence = True  # never elaborated: no "unused" warning on top
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        self.step = step
        self.lane_shape = shape
        self.n = n
        self.reverse = reverse
        self.through = through
        self._lane_module = lane_module
        layout = data.ArrayLayout(shape, n)
        super().__init__({"adv": In(1), "i": In(layout), "o": Out(layout)})

    def delay(self, lane: int) -> int:
        return (self.n - 1 - lane if self.reverse else lane) * self.step

    @property
    def depth(self) -> int:
        """Entries of each lane's buffer (:func:`lane_depth` of the longest delay)."""
        return lane_depth((self.n - 1) * self.step + 1)

    def out(self, lane: int):
        """Lane ``lane`` after its delay, whether or not ``o`` carries the zero-delay lane:
        ``i`` itself for that lane."""
        return self.i[lane] if self.delay(lane) == 0 else self.o[lane]

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self.lane_shape).width
        for lane in range(self.n):
            delay = self.delay(lane)
            if delay == 0:
                if self.through:
                    m.d.comb += self.o[lane].eq(self.i[lane])
                continue
            line = DelayLane(width, self.depth)
            place(m, f"lane{lane}", line, self._lane_module)
            m.d.comb += [
                line.adv.eq(self.adv),
                line.delay.eq(delay),
                line.i.eq(Value.cast(self.i[lane])),
                self.o[lane].eq(line.o),
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
    through : bool
        Whether ``o[0]`` is ``i``; if not it is zero, and ``o`` depends on registers only
        (see :class:`Skew`).
    """

    def __init__(self, shape, stages: int, *, through: bool = True):
        if not isinstance(stages, int) or stages < 1:
            self._MustUse__silence = True
            raise ValueError(f"stages must be a positive integer, not {stages!r}")
        self.stages = stages
        self.through = through
        super().__init__({"adv": In(1), "i": In(shape), "o": Out(data.ArrayLayout(shape, stages))})

    def tap(self, stage: int):
        """The input ``stage`` advancing cycles ago, whether or not ``o`` carries stage 0:
        ``i`` itself for that stage."""
        return self.i if stage == 0 else self.o[stage]

    def elaborate(self, platform):
        m = Module()
        width = len(Value.cast(self.i))
        if self.through:
            m.d.comb += self.o[0].eq(self.i)
        if self.stages > 1:
            regs = Signal((self.stages - 1) * width)
            with m.If(self.adv):
                m.d.sync += regs.eq(Cat(self.i, regs[: (self.stages - 2) * width]))
            m.d.comb += Value.cast(self.o)[width:].eq(regs)
        return m
