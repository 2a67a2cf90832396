"""Systems as data: chips and directed links built from validated TOML presets.

See :mod:`tlm.system.graph` and ``docs/collectives.md`` ("Systems").

>>> from tlm.system import load_system
>>> load_system("ultraserver", chip="trn2").torus.shape
(4, 4, 4)
"""

from .graph import (
    KINDS,
    SYSTEMS,
    FlitLinks,
    Link,
    System,
    SystemSpecError,
    load_system,
    system_names,
)

__all__ = [
    "KINDS",
    "SYSTEMS",
    "FlitLinks",
    "Link",
    "System",
    "SystemSpecError",
    "load_system",
    "system_names",
]
