"""Pydantic models of every YAML file skillyard reads.

These are the *shapes* only; cross-references (tool → workflow → skill → model) and data
flow are checked in `engine.link.linker`. The JSON Schemas in `schemas/` are generated from these
models (`python -m engine.spec.export`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, Discriminator, Field, StrictBool, StrictInt, Tag, create_model
from pydantic.fields import FieldInfo

from .common import Duration, JsonSchema, _Spec, parse_duration  # noqa: F401 (re-exported)
from .settings import (  # noqa: F401 (re-exported: engine.yaml's models used to live here)
    AgentSettings,
    ApiKeySpec,
    EngineSettings,
    ExecutionSettings,
    LimitSettings,
    LoggingSettings,
    RedactionSettings,
    RouterSettings,
    ServerSettings,
    StoreSettings,
    TelemetrySettings,
    TemporalSettings,
)

TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
IDENT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$")


# ─── tools.yaml ─────────────────────────────────────────────────────────────────────────


class BatchSpec(_Spec):
    """How `skillyard batch` checks this tool's cases (docs/batch.md)."""

    expect: list[dict[str, Any]] | dict[str, Any] | None = Field(
        default=None,
        description="Expectations every case checks unless it has its own: {path, equals|contains|matches|approx|"
        "schema|error|judge}.",
    )


class ToolSpec(_Spec):
    """A capability a model may call."""

    description: str = Field(min_length=1, description="What the tool does, for the model.")
    title: str | None = Field(
        default=None, min_length=1, max_length=200, description="Display name for people (the model sees the name)."
    )
    order: StrictInt = Field(default=0, description="Sort position in lists (then by name).")
    parameters: JsonSchema | None = Field(
        default=None, description="JSON Schema of the arguments. Tool types may supply their own."
    )
    enabled: StrictBool = True
    workflow: str | None = Field(default=None, description="Name of the workflow this tool runs.")
    type: str | None = Field(
        default=None, description="Built-in or registered tool type (default: workflow)."
    )
    config: dict[str, Any] = Field(default_factory=dict, description="Settings for the tool type.")
    timeout: Duration | None = Field(default=None, description="Time limit for one call.")
    confirm: StrictBool = Field(default=False, description="Ask for approval before every call.")
    strict: StrictBool | None = Field(
        default=None,
        description="OpenAI strict mode for this tool's definition: true forces it (a schema that cannot be strict "
        "is a load error), false turns it off; not set: strict whenever the parameters qualify.",
    )
    batch: BatchSpec | None = Field(default=None, description="Defaults for `skillyard batch` (docs/batch.md).")


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
    threaded: StrictBool | None = Field(
        default=None,
        description="true: run a sync function in a worker thread (blocking code); false: always on the event loop; "
        "not set: on the loop until its calls take longer than limits.python_thread_after, then in a thread.",
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


def _each_optional(settings: type[_Spec], name: str, doc: str) -> Any:
    """A model of `settings`' fields, each optional (None: the configured value) with its bounds:
    the limits stay one model, however many places may lower them."""
    fields: dict[str, Any] = {
        field: (Optional[info.annotation], FieldInfo.merge_field_infos(info, default=None))
        for field, info in settings.model_fields.items()
    }
    return create_model(name, __base__=_Spec, __doc__=doc, **fields)


if TYPE_CHECKING:
    AgentSkillLimits = AgentSettings
else:
    AgentSkillLimits = _each_optional(
        AgentSettings, "AgentSkillLimits",
        "An agent skill's limits: the `agent:` ones of config/engine.yaml, lower only (link checks it).")


class AgentSkillSpec(_Spec):
    """A model working with tools as a step: the agent loop over rendered templates."""

    kind: Literal["agent"]
    description: str = ""
    model: str | None = Field(default=None, description="Model name from config/models.yaml (default: the project's).")
    system: str | None = Field(default=None, description="Jinja2 template of the system message.")
    user: str = Field(description="Jinja2 template of the user message.")
    tools: list[str] = Field(default_factory=list, description="The tools this agent may call.")
    limits: AgentSkillLimits = Field(default_factory=AgentSkillLimits)
    input: JsonSchema = Field(default_factory=lambda: {"type": "object"})
    output: JsonSchema | None = Field(default=None, description="JSON Schema of the answer. Without it the answer is text.")
    repairs: int = Field(default=2, ge=0, le=5, description="Repair turns for an answer that misses `output`.")


SkillSpec = Annotated[
    Union[PromptSkillSpec, PythonSkillSpec, TemplateSkillSpec, ToolSkillSpec, AgentSkillSpec], Field(discriminator="kind")
]


class SkillsFile(_Spec):
    skills: dict[str, SkillSpec] = Field(default_factory=dict)


# ─── workflows.yaml ─────────────────────────────────────────────────────────────────────


class RetrySpec(_Spec):
    times: int = Field(ge=0, le=10, description="Extra attempts after the first one fails.")
    delay: Duration = Field(default=0.2, description="Wait before each retry (doubles each time).")


class StepSpec(_Spec):
    """One step: a skill (or another workflow), maybe conditional, maybe once per item of a list."""

    id: str = Field(pattern=IDENT_RE.pattern)
    skill: str | None = Field(default=None, description="The skill this step runs.")
    workflow: str | None = Field(default=None, description="Another workflow this step runs (instead of a skill).")
    input: Any = Field(default_factory=dict, description="Mapping: $toolArgs / $steps / $item / $index references.")
    when: str | None = Field(default=None, description="Condition: the step runs only when it holds (see docs/workflows.md).")
    forEach: str | None = Field(default=None, description="Reference to an array: the step runs once per item ($item, $index).")
    concurrency: int = Field(default=4, ge=1, le=1000, description="forEach: items in flight at once.")
    onItemError: Literal["fail", "skip", "collect"] = Field(default="fail", description="forEach: what a failed item does.")
    max_items: int | None = Field(
        default=None, ge=1,
        description="forEach: most items this step takes (more fails the call with limit_exceeded); at most the "
        "engine's limits.max_items, which applies when this is not set.",
    )
    timeout: Duration | None = None
    retry: RetrySpec | int | None = None

    @property
    def retry_spec(self) -> RetrySpec:
        if self.retry is None:
            return RetrySpec(times=0)
        if isinstance(self.retry, int):
            return RetrySpec(times=self.retry)
        return self.retry


class ParallelSpec(_Spec):
    """Steps that run at the same time; after the group every member's output is available."""

    parallel: list[StepSpec] = Field(min_length=1, description="The steps of the group.")


def _step_tag(value: Any) -> str:
    return "Parallel" if isinstance(value, dict) and "parallel" in value else "Step"


WorkflowItem = Annotated[
    Union[Annotated[StepSpec, Tag("Step")], Annotated[ParallelSpec, Tag("Parallel")]], Discriminator(_step_tag)
]


class WorkflowSpec(_Spec):
    description: str = ""
    steps: list[WorkflowItem] = Field(min_length=1)
    output: Any = Field(default=None, description="Mapping of the result (default: last step).")


class WorkflowsFile(_Spec):
    workflows: dict[str, WorkflowSpec] = Field(default_factory=dict)


# ─── config/models.yaml ─────────────────────────────────────────────────────────────────


def _price(value: Any) -> float:
    """A price as YAML wrote it: a plain non-negative finite number (a quoted "0.15" is a typo, not a price)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise ValueError(f"{value!r} is not a price; write a number ≥ 0, in USD per million tokens (e.g. 0.15)")
    return float(value)


Price = Annotated[float, Field(ge=0), BeforeValidator(_price)]


class PricesSpec(_Spec):
    """What a model costs, in US dollars per million tokens: each answer's usage gets a `cost_usd`."""

    input: Price = Field(description="USD per million input (prompt) tokens.")
    output: Price = Field(description="USD per million output (completion) tokens.")


class ReasoningSpec(_Spec):
    """A reasoning model's thinking (docs/agent.md#reasoning): asked for, streamed, kept, or kept in."""

    enabled: StrictBool = Field(default=False, description="Ask the provider to reason (Anthropic extended "
                                "thinking; OpenAI-style reasoning_effort). Models that always reason stream it anyway.")
    effort: Literal["low", "medium", "high"] | None = Field(default=None, description="OpenAI-style reasoning_effort.")
    budget_tokens: int | None = Field(default=None, ge=1024, description="Anthropic extended thinking's budget "
                                      "(at least 1024; below max_tokens). Default 2048.")
    send: StrictBool = Field(default=True, description="true: the reasoning text is streamed and stored; false: it "
                             "never leaves the process, only its duration does.")


class ModelSpec(_Spec):
    provider: str = Field(description="mock, or a registered provider such as openai.")
    model: str | None = Field(default=None, description="The provider's model id.")
    base_url: str | None = None
    api_key: str | None = Field(default=None, description="Use ${ENV_VAR}; never commit keys.")
    timeout: Duration | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)
    options: dict[str, Any] = Field(default_factory=dict, description="Provider-specific settings.")
    stream: StrictBool | None = Field(
        default=None,
        description="true: always stream the answer; false: never (one plain request, the text arrives whole); "
        "not set: stream only when someone watches the run (a timeline, an SSE stream, an event callback).",
    )
    prices: PricesSpec | None = Field(
        default=None, description="USD per million tokens, {input, output}: usage then shows a cost."
    )
    reasoning: ReasoningSpec | None = Field(
        default=None, description="A reasoning model's thinking: {enabled, effort, budget_tokens, send}."
    )
    fallback: list[str] = Field(
        default_factory=list,
        description="Models (names in this file) that take the same request, in order, when this one fails "
        "for a reason worth retrying elsewhere (connection, timeout, 5xx, 429, overloaded).",
    )


class ModelsFile(_Spec):
    default: str = "mock"
    models: dict[str, ModelSpec] = Field(default_factory=lambda: {"mock": ModelSpec(provider="mock")})
