"""The one error tree of skillyard: every exception class the engine defines derives from
`SkillyardError`. The classes more than one layer raises or catches are defined here; a class
that belongs to one part stays in its module (named on the right), below its place in the tree.

    SkillyardError
    ├── ConfigError            a project that cannot load: carries every ConfigIssue (file:line:col)
    ├── UsageError             a front door was used wrongly (bad CLI argument, sync call inside a loop)
    │   ├── AgentSetupError    Engine.agent() asked for a model, tool or tool_choice the project lacks
    │   ├── ExpectationError   a batch expectation that cannot be compiled          link/expect.py
    │   └── TelemetryUnavailable  telemetry asked for, its packages missing         telemetry/config.py
    ├── StepFailure            internal: a step or skill failed; the router turns it into a ToolResult
    │   └── LimitExceeded      a run went past a limit of config/engine.yaml (`limit_exceeded`)
    ├── ToolAdminError         a tool-settings change was refused (`code`)
    ├── ProviderError          a model call failed (`retryable`)
    │   └── PromptChanged      a replayed prompt differs from the recorded one      batch/replay.py
    ├── MappingSyntaxError     a `$…` reference written wrongly (also a ValueError)
    ├── MappingError           a reference that cannot be resolved at run time
    ├── ConditionSyntaxError   a `when:` condition that cannot be read (also a ValueError)
    ├── YamlLoadError          a YAML file that cannot be read (carries its ConfigIssue)
    ├── JudgeError             a batch judge failed or answered out of shape
    ├── StoreError             the run store cannot do what was asked              store/base.py
    │   └── AmbiguousRunId     a run id prefix matches several runs                 store/base.py
    ├── StoreUnavailable       internal: the database cannot be reached; the batch is kept   store/base.py
    ├── SchemaTooNew           a store written by a newer skillyard                 store/schema.py
    ├── InvalidURL, Refused    fetch: not an http(s) URL (`invalid_url`); not allowed (`blocked`)   executors/fetch/guard.py
    ├── UnsupportedEncoding    fetch: a Content-Encoding it cannot undo             executors/fetch/parse.py
    ├── KeyConfigError         API keys that cannot be used (also a ValueError)     server/auth.py
    ├── TooManyRuns            the live-run caps are reached                        server/hub.py
    ├── ApiError               an HTTP refusal with a status and a code             server/api.py
    └── BodyTooLarge           a request body past its cap (also an HTTPException)   server/access.py

Call failures never surface as exceptions: the router translates them into a ToolResult with
an error code. Control signals (cancellation, timeouts) stay asyncio's own, and a few private
ones stay in their modules (`_Stop` in the agent loop, `_Retry` in the Anthropic provider).
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


class ProviderError(SkillyardError):
    """A model call failed (network, auth, rate limit…). `retryable` tells the caller."""

    def __init__(self, message: str, *, retryable: bool = False):
        super().__init__(message)
        self.retryable = retryable


class MappingSyntaxError(SkillyardError, ValueError):
    """A reference is written wrongly (found at link time)."""


class MappingError(SkillyardError):
    """A reference could not be resolved at run time."""

    def __init__(self, reference: str, reason: str):
        super().__init__(f"{reference}: {reason}")
        self.reference = reference
        self.reason = reason


class ConditionSyntaxError(SkillyardError, ValueError):
    """The condition text cannot be read; `pos` is the offset of the problem in it."""

    def __init__(self, message: str, pos: int):
        super().__init__(message)
        self.pos = pos


class YamlLoadError(SkillyardError):
    """A YAML file cannot be read; `issue` says where and why."""

    def __init__(self, issue: ConfigIssue):
        super().__init__(str(issue))
        self.issue = issue


class JudgeError(SkillyardError):
    """A judge skill failed or answered outside {pass, score?, reason}."""
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
