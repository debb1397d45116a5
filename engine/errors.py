"""The one error tree of skillyard: every exception class the engine defines derives from
`SkillyardError`. The classes more than one layer raises or catches are defined here; a class
that belongs to one part stays in its module (named on the right), below its place in the tree.

    SkillyardError
    ├── ConfigError            a project that cannot load: carries every ConfigIssue (file:line:col)
    ├── UsageError             a front door was used wrongly (bad CLI argument, sync call inside a loop)
    │   ├── AgentSetupError    Engine.agent() asked for a model, tool or tool_choice the project lacks
    │   ├── SessionError       a session cannot take a turn (`session_busy`, `unknown_session`)
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
    ├── MissingReference       a `${env:…}`/`${file:…}` reference that cannot be read   spec/references.py
    ├── JudgeError             a batch judge failed or answered out of shape
    ├── StoreError             the run store cannot do what was asked              store/errors.py
    │   └── AmbiguousRunId     a run id prefix matches several runs                 store/queries.py
    ├── StoreUnavailable       internal: the database cannot be reached; the batch is kept   store/errors.py
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

Every error code the engine answers with (a ToolResult's `error.code`, an HTTP error body's
`code`, a run's `error.code`) is an `ErrorCode` member, which carries the advice a model
reads, the HTTP status and the CLI's exit code. A StrEnum: a member is equal to its string
and every JSON writer writes it as that string, so the wire never sees the enum.

Foreign errors (httpx, openai, temporalio…) are translated where they enter, in one function
per boundary: `_translate` in providers/openai.py, providers/anthropic.py and
executors/fetch/executor.py, `call_failure` in backends/temporal/client.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

EXIT_FAILED, EXIT_USAGE = 1, 2  # the CLI's exit codes: a call that ran and failed · a usage, config or argument error
DEFAULT_ADVICE = "Do not retry the same call."
DEFAULT_STATUS = 502  # a call that failed with a tool type's own code: the tool ran and failed


def _result(value: str, status: int, advice: str, exit_code: int = EXIT_FAILED) -> tuple[str, int, str, bool, int]:
    """A code the router or a built-in tool type puts in a ToolResult."""
    return value, status, advice, True, exit_code


class ErrorCode(StrEnum):
    """An error code on the wire, with what goes with it.

    - `advice`: the line a model reads after a failed call (`ToolResult.model_text`);
    - `status`: the HTTP status of an answer with this code. A tool call's status is its code's
      only for the codes a ToolResult carries (`tool_result`); a call failing with any other
      code is 502 (a tool type that raises `StepFailure("unauthorized", …)` makes no 401).
      How a run ended (`interrupted`, an agent's `max_steps`…) is read from the run, never
      answered as a status: those say 500;
    - `exit_code`: `skillyard call`'s exit code for a call that failed with it.

    A tool type may fail with a code of its own (any string): `ErrorCode.of` is then None, and
    the defaults apply (DEFAULT_ADVICE, DEFAULT_STATUS, EXIT_FAILED). Where one code answers
    with another status in one place (`no_store` is 404 for batches, `config_error` 422 for a
    reload), that ApiError says so (`status=`).
    """

    advice: str
    status: int
    tool_result: bool
    exit_code: int

    def __new__(cls, value: str, status: int, advice: str = DEFAULT_ADVICE, tool_result: bool = False,
                exit_code: int = EXIT_FAILED) -> "ErrorCode":
        member = str.__new__(cls, value)
        member._value_ = value
        member.status, member.advice, member.tool_result, member.exit_code = status, advice, tool_result, exit_code
        return member

    # ─── a call the router refuses: the caller's mistake ──────────────────────────────────────
    UNKNOWN_TOOL = _result("unknown_tool", 404, "Call one of the available tools instead.", EXIT_USAGE)
    TOOL_DISABLED = _result("tool_disabled", 403, "This tool is switched off; do not call it again.", EXIT_USAGE)
    NOT_ALLOWED = _result("not_allowed", 403, "This tool may not be called here; do not call it again.", EXIT_USAGE)
    INVALID_ARGUMENTS = _result("invalid_arguments", 422, "Fix the arguments to match the schema and call again.", EXIT_USAGE)
    SENSITIVE_ARGUMENTS = _result("sensitive_arguments", 502,
                                  "Never send passwords, tokens or keys to tools; call again without them.")
    CONFIRMATION_DENIED = _result("confirmation_denied", 403,
                                  "The user declined this call; do not repeat it unless the user asks.")
    APPROVAL_UNAVAILABLE = _result("approval_unavailable", 502,
                                   "This tool needs a person's approval and this client cannot ask for it; do not retry. "
                                   "Use a client that supports elicitation, or a server started with --yes.")
    # the tool's configuration is broken (the others still serve): the server's problem
    CONFIG_ERROR = _result("config_error", 503, "This tool's configuration is broken; do not call it again until it is fixed.")
    # ─── a call that ran and failed ───────────────────────────────────────────────────────────
    EXECUTION_ERROR = _result("execution_error", 502, "Retrying with the same arguments will most likely fail the same way.")
    INVALID_MODEL_OUTPUT = _result("invalid_model_output", 502,
                                   "The model behind this tool gave unusable output; one retry may help.")
    TIMEOUT = _result("timeout", 504, "The tool ran out of time; retry only with a smaller request.")
    # the work asked for is past a limit of this server (not the body's size: that is 413)
    LIMIT_EXCEEDED = _result("limit_exceeded", 422, "The call asked for more work than this server allows (the message "
                             "names the limit); retry only with a smaller request, e.g. fewer items.")
    CANCELLED = _result("cancelled", 409, "The call was cancelled.")
    # ─── fetch (executors/fetch): what failed, and that the same URL will not do better ───────
    BLOCKED = _result("blocked", 403,
                      "This tool's network policy refuses that URL; retrying it will not help. Do not fetch it again.")
    INVALID_URL = _result("invalid_url", 422, "Give an absolute http:// or https:// URL and call again.")
    HTTP_ERROR = _result("http_error", 502, "The server answered with an error status; retrying the same URL will not "
                         "help. Try another URL or answer without it.")
    FETCH_FAILED = _result("fetch_failed", 502, "The page could not be fetched; retrying the same URL will not help. "
                           "Try another URL or answer without it.")
    FETCH_TIMEOUT = _result("fetch_timeout", 504, "The server was too slow; retrying the same URL will not help. "
                            "Try another URL or answer without it.")
    # ─── the HTTP service's refusals (server/) ────────────────────────────────────────────────
    UNAUTHORIZED = "unauthorized", 401
    FORBIDDEN = "forbidden", 403
    PEER_NOT_ALLOWED = "peer_not_allowed", 403
    HOST_NOT_ALLOWED = "host_not_allowed", 403
    ORIGIN_NOT_ALLOWED = "origin_not_allowed", 403
    NOT_FOUND = "not_found", 404
    METHOD_NOT_ALLOWED = "method_not_allowed", 405
    PAYLOAD_TOO_LARGE = "payload_too_large", 413
    PROMPT_TOO_LARGE = "prompt_too_large", 413
    INVALID_REQUEST = "invalid_request", 422
    UNKNOWN_MODEL = "unknown_model", 422
    TOO_MANY_RUNS = "too_many_runs", 429
    SERVER_ERROR = "server_error", 500
    STORE_UNAVAILABLE = "store_unavailable", 503
    # ─── runs (routes/runs.py, the run store) ─────────────────────────────────────────────────
    UNKNOWN_RUN = "unknown_run", 404
    AMBIGUOUS_RUN_ID = "ambiguous_run_id", 409
    NOT_PENDING = "not_pending", 409
    NOT_RUNNING = "not_running", 409
    INTERRUPTED = "interrupted", 500  # how a run ended whose process stopped; a run's code, no answer's
    # ─── how an agent run stopped short (its StopReason, runtime/agent.py; also timeout, cancelled) ───
    MAX_STEPS = "max_steps", 500
    TOKEN_BUDGET = "token_budget", 500
    REPEATED_CALL = "repeated_call", 500
    INVALID_OUTPUT = "invalid_output", 500  # the typed answer stayed wrong after its repairs (runtime/answers.py)
    ERROR = "error", 500  # the model or the loop failed, or the run ended before it began
    # ─── tool administration (ToolAdminError, routes/admin.py) ────────────────────────────────
    READ_ONLY = "read_only", 403
    CODE_TOOLS_DISABLED = "code_tools_disabled", 403
    INVALID_CONFIG = "invalid_config", 422
    EXISTS = "exists", 409
    NO_STORE = "no_store", 409
    # ─── sessions (engine.sessions, POST /v1/agent's session_id) ───────────────────────────────
    SESSION_BUSY = "session_busy", 409
    UNKNOWN_SESSION = "unknown_session", 404

    @classmethod
    def of(cls, code: str) -> "ErrorCode | None":
        """The member spelled `code` (a plain string from a store or a client), or None: a tool
        type's own code."""
        return _MEMBERS.get(code)

    @classmethod
    def named(cls, code: str) -> "ErrorCode":
        """The member spelled `code`, for a code that always is one (KeyError otherwise): what
        `ErrorCode(code)` looks up, but typed (to a type checker that call is the members' constructor)."""
        return _MEMBERS[code]

    @classmethod
    def advice_for(cls, code: str) -> str:
        member = _MEMBERS.get(code)
        return DEFAULT_ADVICE if member is None else member.advice

    @classmethod
    def call_status(cls, code: str) -> int:
        """The HTTP status of a tool call that failed with `code`."""
        member = _MEMBERS.get(code)
        return member.status if member is not None and member.tool_result else DEFAULT_STATUS

    @classmethod
    def exit_code_for(cls, code: str) -> int:
        member = _MEMBERS.get(code)
        return EXIT_FAILED if member is None else member.exit_code


_MEMBERS: dict[str, ErrorCode] = {member.value: member for member in ErrorCode}


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


class SessionError(UsageError):
    """A session cannot take this turn: `code` is session_busy (another turn of it runs) or
    unknown_session (no such session, or another caller's)."""

    def __init__(self, code: str, session_id: str, message: str):
        super().__init__(message)
        self.code, self.session_id, self.message = code, session_id, message


class AgentSetupError(UsageError):
    """`Engine.agent()` was asked for something the project does not have.

    `code`: unknown_model, unknown_tool or invalid_request (ErrorCode); `field`: model, tools or tool_choice
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
        super().__init__(ErrorCode.LIMIT_EXCEEDED, message, {"setting": setting, "limit": limit})


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
    """A tool-settings change was refused. `code`: an ErrorCode member (unknown_tool, read_only,
    code_tools_disabled, invalid_config, exists, no_store), whose status the admin API answers."""

    def __init__(self, code: str, message: str, fields: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.fields = fields or {}  # the problems by field ("config.url"; "" for the tool as a whole)
