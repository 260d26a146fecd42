"""``python -m bmfdsl``: the ``bmfdsl`` command line."""

import sys

from bmfdsl.cli import main

sys.exit(main())
