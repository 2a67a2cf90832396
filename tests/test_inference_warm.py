"""The cache warm-up ``make setup`` runs (tlm.inference.warm): which layouts it builds, and that
a fresh process afterwards finds them on disk - no hardware file parsed, no operator costs or
collective closed forms worked out for a warmed layout's first request."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tlm.inference.layout import as_hardware
from tlm.inference.warm import _layouts, warm

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, sys
from tlm.cluster import hardware, network
from tlm.costs import OpCosts
from tlm.inference import estimate
from tlm.inference.warm import warm

work = {"closed forms": 0, "hardware files": 0, "costs": 0}

def counting(owner, name, what):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        work[what] += 1
        return original(*args, **kwargs)
    setattr(owner, name, wrapper)

counting(network.Network, "_up_phase", "closed forms")
counting(hardware, "_load_hardware", "hardware files")
counting(OpCosts, "for_hardware", "costs")
if sys.argv[1] == "warm":
    print(json.dumps({"built": warm(hardware=("h100",), models=("llama3-8b", "mixtral-8x7b"))}))
else:
    r = estimate(**json.loads(sys.argv[1]))
    print(json.dumps({"work": work, "ttft_s": r.ttft_s}))
"""


def _child(folder, arg: str) -> dict:
    env = dict(os.environ, TRNSIM_CACHE_DIR=str(folder))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, arg], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_layouts_warmed_are_every_tp_the_model_allows():
    """h100 (a server of 8, no larger scale-up domain): Llama 3 8B at tp 1, 2, 4, 8; Mixtral
    8x7B (8 experts, 8 KV heads) with its experts whole (ep 1) and split over the group (ep =
    tp). trn2 adds the UltraServer."""
    h100 = as_hardware("h100")
    dense = [(s, tp, ep) for s, _, tp, ep in _layouts(h100, ("llama3-8b",))]
    assert dense == [("server", tp, 1) for tp in (1, 2, 4, 8)]
    moe = {(tp, ep) for _, _, tp, ep in _layouts(h100, ("mixtral-8x7b",))}
    assert {(1, 1), (2, 2), (8, 8), (8, 1)} <= moe
    assert all(ep in (1, tp) for tp, ep in moe)
    trn2 = {s for s, *_ in _layouts(as_hardware("trn2"), ("llama3-8b",))}
    assert trn2 == {"server", "ultraserver"}


def test_with_the_cache_off_it_only_counts():
    from tlm import diskcache

    with diskcache.cache_dir("off"):
        assert warm(hardware=("h100",), models=("llama3-8b",)) == 16  # 4 tp x 2 x 2 formats


def test_a_fresh_process_after_the_warm_up_builds_nothing(tmp_path):
    """After the warm-up, a first ``estimate`` of a warmed layout at a request of its own in a
    fresh process parses no hardware file and works out no operator costs or closed forms;
    with the cache empty the same call does all three (the check can fail)."""
    built = _child(tmp_path / "warm", "warm")["built"]
    assert built > 16
    request = dict(model="llama3-8b", hardware="h100", system="server", tp=4, fmt="fp8")
    request |= dict(prompt=1000, output=100)
    warmed = _child(tmp_path / "warm", json.dumps(request))
    assert warmed["work"] == {"closed forms": 0, "hardware files": 0, "costs": 0}
    empty = _child(tmp_path / "empty", json.dumps(request))
    assert all(n > 0 for n in empty["work"].values()), empty["work"]
    assert warmed["ttft_s"] == empty["ttft_s"]  # the same figures, loaded or built
