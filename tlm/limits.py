"""The largest values the studies and models take: one definition, shared by the front door
(:mod:`tlm.studies.protocol` checks its inputs against them) and the models that draw or take
lengths themselves (:mod:`tlm.inference.serving.requests`). Each keeps products of counts exact
in a float and within an int64, and allocations within what a machine holds."""

#: The most chips (and so the largest parallel size) a study takes: 10 million.
MAX_CHIPS = 10_000_000
#: The largest other count a study takes (sequences, tokens, cycles, steps): a billion, so that
#: products of counts stay exact in a float and within an int64.
MAX_COUNT = 1_000_000_000
#: The most tokens of a request's prompt or output: a million.
MAX_REQUEST_TOKENS = 1_000_000
#: The largest side of a GEMM a study takes: 2^24 (one 2^24 x 2^24 BF16 operand is 512 TiB;
#: the HBM refuses far smaller ones).
MAX_GEMM_SIZE = 1 << 24
#: The largest byte count a study takes for one chip (a reserve, a buffer): 2^50, a pebibyte.
MAX_BYTES = 1 << 50
