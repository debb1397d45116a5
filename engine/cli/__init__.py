"""Command-line front doors: `run-workflow` and `skillyard`."""
