"""`python -m engine.server serve|mcp …`: the same commands as `skillyard serve|mcp`."""

import sys

from ..cli.serve import main

sys.exit(main())
