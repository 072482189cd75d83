"""``python -m ssdtwin.pts.report FOLDER [--pdf]``: re-render (or compare) report folders."""

import sys

from . import main

sys.exit(main())
