import sys

from .studies.cli import main

sys.exit(main())
