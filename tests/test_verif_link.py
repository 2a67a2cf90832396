"""Entry points of the router and network cocotb benches: one router on Icarus (every port
pair and VC, backpressure on every output), the 4x4 server torus on Icarus, the 4x4x4
UltraServer on Verilator (saturation run in the slow tier), and an all-gather carrying real
bytes through the 4x4 torus on Icarus (the lowest rung of the collectives' ladder)."""

import pytest

from tlm.link.config import LinkConfig
from verif.common.runner import ROOT, run
from verif.common.toolchain import have_simulator
from verif.link.build import build_link
from verif.link.run import rerun


def run_bench(sim, block, cfg, module, seed, tag, testcase=None, **env):
    if not have_simulator(sim):
        pytest.fail(f"{sim} is not installed: run `make setup`")
    simbuild = build_link(sim, block, cfg)
    again = rerun(sim, block, cfg, seed, testcase, env)
    env = {
        "LINK_SHAPE": cfg.torus.name,
        "LINK_VCS": cfg.vcs,
        "LINK_DEPTH": cfg.depth,
        "SEED": seed,
        "PYTHONPATH": ROOT,
    } | env
    test_dir = simbuild.build_dir / f"run-{tag}-{seed}"
    run(simbuild, module, env=env, test_dir=test_dir, testcase=testcase, rerun=again)


@pytest.mark.sim
def test_router_icarus(seed):
    """Directed and random traffic, under full rate, idle inputs and slow neighbours (every
    send:ready:credit pattern at least once: router.patterns coverage)."""
    cfg = LinkConfig((4, 4), depth=2)
    patterns = (
        "always:always:always,random:random:random,always:1of4:1of4,"
        "3of4:1of2:1of2,1of2:3of4:3of4,1of4:always:always"
    )
    run_bench(
        "icarus",
        "link_router",
        cfg,
        "verif.link.bench_router",
        seed,
        "router",
        testcase="lockstep",
        LINK_COORD="1,2",
        LINK_PACKETS=8,
        LINK_PATTERNS=patterns,
    )


@pytest.mark.sim
@pytest.mark.parametrize("rogue", [1, 2, 3, 4])
def test_router_link_misuse_icarus(rogue, seed):
    """The neighbour on link port ``rogue`` (x+, x-, y+, y-) sends without credits, neighbours
    return credits not owed: flits and credits dropped and counted as the model does, the
    other inputs' packets all get through. Every port: each input VC has its own buffer-full
    check (a mutant disabling the y- port's, with only x- rogue, survived ``make mutate``)."""
    run_bench(
        "icarus",
        "link_router",
        LinkConfig((4, 4), depth=2),
        "verif.link.bench_router",
        seed,
        f"router-misuse-{rogue}",
        testcase="misuse",
        LINK_COORD="1,2",
        LINK_PACKETS=12,
        LINK_PATTERNS="always:random:1of4",
        LINK_ROGUE=rogue,
        LINK_SPURIOUS=0.05,
    )


@pytest.mark.sim
def test_server_4x4_icarus(seed):
    """The 4x4 torus: uniform traffic with malformed packets, then backpressure (every
    inject:eject pattern at least once: torus.patterns coverage)."""
    cfg = LinkConfig((4, 4))
    run_bench(
        "icarus",
        "torus",
        cfg,
        "verif.link.bench_network",
        seed,
        "4x4",
        testcase="traffic",
        LINK_PACKETS=12,
        LINK_PATTERNS="always:always,random:1of4,3of4:random,1of2:3of4,1of4:1of2",
    )


@pytest.mark.sim
def test_server_drop_in_last_cycle_icarus(seed):
    """The 4x4 torus with malformed packets only: the run ends in the cycle of the last drop,
    and the counters read after it hold every drop (the bench once read them a cycle early)."""
    run_bench(
        "icarus",
        "torus",
        LinkConfig((4, 4)),
        "verif.link.bench_network",
        seed,
        "4x4-last-drop",
        testcase="last_cycle_drop",
    )


@pytest.mark.sim
def test_server_saturation_icarus(seed):
    """Every node of the 4x4 torus sends back to back (offered load 1, about twice the
    saturation load) for thousands of cycles: no deadlock, every packet on time."""
    cfg = LinkConfig((4, 4))
    run_bench(
        "icarus",
        "torus",
        cfg,
        "verif.link.bench_network",
        seed,
        "4x4-sat",
        testcase="traffic",
        LINK_PACKETS=500,
        LINK_TRAFFIC="uniform",
        LINK_PATTERNS="always:always",
        LINK_MALFORMED=0,
    )


@pytest.mark.sim
def test_ultraserver_4x4x4_verilator(seed):
    """The 4x4x4 torus: uniform and transpose traffic, sources and sinks at random."""
    cfg = LinkConfig((4, 4, 4))
    run_bench(
        "verilator",
        "torus",
        cfg,
        "verif.link.bench_network",
        seed,
        "4x4x4",
        testcase="traffic",
        LINK_PACKETS=10,
        LINK_PATTERNS="always:always,random:3of4",
    )


def saturate_ultraserver(traffic, packets, seed):
    """Every node sends back to back (offered load 1, about twice saturation) for thousands
    of cycles; all packets arrive, at the cycles the model predicts, and the network drains."""
    cfg = LinkConfig((4, 4, 4))
    run_bench(
        "verilator",
        "torus",
        cfg,
        "verif.link.bench_network",
        seed,
        f"sat-{traffic}",
        testcase="traffic",
        LINK_PACKETS=packets,
        LINK_TRAFFIC=traffic,
        LINK_PATTERNS="always:always",
        LINK_MALFORMED=0,
    )


@pytest.mark.sim
def test_ultraserver_saturation_verilator(seed):
    """Uniform traffic at offered load 1 for about 2,400 cycles."""
    saturate_ultraserver("uniform", 400, seed)


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.parametrize("traffic", ["uniform", "transpose", "hotspot"])
def test_ultraserver_saturation_long_verilator(traffic, seed):
    """Uniform and transpose for about 3,500 cycles, hotspot for about 21,000."""
    saturate_ultraserver(traffic, 600, seed)


@pytest.mark.sim
@pytest.mark.parametrize(
    "algo,fmt",
    [("ring", "bf16"), ("kangaring", "fp8_e4m3"), ("rdh", "fp32"), ("mesh", "bf16")],
)
def test_all_gather_4x4_icarus(algo, fmt, seed):
    """An all-gather's packets carry the chunk bytes through the RTL torus, in lockstep with
    the model, at full rate and under idle sources and slow sinks; every rank's result equals
    the values engine's bit for bit. 13 elements per rank: uneven KangaRing sub-chunks, partial
    packets (bf16: 26 bytes, fp8: 13, fp32: 52 per block; 21 bytes fill a packet)."""
    run_bench(
        "icarus",
        "torus",
        LinkConfig((4, 4)),
        "verif.link.bench_collective",
        seed,
        f"all-gather-{algo}",
        COLL_ALGO=algo,
        COLL_FORMAT=fmt,
        COLL_COUNT=16 * 13,
        LINK_PATTERNS="always:always,random:1of4",
    )


@pytest.mark.sim
@pytest.mark.slow
def test_all_gather_4x4_verilator(seed):
    """The ring all-gather on Verilator: the bench does not depend on Icarus."""
    run_bench(
        "verilator",
        "torus",
        LinkConfig((4, 4)),
        "verif.link.bench_collective",
        seed,
        "all-gather-ring",
        COLL_ALGO="ring",
        LINK_PATTERNS="always:always,random:1of4",
    )


@pytest.mark.parametrize("block", ["link_router", "torus"])
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_the_save_file_decodes_flits_into_wires_the_design_has(block, sim, tmp_path):
    """``make sim-link WAVES=1``'s save file shows each flit port of the router (router 0 of a
    torus) decoded into kind, VC, destination, source, length, sequence and data, and each drop
    counter by its kind - every one a wire of the generated Verilog (the dump holds them:
    ``tests/test_verif_link_run.py`` runs the benches with waves)."""
    import re

    from verif.link.build import link_verilog
    from verif.link.run import write_gtkw

    cfg = LinkConfig((4, 4))
    save = write_gtkw(block, cfg, tmp_path / "dump.fst", tmp_path / "s.gtkw", sim)
    traces = [t for t in save.read_text().splitlines() if re.search(r"_flit\.|\.?drops_", t)]
    wires = set()
    for line in link_verilog(block, cfg).read_text().splitlines():
        hit = re.match(r"\s*(?:wire|reg)\s+(?:\[\d+:\d+\]\s+)?(\\\S+|\w+)", line)
        if hit:
            wires.add(hit.group(1).lstrip("\\"))
    fields = [t for t in traces if "_flit." in t]
    assert len(fields) == 9 * (2 + 2 * 4)  # 9 fields of inject, eject, 4 link inputs, 4 outputs
    assert sum("drops_" in t for t in traces) == 5
    for trace in traces:
        name = re.sub(r"\[\d+:0\]$", "", trace.split(".", 1)[1])  # below the top, no range
        name = name.removeprefix("router0.")
        assert name.lstrip("\\") in wires, trace


def test_contention_pairs_wrap_the_arbiters():
    """RouterEnv's contention rounds (the first triple of the router bench): on the model, at
    full rate, every output's round-robin pointer wraps with exactly two requesters asking for
    all pairs but those of two VCs of one link port (their flits arrive one a cycle). An
    arbiter bug that needs few requesters asking (a prefix OR missing a term) shows there."""
    from itertools import combinations

    import numpy as np

    from tlm.link.router import Router
    from verif.link.router_env import RouterEnv

    cfg, coord = LinkConfig((4, 4), depth=2), (1, 2)
    model = Router(cfg, coord)
    wraps = set()
    arbitrate = model._arbitrate

    def watch(port, asking):
        pair = tuple(sorted({r for r, _ in asking}))
        if len(pair) == 2 and model.rr[port] == (pair[1] + 1) % cfg.requesters:
            wraps.add((port, pair))
        return arbitrate(port, asking)

    model._arbitrate = watch
    rng = np.random.default_rng(1)
    env = RouterEnv(
        cfg, coord, rng, 2, send="always", ready="always", credit="always", contention=True
    )
    idle = 0
    while idle < 30:
        ins = env.drive()
        env.observe(model.outputs(), ins)
        model.step(**ins.kwargs())
        idle = idle + 1 if env.idle else 0
    env.check_delivered()
    same_port = {(r, r + 1) for r in range(1, cfg.requesters, cfg.vcs)}
    pairs = set(combinations(range(cfg.requesters), 2)) - same_port
    assert {(o, p) for o in range(cfg.ports) for p in pairs} <= wraps


def test_handover_rounds_pass_every_output_vc_on():
    """RouterEnv's hand-over rounds (the first triple of the router bench): on the model, at
    full rate, for every output VC and every two requesters but two VCs of one link port, each
    one's single and tail is granted with the other granted the next cycle on the same output
    VC. The router keeps each requester's view of the output VCs (busy, credits) apart: a
    term missing from one requester's view after another's grant (``make mutate`` seed 1,
    router_4x4 m022 and m023) shows only there."""
    from itertools import permutations

    import numpy as np

    from tlm.link.flit import FlitKind
    from tlm.link.router import Router
    from verif.link.router_env import RouterEnv

    cfg, coord = LinkConfig((4, 4), depth=2), (1, 2)
    model = Router(cfg, coord)
    granted = []
    grant = model._grant

    def watch(r, port, vc, nxt, info):
        granted.append((port, vc, r, cfg.fmt.kind(model.fifo[r][0])))
        return grant(r, port, vc, nxt, info)

    model._grant = watch
    rng = np.random.default_rng(1)
    env = RouterEnv(
        cfg, coord, rng, 0, send="always", ready="always", credit="always", handover=True
    )
    handed, before, idle = set(), {}, 0
    while idle < 30:
        ins = env.drive()
        env.observe(model.outputs(), ins)
        granted.clear()
        model.step(**ins.kwargs())
        now = {(port, vc): (r, kind) for port, vc, r, kind in granted}
        for (port, vc), (r, _) in now.items():
            if (port, vc) in before and before[port, vc][0] != r:
                handed.add((port, vc, before[port, vc][0], r, before[port, vc][1]))
        before = now
        idle = idle + 1 if env.idle else 0
    env.check_delivered()
    port_of = [0] + [cfg.requester_link(r)[0] for r in range(1, cfg.requesters)]
    pairs = [(a, b) for a, b in permutations(range(cfg.requesters), 2) if port_of[a] != port_of[b]]
    vcs = [(0, 0)] + [(o, vc) for o in range(1, cfg.ports) for vc in range(cfg.vcs)]
    kinds = (FlitKind.SINGLE, FlitKind.TAIL)
    assert {(o, vc, a, b, k) for o, vc in vcs for a, b in pairs for k in kinds} <= handed
