"""Code coverage of the regression's benches: Verilator line, branch and toggle coverage,
mapped back to the Amaranth source lines through the ``src`` attributes Amaranth writes, and
reported per block (``make coverage-code``; ``python -m verif.coverage.code``).

:mod:`.targets` says what is measured, :mod:`.measure` builds and runs it, :mod:`.dat` reads
Verilator's ``coverage.dat``, :mod:`.srcmap` maps Verilog lines to Amaranth lines and
:mod:`.report` turns the points into figures.
"""
