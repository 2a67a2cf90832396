"""Mutation grading of the benches (``make mutate``): Yosys's ``mutate`` pass plants faults in
the Verilog a bench builds, every bench runs on each mutant, survivors are checked for
equivalence or classified (``survivors.toml``). See docs/verification.md, "Mutation grading".

- :mod:`.yosys`: the design as RTLIL, the sample, a mutant's Verilog (with or without initial
  values), a register's reset taken away, the cut-point equivalence check.
- :mod:`.targets`: the blocks, configurations and benches graded.
- :mod:`.grade`: one mutant under every bench; a target's sample.
- :mod:`.survivors`, :mod:`.report`: classified survivors; the summary and Markdown.
"""
