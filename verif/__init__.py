"""Verification: stimulus, scoreboards and cocotb benches, one folder per unit."""
