"""Kernels shipped with the chip model: tiled GEMM, and softmax fused after a matmul."""

from .gemm import assemble, build_gemm, gemm, gemm_blocks

__all__ = ["gemm", "build_gemm", "gemm_blocks", "assemble"]
from .softmax import build_matmul_softmax, matmul_softmax, softmax_reference  # noqa: E402

__all__ += ["matmul_softmax", "build_matmul_softmax", "softmax_reference"]
