"""The `openai` provider: any OpenAI-compatible chat-completions endpoint, via the official SDK.

OpenAI, vLLM, Ollama, DeepSeek, OpenRouter… all speak this wire format. Streaming is always
on: text deltas go to `on_text`, tool-call deltas (split across chunks by `index`) are
assembled here. Retries on 429/5xx/connection errors are the SDK's own (`max_retries`, with
backoff honouring `retry-after`). A stream that breaks off, stalls past `timeout`, or ends
without a `finish_reason` is a ProviderError. Structured output: `response_format:
json_schema` first; if the server refuses it, `json_object`, then plain text (the skill
validates and repairs either way). The SDK client is made per event loop (its pooled
connections belong to the loop that opened them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import weakref
from typing import Any, Callable

import httpx
import openai

from ..lang.strict_schema import StrictSchema, openai_function, openai_json_schema
from ..spec.models import ModelSpec
from .base import ModelRequest, ModelResponse, ProviderError, ToolCall, Usage, reasoning_sink, without_key
from .chat_format import from_openai_message, from_openai_messages, to_openai_messages  # noqa: F401 - the provider's adapters

try:  # recent SDKs ship their own fork of httpx; catch both at the boundary
    import httpx2 as _httpx2

    _HTTP_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, _httpx2.HTTPError)
except ImportError:  # pragma: no cover - depends on the installed SDK
    _HTTP_ERRORS = (httpx.HTTPError,)

_FORMAT_LADDER = ("json_schema", "json_object", "none")


def to_openai_tools(tools: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """With `strict: true` and the strict form the linker computed for the tool (its spec's
    `"strict"`, the parameters to send), when it has one."""
    return [openai_function(t["name"], t["description"], t["parameters"], t.get("strict")) for t in tools]


def to_openai_tool_choice(choice: str) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


class OpenAIProvider:
    def __init__(self, spec: ModelSpec, client: openai.AsyncOpenAI | None = None):
        if spec.model is None:
            raise ProviderError("an openai model needs `model:` (the endpoint's model id)")
        self.spec = spec
        self._given = client
        # One SDK client per event loop: its pooled connections belong to the loop that opened
        # them, and a provider (cached on the Project) may serve several `asyncio.run`s.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = weakref.WeakKeyDictionary()
        self._format = str(spec.options.get("structured_output", "json_schema"))

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client of the running event loop (or the one passed in)."""
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            spec = self.spec
            client = self._clients[loop] = openai.AsyncOpenAI(
                api_key=spec.api_key or "not-needed",  # local servers (vLLM, Ollama) take any key
                base_url=spec.base_url,
                timeout=spec.timeout or 60.0,
                max_retries=int(spec.options.get("max_retries", 2)),
                # The plain HTTP client, not the SDK's default wrapper: the wrapper's __del__
                # schedules its close on whatever loop runs when it is collected, which fails
                # for connections of an earlier, closed loop.
                http_client=openai.DefaultAsyncHttpxClient(),
            )
        return client

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
        reasoning = self.spec.reasoning
        if reasoning is not None and reasoning.enabled and reasoning.effort is not None:
            params["reasoning_effort"] = reasoning.effort
        while True:
            if request.output_schema is not None:
                _set_response_format(params, self._format, request.output_schema, request.output_strict)
            stream = _StreamState()
            try:
                return _strict_answer(await self._stream(params, on_text, stream), params, request.output_strict)
            except openai.BadRequestError as exc:
                if request.output_schema is None or self._format == "none" or "response_format" not in str(exc):
                    raise self._translate(exc, stream) from None
                self._format = _FORMAT_LADDER[_FORMAT_LADDER.index(self._format) + 1]  # refused: the next rung
            except (openai.OpenAIError, *_HTTP_ERRORS) as exc:
                raise self._translate(exc, stream) from None

    def _translate(self, exc: Exception, stream: "_StreamState") -> ProviderError:
        """The one place an error of the SDK (or of the httpx under it) becomes a ProviderError,
        retryable when another attempt may succeed; never with this model's API key in it."""
        if isinstance(exc, openai.BadRequestError):
            return ProviderError(f"the endpoint refused the request: {self._short(exc)}")
        if isinstance(exc, openai.APIStatusError):
            retryable = exc.status_code == 429 or exc.status_code >= 500
            return ProviderError(f"HTTP {exc.status_code}: {self._short(exc)}", retryable=retryable)
        if isinstance(exc, openai.APITimeoutError):
            return ProviderError(f"the endpoint did not answer within {self.spec.timeout or 60.0:g}s", retryable=True)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            detail = without_key(f"{type(cause).__name__}: {cause}", self.spec.api_key) if cause is not None else self._short(exc)
            if stream.started:  # the endpoint had answered: the body broke off mid-stream
                return ProviderError(f"the stream broke off: {detail}", retryable=True)
            return ProviderError(f"the connection to the endpoint failed: {detail}", retryable=True)
        if isinstance(exc, _HTTP_ERRORS):  # the connection dropped mid-stream
            return ProviderError(f"the stream broke off: {type(exc).__name__}: {self._short(exc)}", retryable=True)
        return ProviderError(f"{type(exc).__name__}: {self._short(exc)}")

    def _short(self, exc: Exception) -> str:
        """The error's message, without this model's API key (some endpoints and proxies echo it)."""
        return without_key(_short(exc), self.spec.api_key)

    async def _stream(self, params: dict[str, Any], on_text: Callable[[str], None] | None, state: "_StreamState") -> ModelResponse:
        stream = await self.client.chat.completions.create(**params)
        state.started = True
        on_reasoning = reasoning_sink(on_text)
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage = Usage()
        finish: str | None = None
        async for chunk in stream:
            if chunk.usage is not None:
                usage = Usage(chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
            for choice in chunk.choices:
                delta = choice.delta
                # DeepSeek and vLLM send `reasoning_content`, Ollama and OpenRouter `reasoning` (extra fields of the delta)
                thought = (getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)) if delta is not None else None
                if isinstance(thought, str) and thought and on_reasoning is not None:
                    on_reasoning(thought)
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
        if finish is None:  # the body ended without a finish_reason (and without [DONE]): cut off
            raise ProviderError("the stream ended before the model finished (no finish_reason)", retryable=True)
        tool_calls = tuple(
            ToolCall(slot["id"] or f"call_{index}", slot["name"], "".join(slot["arguments"]))
            for index, slot in sorted(calls.items())
        )
        return ModelResponse("".join(text), usage, finish, tool_calls)


class _StreamState:
    """Whether the endpoint answered (then a dropped connection is a stream that broke off)."""

    __slots__ = ("started",)

    def __init__(self) -> None:
        self.started = False


def _set_response_format(params: dict[str, Any], mode: str, schema: dict[str, Any], form: StrictSchema | None) -> None:
    params.pop("response_format", None)
    if mode == "json_schema":
        params["response_format"] = {"type": "json_schema", "json_schema": openai_json_schema(schema, form)}
    elif mode == "json_object":
        params["response_format"] = {"type": "json_object"}


def _strict_answer(response: ModelResponse, params: dict[str, Any], form: StrictSchema | None) -> ModelResponse:
    """The answer to a strict `response_format` without the nulls strict mode made the model
    write for optional properties (the skill validates against the schema as written)."""
    if form is None or not params.get("response_format", {}).get("json_schema", {}).get("strict"):
        return response
    text = form.answer_text(response.text)
    return response if text is response.text else dataclasses.replace(response, text=text)


def _short(exc: Exception) -> str:
    message = getattr(exc, "message", None) or str(exc)
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        body = body["error"]
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        message = body["message"]
    return str(message)[:300]

