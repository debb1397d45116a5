"""The agent loop: Think → Act → Observe, with the limits a production agent needs.

Each model call is one step: `max_steps` counts the first generation, every tool-call round
and the final answer, so a limit of N is N model calls (what a run costs), whatever they
asked for. Tool calls the model asks for in one turn run concurrently (up to
`max_parallel_tool_calls`), each through the router in the same run, so their events nest
under the agent run with their own `tool_call_id`. Every stop says why and returns what was
gathered so far.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, Collection, Literal, Protocol

from ..errors import LimitExceeded, StepFailure
from ..logging import logger
from ..providers.base import (
    ChatMessage,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ToolCall,
    Usage,
    clean_response,
)
from ..providers.pricing import priced_response
from ..runs.events import Event, Listener, stream_run
from ..runs.run import end_status, stop_code
from ..safety.redaction import Redactor
from ..safety.untrusted import replace_lone_surrogates
from ..spec.settings import AgentSettings
from .answers import DEFAULT_REPAIRS, AnswerSchema, problem_lines, refusal_details, repair_message, with_instruction
from .ids import new_id
from .result import ToolResult
from .router import route_in_run
from .turns import chat_format, parse_messages, session_turn, trim_history

if TYPE_CHECKING:
    from ..runs.events import QueuedListener
    from ..runs.live import LiveRuns, RunEnd
    from ..runs.run import Approver, Run, RunKind
    from .project import Project
    from .turns import SessionBook

StopReason = Literal["answer", "max_steps", "timeout", "token_budget", "repeated_call", "error", "cancelled",
                     "invalid_output"]
CORRECTABLE = frozenset({"unknown_tool", "invalid_arguments"})


AgentLimits = AgentSettings  # the limits of one agent run: config/engine.yaml's `agent:` model, defaults and bounds


@dataclass
class AgentResult:
    run_id: str
    stop_reason: StopReason
    answer: str
    messages: list[ChatMessage]
    tool_results: list[ToolResult] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    error: str | None = None
    session_id: str | None = None
    data: Any = None  # the parsed answer, when the agent has an output schema and the answer matched it
    error_details: dict[str, Any] | None = None  # invalid_output: the errors and the last answer

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: `messages` in the OpenAI chat format (what `run` takes back)."""
        return {
            "run_id": self.run_id,
            **({"session_id": self.session_id} if self.session_id is not None else {}),
            "stop_reason": self.stop_reason,
            "answer": self.answer,
            "steps": self.steps,
            "usage": self.usage.as_dict(),
            "tool_results": [r.to_dict() for r in self.tool_results],
            "error": self.error,
            **({"data": self.data} if self.data is not None else {}),
            **({"details": self.error_details} if self.error_details is not None else {}),
            "messages": chat_format(self.messages),
        }


class _Stop(Exception):
    def __init__(self, reason: StopReason, message: str | None = None, details: dict[str, Any] | None = None):
        super().__init__(message or reason)
        self.reason = reason
        self.message = message
        self.details = details


as_messages = parse_messages  # a prompt, or ChatMessages / OpenAI chat-format dicts, checked (runtime/turns.py)


class RunOpener(Protocol):
    """What opens Runs (the Engine) and drives them (its `live`, engine/runs/live.py): all the
    agent loop needs of it."""

    @property
    def project(self) -> "Project": ...

    @property
    def live(self) -> "LiveRuns": ...

    def open_run(self, run_id: str, on_event: "Listener | None" = None, kind: RunKind = "tool", name: str = "",
                 principal: str | None = None, approver: Approver | None = None,
                 ) -> "tuple[Run, list[QueuedListener]]": ...

    @property
    def sessions(self) -> "SessionBook": ...


class Agent:
    def __init__(
        self,
        runs: "RunOpener | None",
        model: str,
        *,
        tools: Collection[str] | None,
        limits: AgentLimits,
        tool_choice: str = "auto",
        system: str | None = None,
        approve: "Approver | None" = None,
        output_schema: "dict[str, Any] | AnswerSchema | None" = None,
        repairs: int = DEFAULT_REPAIRS,
    ):
        """`output_schema`: the final answer must be JSON matching it (compiled here, once per
        agent; an AnswerSchema is taken as compiled); a wrong one gets `repairs` repair turns."""
        self.runs = runs  # opens, and ends, the Run of each `run()` (the Engine); None: only `run_in` runs it (in a run opened elsewhere)
        self.model = model
        self.tools = set(tools) if tools is not None else None
        self.limits = limits
        self.tool_choice = tool_choice
        self.answer = output_schema if isinstance(output_schema, AnswerSchema) or output_schema is None \
            else AnswerSchema.of(output_schema)
        self.repairs = repairs
        self.system = with_instruction(system, self.answer)
        self.approve = approve

    async def run(
        self, messages: str | list[Any], *, on_event: Listener | None = None, run_id: str | None = None,
        principal: str | None = None, session: str | None = None,
    ) -> AgentResult:
        """Run the loop to a stop. On cancellation the partial result is the run's own: the
        `result` of its `agent_done` event (every run of this Agent has its own).

        `session`: continue that session (created on first use): its history goes first, and
        the turn is kept when the run stops (runtime/turns.py). SessionError when another turn
        of it is running (`session_busy`)."""
        run_id = run_id or new_id("run")
        if session is not None:
            async def turn(sent: list[ChatMessage]) -> AgentResult:
                return await self._run(sent, on_event, run_id, principal, session)

            runs = self._opener()
            return await session_turn(turn, runs.sessions, runs.project.redactor, session, messages,
                                      run_id, principal)
        return await self._run(as_messages(messages), on_event, run_id, principal, None)

    async def _run(self, messages: str | list[Any], on_event: Listener | None, run_id: str, principal: str | None,
                   session: str | None) -> AgentResult:
        parsed = as_messages(messages)  # a bad message raises here, before any run opens
        runs = self._opener()
        run, queued = runs.open_run(run_id, on_event, kind="agent", name=self.model,
                                    principal=principal, approver=self.approve)
        loop = _Loop(self, run, parsed, runs.project, session)
        return await runs.live.drive(run, queued, loop.run(), loop.end_of)

    def _opener(self) -> RunOpener:
        """What opens this Agent's runs: an Agent made without one (an agent step's, a durable
        workflow's) runs only inside a run its caller opened (`run_in`)."""
        if self.runs is None:
            raise TypeError("this Agent has nothing to open its runs with: run it in its caller's run (run_in)")
        return self.runs

    async def stream(self, messages: str | list[Any], **options: Any) -> AsyncIterator[Event]:
        """Yield the run's events as they happen; the last one is `agent_done`."""
        async for event in stream_run(
            lambda listener: self.run(messages, on_event=listener, **options), lambda e: e.type == "agent_done"
        ):
            yield event


async def run_in(agent: Agent, run: "Run", project: "Project", messages: str | list[Any]) -> AgentResult:
    """The loop inside a Run its caller opened and ends (an agent step of a workflow, in the
    workflow's call): its events, tool calls and approvals are that Run's; `project` is the call's."""
    return await _Loop(agent, run, as_messages(messages), project).run()


def agent_run_end(result: AgentResult | None) -> "RunEnd":
    """(status, result, error) of an agent run (None: it ended before it began), by the
    run's end rule (`end_status`)."""
    if result is None:
        return "error", None, {"code": "error", "message": "the run ended before it began"}
    code = stop_code(result.stop_reason)
    if code is None:
        return end_status(code), result.answer, None
    error: dict[str, Any] = {"code": code, "message": result.error}
    if result.error_details is not None:
        error["details"] = result.error_details
    return end_status(code), result.answer, error


class _Loop:
    """The state of one agent run.

    `route` runs one tool call in the run; a durable loop (the Temporal backend's agent
    workflow) replaces it with one that routes the call on a worker.
    """

    route = staticmethod(route_in_run)

    def __init__(self, agent: Agent, events: "Run", messages: list[ChatMessage], project: "Project",
                 session: str | None = None):
        self.agent = agent
        self.limits = agent.limits
        self.events = events
        self.project = project  # pinned for the whole run
        self.given = messages  # the transcript as it came (AgentResult.messages starts with it whole)
        kept, self.trimmed = self._trimmed(messages)
        self.messages = ([ChatMessage("system", agent.system)] if agent.system else []) + kept  # what the model reads
        self.produced_from = len(self.messages)
        self.result = AgentResult(events.run_id, "answer", "", list(messages), session_id=session)
        self.ended: AgentResult | None = None  # the result, once the loop stopped (this run's, nobody else's)
        self.corrections: dict[str, int] = {}
        self.repairs_left = agent.repairs
        self.recent_calls: list[str] = []
        self.tool_specs: tuple[dict[str, Any], ...] = ()  # set as the loop runs (in its Run: a bug ends that)
        self.allowed: set[str] = set()
        self.budget = self.project.answer_budget  # what one model answer may hold

    def end_of(self, run: "Run", answered: AgentResult | None) -> "RunEnd":
        """How the run ended: by this loop's own result (a cancelled loop's partial one too)."""
        return agent_run_end(self.ended)

    def _trimmed(self, messages: list[ChatMessage]) -> tuple[list[ChatMessage], tuple[int, int]]:
        """The history within agent.max_history_tokens, and (turns, tokens) dropped (the system prompt counts)."""
        system = [ChatMessage("system", self.agent.system)] if self.agent.system else []
        kept, turns, tokens = trim_history(system + messages, self.limits.max_history_tokens)
        return kept[len(system):], (turns, tokens)

    async def run(self) -> AgentResult:
        started = time.perf_counter()
        self.tool_specs = tuple(  # the provider-neutral form of ModelRequest.tools, with its link-time strict form
            t.model_spec for t in self.project.callable_tools(self.agent.tools)
        )
        self.allowed = {s["name"] for s in self.tool_specs}
        start = {
            "model": self.agent.model,
            "tools": sorted(self.allowed),
            "limits": {k: v for k, v in self.limits.__dict__.items()},
            "input": [{"role": m.role, "content": m.content} for m in self.messages],
        }
        if self.result.session_id is not None:
            start["session_id"] = self.result.session_id
        self.events.emit("agent_start", start)
        if self.trimmed[0]:
            self.events.emit("history_trimmed", {"turns": self.trimmed[0], "tokens": self.trimmed[1],
                                                 "max_history_tokens": self.limits.max_history_tokens})
        try:
            async with asyncio.timeout(self.limits.total_timeout):
                await self._loop()
        except _Stop as stop:
            self.result.stop_reason = stop.reason
            self.result.error = stop.message if stop.reason in ("error", "invalid_output") else None
            self.result.error_details = stop.details
            if stop.reason in ("error", "invalid_output"):
                self.events.emit("agent_error", {"message": stop.message, **({"code": stop.reason, "details": stop.details}
                                                                             if stop.details is not None else {})})
        except LimitExceeded as limit:  # the run's event cap (limits.max_events_per_run): it says which
            self.result.stop_reason, self.result.error = "error", limit.message
            self.events.emit("agent_error", {"message": limit.message, "code": limit.code})
        except TimeoutError:
            self.result.stop_reason = "timeout"
        except asyncio.CancelledError:
            self.result.stop_reason = "cancelled"
            self._done(started)
            raise
        self._done(started)
        return self.result

    def _done(self, started: float) -> None:
        result = self.result
        result.messages = self.given + self.messages[self.produced_from:]  # the whole transcript, the answer last
        if result.stop_reason in LIMIT_STOPS and not result.answer.strip():
            result.answer = self.events.scrub_text(gathered_summary(result, self.limits, self.project.redactor))
        self.ended = result
        self.events.emit("agent_done", {
            "stop_reason": result.stop_reason,
            "answer": result.answer,
            **({"data": result.data} if result.data is not None else {}),
            "steps": result.steps,
            "usage": result.usage.as_dict(),
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
            "error": result.error,
        }, result=result)

    async def _loop(self) -> None:
        for step in range(1, self.limits.max_steps + 1):
            self.result.steps = step
            response = await self._think(step)
            if not response.tool_calls:
                self.result.answer = response.text
                self.messages.append(ChatMessage("assistant", response.text))
                if self.agent.answer is None or self._typed(response.text, step):
                    self.events.emit("final_answer_delta", {"text": response.text})
                    raise _Stop("answer")
                continue
            await self._act(response.text, _unique_ids(response.tool_calls, step), response.reasoning)
        raise _Stop("max_steps")

    def _typed(self, text: str, step: int) -> bool:
        """Whether the answer matches the agent's output schema (then `result.data` holds it).
        A wrong one gets a repair turn while the repairs last (the prompt skills' policy), else
        the run stops with `invalid_output`, the errors and the last answer in its details."""
        assert self.agent.answer is not None
        value, problems = self.agent.answer.parse(text)
        if not problems:
            self.result.data = value
            return True
        lines = problem_lines(problems)
        if self.repairs_left == 0:
            tries = self.agent.repairs + 1
            raise _Stop("invalid_output", f"model {self.agent.model!r} gave an answer that does not match the output "
                        f"schema after {tries} attempt(s): {lines[0]}", refusal_details(problems, text))
        self.repairs_left -= 1
        self.events.emit("answer_invalid", {"step": step, "errors": lines[:5],
                                            "repairs_left": self.repairs_left})
        self.messages.append(ChatMessage("user", repair_message(problems)))
        return False

    async def _think(self, step: int) -> ModelResponse:
        try:
            provider, spec = self.project.provider(self.agent.model)
        except StepFailure as failure:
            raise _Stop("error", failure.message) from None
        first = step == 1
        # `required` and a named tool apply to the first model call only (else the model could
        # never answer); `none` keeps the tools declared (the history may hold tool calls,
        # which Anthropic accepts only with tools defined) but forbids calling them.
        choice = self.agent.tool_choice if first or self.agent.tool_choice in ("auto", "none") else "auto"
        tools = self.tool_specs
        answer = self.agent.answer
        request = ModelRequest(tuple(self.messages), model=spec.model, temperature=spec.temperature,
                               max_tokens=spec.max_tokens, tools=tools, tool_choice=choice if tools else "auto",
                               output_schema=answer.raw if answer is not None else None,
                               output_strict=answer.strict if answer is not None else None, budget=self.budget)
        self.events.emit("model_call_start", {"step": step, "model": self.agent.model, "messages": len(self.messages)})
        # Text as it comes only for someone who watches the run: without, the provider may ask for
        # one plain answer (less work on both sides); the model's `stream:` may force either.
        sinks = TextSinks(self.events, step, spec.reasoning is None or spec.reasoning.send) if self.events.watchers else None
        try:
            response = await provider.request(request, sinks)
        except ProviderError as exc:
            raise _Stop("error", self.events.scrub_text(f"model {self.agent.model!r} failed: {exc}")) from None
        except LimitExceeded:  # raised by a text delta past the run's event cap: not the model's fault
            raise
        except Exception as exc:  # noqa: BLE001 - a provider's own bug ends the run with a reason, not a crash
            logger.exception("model provider failed", model=self.agent.model, run_id=self.events.run_id)
            raise _Stop("error", self.events.scrub_text(f"model {self.agent.model!r} failed: {type(exc).__name__}: {exc}")) from None
        finally:
            if sinks is not None:
                sinks.close()
        response = priced_response(clean_response(response, self.agent.model), spec.prices)
        self.result.usage = self.result.usage + response.usage
        if self._over_budget():
            if not response.tool_calls:  # the model answered: that answer stands, and ends the transcript
                self.result.answer = response.text
                self.messages.append(ChatMessage("assistant", response.text))
            raise _Stop("token_budget")
        return response

    async def _act(self, text: str, calls: tuple[ToolCall, ...], reasoning: tuple[dict[str, Any], ...] = ()) -> None:
        for call in calls:
            key = f"{call.name}\x00{_canonical(call.arguments)}"
            self.recent_calls.append(key)
        tail = self.recent_calls[-self.limits.max_repeated_calls :]
        repeated = len(tail) == self.limits.max_repeated_calls and len(set(tail)) == 1
        gate = asyncio.Semaphore(self.limits.max_parallel_tool_calls)
        finished: dict[str, ToolResult] = {}

        async def one(call: ToolCall) -> ToolResult:
            async with gate:
                result = await self.route(
                    self.events, self.project, call.name, call.arguments, tool_call_id=call.id,
                    allowed_tools=self.allowed, timeout=self.limits.tool_timeout,
                )
            if result.error is not None:
                result = self.events.scrub_error(result)
            finished[call.id] = result
            return result

        if repeated:  # the repeated call is not run, and not kept in the transcript unanswered
            raise _Stop("repeated_call")
        self.messages.append(ChatMessage("assistant", text, tool_calls=calls, reasoning=reasoning))
        try:
            await asyncio.gather(*(one(call) for call in calls))
        finally:  # also on timeout / cancellation: keep what finished, answer every call in the transcript
            for call in calls:
                result = finished.get(call.id)
                if result is not None:
                    self.result.tool_results.append(result)
                observation = self._observation(call, result) if result is not None else (
                    f"[{call.name} failed: cancelled] The call was cancelled before it finished.")
                failed = result is None or not result.ok
                self.messages.append(ChatMessage("tool", observation, tool_call_id=call.id, name=call.name, is_error=failed))
        results = [finished[call.id] for call in calls]
        self._count_tool_usage(results)
        for call, result in zip(calls, results, strict=True):  # one result per call, made just above
            if result.error is not None and result.error.code in CORRECTABLE:
                count = self.corrections[call.name] = self.corrections.get(call.name, 0) + 1
                if count >= self.limits.max_corrections:
                    raise _Stop("error", f"tool {call.name!r}: {count} invalid calls in a row "
                                         f"(limit max_corrections={self.limits.max_corrections})")
            else:
                self.corrections.pop(call.name, None)

    def _over_budget(self) -> bool:
        budget = self.limits.token_budget
        return budget is not None and self.result.usage.input_tokens + self.result.usage.output_tokens > budget

    def _count_tool_usage(self, results: list[ToolResult]) -> None:
        """Model calls made inside the tool calls (a prompt skill's, an MCP server's sampling) are
        the run's too: their usage adds to the run's, and counts against token_budget."""
        for result in results:
            used = result.metadata.get("usage")
            if used:
                self.result.usage = self.result.usage + Usage(used.get("input_tokens", 0), used.get("output_tokens", 0),
                                                              used.get("cost_usd"))
        if self._over_budget():
            raise _Stop("token_budget")

    def _observation(self, call: ToolCall, result: ToolResult) -> str:
        """What the model reads back: sensitive values in the result never reach it.

        The data goes through the run's own scrubber, as its events do: values under sensitive
        keys are replaced, and so is every secret the run knows wherever it shows up (a fetched
        `"note": "see <the password>"` beside `"password": …`). Data that renders its own model
        text (a fetch result) is rebuilt from the redacted copy; the text as a whole (an error's
        details too) has the run's known secrets hidden before it is cut to size.
        """
        if result.error is not None and result.error.code == "confirmation_denied":
            return f"The user declined the call of {call.name}. Do not call it again unless the user asks."
        scrub = self.events.scrubber
        data = result.data
        redacted = scrub(data) if scrub is not None else self.project.redactor.redact(data)
        if redacted is not data:
            result = dataclasses.replace(result, data=_same_kind(data, redacted))
        return capped(self.events.scrub_text(result.model_text()), self.limits.max_result_chars)


class TextSinks:
    """Where a model call's streamed text and reasoning go: `model_text_delta` and
    `model_reasoning_delta` events, each held back like model text (a secret split across two
    deltas is still caught), and `model_reasoning_done {duration_ms, chars}` once the answer (or
    the call's end) follows the reasoning. `send=False` (the model's `reasoning.send`): the
    reasoning's text never leaves the process, only its duration and size do."""

    def __init__(self, events: "Run", step: int, send: bool):
        self.events, self.step, self.send = events, step, send
        self.text, self.thought = events.text_stream(), events.text_stream()
        self.started: float | None = None
        self.chars = 0
        self.finished = False

    def __call__(self, piece: str) -> None:
        self.end_reasoning()
        shown = self.text.push(replace_lone_surrogates(piece))
        if shown:
            self.events.emit("model_text_delta", {"text": shown, "step": self.step})

    def on_reasoning(self, piece: str) -> None:
        if self.started is None:
            self.started = time.perf_counter()
        self.chars += len(piece)
        if self.send:
            shown = self.thought.push(replace_lone_surrogates(piece))
            if shown:
                self.events.emit("model_reasoning_delta", {"text": shown, "step": self.step})

    def end_reasoning(self) -> None:
        if self.started is None or self.finished:
            return
        self.finished = True
        rest = self.thought.flush() if self.send else ""
        if rest:
            self.events.emit("model_reasoning_delta", {"text": rest, "step": self.step})
        self.events.emit("model_reasoning_done", {"duration_ms": round((time.perf_counter() - self.started) * 1000, 2),
                                                  "chars": self.chars, "step": self.step})

    def close(self) -> None:
        self.end_reasoning()
        rest = self.text.flush()
        if rest:
            self.events.emit("model_text_delta", {"text": rest, "step": self.step})


def capped(text: str, max_chars: int) -> str:
    """`text` cut to `max_chars`, with a note saying how much was cut (agent.max_result_chars)."""
    if len(text) <= max_chars:
        return text
    return (text[:max_chars] + f"\n[… {len(text) - max_chars:,} more characters cut: the result held {len(text):,}; "
            f"the model reads at most {max_chars:,} (agent.max_result_chars)]")


LIMIT_STOPS = frozenset({"max_steps", "timeout", "token_budget", "repeated_call"})
_LIMIT_NAMES = {"max_steps": "max_steps", "timeout": "total_timeout", "token_budget": "token_budget",
                "repeated_call": "max_repeated_calls"}


def gathered_summary(result: AgentResult, limits: AgentLimits, redactor: Redactor, per_result: int = 400) -> str:
    """The answer of a run a limit stopped: what the tool calls gathered, said plainly (no model call:
    asking the model again would break the very limit that stopped it)."""
    name = _LIMIT_NAMES[result.stop_reason]
    value = getattr(limits, name)
    head = f"Stopped before a final answer: the limit {name}={value if value is not None else '-'} was reached"
    if not result.tool_results:
        return head + " before any tool returned a result."
    lines = [head + f". What {len(result.tool_results)} tool call(s) returned:"]
    for tool_result in result.tool_results[-8:]:
        lines.append(f"- {tool_result.tool}: {_short_result(tool_result, redactor, per_result)}")
    return "\n".join(lines)


def _short_result(result: ToolResult, redactor: Redactor, limit: int) -> str:
    if result.error is not None:
        return f"failed ({result.error.code}): {result.error.message[:limit]}"
    data = redactor.redact(result.data)
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _same_kind(original: Any, redacted: Any) -> Any:
    """`redacted` as the type of `original` when that type renders model text (else plain data)."""
    if callable(getattr(original, "render_model_text", None)) and isinstance(original, dict):
        try:
            return type(original)(redacted)
        except Exception:  # noqa: BLE001 - a type that cannot be rebuilt reads as plain JSON
            return redacted
    return redacted


def _unique_ids(calls: tuple[ToolCall, ...], step: int) -> tuple[ToolCall, ...]:
    """Every call of a turn needs its own id: approvals and results are keyed by it."""
    seen: set[str] = set()
    out = []
    for index, call in enumerate(calls):
        if not call.id or call.id in seen:
            call = ToolCall(f"{call.id or 'call'}_{step}_{index}", call.name, call.arguments)
        seen.add(call.id)
        out.append(call)
    return tuple(out)


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except (json.JSONDecodeError, TypeError):
        return arguments


__all__ = ["Agent", "AgentLimits", "AgentResult", "StopReason", "run_in"]
