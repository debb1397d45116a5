"""The old home of the call context: `engine.context.RunContext` is now `CallContext`
(engine/runtime/context.py). Importing from here still works, with a DeprecationWarning."""

from __future__ import annotations

import warnings
from typing import Any

from .runtime import context as _context

_MOVED = {"RunContext": "CallContext", "CallContext": "CallContext", "SkillContext": "SkillContext"}


def __getattr__(name: str) -> Any:
    new = _MOVED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"engine.context.{name} is now engine.runtime.context.{new}", DeprecationWarning, stacklevel=2)
    return getattr(_context, new)
