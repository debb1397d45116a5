"""Python skills: `function: package.module:name`, sync or async.

The function is called directly (or `run` when it goes to a worker thread, below); when it
raises, the workflow executor turns the exception into an error whose details are the user's
frames (`engine.safety.user_frames`), with `user_roots` saying where the user's package lives.

Where a sync function runs (`threaded:` in skills.yaml):

- `true`: every call in a worker thread (blocking I/O, long CPU work);
- `false`: every call on the event loop (code that must stay on one thread);
- not set: on the event loop while its calls are quick — a hop to a thread costs about 30 µs,
  a hundred times a quick skill — and in a worker thread once two calls took longer than
  `limits.python_thread_after` (default 20 ms): a CPU-heavy skill holds up the service's other
  calls (and `/healthz`) twice, not on every call. Two, because a busy machine stalls a quick
  call now and then (measured: 2 of 3 million calls of a trivial function took over 20 ms at
  load 5 on 2 cores). After THREAD_CALLS calls in threads it tries the loop again, on
  probation: one slow call sends it back. The workflow executor times every attempt for its
  events; it tells the skill of a slow one (`Skill.took_long`), so timing costs nothing here.

Worker threads come from one bounded pool of their own (`skill_pool`), so skills that keep
threads busy never delay the run store's reads, which use asyncio's default pool. An async
function always runs on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import inspect
import os
import threading
from typing import Any, Callable

from ..logging import logger
from ..runtime.context import SkillContext
from ..runtime.contracts import Skill
from ..runtime.timing import PLAIN_TYPES
from ..safety.user_frames import package_root

THREAD_CALLS = 1000  # calls of a skill moved to threads before it tries the event loop again
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def skill_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The worker threads of python skills (made at first use; as many as asyncio's default pool)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = concurrent.futures.ThreadPoolExecutor(min(32, (os.cpu_count() or 1) + 4), "skillyard-skill")
    return _pool


def in_worker_thread(function: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
    """`function(*args)` in a thread of `skill_pool`, with the caller's context variables (as
    `asyncio.to_thread`: a log line written there still hides the run's secrets)."""
    call = functools.partial(contextvars.copy_context().run, function, *args)
    return asyncio.get_running_loop().run_in_executor(skill_pool(), call)


class PythonSkill(Skill):
    kind = "python"

    def __init__(
        self,
        name: str,
        function: Callable[..., Any],
        input_schema: dict[str, Any],
        output_schema: dict[str, Any] | None,
        threaded: bool | None = False,
        thread_after: float | None = None,
    ):
        """`threaded`: True, False, or None (decided by timing; see the module). `thread_after`:
        seconds, for `threaded=None` (None: never move it)."""
        super().__init__(name, input_schema, output_schema)
        self.function = function
        self.is_async = inspect.iscoroutinefunction(function)
        self.wants_context = accepts_context(function)
        self.threaded = threaded is True and not self.is_async
        self.needs_context = self.wants_context
        root = package_root(function)
        self.user_roots: tuple[str, ...] = (root,) if root else ()
        timed = threaded is None and thread_after is not None and not self.is_async
        self._thread_after_ms = thread_after * 1000 if timed and thread_after is not None else float("inf")
        self._slow_calls = 0  # (timed) calls that took longer than thread_after: two move it to threads
        self._thread_calls = 0  # (timed, moved) calls since it moved to threads
        if timed:  # on the loop, timed, until calls are slow (see Skill.call)
            self._on_loop()
        elif not self.threaded:  # sync or async, the function itself is the call (see Skill.call)
            self.call = function if self.wants_context else self._call_plain

    def _call_plain(self, input: dict[str, Any], ctx: SkillContext | None) -> Any:
        return self.function(input)

    def took_long(self, duration_ms: float) -> None:
        """A call held the event loop too long (the executor times each attempt): the second
        time, the later ones run in a worker thread."""
        self._slow_calls += 1
        if self._slow_calls < 2:
            return
        self.threaded, self.call, self._thread_calls = True, self.run, 0
        self.slow_after_ms = float("inf")  # in a thread, a slow call holds nothing up
        logger.info("python skill is slow: its later calls run in a worker thread", skill=self.name,
                    took_ms=int(duration_ms), threshold_ms=int(self._thread_after_ms),
                    hint="set `threaded: true` or `threaded: false` on the skill to decide yourself")

    def _on_loop(self) -> None:
        self.threaded = False
        self.call = self.function if self.wants_context else self._call_plain
        self.slow_after_ms = self._thread_after_ms

    async def run(self, input: dict[str, Any], ctx: SkillContext | None) -> Any:
        args = (input, ctx) if self.wants_context else (input,)
        if self.is_async:
            return await self.function(*args)
        if self.threaded:
            output = await in_worker_thread(self.function, *args)
            if self._thread_after_ms != float("inf"):  # moved there by timing: now and then, try the loop again
                self._thread_calls += 1
                if self._thread_calls >= THREAD_CALLS and self.threaded:
                    self._slow_calls = 1  # on probation: one slow call sends it back
                    self._on_loop()
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
