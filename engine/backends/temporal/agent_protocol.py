"""What travels between the front door, the agent workflow and its activities: plain JSON.

The agent loop's values (messages, model requests and responses, tool results) are
dataclasses in the engine; Temporal records plain JSON in an execution's history, so they
cross here, both ways, without loss of anything the loop reads back.
"""

from __future__ import annotations

from typing import Any

from ...lang.strict_schema import StrictSchema, to_strict
from ...providers.base import ChatMessage, ModelRequest, ModelResponse, ToolCall, Usage
from ...runtime.result import ToolError, ToolResult
from .protocol import APPROVE_SIGNAL, PENDING_QUERY  # noqa: F401 - shared with a direct call's confirmation

AGENT_WORKFLOW = "skillyard.agent"  # the workflow type of an agent run (workflow id = the run id)
MODEL_ACTIVITY = "skillyard.model_request"  # one model request (its answer is recorded: never paid for twice)
TOOL_ACTIVITY = "skillyard.agent_tool"  # one tool call of an agent, routed on a worker


def message_out(message: ChatMessage) -> dict[str, Any]:
    return {"role": message.role, "content": message.content,
            "tool_calls": [[c.id, c.name, c.arguments] for c in message.tool_calls],
            "tool_call_id": message.tool_call_id, "name": message.name, "is_error": message.is_error}


def message_in(value: dict[str, Any]) -> ChatMessage:
    return ChatMessage(value["role"], value["content"], tuple(ToolCall(*c) for c in value.get("tool_calls") or ()),
                       value.get("tool_call_id"), value.get("name"), bool(value.get("is_error")))


def request_out(request: ModelRequest) -> dict[str, Any]:
    """`output_strict` travels as a flag: the worker rebuilds the strict form from the schema (`request_in`)."""
    return {"messages": [message_out(m) for m in request.messages], "model": request.model,
            "output_schema": request.output_schema, "output_strict": request.output_strict is not None,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens, "tools": list(request.tools), "tool_choice": request.tool_choice}


def request_in(value: dict[str, Any]) -> ModelRequest:
    schema = value["output_schema"]
    strict = to_strict(schema) if schema is not None and value.get("output_strict") else None
    return ModelRequest(tuple(message_in(m) for m in value["messages"]), model=value["model"],
                        output_schema=schema, temperature=value["temperature"],
                        max_tokens=value["max_tokens"], tools=tuple(value["tools"]), tool_choice=value["tool_choice"],
                        output_strict=strict if isinstance(strict, StrictSchema) else None)


def usage_out(usage: Usage) -> list[Any]:
    """[input, output] tokens, and the cost when the model's prices gave one (`Usage(*value)` reads both)."""
    if usage.cost_usd is None:
        return [usage.input_tokens, usage.output_tokens]
    return [usage.input_tokens, usage.output_tokens, usage.cost_usd]


def response_out(response: ModelResponse) -> dict[str, Any]:
    return {"text": response.text, "usage": usage_out(response.usage),
            "finish_reason": response.finish_reason, "tool_calls": [[c.id, c.name, c.arguments] for c in response.tool_calls]}


def response_in(value: dict[str, Any]) -> ModelResponse:
    return ModelResponse(value["text"], Usage(*value["usage"]), value["finish_reason"],
                         tuple(ToolCall(*c) for c in value["tool_calls"]))


def result_out(result: ToolResult) -> dict[str, Any]:
    return {"ok": result.ok, "tool": result.tool, "run_id": result.run_id, "tool_call_id": result.tool_call_id,
            "data": result.data, "error": result.error.to_dict() if result.error is not None else None,
            "metadata": result.metadata}


def result_in(value: dict[str, Any]) -> ToolResult:
    error = value.get("error")
    return ToolResult(value["ok"], value["tool"], value["run_id"], value["tool_call_id"], value.get("data"),
                      ToolError(error["code"], error["message"], error.get("details") or {}) if error else None,
                      value.get("metadata") or {})
