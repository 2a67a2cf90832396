"""Pipeline cuts in a combinational datapath, placed by name."""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, Signal, Value

from .arith import words

__all__ = ["Stages"]

#: In the words form (:mod:`hdl.arith`), the values a delay register holds (see
#: :meth:`Stages.sync`) no wider than half this are registered together, first fit, in words
#: of at most this many bits, so Verilator copies and selects a few words a stage, not a
#: hundred one-bit flags (the 128x128 every-format engine, cuts in place: 366 -> 616 cycles/s
#: driven).
PACK_BITS = 64


class Stages:
    """The pipeline registers of one datapath: a function describing the datapath calls
    :meth:`cut` at each place a register may go; only the cuts named in ``active`` become
    registers. ``carry`` holds values that ride along through every active cut (flags
    computed early and used at the end); :meth:`after_cut` changes one of them in the stage
    after the next active cut.

    Every register is reset-less and its next value is the single expression
    ``Mux(adv, value, reg)`` (it holds while ``adv`` is low; see
    :class:`~hdl.tensor.pe.ProcessingElement` for why one expression).

    In the words form (:mod:`hdl.arith`) the cuts are retimed: each only counts, and
    :meth:`sync`, which a datapath calls where it reads a new input and where it ends, delays
    what is live by that many registers. The ports see the same values on the same cycles.

    Parameters
    ----------
    m : Module
        The module the registers go in.
    adv : Value or None
        The enable; ``None`` with no active cuts (a combinational datapath).
    active : iterable of str
        The cuts that are registers.

    Examples
    --------
    >>> st = Stages(m, adv, {"mul.product"})                  # doctest: +SKIP
    >>> p = st.cut("mul.product", prod=w * x)["prod"]         # doctest: +SKIP
    """

    def __init__(self, m, adv=None, active=()):
        self.m = m
        self.adv = adv
        self.active = frozenset(active)
        if self.active and adv is None:
            raise ValueError(f"cuts {sorted(self.active)} need an enable, not adv=None")
        self.carry: dict = {}
        self.used: set = set()
        self._after: dict = {}
        # The words form (hdl.arith) retimes: cuts pass their values through and count, and
        # sync() delays what it is given by that many registers.
        self.retime = words()
        self.pending = 0
        self._delays = 0

    def cut(self, name: str, **values) -> dict:
        """``values`` after the cut ``name``: registered if the cut is active (``carry``
        too), else themselves. In the words form (:mod:`hdl.arith`) an active cut only
        counts; :meth:`sync` places its register."""
        if name not in self.active:
            return values
        self.used.add(name)
        if self.retime:
            self.pending += 1
        else:
            values = self._delay(name.replace(".", "_"), values, 1)
        after, self._after = self._after, {}
        self.carry.update({k: f(self.carry[k]) for k, f in after.items()})
        return values

    def sync(self, **values) -> dict:
        """``values`` (and ``carry``, in place) delayed by the cuts passed since the last
        sync: themselves in the gates form, whose cuts are registers where they are. Call it
        where the datapath reads an input that is not a function of the values so far (the
        partial sum) and where it ends.

        In the words form (:mod:`hdl.arith`) the cuts are retimed: all the logic between two
        syncs is computed at once, and its results pass through as many registers as there
        were cuts. Every register advances on the same ``adv``, and a stage's logic reads
        only the values registered before it, so each value leaves the last register on the
        same cycle and equal to the gates form's."""
        if not self.pending:
            return values
        values = self._delay("delay", values, self.pending)
        self.pending = 0
        return values

    def _delay(self, tag: str, values: dict, stages: int) -> dict:
        """``values`` and ``carry`` (in place) through ``stages`` registers each."""
        live = {("c", k): Value.cast(v) for k, v in self.carry.items()}
        live |= {("v", k): Value.cast(v) for k, v in values.items()}
        for _ in range(stages):
            name = tag if not self.retime else f"{tag}{self._delays}"
            live = self._registers(name, live)
            self._delays += 1
        self.carry.update({k: live[("c", k)] for k in self.carry})
        return {k: live[("v", k)] for k in values}

    def _registers(self, tag: str, values: dict) -> dict:
        """Each of ``values`` (keyed ``(kind, name)``) registered, as the same key; in the
        words form the narrow ones share registers (:data:`PACK_BITS`)."""

        def reg(name, value):
            r = Signal(value.shape(), reset_less=True, name=f"{tag}_{name}")
            self.m.d.sync += r.eq(Mux(self.adv, value, r))
            return r

        groups, out = [], {}
        for key, v in values.items():
            if not self.retime or len(v) > PACK_BITS // 2:
                out[key] = reg(key[1], v)
                continue
            fits = (g for g in groups if sum(len(values[k]) for k in g) + len(v) <= PACK_BITS)
            group = next(fits, None)
            if group is None:
                groups.append(group := [])
            group.append(key)
        for n, group in enumerate(groups):
            packed = reg(f"pack{n}", Cat(*(values[key] for key in group)))
            at = 0
            for key in group:
                piece = packed[at : at + len(values[key])]
                out[key] = piece.as_signed() if values[key].shape().signed else piece
                at += len(values[key])
        return out

    def after_cut(self, key: str, change):
        """Replace ``carry[key]`` by ``change(carry[key])`` just after the next active cut:
        work that would lengthen the stage it was carried from is done in the next one.
        A value needed before that cut comes: :meth:`settle`."""
        self._after[key] = change

    def settle(self, key: str):
        """``carry[key]`` with its pending :meth:`after_cut` change made here, if any."""
        if key in self._after:
            self.carry[key] = self._after.pop(key)(self.carry[key])
        return self.carry[key]

    def check(self):
        """Raise ``ValueError`` if an active cut was never reached (a misspelt name)."""
        if self.active - self.used:
            raise ValueError(f"no cut named {sorted(self.active - self.used)} in this datapath")
        if self.pending:
            raise ValueError(f"{self.pending} retimed cuts with no sync() after them")
