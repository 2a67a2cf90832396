"""Pieces every bench shares: the simulator runner with its work-arounds, and build caching."""
