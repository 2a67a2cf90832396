"""The cluster model against the server TLM on a case both run: a tensor-parallel layer's
row-parallel GEMM and the all-reduce of its partial sums on 16 trn2 chips.

The cluster model prices it with the pieces :func:`tlm.cluster.training.training_step` adds up
- the GEMM of one chip's share on the operator costs (``OpCosts.for_preset("trn2")``, the
chip TLM's calibration) and the all-reduce of the output on the network
(``Network.for_hardware(trn2)``: tp 16 at stride 1 is the 4x4 server plane of the UltraServer)
- and ``trnsim tp-step`` runs every chip's GEMM on the chip model and the all-reduce on the
collective flow model in one simulation sharing HBM (GEMM first, then the all-reduce: one
block), with the algorithm the network chose. Tolerance 5 %: what the cluster model leaves out
is the all-reduce's HBM traffic contending with nothing else (the GEMM is done), a few percent
at most where DMA reads and writes slow the link transfers.
"""

import pytest

from tlm.cluster.network import Network
from tlm.costs import OpCosts
from tlm.hardware import load_hardware
from tlm.studies import run_study

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

TOLERANCE = 0.05


@pytest.mark.parametrize("m,n,k", [(256, 1024, 8192), (1024, 4096, 8192)])
def test_tensor_parallel_layer_on_16_chips_matches_the_server_tlm(m, n, k):
    costs = OpCosts.for_preset("trn2")
    network = Network.for_hardware(load_hardware("trn2"))
    nbytes = m * n * 2  # bf16 partial sums
    algo = str(network.algorithm("all_reduce", 16, 1, nbytes))
    gemm = float(costs.gemm_s(m, n, k // 16))
    reduce = float(network.collective_s("all_reduce", 16, 1, nbytes))
    tlm = run_study(
        "tp-step", m=m, n=n, k=k, values=False, system="server", algo=algo, format="bf16"
    ).results
    print(f"{m}x{n}x{k} {algo}: cluster {gemm + reduce:.4g} s, tp-step {tlm.step_s:.4g} s")
    assert gemm == pytest.approx(tlm.gemm_alone_s, rel=TOLERANCE)
    assert reduce == pytest.approx(tlm.all_reduce_alone_s, rel=TOLERANCE)
    assert gemm + reduce == pytest.approx(tlm.step_s, rel=TOLERANCE)
