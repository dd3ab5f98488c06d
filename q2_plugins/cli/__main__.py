"""``python -m q2_plugins.cli``: the ``q2`` command."""

import sys

from . import main

sys.exit(main())
