"""The router: the only door from a tool call to real work.

unknown tool → allow/deny policy → per-call subset → enabled → arguments parse as JSON →
JSON Schema (every error, with JSON Pointers; a tool sent in OpenAI strict mode first loses
the nulls a model sent for its optional properties, checked only when the arguments fail) →
defaults → confirmation → executor under the tool's timeout. It never raises for a bad call;
it returns a ToolResult with a code.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, Awaitable, Collection

from ..errors import ErrorCode, StepFailure
from ..logging import logger
from ..safety.redaction import Redactor, unparsed_arguments
from ..safety.untrusted import Problem, arguments_problem, find_problem, loads, text_may_hide_problem
from .context import NO_USAGE, CallContext
from .deadlines import deadline
from .ids import new_id
from .project import LinkedTool
from .result import ToolError, ToolResult
from .timing import PLAIN_TYPES, elapsed_ms, perf_counter_ns

if TYPE_CHECKING:
    from .project import Project
    from .run import Run


def route_in_run(
    run: "Run",
    project: "Project",
    name: str,
    arguments: str | dict[str, Any] | None,
    *,
    tool_call_id: str | None = None,
    model: str | None = None,
    allowed_tools: Collection[str] | None = None,
    timeout: float | None = None,
    announce_start: bool = False,
) -> Awaitable[ToolResult]:
    """One call inside a Run (a tool run's own call, or one of an agent's calls).

    Returns the router's coroutine itself (await it), so a call has no extra frame.
    """
    context = CallContext(run.run_id, tool_call_id or new_id("call"), name, run, project, model)
    return route_call(context, project, arguments, allowed_tools=allowed_tools, timeout=timeout,
                      announce_start=announce_start)


async def route_call(
    run: CallContext,
    project: "Project",
    arguments: str | dict[str, Any] | None,
    *,
    allowed_tools: Collection[str] | None = None,
    timeout: float | None = None,
    announce_start: bool = False,
) -> ToolResult:
    """Check and run one call; emits tool_call_start … tool_call_result / tool_call_error.

    `announce_start`: someone streams this call's events; the router lets the event loop
    turn once after `tool_call_start`, so that event can reach them before the tool runs
    (under a burst of streamed calls, each hears its call began before any call's work).
    """
    started = perf_counter_ns()
    name = run.tool
    problem: str | Problem | None = None
    if isinstance(arguments, (str, bytes)):
        arguments, problem = _decode_json(arguments)  # listeners (and redaction) see the object, never the text
    elif arguments is not None:
        problem = arguments_problem(arguments)  # C speed unless something is odd
        if problem is not None:  # too deep, a lone surrogate…: no listener could take it
            arguments = f"(not shown: {problem})"
    tool = project.tools.get(name)
    # Validated first (a pure check), so that valid arguments of a closed schema skip redaction.
    valid = tool is not None and type(arguments) is dict and tool.validator.is_valid(arguments)
    call_id = run.tool_call_id
    run.run.emit(
        "tool_call_start",
        {"tool": name, "arguments": arguments if arguments is not None else {}},
        tool_call_id=call_id, clean=valid and tool.arguments_clean,  # type: ignore[union-attr]  # valid: tool is not None
    )
    limit: float | None = None
    try:
        if announce_start:  # inside the try: a call cancelled here still ends with its error event
            await asyncio.sleep(0)
        if tool is None:
            if name in project.broken and project.policy.permits(name) and (allowed_tools is None or name in allowed_tools):
                raise StepFailure(ErrorCode.CONFIG_ERROR, f"tool {name!r} cannot run: its configuration has problems",
                                  {"problems": [str(issue) for issue in project.broken[name]]})
            available = [n for n, t in project.tools.items() if t.enabled and project.policy.permits(n)]
            raise StepFailure(ErrorCode.UNKNOWN_TOOL, f"there is no tool named {name!r}", {"available_tools": available})
        if not project.policy.permits(name) or (allowed_tools is not None and name not in allowed_tools):
            raise StepFailure(ErrorCode.NOT_ALLOWED, f"tool {name!r} is not allowed here")
        if not tool.enabled:
            raise StepFailure(ErrorCode.TOOL_DISABLED, f"tool {name!r} is disabled")
        args = _parse_arguments(arguments, problem, tool, valid)
        if project.settings.redaction.arguments == "refuse":
            _refuse_sensitive(args, project.redactor)
        run.run.emit("tool_progress_delta", tool.matched_progress, tool_call_id=call_id, clean=True)  # engine-built
        if tool.confirm:  # an executor may keep the question itself (Temporal: durable, in its execution)
            await getattr(tool.executor, "ask_confirmation", confirm_call)(run, tool, args)
        limit = tool.timeout if timeout is None else min(timeout, tool.timeout)
        with deadline(limit):
            data = await tool.executor.execute(args, run)
    except StepFailure as failure:
        return _finish(run, started, error=ToolError(failure.code, failure.message, failure.details))
    except TimeoutError:
        if limit is None:  # raised before the tool ran, e.g. by an approval callback
            return _finish(run, started, error=ToolError(ErrorCode.EXECUTION_ERROR, "the call timed out before it could run"))
        return _finish(run, started, error=ToolError(ErrorCode.TIMEOUT, f"tool {name!r} took longer than {limit:g}s"))
    except asyncio.CancelledError:
        _finish(run, started, error=ToolError(ErrorCode.CANCELLED, f"call of {name!r} was cancelled"))
        raise
    except Exception as exc:  # noqa: BLE001 - the translation boundary: never raise to the caller
        logger.exception("tool execution failed", tool=name, run_id=run.run_id)
        return _finish(run, started, error=ToolError(ErrorCode.EXECUTION_ERROR, f"{type(exc).__name__}: {exc}"))
    return _finish(run, started, data=data, clean=tool.result_clean)


def _decode_json(text: str | bytes) -> tuple[Any, str | Problem | None]:
    """Model-written argument text → (value, None), or (a placeholder, what is wrong with it).

    The text is checked at C speed (`text_may_hide_problem`); the decoded value is walked only
    when the text could hide too deep nesting or a lone surrogate. Text that is not accepted is
    never shown (`unparsed_arguments`): without parsed keys, redaction could not find its secrets.
    """
    if isinstance(text, bytes):
        try:  # as json.loads reads bytes (UTF-8/16/32); 'surrogatepass' lets the check below name the place
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        except UnicodeDecodeError as exc:
            return unparsed_arguments(text), f"{exc.reason} at byte {exc.start}"
    if not text.strip():
        return {}, None
    problem: str | Problem | None
    try:
        value = loads(text)
    except json.JSONDecodeError as exc:
        problem = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except ValueError as exc:  # NaN, a huge number, absurd nesting (untrusted.loads)
        problem = str(exc)
    else:
        if value is None:
            problem = "arguments must be a JSON object, not null"
        elif not text_may_hide_problem(text) or (problem := find_problem(value)) is None:
            return value, None
    return unparsed_arguments(text), problem


def _parse_arguments(arguments: Any, problem: str | Problem | None, tool: LinkedTool, valid: bool) -> dict[str, Any]:
    if isinstance(problem, Problem):
        raise StepFailure(
            ErrorCode.INVALID_ARGUMENTS,
            f"arguments cannot be accepted: {problem}",
            {"errors": [problem.as_dict()], "schema": tool.parameters},
        )
    if problem is not None:
        raise StepFailure(ErrorCode.INVALID_ARGUMENTS, f"arguments are not valid JSON: {problem}", {"schema": tool.parameters})
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise StepFailure(
            ErrorCode.INVALID_ARGUMENTS,
            f"arguments must be a JSON object, not {type(arguments).__name__}",
            {"schema": tool.parameters},
        )
    if valid or tool.validator.is_valid(arguments):  # `valid`: the router already checked this object
        return tool.validator.with_defaults(arguments) if tool.validator.has_defaults else arguments
    if tool.strict is not None:  # strict mode lets a model send null for an optional property: dropped
        trimmed = tool.strict.drop_nulls(arguments)
        if trimmed is not arguments:
            if tool.validator.is_valid(trimmed):
                return tool.validator.with_defaults(trimmed) if tool.validator.has_defaults else trimmed
            arguments = trimmed  # what else is wrong is reported without those nulls
    violations = tool.validator.check(arguments)
    summary = "; ".join(f"{v.pointer or '/'}: {v.message}" for v in violations[:5])
    raise StepFailure(
        ErrorCode.INVALID_ARGUMENTS,
        f"{len(violations)} argument error(s): {summary}",
        {"errors": [v.as_dict() for v in violations], "schema": tool.parameters},
    )


def _refuse_sensitive(args: dict[str, Any], redactor: Redactor) -> None:
    paths = redactor.sensitive_paths(args)
    if paths:
        raise StepFailure(
            ErrorCode.SENSITIVE_ARGUMENTS,
            f"the arguments hold sensitive fields ({', '.join(paths)}), which this engine refuses to pass to tools",
            {"fields": paths},
        )


async def confirm_call(run: CallContext, tool: LinkedTool, args: dict[str, Any]) -> None:
    """Ask for a yes before a `confirm: true` tool runs; `declined` when the answer is no."""
    run.run.emit(
        "confirmation_required", {"tool": tool.name, "arguments": args}, tool_call_id=run.tool_call_id
    )
    approved = await run.run.ask_approval(tool, args, run.tool_call_id)  # the Run: its approver, or any front door
    if not approved:
        raise declined(tool.name)


def declined(tool: str) -> StepFailure:
    return StepFailure(ErrorCode.CONFIRMATION_DENIED, f"the user declined the call of {tool!r}")


def _finish(run: CallContext, started: int, *, data: Any = None, error: ToolError | None = None, clean: bool = False) -> ToolResult:
    """The ToolResult and its terminal event; `clean`: the tool's result data is proven free of sensitive keys."""
    metadata: dict[str, Any] = {"duration_ms": elapsed_ms(started)}
    if type(data) not in PLAIN_TYPES:
        extra = getattr(data, "result_metadata", None)
        if callable(extra):  # executors whose data carries facts about the call (fetch: status, bytes…)
            metadata.update(extra())
    usage = run.usage
    if usage is not NO_USAGE and (usage.input_tokens or usage.output_tokens):
        metadata["usage"] = usage.as_dict()
    redactor = run.project.redactor
    if redactor.configured_regex is not None:  # the operator's secrets are not the caller's, whatever a tool returns
        data = redactor.hide_configured(data)
        if error is not None:
            error = ToolError(error.code, redactor.hide_configured(error.message), redactor.hide_configured(error.details))
    result = ToolResult(error is None, run.tool, run.run_id, run.tool_call_id, data, error, metadata)
    if error is None:
        event = run.run.emit("tool_call_result", {"ok": True, "data": data, "metadata": metadata},
                             tool_call_id=run.tool_call_id, result=result, clean=clean)
    else:
        event = run.run.emit("tool_call_error", {"ok": False, "error": error.to_dict(), "metadata": metadata},
                             tool_call_id=run.tool_call_id, result=result)
    object.__setattr__(result, "shown", event.data)  # frozen, but the event must carry this very result
    return result
