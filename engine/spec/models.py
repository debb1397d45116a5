"""Pydantic models of every YAML file skillyard reads.

These are the *shapes* only; cross-references (tool → workflow → skill → model) and data
flow are checked in `engine.link`. The JSON Schemas in `schemas/` are generated from these
models (`python -m engine.spec.export`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema

from ..redaction import DEFAULT_SENSITIVE_KEYS

TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
IDENT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$")

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """`30`, `30s`, `500ms`, `2m`, `1h` → seconds (float). Bare numbers are seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 30s, 500ms or 2m")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION_RE.match(value)):
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    else:
        raise ValueError(f"{value!r} is not a duration; write e.g. 30s, 500ms or 2m")
    if seconds <= 0:
        raise ValueError("a duration must be greater than zero")
    return seconds


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    PlainSerializer(lambda v: f"{v:g}s"),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s|m|h)?\s*$"},
            ],
            "description": "Seconds, or a string such as 30s, 500ms, 2m, 1h.",
        }
    ),
]

JsonSchema = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "description": "A JSON Schema (Draft 2020-12)."}),
]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ─── tools.yaml ─────────────────────────────────────────────────────────────────────────


class ToolSpec(_Spec):
    """A capability a model may call."""

    description: str = Field(min_length=1, description="What the tool does, for the model.")
    parameters: JsonSchema | None = Field(
        default=None, description="JSON Schema of the arguments. Tool types may supply their own."
    )
    enabled: bool = True
    workflow: str | None = Field(default=None, description="Name of the workflow this tool runs.")
    type: str | None = Field(
        default=None, description="Built-in or registered tool type (default: workflow)."
    )
    config: dict[str, Any] = Field(default_factory=dict, description="Settings for the tool type.")
    timeout: Duration | None = Field(default=None, description="Time limit for one call.")
    confirm: bool = Field(default=False, description="Ask for approval before every call.")


class ToolsFile(_Spec):
    tools: dict[str, ToolSpec] = Field(default_factory=dict)


# ─── skills.yaml ────────────────────────────────────────────────────────────────────────


class PromptSkillSpec(_Spec):
    """Render Jinja2 templates, ask a model, validate its answer."""

    kind: Literal["prompt"]
    description: str = ""
    model: str | None = Field(default=None, description="Model name from config/models.yaml.")
    system: str | None = Field(default=None, description="Jinja2 template of the system message.")
    user: str = Field(description="Jinja2 template of the user message.")
    input: JsonSchema = Field(default_factory=lambda: {"type": "object"})
    output: JsonSchema | None = Field(
        default=None, description="JSON Schema of the answer. Without it the answer is text."
    )
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)
    repairs: int = Field(
        default=2, ge=0, le=5, description="Retries with the validation errors fed back."
    )


class PythonSkillSpec(_Spec):
    """Call a Python function `package.module:name` (sync or async)."""

    kind: Literal["python"]
    description: str = ""
    function: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    input: JsonSchema = Field(default_factory=lambda: {"type": "object"})
    output: JsonSchema | None = None
    threaded: bool = Field(
        default=False, description="Run a sync function in a worker thread (for blocking code)."
    )


class TemplateSkillSpec(_Spec):
    """Render a Jinja2 template: a string, or JSON when an output schema is given."""

    kind: Literal["template"]
    description: str = ""
    template: str
    input: JsonSchema = Field(default_factory=lambda: {"type": "object"})
    output: JsonSchema | None = None


class ToolSkillSpec(_Spec):
    """Run a registered tool type (e.g. fetch) as a step; its schemas come from the type."""

    kind: Literal["tool"]
    description: str = ""
    type: str = Field(description="A registered tool type other than workflow, e.g. fetch.")
    config: dict[str, Any] = Field(default_factory=dict, description="Settings of that tool type.")


SkillSpec = Annotated[
    Union[PromptSkillSpec, PythonSkillSpec, TemplateSkillSpec, ToolSkillSpec], Field(discriminator="kind")
]


class SkillsFile(_Spec):
    skills: dict[str, SkillSpec] = Field(default_factory=dict)


# ─── workflows.yaml ─────────────────────────────────────────────────────────────────────


class RetrySpec(_Spec):
    times: int = Field(ge=0, le=10, description="Extra attempts after the first one fails.")
    delay: Duration = Field(default=0.2, description="Wait before each retry (doubles each time).")


class StepSpec(_Spec):
    id: str = Field(pattern=IDENT_RE.pattern)
    skill: str
    input: Any = Field(default_factory=dict, description="Mapping: $toolArgs / $steps references.")
    timeout: Duration | None = None
    retry: RetrySpec | int | None = None

    @property
    def retry_spec(self) -> RetrySpec:
        if self.retry is None:
            return RetrySpec(times=0)
        if isinstance(self.retry, int):
            return RetrySpec(times=self.retry)
        return self.retry


class WorkflowSpec(_Spec):
    description: str = ""
    steps: list[StepSpec] = Field(min_length=1)
    output: Any = Field(default=None, description="Mapping of the result (default: last step).")


class WorkflowsFile(_Spec):
    workflows: dict[str, WorkflowSpec] = Field(default_factory=dict)


# ─── config/models.yaml ─────────────────────────────────────────────────────────────────


class ModelSpec(_Spec):
    provider: str = Field(description="mock, or a registered provider such as openai.")
    model: str | None = Field(default=None, description="The provider's model id.")
    base_url: str | None = None
    api_key: str | None = Field(default=None, description="Use ${ENV_VAR}; never commit keys.")
    timeout: Duration | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)
    options: dict[str, Any] = Field(default_factory=dict, description="Provider-specific settings.")


class ModelsFile(_Spec):
    default: str = "mock"
    models: dict[str, ModelSpec] = Field(default_factory=lambda: {"mock": ModelSpec(provider="mock")})


# ─── config/engine.yaml ─────────────────────────────────────────────────────────────────


class RouterSettings(_Spec):
    allow: list[str] = Field(default_factory=lambda: ["*"], description="Glob patterns of callable tools.")
    deny: list[str] = Field(default_factory=list, description="Glob patterns that win over allow.")


class LimitSettings(_Spec):
    tool_timeout: Duration = Field(default=300.0, description="Default time limit of a tool call.")


class LoggingSettings(_Spec):
    format: Literal["console", "json"] = "console"
    level: Literal["debug", "info", "warning", "error"] = "warning"


class StoreSettings(_Spec):
    enabled: bool = Field(default=True, description="Record runs (the CLI; the Python API opts in).")
    path: str = Field(default=".skillyard/runs.db", description="SQLite file, relative to the project.")
    url: str | None = Field(
        default=None,
        pattern=r"^(sqlite:///.+|postgres(ql)?://.+)$",
        description="sqlite:///<path> (relative to the project) or postgresql://user@host:port/db; wins over `path`. "
        "The environment variable SKILLYARD_STORE_URL wins over both.",
    )


class RedactionSettings(_Spec):
    sensitive_keys: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SENSITIVE_KEYS),
        description="Values under these keys (snake/camel/kebab case) are redacted before storage and logs.",
    )
    arguments: Literal["pass", "refuse"] = Field(
        default="pass",
        description="refuse: a tool call whose arguments hold a sensitive key fails with sensitive_arguments.",
    )


class ApiKeySpec(_Spec):
    name: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9_.@-]{1,64}$",
        description="Who holds the key: runs record it, and a caller sees only the runs of its own key name.",
    )
    role: Literal["admin", "caller"]
    key: str | None = Field(default=None, description="The key, best as ${ENV_VAR}; never commit keys.")
    key_sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$", description="Or its SHA-256 digest.")


class ServerSettings(_Spec):
    api_keys: list[ApiKeySpec] = Field(
        default_factory=list,
        description="Keys of `skillyard serve`, besides SKILLYARD_API_KEYS (name:admin:K1,name2:caller:K2).",
    )
    allow_code_tools: bool = Field(
        default=False,
        description="Let the admin API (and `skillyard tools add|set`) create or reconfigure tools of types that run "
        "code on this host (python, and third-party types that do not declare otherwise). "
        "true means: an admin key = code execution on this host.",
    )
    max_body_bytes: int = Field(default=1 << 20, ge=1024, description="Largest request body (bytes); larger gets 413.")
    max_prompt_chars: int = Field(
        default=200_000, ge=1, description="Largest agent prompt: the characters of all messages and the system text."
    )
    max_live_runs: int = Field(default=1000, ge=1, description="Runs live at once in one service process; more gets 429.")
    max_live_runs_per_key: int = Field(default=100, ge=1, description="Runs live at once per API key name; more gets 429.")


class TemporalSettings(_Spec):
    address: str = Field(
        default="127.0.0.1:7233", min_length=1,
        description="host:port of the Temporal frontend. The environment variable SKILLYARD_TEMPORAL_ADDRESS wins.",
    )
    namespace: str = Field(default="default", min_length=1, description="The Temporal namespace of the executions.")
    task_queue: str = Field(default="skillyard", min_length=1, description="The task queue `skillyard worker` polls.")
    heartbeat_timeout: Duration = Field(
        default=10.0,
        description="A step's worker that has not heartbeated for this long is taken for dead; the step runs again "
        "on another worker.",
    )


class ExecutionSettings(_Spec):
    backend: Literal["local", "temporal"] = Field(
        default="local",
        description="local: tool calls run in the calling process. temporal: each call is a Temporal workflow "
        "execution run by `skillyard worker` processes (needs a postgresql:// store).",
    )
    temporal: TemporalSettings = Field(default_factory=TemporalSettings)


class TelemetrySettings(_Spec):
    traces: bool = Field(
        default=False,
        description="Export OpenTelemetry traces over OTLP/HTTP (needs the otel extra: pip install 'skillyard[otel]'). "
        "OTEL_TRACES_EXPORTER=otlp|console or an OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT also turns them on; "
        "OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turns them off.",
    )
    endpoint: str | None = Field(
        default=None, pattern=r"^https?://[^\s]+$",
        description="OTLP/HTTP collector, e.g. http://127.0.0.1:4318 (spans go to <endpoint>/v1/traces). "
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_EXPORTER_OTLP_ENDPOINT win over it.",
    )
    service_name: str = Field(default="skillyard", min_length=1, description="service.name of the spans; OTEL_SERVICE_NAME wins.")
    metrics: bool = Field(
        default=False, description="Serve Prometheus metrics at GET /metrics (admin key) on `skillyard serve`."
    )


class EngineSettings(_Spec):
    router: RouterSettings = Field(default_factory=RouterSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    redaction: RedactionSettings = Field(default_factory=RedactionSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    execution: ExecutionSettings = Field(default_factory=ExecutionSettings)
