"""The engine's own structured log (structlog), independent of the application's log setup.

Why it is built this way:

- The logger is the engine's own (`structlog.wrap_logger` with its own processor chain and a
  stderr writer), never structlog's global configuration: an embedding application that calls
  `structlog.configure` neither breaks it nor is broken by it, and an application that never
  configured anything does not get the engine's lines on its **stdout** (structlog's default).
- Exceptions are rendered as plain tracebacks (`format_exc_info`), never by rich or
  better-exceptions, which print every frame's local variables (arguments, passwords, the
  `Authorization` header of a request).
- Every record passes through the redactor: values under sensitive keys, sensitive URL query
  parameters, and the known secrets of the current run (and configured keys) anywhere in text,
  the exception text included.
- structlog is imported on the first log line or `configure_logging`, not with `import engine`:
  with `rich` installed it pulls in ~11,000 objects, while a healthy call path never logs.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal

from .safety.redaction import Redactor, active_scrubber, scrub_text

LogFormat = Literal["console", "json"]
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _Settings:
    """What `configure_logging` chose (the defaults apply to an engine nobody configured)."""

    format: LogFormat = "console"
    level: int = logging.WARNING
    redactor: Redactor | None = None


class _Logger:
    """`logger.error("...", key=value)` etc.: the engine's structlog logger, built on first use."""

    __slots__ = ("_bound",)

    def __init__(self) -> None:
        self._bound: Any = None

    def __getattr__(self, method: str) -> Any:
        if self._bound is None:
            self._bound = _build()
        return getattr(self._bound, method)

    def reset(self) -> None:
        """Rebuild on the next line (after `configure_logging`)."""
        self._bound = None


logger: Any = _Logger()


class _StderrLogger:
    """Writes to whatever sys.stderr is at write time (not the stream of configure time)."""

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log = debug = info = warn = warning = err = error = critical = exception = fatal = failure = msg


def _redact(redactor: Redactor) -> Any:
    def redact(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        """Sensitive keys and URL parameters, then known secrets inside every string."""
        redacted = redactor.redact(event_dict)
        run = active_scrubber()
        regex = run.regex if run is not None else redactor.configured_regex
        return scrub_text(redacted, regex) if regex is not None else redacted

    return redact


def _build() -> Any:
    import structlog

    redactor = _Settings.redactor or Redactor()
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if _Settings.format == "json"
        else structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)
    )
    processors = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"),
        structlog.processors.format_exc_info,  # plain text, no locals; redacted by the next step
        _redact(redactor),
        renderer,
    ]
    return structlog.wrap_logger(
        _StderrLogger(),
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(_Settings.level),
        context_class=dict,
        cache_logger_on_first_use=False,
    )


def configure_logging(format: LogFormat = "console", level: str = "warning", redactor: Redactor | None = None) -> None:
    """Send the engine's log to stderr as console lines or JSON lines, sensitive values redacted.

    Touches only the engine's logger: structlog's global configuration stays the application's.
    """
    _Settings.format = format
    _Settings.level = _LEVELS.get(level, logging.WARNING)
    _Settings.redactor = redactor
    logger.reset()
