"""Pydantic models of `config/engine.yaml`: the engine's settings (router, limits, store, server, …)."""

from __future__ import annotations

import ipaddress
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from ..safety.redaction import DEFAULT_SENSITIVE_KEYS
from .common import Duration, _Spec

# ─── config/engine.yaml ─────────────────────────────────────────────────────────────────


class RouterSettings(_Spec):
    allow: list[str] = Field(default_factory=lambda: ["*"], description="Glob patterns of callable tools.")
    deny: list[str] = Field(default_factory=list, description="Glob patterns that win over allow.")


# What a model's answer may hold (the answer is untrusted input: a model, or whatever answers at its
# base_url, can stream without end). The providers read these defaults when no setting reaches them.
DEFAULT_MAX_TOOL_ARGS_BYTES = 1 << 20
DEFAULT_MAX_ANSWER_CHARS = 1_000_000  # about 250,000 tokens: more than any model writes in one answer


class LimitSettings(_Spec):
    """What one call may cost: its time, the items of a forEach step, its events, a model's answer
    (docs/operations.md)."""

    tool_timeout: Duration = Field(default=300.0, description="Default time limit of a tool call.")
    max_items: int = Field(
        default=1000, ge=1,
        description="Most items one forEach step takes; more fails the call with limit_exceeded. "
        "A step's own `max_items` may only be lower.",
    )
    max_events_per_run: int = Field(
        default=20_000, ge=100,
        description="Most events one run emits (its ending events aside); the next one fails the run with "
        "limit_exceeded.",
    )
    max_schema_bytes: int = Field(
        default=64 * 1024, ge=1024,
        description="Largest JSON Schema a caller sends (output_schema), in bytes of compact JSON; a larger one is "
        "refused (422). Its nesting (64 levels) and its growth through $refs (100,000 nodes) are bounded too. An MCP "
        "server's inputSchema or requestedSchema is held to the same budget at its default, 64 KiB.",
    )
    max_tool_args_bytes: int = Field(
        default=DEFAULT_MAX_TOOL_ARGS_BYTES, ge=1024,
        description="Most bytes of tool-call arguments one model answer may hold (UTF-8, all its calls together); "
        "more ends that model call with limit_exceeded.",
    )
    max_answer_chars: int = Field(
        default=DEFAULT_MAX_ANSWER_CHARS, ge=1000,
        description="Most characters of text (and reasoning) one model answer may hold; more ends that model call "
        "with limit_exceeded.",
    )
    python_thread_after: Duration | None = Field(
        default=0.02,
        description="A sync python skill without `threaded:` runs on the event loop until a call of it takes longer "
        "than this; its later calls then run in a worker thread (null: never move one).",
    )


class AgentSettings(_Spec):
    """The agent loop's limits (`skillyard chat`, POST /v1/agent, the web chat, `Engine.agent`,
    an agent skill's `limits:`): the one model of them, with their defaults and bounds.
    `engine.AgentLimits` is this class; hitting a limit stops the loop with that reason.

    A caller may ask for less per call (chat flags, the request body); never for more.
    """

    max_steps: int = Field(default=8, ge=1, le=200, description="Most model calls in one run (the final answer counts).")
    max_parallel_tool_calls: int = Field(default=4, ge=1, le=64, description="Tool calls of one model turn run at once.")
    tool_timeout: Duration | None = Field(default=None, description="Caps every tool's own timeout inside an agent run.")
    total_timeout: Duration | None = Field(default=600.0, description="Wall time of the whole run (null: none).")
    token_budget: int | None = Field(default=None, ge=1, description="Input + output tokens over the run (null: none).")
    max_repeated_calls: int = Field(
        default=3, ge=2, le=100, description="The same tool with the same arguments this many times in a row stops the run."
    )
    max_corrections: int = Field(
        default=3, ge=1, le=100, description="Invalid calls (unknown tool, bad arguments) of one tool in a row before giving up."
    )
    max_result_chars: int = Field(
        default=20_000, ge=200, description="A tool result handed to the model is cut to this many characters, with a note."
    )
    max_history_tokens: int | None = Field(
        default=None, ge=1, description="A conversation's history sent to the model is cut to about this many tokens "
        "(estimated from characters), dropping the oldest whole turns (null: none).",
    )

    @classmethod
    def from_settings(cls, settings: "AgentSettings", **overrides: Any) -> "AgentSettings":
        """`settings` with per-call overrides (None: keep), checked by the same bounds (ValueError
        naming each one that fails)."""
        asked = {name: value for name, value in overrides.items() if value is not None}
        if not asked:
            return settings
        try:
            return cls.model_validate({**settings.model_dump(), **asked})
        except ValidationError as exc:
            raise ValueError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from None

    def exceeded_by(self, asked: dict[str, Any]) -> list[str]:
        """The asked limits that go beyond these ones (a service's callers may only ask for less)."""
        over = []
        for name, value in asked.items():
            mine = getattr(self, name)
            if value is not None and mine is not None and value > mine:
                over.append(f"{name}={value:g} is above this service's {name}={mine:g} (agent.{name} in config/engine.yaml)")
        return over


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
    durability: Literal["committed", "relaxed"] = Field(
        default="committed",
        description="committed: a call is answered (JSON body, last SSE frame, MCP result) only once its run's events "
        "are committed, so a crash right after the answer loses nothing answered; relaxed: answers do not wait (the "
        "store writes behind, every 50 ms), and a crash loses the runs of its last ~50 ms, answered or not.",
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
    admin_private_networks: list[str] = Field(
        default_factory=list,
        description="Private networks (CIDR, e.g. 10.1.0.0/16) a tool stored through the admin API (or `skillyard tools "
        "add|set`) may open with `allowPrivateNetworks`; each of its networks must lie inside one of these. Empty: none "
        "(403 forbidden).",
    )
    admin_references: list[str] = Field(
        default_factory=list,
        description="The references a tool stored through the admin API (or `skillyard tools add|set`) may use in its "
        "config, as globs: `env:PARTNER_*` (`${env:PARTNER_X}`, `${PARTNER_X}`), `file:/run/secrets/partner-*`. "
        "Empty: none (403 forbidden).",
    )
    max_body_bytes: int = Field(default=1 << 20, ge=1024, description="Largest request body (bytes); larger gets 413.")
    max_prompt_chars: int = Field(
        default=200_000, ge=1, description="Largest agent prompt: the characters of all messages and the system text."
    )
    max_live_runs: int = Field(default=1000, ge=1, description="Runs live at once in one service process; more gets 429.")
    max_live_runs_per_key: int = Field(default=100, ge=1, description="Runs live at once per API key name; more gets 429.")


    @field_validator("admin_private_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for item in value:
            try:
                ipaddress.ip_network(item.strip(), strict=True)
            except ValueError as exc:
                raise ValueError(f"{item!r} is not a network in CIDR form such as 10.1.0.0/16 ({exc})") from None
        return [item.strip() for item in value]


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
    agent: AgentSettings = Field(default_factory=AgentSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    redaction: RedactionSettings = Field(default_factory=RedactionSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    execution: ExecutionSettings = Field(default_factory=ExecutionSettings)
