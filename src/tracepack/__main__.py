"""``python -m tracepack``: the same as the ``tracepack`` command."""

import sys

from tracepack.cli import main

sys.exit(main())
