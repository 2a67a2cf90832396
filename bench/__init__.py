"""Benchmarks (``make bench``): figures printed as a table and written to build/bench/."""
