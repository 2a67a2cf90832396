"""Every ``trnsim`` study, registered in the order ``trnsim --help`` lists them.

A new study is a module of this package that defines its inputs, results and function and
calls :func:`~tlm.studies.protocol.register`; it is added to the imports below.
"""

from . import (  # noqa: F401
    collective,
    cost,
    gemm,
    infer,
    infer_search,
    model,
    noc,
    serve,
    tensor,
    tp_step,
    train,
    train_search,
    validate,
)

__all__: list[str] = []
