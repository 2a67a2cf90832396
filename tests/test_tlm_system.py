"""Systems as data: presets validate, every figure has a source, links and routes are right."""

import tomllib
from itertools import product
from pathlib import Path

import pytest

from tlm.link.routing import route
from tlm.link.topology import Torus, port_name
from tlm.system import SYSTEMS, SystemSpecError, load_system
from tlm.system.schema import SystemFile

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", SYSTEMS)
def test_every_figure_has_a_source(name):
    system = load_system(name)
    figures = system.file.figures()
    assert figures
    for where, figure in figures.items():
        keys = figure.source.split()
        assert keys and all(k in system.file.sources for k in keys), where


def test_trn2_server_is_a_4x4_torus_at_the_assumed_rates():
    s = load_system("server", chip="trn2")
    assert s.name == "trn2-server" and s.chips == 16 and s.torus == Torus((4, 4))
    assert len(s.links) == 64 and {link.bandwidth_Bps for link in s.links} == {256e9}
    out_of = [sum(link.bandwidth_Bps for link in s.links if link.src == c) for c in range(16)]
    assert out_of == [1024e9] * 16  # TRN2: 1024 GB/s per chip inside the server


def test_ultraserver_z_at_the_inter_server_rate():
    s = load_system("ultraserver")
    assert s.torus.shape == (4, 4, 4) and s.chips == 64 and len(s.links) == 64 * 6
    z = [link for link in s.links if link.name.endswith(("z+", "z-"))]
    assert len(z) == 128 and {link.bandwidth_Bps for link in z} == {128e9}
    z_out = [sum(link.bandwidth_Bps for link in z if link.src == c) for c in range(64)]
    assert z_out == [256e9] * 64  # TRN2: 256 GB/s inter-server per chip


@pytest.mark.parametrize("name", ["trn1-server", "trn2-server", "trn2-ultraserver"])
def test_flit_figures_match_every_link(name):
    """bytes_per_flit x clock_hz / interval of the link's dimension is its bandwidth."""
    s = load_system(name)
    f = s.flit
    assert (f.bytes_per_flit, f.max_packet_flits) == (64, 16)
    assert f.interval == ((1, 1, 2) if s.torus.dims == 3 else (1, 1))
    for link in s.links:
        d = "xyz".index(link.name.split()[-1][0])
        assert f.bytes_per_flit * f.clock_hz / f.interval[d] == link.bandwidth_Bps
    assert load_system("trn3-ultraserver").flit is None


def test_trn3_switch_and_trn1():
    s = load_system("ultraserver", chip="trn3")
    assert s.torus is None and s.chips == 64 and len(s.links) == 128
    assert [s.links[i].name for i in s.path(3, 40)] == ["chip 3 up", "chip 40 down"]
    assert load_system("server", chip="trn1").links[0].bandwidth_Bps == 96e9


def test_trn3_gen2_two_levels_of_switch():
    """144 chips in servers of 4: a server's chips meet at its first-level switch, other
    servers' through the spine the destination's local number picks."""
    s = load_system("ultraserver-gen2", chip="trn3")
    assert s.torus is None and s.chips == 144
    assert len(s.links) == 2 * 144 + 2 * 36 * 2  # chip up/down, leaf-spine up/down
    assert s.vertices[144] == "switch 0.0" and s.vertices[-1] == "spine switch 0.1"
    assert [s.links[i].name for i in s.path(1, 3)] == ["chip 1 up", "chip 3 down"]
    assert [s.links[i].name for i in s.path(0, 5)] == [
        "chip 0 up",
        "switch 0.0 to spine 1 up",
        "switch 0.1 to spine 1 down",
        "chip 5 down",
    ]
    assert [s.links[i].name for i in s.path(7, 140)][1] == "switch 0.1 to spine 0 up"
    for a, b in product(range(0, 144, 7), range(0, 144, 5)):  # chains from a to b
        here = a
        for i in s.path(a, b):
            assert s.links[i].src == here
            here = s.links[i].dst
        assert here == b
    up = [ln for ln in s.links if ln.name.endswith("to spine 0 up")]
    assert len(up) == 36 and up[0].bandwidth_Bps == 5.12e12  # 4 x 2.56 TB/s over 2 spines
    two = load_system("2xtrn3-ultraserver-gen2")  # nodes joined by EFA keep their own tiers
    assert two.chips == 288 and [two.links[i].name for i in two.path(144, 149)][1] == (
        "switch 1.0 to spine 1 up"
    )


@pytest.mark.parametrize("name", ["trn2-server", "trn2-ultraserver"])
def test_routes_follow_tlm_link_routing(name):
    """Each route is a chain of links from source to destination, of minimal length."""
    s = load_system(name)
    for a, b in product(range(s.chips), repeat=2):
        path = s.path(a, b)
        assert len(path) == s.torus.hops(s.torus.coord(a), s.torus.coord(b))
        here = a
        for i in path:
            assert s.links[i].src == here
            here = s.links[i].dst
        assert here == b


@pytest.mark.parametrize("name", ["trn2-server", "trn2-ultraserver"])
def test_routes_take_route_s_port_at_every_router(name):
    """Each route's links are the ports :func:`tlm.link.routing.route` gives router by router
    (the routes are worked out once per displacement: the ports depend on the coordinates
    only through their differences)."""
    s = load_system(name)
    t = s.torus
    for a, b in product(range(s.chips), repeat=2):
        here, ports = t.coord(a), []
        while (port := route(t.shape, here, t.coord(a), t.coord(b))[0]) != 0:
            ports.append((t.node(here), port))
            here = t.neighbour(here, port)
        got = [(s.links[i].src, s.links[i].name.split()[-1]) for i in s.path(a, b)]
        assert got == [(chip, port_name(port)) for chip, port in ports], (a, b)


def test_nodes_joined_by_efa_with_oversubscription(tmp_path):
    s = load_system("3xserver")
    assert s.chips == 48 and s.nodes == 3
    path = s.path(5, 40)
    assert [s.links[i].name for i in path] == [
        "chip 5 efa up",
        "leaf 0 up",
        "leaf 2 down",
        "chip 40 efa down",
    ]
    assert s.links[path[0]].bandwidth_Bps == 25e9
    assert s.links[path[1]].bandwidth_Bps == 16 * 25e9
    assert sum(s.links[i].latency_s for i in path) == pytest.approx(15e-6)  # CC: about 15 us
    raw = tomllib.loads((ROOT / "tlm/system/trn2-server.toml").read_text())
    raw["efa"]["oversubscription"]["value"] = 4.0
    path_file = tmp_path / "over.toml"
    path_file.write_text(_dump(raw))
    over = load_system(f"2x{path_file}")
    up = [link for link in over.links if link.name == "leaf 0 up"]
    assert up[0].bandwidth_Bps == 16 * 25e9 / 4


def _dump(data, prefix="") -> str:
    """A small TOML writer for the test's edited preset (tables, arrays of tables, values)."""
    import json

    lines, tables = [], []
    for key, value in data.items():
        if isinstance(value, dict) and not ({"value", "source"} <= set(value)):
            tables.append((key, value))
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            tables.append((key, value))
        elif isinstance(value, dict):
            inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    for key, value in tables:
        name = f"{prefix}{key}"
        if isinstance(value, list):
            for item in value:
                lines += [f"[[{name}]]", _dump(item, name + ".")]
        else:
            lines += [f"[{name}]", _dump(value, name + ".")]
    return "\n".join(lines)


SWITCH = {
    "chips": {"value": 16, "source": "ASSUMED"},
    "port_bandwidth_Bps": {"value": 1e12, "source": "ASSUMED"},
    "latency_s": {"value": 1e-7, "source": "ASSUMED"},
}
TIER = {
    "leaf_chips": {"value": 5, "source": "ASSUMED"},
    "spines": {"value": 2, "source": "ASSUMED"},
    "uplink_bandwidth_Bps": {"value": 1e12, "source": "ASSUMED"},
    "uplink_latency_s": {"value": 1e-7, "source": "ASSUMED"},
}

BAD_SPECS = [
    ("foo", "system must be one of server, ultraserver, ultraserver-gen2 (of the chip preset)"),
    ("1xserver", "system must be one of server"),
    ("2000xserver", "system must be one of server"),
    ("/no/such.toml", "/no/such.toml: cannot be read (No such file or directory)"),
]


@pytest.mark.parametrize("spec,start", BAD_SPECS)
def test_bad_system_names(spec, start):
    with pytest.raises(SystemSpecError) as info:
        load_system(spec)
    assert str(info.value).startswith(start)


def test_chip_must_match():
    message = r"of trn2 chips \(the chip preset\), not 'trn1-server'"
    with pytest.raises(SystemSpecError, match=message):
        load_system("trn1-server", chip="trn2")
    with pytest.raises(SystemSpecError, match="one of server for chip trn1"):
        load_system("ultraserver", chip="trn1")


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d["torus"]["dimension"].pop(), "one table per ring of shape [4, 4], not 1"),
        (
            lambda d: d["torus"]["dimension"][0]["bandwidth_Bps"].update(value=0),
            "bandwidth_Bps must be a number > 0, not 0",
        ),
        (
            lambda d: d["efa"]["oversubscription"].update(value=0.5),
            "oversubscription must be a number >= 1, not 0.5",
        ),
        (lambda d: d["efa"]["nic_bandwidth_Bps"].update(source="NOPE"), "cites source 'NOPE'"),
        (lambda d: d.update(switch=SWITCH), "exactly one of [torus] and [switch]"),
        (lambda d: d.update(chip="trn9"), "Input should be 'trn1', 'trn2' or 'trn3'"),
        (
            lambda d: d["flit"]["clock_hz"].update(value=3e9),
            "bad.toml: flit.bytes_per_flit x flit.clock_hz (1.92e+11 B/s) must equal "
            "torus.dimension.0.bandwidth_Bps (2.56e+11 B/s) times a whole number of cycles per "
            "flit (1 at the full flit rate), not 0.75 times: change one of them",
        ),
        (
            lambda d: d["torus"]["dimension"][1]["bandwidth_Bps"].update(value=100e9),
            "torus.dimension.1.bandwidth_Bps (1e+11 B/s) times a whole number of cycles per "
            "flit (1 at the full flit rate), not 2.56 times",
        ),
        (
            lambda d: d["flit"]["max_packet_flits"].update(value=12),
            "max_packet_flits must be a power of two in 2..64 (the length field's range), not 12",
        ),
        (
            lambda d: d["flit"]["bytes_per_flit"].update(value=0.5),
            "bytes_per_flit must be an integer >= 1, not 0.5",
        ),
        (
            lambda d: (d.pop("torus"), d.update(switch=SWITCH)),
            "[flit] describes torus links: a system with [switch] has none",
        ),
        (
            lambda d: (
                d.pop("torus"),
                d.pop("flit"),
                d.update(switch={**SWITCH, "leaf_chips": {"value": 4, "source": "ASSUMED"}}),
            ),
            "a two-level switch needs all of leaf_chips, spines, uplink_bandwidth_Bps, "
            "uplink_latency_s; missing spines, uplink_bandwidth_Bps, uplink_latency_s",
        ),
        (
            lambda d: (d.pop("torus"), d.pop("flit"), d.update(switch={**SWITCH, **TIER})),
            "leaf_chips must divide chips (16), not 5",
        ),
    ],
)
def test_bad_system_files(edit, message, tmp_path):
    raw = tomllib.loads((ROOT / "tlm/system/trn2-server.toml").read_text())
    edit(raw)
    path = tmp_path / "bad.toml"
    path.write_text(_dump(raw))
    with pytest.raises(SystemSpecError) as info:
        load_system(str(path))
    assert message in str(info.value)
    assert SystemFile  # the schema the file is checked against


def test_user_system_file_round_trips(tmp_path):
    raw = tomllib.loads((ROOT / "tlm/system/trn2-server.toml").read_text())
    path = tmp_path / "mine.toml"
    path.write_text(_dump(raw))
    assert load_system(str(path)).links == load_system("trn2-server").links


def test_failed_links_and_detours():
    server = load_system("trn2-server")
    failed = server.without([(1, 0), (5, 9)])
    assert failed.failed == ((0, 1), (5, 9)) and len(failed.links) == 60
    assert failed.name == "trn2-server without 0-1, 5-9"
    for a in range(16):
        for b in range(16):
            path = failed.path(a, b)
            assert len(path) >= server.hops(a, b)
            ends = [(failed.links[i].src, failed.links[i].dst) for i in path]
            assert all(e not in {(0, 1), (1, 0), (5, 9), (9, 5)} for e in ends)
            if path:  # a connected walk from a to b
                assert ends[0][0] == a and ends[-1][1] == b
                assert all(x[1] == y[0] for x, y in zip(ends, ends[1:], strict=False))
            names = [failed.links[i].name for i in path]
            assert failed.detoured(a, b) == (
                names != [server.links[i].name for i in server.path(a, b)]
            )
    with pytest.raises(SystemSpecError, match="two chips joined by a link .* not 0-2"):
        server.without([(0, 2)])
    with pytest.raises(SystemSpecError, match="chip must be an integer in 0..15, not 16"):
        server.without([(0, 16)])
    with pytest.raises(SystemSpecError, match="meet at a switch"):
        load_system("trn3-ultraserver").without([(0, 1)])
    cut = server.without([(0, 1), (0, 3), (0, 4), (0, 12)])
    with pytest.raises(SystemSpecError, match="cut chip 1 off from chip 0"):
        cut.path(0, 1)


def test_shift_is_a_symmetry():
    for name in ("trn2-server", "trn2-ultraserver", "3xtrn2-server", "trn3-ultraserver"):
        s = load_system(name)
        for to in (1, s.chips // 2 + 3, s.chips - 1):
            image = [s.shift(c, 0, to) for c in range(s.chips)]
            assert sorted(image) == list(range(s.chips)) and image[0] == to
            for a, b in ((0, 1), (2, s.chips - 1), (5, 7)):  # routes keep their length
                assert s.hops(image[a], image[b]) == s.hops(a, b)
