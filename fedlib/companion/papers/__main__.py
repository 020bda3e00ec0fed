import sys

from fedlib.companion.papers import main

sys.exit(main())
