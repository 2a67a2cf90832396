"""Kernels shipped with the chip model: tiled GEMM, and softmax fused after a matmul."""

from .gemm import assemble, build_gemm, gemm, gemm_blocks

__all__ = ["gemm", "build_gemm", "gemm_blocks", "assemble"]
