"""Tensor engine verification: random stimulus, a lockstep scoreboard fed by the TLM, and the
cocotb bench (``bench.py``)."""
