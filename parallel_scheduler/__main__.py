"""``python -m parallel_scheduler``, the same as the ``parallel-scheduler`` command."""

import sys

from parallel_scheduler.cli import main

sys.exit(main())
