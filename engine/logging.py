"""The engine's own structured log (structlog). Configured by the front door, never at import.

structlog is imported on the first log line or `configure_logging`, not with `import engine`:
with `rich` installed it pulls in ~11,000 objects (~250 ms of import, and every full garbage
collection of an embedding service walks them), while a healthy call path never logs.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal

from .redaction import Redactor


class _Logger:
    """`logger.error("...", key=value)` etc.: structlog's logger "skillyard", bound on first use."""

    __slots__ = ("_bound",)

    def __init__(self) -> None:
        self._bound: Any = None

    def __getattr__(self, method: str) -> Any:
        if self._bound is None:
            import structlog

            self._bound = structlog.get_logger("skillyard")
        return getattr(self._bound, method)


logger: Any = _Logger()

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class _StderrLoggerFactory:
    """Writes to whatever sys.stderr is at write time (not the stream of configure time)."""

    def __call__(self, *args: Any) -> "_StderrLogger":
        return _StderrLogger()


class _StderrLogger:
    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log = debug = info = warn = warning = err = error = critical = exception = fatal = failure = msg


def configure_logging(
    format: Literal["console", "json"] = "console", level: str = "warning", redactor: Redactor | None = None
) -> None:
    """Send the engine's log to stderr as console lines or JSON lines, sensitive values redacted."""
    import structlog

    redactor = redactor or Redactor()

    def redact(logger: Any, method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
        return redactor.redact(event_dict)  # type: ignore[no-any-return]

    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if format == "json" else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            redact,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info if format == "json" else structlog.dev.set_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.WARNING)),
        logger_factory=_StderrLoggerFactory(),
        cache_logger_on_first_use=False,
    )
