"""``trnsim`` studies: one protocol for every question the models answer.

Each study is an inputs type (validated where it enters, units in field names, defaults from a
preset), a function, and a results type; the command line is generated from the inputs type
(:mod:`tlm.studies.cli`) and every run has one JSON contract (:class:`Report`). See
``docs/studies.md``.

>>> from tlm.studies import STUDIES, run_study
>>> sorted(STUDIES)  # doctest: +NORMALIZE_WHITESPACE
['collective', 'compare', 'cost', 'gemm', 'infer', 'infer-search', 'model', 'noc', 'serve',
 'system', 'tensor', 'tp-step', 'train', 'train-search', 'validate']
"""

from .protocol import STUDIES, InputError, Inputs, Report, Results, Study, run_study

__all__ = ["STUDIES", "InputError", "Inputs", "Report", "Results", "Study", "run_study"]
