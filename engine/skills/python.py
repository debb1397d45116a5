"""Python skills: `function: package.module:name`, sync or async.

The function is called directly (no wrapper on the per-call path); when it raises, the
workflow executor turns the exception into an error whose details are the user's frames
(`engine.safety.user_frames`), with `user_roots` saying where the user's package lives.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable

from ..runtime.context import SkillContext
from ..runtime.contracts import Skill
from ..runtime.timing import PLAIN_TYPES
from ..safety.user_frames import package_root


class PythonSkill(Skill):
    kind = "python"

    def __init__(
        self,
        name: str,
        function: Callable[..., Any],
        input_schema: dict[str, Any],
        output_schema: dict[str, Any] | None,
        threaded: bool = False,
    ):
        super().__init__(name, input_schema, output_schema)
        self.function = function
        self.is_async = inspect.iscoroutinefunction(function)
        self.wants_context = accepts_context(function)
        self.threaded = threaded and not self.is_async
        self.needs_context = self.wants_context
        root = package_root(function)
        self.user_roots: tuple[str, ...] = (root,) if root else ()
        if not self.threaded:  # sync or async, the function itself is the call (see Skill.call)
            self.call = function if self.wants_context else self._call_plain

    def _call_plain(self, input: dict[str, Any], ctx: SkillContext | None) -> Any:
        return self.function(input)

    async def run(self, input: dict[str, Any], ctx: SkillContext | None) -> Any:
        args = (input, ctx) if self.wants_context else (input,)
        if self.is_async:
            return await self.function(*args)
        if self.threaded:
            output = await asyncio.to_thread(self.function, *args)
        else:
            output = self.function(*args)
        if type(output) not in PLAIN_TYPES and inspect.isawaitable(output):  # e.g. `async def __call__`, a wrapped coroutine
            output = await output
        return output


def accepts_context(function: Callable[..., Any]) -> bool:
    """`f(input)` or `f(input, ctx)`: decided once, at link time."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in parameters)


def signature_problem(function: Callable[..., Any]) -> str | None:
    """Why `function` cannot be called as a skill, or None."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if not positional and not any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return "takes no positional parameter; define it as f(input) or f(input, ctx)"
    if len(required) > 2:
        return f"requires {len(required)} positional parameters; define it as f(input) or f(input, ctx)"
    return None
