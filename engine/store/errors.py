"""The run store's errors (engine/errors.py draws them in the one tree)."""

from __future__ import annotations

from ..errors import SkillyardError


class StoreError(SkillyardError):
    """The store cannot be opened or used; the message says why and what to do."""


class StoreUnavailable(SkillyardError):
    """Raised by a dialect's `write_rows` or `write_side` when its database cannot be reached:
    the writer keeps what it was writing, in order, and tries again (writer.py)."""
