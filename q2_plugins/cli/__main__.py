"""``python -m q2_plugins.cli``: the ``q2`` command."""

import sys

from q2_plugins.cli import main

sys.exit(main())
