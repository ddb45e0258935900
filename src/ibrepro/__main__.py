"""``python -m ibrepro``: the ``ibrepro`` command (:mod:`ibrepro.cli`), where the console script is not on PATH."""

import sys

from .cli import main

sys.exit(main())
