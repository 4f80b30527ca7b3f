"""``python -m cebroker`` runs the command line."""

import sys

from cebroker.cli import main

sys.exit(main())
