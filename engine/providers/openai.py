"""The `openai` provider: any OpenAI-compatible chat-completions endpoint, via the official SDK.

OpenAI, vLLM, Ollama, DeepSeek, OpenRouter… all speak this wire format. Streaming is always
on: text deltas go to `on_text`, tool-call deltas (split across chunks by `index`) are
assembled here. Retries on 429/5xx/connection errors are the SDK's own (`max_retries`, with
backoff). Structured output: `response_format: json_schema` first; if the server refuses it,
`json_object`, then plain text (the skill validates and repairs either way).
"""

from __future__ import annotations

from typing import Any, Callable

import httpx
import openai

from ..spec.models import ModelSpec
from .base import ChatMessage, ModelRequest, ModelResponse, ProviderError, ToolCall, Usage

_FORMAT_LADDER = ("json_schema", "json_object", "none")


def to_openai_messages(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    """Engine messages → chat-completions `messages`."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content})
        elif message.role == "assistant" and message.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": message.content or None,
                    "tool_calls": [
                        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                        for c in message.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": message.role, "content": message.content})
    return out


def from_openai_message(message: dict[str, Any]) -> ChatMessage:
    """A chat-completions message → the engine's ChatMessage (the other direction of the adapter)."""
    role = message["role"]
    if role == "tool":
        return ChatMessage("tool", message.get("content") or "", tool_call_id=message.get("tool_call_id"))
    calls = tuple(
        ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments") or "")
        for c in message.get("tool_calls") or []
    )
    return ChatMessage(role, message.get("content") or "", tool_calls=calls)


def to_openai_tools(tools: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]}}
        for t in tools
    ]


def to_openai_tool_choice(choice: str) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


class OpenAIProvider:
    def __init__(self, spec: ModelSpec, client: openai.AsyncOpenAI | None = None):
        if spec.model is None:
            raise ProviderError("an openai model needs `model:` (the endpoint's model id)")
        self.spec = spec
        self.client = client or openai.AsyncOpenAI(
            api_key=spec.api_key or "not-needed",  # local servers (vLLM, Ollama) take any key
            base_url=spec.base_url,
            timeout=spec.timeout or 60.0,
            max_retries=int(spec.options.get("max_retries", 2)),
        )
        self._format = str(spec.options.get("structured_output", "json_schema"))

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        params: dict[str, Any] = {
            "model": request.model or self.spec.model,
            "messages": to_openai_messages(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens
        if request.tools:
            params["tools"] = to_openai_tools(request.tools)
            params["tool_choice"] = to_openai_tool_choice(request.tool_choice)
        while True:
            if request.output_schema is not None:
                _set_response_format(params, self._format, request.output_schema)
            try:
                return await self._stream(params, on_text)
            except openai.BadRequestError as exc:
                if request.output_schema is None or self._format == "none" or "response_format" not in str(exc):
                    raise ProviderError(f"the endpoint refused the request: {_short(exc)}") from None
                self._format = _FORMAT_LADDER[_FORMAT_LADDER.index(self._format) + 1]
            except openai.APIStatusError as exc:
                retryable = exc.status_code == 429 or exc.status_code >= 500
                raise ProviderError(f"HTTP {exc.status_code}: {_short(exc)}", retryable=retryable) from None
            except openai.APITimeoutError:
                raise ProviderError("the endpoint did not answer in time", retryable=True) from None
            except openai.APIConnectionError as exc:
                raise ProviderError(f"cannot reach the endpoint: {_short(exc)}", retryable=True) from None
            except httpx.HTTPError as exc:  # e.g. the connection dropped mid-stream
                raise ProviderError(f"the stream broke off: {type(exc).__name__}: {_short(exc)}", retryable=True) from None
            except openai.OpenAIError as exc:
                raise ProviderError(f"{type(exc).__name__}: {_short(exc)}") from None

    async def _stream(self, params: dict[str, Any], on_text: Callable[[str], None] | None) -> ModelResponse:
        stream = await self.client.chat.completions.create(**params)
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage = Usage()
        finish = "stop"
        async for chunk in stream:
            if chunk.usage is not None:
                usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
            for choice in chunk.choices:
                delta = choice.delta
                if delta is not None and delta.content:
                    text.append(delta.content)
                    if on_text is not None:
                        on_text(delta.content)
                for piece in (delta.tool_calls if delta is not None else None) or []:
                    slot = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": []})
                    if piece.id:
                        slot["id"] = piece.id
                    if piece.function is not None:
                        if piece.function.name:
                            slot["name"] += piece.function.name
                        if piece.function.arguments:
                            slot["arguments"].append(piece.function.arguments)
                if choice.finish_reason:
                    finish = choice.finish_reason
        tool_calls = tuple(
            ToolCall(slot["id"] or f"call_{index}", slot["name"], "".join(slot["arguments"]))
            for index, slot in sorted(calls.items())
        )
        return ModelResponse("".join(text), usage, finish, tool_calls)


def _set_response_format(params: dict[str, Any], mode: str, schema: dict[str, Any]) -> None:
    params.pop("response_format", None)
    if mode == "json_schema":
        params["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    elif mode == "json_object":
        params["response_format"] = {"type": "json_object"}


def _short(exc: Exception) -> str:
    message = getattr(exc, "message", None) or str(exc)
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message", message)
    return str(message)[:300]

