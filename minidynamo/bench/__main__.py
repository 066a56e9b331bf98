"""``python -m minidynamo.bench [...]``: the benchmark's command line (the driver is ``bench/__init__.py``)."""

import sys

from minidynamo.bench import main

sys.exit(main())
