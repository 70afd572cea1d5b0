"""``python -m icefloe.cli``: the ``icefloe`` command."""

import sys

from icefloe.cli import main

sys.exit(main())
