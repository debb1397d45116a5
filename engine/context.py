"""The old home of a call's contexts: `RunContext` is now `CallContext` (engine/runtime/context.py),
and both contexts are exported by `engine`. Importing them from here still works for one release,
with a DeprecationWarning at the importing line that says what to write instead."""

from __future__ import annotations

import warnings
from typing import Any

_MOVED = {"RunContext": "CallContext", "SkillContext": "SkillContext"}  # old name → its name in `engine`


def __getattr__(name: str) -> Any:
    new = _MOVED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"engine.context.{name} moved: write `from engine import {new}` (engine.context goes away in the "
                  "next release)", DeprecationWarning, stacklevel=2)
    from .runtime import context

    return getattr(context, new)
