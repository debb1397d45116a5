"""The one error tree of skillyard.

    SkillyardError
    ├── ConfigError          a project that cannot load: carries every ConfigIssue (file:line:col)
    ├── UsageError           a front door was used wrongly (bad CLI argument, sync call inside a loop)
    └── StepFailure          internal: a step or skill failed; the router turns it into a ToolResult
        └── LimitExceeded    a run went past a limit of config/engine.yaml (`limit_exceeded`)

Call failures never surface as exceptions: the router translates them into a ToolResult with
an error code. Control signals (cancellation, timeouts) stay asyncio's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Location:
    """A place in a YAML file: `file:line:col` plus the YAML path for context."""

    file: str
    line: int = 0
    col: int = 0
    path: str = ""

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.col}"
        return self.file


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One thing wrong with the project, where it is, and what to do about it."""

    location: Location
    message: str
    hint: str = ""

    def __str__(self) -> str:
        text = f"{self.location}: {self.message}"
        if self.hint:
            text += f" — {self.hint}"
        return text


class SkillyardError(Exception):
    """Base of every error skillyard raises on purpose."""


class ConfigError(SkillyardError):
    """The project could not be loaded; `issues` holds all problems found, in file order."""

    def __init__(self, issues: list[ConfigIssue]):
        unique = list(dict.fromkeys(issues))  # one mistake reached twice (e.g. through an alias) is said once
        self.issues = sorted(unique, key=lambda i: (i.location.file, i.location.line, i.location.col))
        super().__init__("\n".join(str(i) for i in self.issues))


class UsageError(SkillyardError):
    """A front door (CLI, Python API) was used in a way that cannot work."""


class AgentSetupError(UsageError):
    """`Engine.agent()` was asked for something the project does not have.

    `code`: unknown_model, unknown_tool or invalid_request; `field`: model, tools or tool_choice
    (front doors name their own flag or JSON field from it).
    """

    def __init__(self, code: str, field: str, value: Any, reason: str, **details: Any):
        super().__init__(f"{field} {value}: {reason}")
        self.code, self.field, self.value, self.reason, self.details = code, field, value, reason, details
        self.message = str(self)


@dataclass
class StepFailure(SkillyardError):
    """A step or skill failed. `code` becomes the ToolResult error code."""

    code: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    retryable: bool = False

    def __post_init__(self) -> None:
        Exception.__init__(self, self.message)


class LimitExceeded(StepFailure):
    """A run went past a limit of config/engine.yaml (`limits.max_items`, `limits.max_events_per_run`):
    the whole call stops with code `limit_exceeded`, whatever a forEach's `onItemError` says."""

    def __init__(self, setting: str, limit: int, message: str):
        super().__init__("limit_exceeded", message, {"setting": setting, "limit": limit})


class IssueCollector:
    """Gathers ConfigIssues so that all problems are reported at once."""

    def __init__(self) -> None:
        self.issues: list[ConfigIssue] = []

    def add(self, location: Location, message: str, hint: str = "") -> None:
        self.issues.append(ConfigIssue(location, message, hint))

    def raise_if_any(self) -> None:
        if self.issues:
            raise ConfigError(self.issues)


class ToolAdminError(SkillyardError):
    """A tool-settings change was refused. `code`: unknown_tool, read_only, invalid_config, exists, no_store."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message
