"""Pipeline cuts placed by name (hdl.stages.Stages) in Amaranth's simulator."""

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hdl.stages import Stages


def pipeline(active, settle_early=False):
    """``out = (a + 1) * 2`` through the cuts ``one`` then ``two``; ``a``'s value rides in
    ``carry`` from before ``one`` and is tripled by :meth:`Stages.after_cut` in the stage
    after the next active cut (or where it is read, with ``settle_early``)."""
    m = Module()
    a, adv = Signal(8), Signal()
    out, rode = Signal(16), Signal(16)
    st = Stages(m, adv, active)
    st.carry["a"] = a
    st.after_cut("a", lambda v: v * 3)
    if settle_early:
        st.settle("a")
    v = st.cut("one", x=a + 1)
    v = st.cut("two", y=v["x"] * 2)
    st.check()
    m.d.comb += [out.eq(v["y"]), rode.eq(st.carry["a"])]
    return m, a, adv, out, rode


@pytest.mark.parametrize(
    "active,latency", [((), 0), (("one",), 1), (("two",), 1), (("one", "two"), 2)]
)
@pytest.mark.parametrize("settle_early", [False, True])
def test_after_cut_changes_the_carried_value_once(active, latency, settle_early):
    """The datapath's value and the carried one arrive together, ``latency`` advancing cycles
    late; the carried value is changed exactly once whichever cuts are active (and with no
    cut at all, only by :meth:`Stages.settle`)."""
    m, a, adv, out, rode = pipeline(active, settle_early)
    tripled = bool(active) or settle_early
    sim = Simulator(m)
    if active:
        sim.add_clock(1e-6)
    seen = []

    async def bench(ctx):
        for value in range(1, 8):
            ctx.set(a, value)
            ctx.set(adv, 1)
            if active:
                await ctx.tick()
            else:
                await ctx.delay(1e-6)
            seen.append((ctx.get(out), ctx.get(rode)))

    sim.add_testbench(bench)
    sim.run()
    inputs = list(range(1, 8))
    for i, (y, r) in enumerate(seen):
        src = inputs[i - latency + 1] if active else inputs[i]  # after the tick: the next cycle
        if active and i - latency + 1 < 0:
            continue
        assert y == (src + 1) * 2
        assert r == (src * 3 if tripled else src)


def test_check_names_a_misspelt_cut():
    m = Module()
    m._MustUse__silence = True  # never elaborated: only the names are checked
    st = Stages(m, Signal(), {"one", "tow"})
    st.cut("one", x=Signal(4))
    with pytest.raises(ValueError, match="no cut named \\['tow'\\]"):
        st.check()


def test_words_form_retimes_cuts_into_packed_delays():
    """In the words form two cuts pass their values through and :meth:`Stages.sync` delays
    them (and ``carry``) by two registers each, the values of at most 32 bits sharing
    registers of at most 64 (hdl.stages.PACK_BITS); the gates form registers each value at
    each cut. Either way every value leaves two cycles later unchanged, a signed one still
    signed, and with no sync the words form's check() names the cuts left pending."""
    from amaranth.hdl import signed

    from hdl.arith import arithmetic

    counts = {}
    for form in ("gates", "words"):
        m = Module()
        adv = Signal()
        flags = [Signal(name=f"f{i}") for i in range(20)]
        exp, wide = Signal(signed(10)), Signal(48)
        with arithmetic(form):
            st = Stages(m, adv, {"one", "two"})
            st.carry["e"] = exp
            v = st.cut("one", wide=wide, **{f"f{i}": f for i, f in enumerate(flags)})
            v = st.sync(**st.cut("two", **v))
            st.check()
        counts[form] = len(m._statements.get("sync", []))
        assert st.carry["e"].shape() == signed(10)
        out = Signal(signed(10))
        m.d.comb += out.eq(st.carry["e"])
        sim = Simulator(m)
        sim.add_clock(1e-6)
        got = []

        async def bench(ctx, flags=flags, exp=exp, wide=wide, v=v, out=out, adv=adv, got=got):
            ctx.set(adv, 1)
            ctx.set(exp, -300)
            ctx.set(wide, (1 << 47) | 5)
            for i, f in enumerate(flags):
                ctx.set(f, i % 3 == 0)
            await ctx.tick()
            ctx.set(exp, 7)  # a new value follows; the first leaves after the second tick
            await ctx.tick()
            got.append((ctx.get(out), ctx.get(v["wide"]), [ctx.get(v[f"f{i}"]) for i in range(20)]))

        sim.add_testbench(bench)
        sim.run()
        assert got == [(-300, (1 << 47) | 5, [int(i % 3 == 0) for i in range(20)])], form
    assert counts == {"gates": 44, "words": 4}, counts
    with arithmetic("words"):
        st = Stages(m, adv, {"one"})  # the module simulated above: a new one unused warns
        st.cut("one", x=Signal(4))
    with pytest.raises(ValueError, match="^1 retimed cuts with no sync"):
        st.check()
