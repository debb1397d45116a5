"""What each event type's data holds: one TypedDict per type, the keys docs/events.md lists.

A reader declares an event's data as its type says (`done: AgentDone = event.data`, a stored
event's dict alike) and reads its keys by name: a key that is always there by `[key]`, one
that is there only when it applies (`NotRequired`) by `.get`. The declaration costs nothing at
run time (a TypedDict is a plain dict, and `Event.data` is typed Any); mypy checks each read
against it, and a test checks these types against docs/events.md, both ways. `Where` names
the keys a reader of any event of a workflow step looks for.

`tool_progress_delta` and `skill_progress_delta` are open (`OPEN`): besides the keys named
here they carry whatever facts the tool, executor or python skill reports.
"""


from typing import Any, NotRequired, TypedDict


class Usage(TypedDict):
    input_tokens: int
    output_tokens: int
    cost_usd: NotRequired[float]  # when the model has `prices:`


class ErrorData(TypedDict):
    code: str
    message: str
    details: NotRequired[Any]


class Where(TypedDict, total=False):
    """Where in a workflow an event happened, for a reader of events of any type: a progress
    event's step (`step_id` in its data), a forEach item's events (`item_index`)."""

    step_id: str
    item_index: int


# ─── tool call events ────────────────────────────────────────────────────────


class ToolCallStart(TypedDict):
    tool: str
    arguments: Any  # the arguments as given (redacted), or "[unparsed arguments: N chars]"


class ToolProgressDelta(TypedDict):
    """Open: a tool type or executor adds facts of its own."""

    stage: str
    message: str
    executor: NotRequired[str]  # matched
    workflow: NotRequired[str]  # prepared, done; step_started of a step that runs a workflow
    steps: NotRequired[int]  # prepared
    step: NotRequired[int]  # step_started, step_finished, step_skipped
    of: NotRequired[int]
    step_id: NotRequired[str]
    duration_ms: NotRequired[float]  # step_finished
    condition: NotRequired[str]  # step_skipped
    parallel: NotRequired[list[str]]
    item_index: NotRequired[int]  # item_finished
    items_done: NotRequired[int]
    items_total: NotRequired[int]  # item_finished; step_started of a forEach step


class ConfirmationRequired(TypedDict):
    tool: str
    arguments: Any


class InputRequired(TypedDict):
    server: str
    message: str
    requested_schema: dict[str, Any]


class SkillStart(TypedDict):
    input: Any
    attempt: int
    kind: str
    item_index: NotRequired[int]  # a forEach item's step


class SkillProgressDelta(TypedDict):
    """Open: a python skill's `ctx.progress(message, **facts)` adds its facts."""

    message: str
    stage: NotRequired[str]
    item_index: NotRequired[int]


class SkillResult(TypedDict):
    output: Any
    duration_ms: float
    item_index: NotRequired[int]


class SkillError(TypedDict):
    code: str
    message: str
    attempt: int
    will_retry: NotRequired[bool]  # absent: the step's input was invalid, nothing ran (no retry)
    duration_ms: NotRequired[float]
    item_index: NotRequired[int]


class ExchangeMessage(TypedDict):
    role: str
    content: Any


class ModelExchange(TypedDict):
    model: str
    attempt: int
    messages: list[ExchangeMessage]
    output_schema: bool
    response: str
    usage: Usage
    item_index: NotRequired[int]
    server: NotRequired[str]  # a sampling request of this MCP server
    max_tokens: NotRequired[int]  # the sampling request's, clamped to the model's own


class ToolCallResult(TypedDict):
    ok: bool  # True
    data: Any
    metadata: dict[str, Any]  # duration_ms; usage; an executor's facts (fetch: status, bytes…)


class ToolCallError(TypedDict):
    ok: bool  # False
    error: ErrorData
    metadata: dict[str, Any]


# `from` is a keyword: the functional form. The model that failed, the one asked next, why.
ModelFallback = TypedDict("ModelFallback", {"from": str, "to": str, "reason": str})


# ─── agent events ────────────────────────────────────────────────────────────


class AgentStart(TypedDict):
    model: str
    tools: list[str]
    limits: dict[str, Any]
    input: list[ExchangeMessage]
    session_id: NotRequired[str]  # a turn of a session


class HistoryTrimmed(TypedDict):
    turns: int
    tokens: int
    max_history_tokens: int


class ModelCallStart(TypedDict):
    step: int
    model: str
    messages: int


class TextDelta(TypedDict):
    text: str
    step: int


class ReasoningDone(TypedDict):
    duration_ms: float
    chars: int
    step: int


class FinalAnswerDelta(TypedDict):
    text: str


class AnswerInvalid(TypedDict):
    step: int
    errors: list[str]
    repairs_left: int


class AgentError(TypedDict):
    message: str | None
    code: NotRequired[str]
    details: NotRequired[Any]


class AgentDone(TypedDict):
    stop_reason: str
    answer: str
    data: NotRequired[Any]  # the parsed answer of an agent with an output schema
    steps: int
    usage: Usage
    duration_ms: float
    error: str | None


PAYLOADS: dict[str, type] = {
    "agent_start": AgentStart,
    "history_trimmed": HistoryTrimmed,
    "model_call_start": ModelCallStart,
    "model_reasoning_delta": TextDelta,
    "model_reasoning_done": ReasoningDone,
    "model_text_delta": TextDelta,
    "tool_call_start": ToolCallStart,
    "tool_progress_delta": ToolProgressDelta,
    "skill_start": SkillStart,
    "skill_progress_delta": SkillProgressDelta,
    "skill_result": SkillResult,
    "skill_error": SkillError,
    "model_exchange": ModelExchange,
    "model_fallback": ModelFallback,
    "tool_call_result": ToolCallResult,
    "tool_call_error": ToolCallError,
    "confirmation_required": ConfirmationRequired,
    "input_required": InputRequired,
    "final_answer_delta": FinalAnswerDelta,
    "answer_invalid": AnswerInvalid,
    "agent_error": AgentError,
    "agent_done": AgentDone,
}
OPEN = frozenset({"tool_progress_delta", "skill_progress_delta"})  # may carry facts beyond their keys
