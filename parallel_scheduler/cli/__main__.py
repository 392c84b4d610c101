"""``python -m parallel_scheduler.cli``, the same as the ``parallel-scheduler`` command."""

import sys

from . import main

sys.exit(main())
