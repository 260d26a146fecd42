"""``python -m bmfdsl``: the ``bmfdsl`` command line."""

import sys

from bmfdsl.apps import main

sys.exit(main())
