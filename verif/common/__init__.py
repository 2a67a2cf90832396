"""Pieces every bench shares: the simulator runner with its work-arounds, build caching, stream
patterns, and what the one-run commands share (``run.py``)."""
