"""The model against published measurements: data files of what was measured (with sources)
and the code that runs the model on each row, fits the few named parameters on some rows and
reports the error of every row. ``trnsim validate`` is the front door.

* :mod:`~tlm.validation.collectives` - collective operations (nccom-test figures);
* :mod:`~tlm.validation.training` - training runs (Megatron-LM, Korthikanti et al., Llama 3);
* :mod:`~tlm.validation.inference` - inference latencies and throughputs;
* :mod:`~tlm.validation.row` - :class:`~tlm.validation.row.ValidationRow`, the row all three
  return.
"""
