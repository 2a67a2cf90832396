"""Functional coverage of the benches (cocotb-coverage), sampled where the scoreboards and
monitors already look, merged across runs and reported per item of ``verif/testplan.toml``
(``make coverage``; ``python -m verif.coverage``)."""
