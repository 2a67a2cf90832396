"""Formal properties of the RTL, checked with SymbiYosys (``make formal``; see
``docs/verification.md``).

One harness per property beside the RTL it checks (:mod:`.arbiter`, :mod:`.router`), an
exhaustive Python check of the routing function (:mod:`.deadlock`), the registry
(:mod:`.properties`), and the runner (:mod:`.sby`).
"""
