"""The analytic engine: alpha-beta per step with shared links counted, vectorised over sizes."""

import numpy as np
import pytest

from tlm.collectives import Analytic, build, choose
from tlm.collectives.schedule import Schedule, Step, Transfer
from tlm.system import load_system

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

SERVER = load_system("trn2-server")
HOP_S = 1e-6 + 0.5e-6  # step_fixed_s + one link's latency_s (the presets' ASSUMED figures)


def test_ring_all_reduce_is_its_closed_form():
    """2 (r - 1) steps of one chunk (size / r) over one 256 GB/s link each."""
    cost = Analytic(build("ring", "all_reduce", SERVER), SERVER)
    sizes = np.array([32, 1 << 20, 1 << 30, 3 << 30])
    want = 30 * (HOP_S + sizes / 16 / 256e9)
    assert np.allclose(cost.time_s(sizes, itemsize=2), want, rtol=1e-12)


def test_kangaring_uses_four_rings_at_once():
    cost = Analytic(build("kangaring", "all_reduce", SERVER), SERVER)
    size = 1 << 30
    want = 30 * (HOP_S + size / 64 / 256e9)
    assert cost.time_s([size], 2)[0] == pytest.approx(want, rel=1e-12)


def test_shared_links_are_counted():
    """Two transfers whose routes share a link take twice one transfer's time on it."""
    # chip 0 -> 2 goes x+ x+ (half way round: +), crossing 'chip 1 x+'; chip 1 -> 2 too
    alone = (Step((Transfer(1, 2, 0, 1, False),), ()),)
    one = Schedule("permute", "test", tuple(range(16)), 1, 1, alone)
    two = Schedule(
        "permute",
        "test",
        tuple(range(16)),
        1,
        1,
        (Step((Transfer(0, 2, 0, 1, False), Transfer(1, 2, 0, 1, False)), ()),),
    )
    size = 256e6
    t1 = Analytic(one, SERVER).time_s([size], 1)[0]
    t2 = Analytic(two, SERVER).time_s([size], 1)[0]
    assert t1 == pytest.approx(HOP_S + size / 256e9)
    assert t2 == pytest.approx(1e-6 + 2 * 0.5e-6 + 2 * size / 256e9)  # two hops, shared link


def test_dependencies_take_the_longest_path():
    """Steps that wait for different steps: the operation ends with the longer chain (a then
    c, each one hop; or b, three chunks on one link)."""
    a = Step((Transfer(0, 1, 0, 1, False),), ())
    b = Step((Transfer(1, 2, 0, 1, False),) * 3, ())
    c = Step((Transfer(1, 0, 0, 1, False),), (0,))
    s = Schedule("permute", "test", tuple(range(16)), 1, 1, (a, b, c))
    cost = Analytic(s, SERVER)
    assert not cost.chain
    for size in (1.0, 1e9):
        t_a = HOP_S + size / 256e9
        t_b = HOP_S + 3 * size / 256e9
        assert cost.time_s([size], 1)[0] == pytest.approx(max(2 * t_a, t_b), rel=1e-12)
    assert 2 * (HOP_S + 1 / 256e9) > HOP_S + 3 / 256e9  # small: the chain a, c is longer
    assert 2 * (HOP_S + 1e9 / 256e9) < HOP_S + 3e9 / 256e9  # large: b is


def test_vectorised_equals_one_by_one():
    system = load_system("3xtrn2-server")
    cost = Analytic(build("hierarchical", "all_reduce", system), system)
    sizes = np.arange(1, 2000) * 96
    together = cost.time_s(sizes, 2)
    alone = np.array([cost.time_s([s], 2)[0] for s in sizes[:50]])
    assert np.array_equal(together[:50], alone)
    assert (np.diff(together) >= 0).all()


def test_uneven_sizes_are_charged_the_largest_chunk():
    cost = Analytic(build("ring", "all_reduce", SERVER), SERVER)
    # 17 elements over 16 chunks: the largest chunk has 2
    assert cost.chunk_bytes([34], 2)[0] == 4 and cost.chunk_bytes([32], 2)[0] == 2


def test_hierarchical_beats_a_flat_ring_over_efa():
    system = load_system("4xtrn2-server")
    flat = Analytic(build("ring", "all_reduce", system), system).time_s([1 << 30], 2)[0]
    tiered = Analytic(build("hierarchical", "all_reduce", system), system).time_s([1 << 30], 2)[0]
    assert tiered < flat
    # the EFA phase moves 2 (N - 1) / N of a 1/16 share of the buffer over a 25 GB/s NIC
    efa = 2 * 3 / 4 * (1 << 30) / 16 / 25e9
    assert tiered > efa


@pytest.mark.parametrize(
    "size,algo", [(8, "mesh"), ((1 << 20) - 2, "mesh"), (1 << 20, "rdh"), (56 << 20, "kangaring")]
)
def test_auto_thresholds(size, algo):
    assert choose("all_reduce", SERVER, size) == algo


def test_auto_falls_back():
    """Where the documented choice does not fit: rings of rings on a torus (KangaRing off the
    4x4 server, gathers over EFA), the snake ring round a failed link or off a torus."""
    ultra = load_system("trn2-ultraserver")
    assert choose("all_reduce", ultra, 1 << 30) == "rings"
    assert choose("all_reduce", ultra, 8 << 20) == "rdh"
    assert choose("all_gather", load_system("4xtrn2-server"), 1 << 30) == "rings"
    assert choose("all_reduce", load_system("4xtrn2-server"), 1 << 30) == "hierarchical"
    assert choose("all_reduce", SERVER.without([(5, 6)]), 1 << 30) == "ring"
    assert choose("all_reduce", ultra.without([(5, 6)]), 1 << 30) == "ring"
    # the fallback is the faster: 1 GiB on the UltraServer
    fast, slow = (
        Analytic(build(a, "all_reduce", ultra), ultra).time_s([1 << 30], 2)[0]
        for a in ("rings", "ring")
    )
    assert fast < slow / 3
    assert choose("all_to_all", SERVER, 1 << 30) == "mesh"
    assert choose("broadcast", SERVER, 1 << 30) == "ring"


def test_the_sample_figures_in_the_docs_are_the_models():
    """docs/collectives.md's tables of sample figures, recomputed: time to 3 digits, busbw in
    GB/s - the links alone, and as shipped (the runtime's ranks, with the algorithm)."""
    from pathlib import Path

    from tlm.studies import run_study
    from tlm.studies.units import human

    doc = (Path(__file__).resolve().parents[1] / "docs" / "collectives.md").read_text()
    rows = {
        "server, ring": ("server", "ring"),
        "server, mesh": ("server", "mesh"),
        "server, rdh": ("server", "rdh"),
        "server, kangaring": ("server", "kangaring"),
        "ultraserver, rdh": ("ultraserver", "rdh"),
        "4 servers, hierarchical": ("4xserver", "hierarchical"),
    }
    sizes = "64KiB,1MiB,16MiB,256MiB,4GiB"
    for label, (system, algo) in rows.items():
        (line,) = [x for x in doc.splitlines() if x.startswith(f"| {label} |")]
        r = run_study("collective", system=system, algo=algo, sizes=sizes, runtime=False)
        cells = [
            f"{human('time_s', p.time_s)}, {p.busbw_Bps / 1e9:.0f} GB/s" for p in r.results.series
        ]
        assert line == f"| {label} | " + " | ".join(cells) + " |"
    shipped = {
        "server, 64 ranks": {"system": "server"},
        "server, 16 ranks": {"system": "server", "ranks": 16},
        "ultraserver, 256 ranks": {"system": "ultraserver"},
        "4xserver, 256 ranks": {"system": "4xserver"},
    }
    for label, inputs in shipped.items():
        (line,) = [x for x in doc.splitlines() if x.startswith(f"| {label} |")]
        r = run_study("collective", sizes=sizes, **inputs)
        assert r.inputs.runtime
        cells = [
            f"{human('time_s', p.time_s)}, {p.busbw_Bps / 1e9:.0f} GB/s ({p.algorithm})"
            for p in r.results.series
        ]
        assert line == f"| {label} | " + " | ".join(cells) + " |"


def test_the_64_rank_kangaring_table_in_the_docs_is_the_models():
    """docs/collectives.md's KangaRing against the rings of rings over the server's 64 ranks
    (`trnsim collective --ranks 64 --sizes 64MiB,512MiB,4GiB --algo ...`), recomputed; `auto`
    picks KangaRing at each of those sizes."""
    from pathlib import Path

    from tlm.studies import run_study
    from tlm.studies.units import human

    doc = (Path(__file__).resolve().parents[1] / "docs" / "collectives.md").read_text()
    sizes = "64MiB,512MiB,4GiB"
    for label, algo in (
        ("kangaring (auto from 56 MB)", "kangaring"),
        ("rings of rings (auto's pick before)", "rings"),
    ):
        (line,) = [x for x in doc.splitlines() if x.startswith(f"| {label} |")]
        r = run_study("collective", system="server", ranks=64, algo=algo, sizes=sizes)
        cells = [
            f"{human('time_s', p.time_s)}, {p.busbw_Bps / 1e9:.0f} GB/s" for p in r.results.series
        ]
        assert line == f"| {label} | " + " | ".join(cells) + " |"
    auto = run_study("collective", system="server", ranks=64, sizes=sizes).results.series
    assert {p.algorithm for p in auto} == {"kangaring"}
