"""``python -m fedlib run PAPER ...`` and ``python -m fedlib show KEY``: see :mod:`fedlib.cli`."""

import sys

from .cli import main

sys.exit(main())
