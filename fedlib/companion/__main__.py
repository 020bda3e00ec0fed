"""``python -m fedlib.companion run PAPER ...`` and ``python -m fedlib.companion show KEY``: see
:mod:`fedlib.companion.cli`."""

import sys

from fedlib.companion.cli import main

sys.exit(main())
