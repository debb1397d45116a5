"""The `openai` provider: any OpenAI-compatible chat-completions endpoint, via the official SDK.

OpenAI, vLLM, Ollama, DeepSeek, OpenRouter… all speak this wire format. The answer is
streamed when the caller takes text as it comes (`on_text`; the model's `stream:` may force
either): text deltas go to `on_text`, tool-call deltas (split across chunks by `index`) are
assembled here; otherwise it is one plain body. The SDK sends the body skillyard built as it
is and retries; the answer is read here (bounded_http.py), within the request's budget
(`limits.max_tool_args_bytes`, `limits.max_answer_chars`: LimitExceeded past it). Retries on 429/5xx/connection errors are the SDK's own (`max_retries`, with
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
import httpx2
import openai
import orjson

from ..lang.strict_schema import StrictSchema, openai_function, openai_json_schema
from ..spec.models import ModelSpec
from .base import (
    AnswerBudget,
    AnswerMeter,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ToolCall,
    Usage,
    reasoning_sink,
    streams,
    without_key,
)
from .bounded_http import NO_COMPRESSION, READING, BoundedTransport, loads, read_body, sse_events
from .chat_format import content_text, from_openai_message, from_openai_messages, to_openai_messages  # noqa: F401 - the provider's adapters

# The SDK sends through its own fork of httpx (httpx2); errors of both are caught at the boundary.
_HTTP_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, httpx2.HTTPError)
_REQUEST_ERRORS: tuple[type[Exception], ...] = (openai.OpenAIError, *_HTTP_ERRORS)  # what a request may raise, translated at the boundary

_FORMAT_LADDER = ("json_schema", "json_object", "none")
POOL = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)  # the SDK's own client's pool
CALL_SLOT_BYTES = 64  # what each tool call of an answer counts against limits.max_tool_args_bytes beside its text


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
                http_client=openai.DefaultAsyncHttpxClient(transport=BoundedTransport(httpx2.AsyncHTTPTransport(limits=POOL))),
                default_headers=NO_COMPRESSION,
            )
        return client

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        streamed = streams(self.spec.stream, on_text)
        params = self._params(request, streamed)
        while True:
            if request.output_schema is not None:
                _set_response_format(params, self._format, request.output_schema, request.output_strict)
            state = _StreamState()
            reading = READING.set(request.budget)
            try:
                return _strict_answer(await self._answer(params, on_text, state, request.budget), params, request.output_strict)
            except openai.BadRequestError as exc:
                if request.output_schema is None or self._format == "none" or "response_format" not in str(exc):
                    raise self._translate(exc, state) from None
                self._format = _FORMAT_LADDER[_FORMAT_LADDER.index(self._format) + 1]  # refused: the next rung
            except _REQUEST_ERRORS as exc:
                raise self._translate(exc, state) from None
            except (AttributeError, TypeError, ValueError) as exc:  # a body of the wrong shape (orjson's errors too)
                raise ProviderError(f"the endpoint's answer is not a chat completion: {type(exc).__name__}: "
                                    f"{self._short(exc)}") from None
            finally:
                READING.reset(reading)

    def _params(self, request: ModelRequest, streamed: bool) -> dict[str, Any]:
        """The request body, built once per model call. It goes to the endpoint as it is (the
        SDK's `post`): skillyard built and checked every part of it, so the SDK's own walk of
        its typed parameters would only repeat that work."""
        params: dict[str, Any] = {"model": request.model or self.spec.model, "messages": to_openai_messages(request.messages)}
        if streamed:
            params["stream"] = True
            params["stream_options"] = {"include_usage": True}
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
        return params

    async def _answer(self, params: dict[str, Any], on_text: Callable[[str], None] | None, state: "_StreamState",
                      budget: AnswerBudget) -> ModelResponse:
        """One answer, streamed or plain, as the endpoint sent it (a server that streams a plain
        request's answer is read as a stream). The SDK sends, authenticates and retries (429,
        5xx, connection errors); the body is read here, within `budget`."""
        response = await self.client.post("/chat/completions", cast_to=httpx2.Response, body=params, stream=True)
        state.started = True
        meter = AnswerMeter(budget)
        if "text/event-stream" not in response.headers.get("content-type", ""):
            return _completion(loads(await read_body(response, budget)), on_text, meter)
        try:
            return await _streamed(response, on_text, meter)
        finally:
            await response.aclose()

    def _translate(self, exc: Exception, stream: "_StreamState") -> ProviderError:
        """The one place an error of the SDK (or of the httpx under it) becomes a ProviderError,
        retryable when another attempt may succeed; never with this model's API key in it."""
        if isinstance(exc, openai.BadRequestError):
            return ProviderError(f"the endpoint refused the request: {self._short(exc)}")
        if isinstance(exc, openai.APIStatusError):
            retryable = exc.status_code == 429 or exc.status_code >= 500
            return ProviderError(f"HTTP {exc.status_code}: {self._short(exc)}", retryable=retryable)
        if isinstance(exc, (openai.APITimeoutError, httpx2.TimeoutException, httpx.TimeoutException)):
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



def _completion(data: Any, on_text: Callable[[str], None] | None, meter: AnswerMeter) -> ModelResponse:
    """A plain chat completion (its JSON, parsed) → the answer, counted against its budget."""
    choices = data.get("choices")
    if not choices:
        error = data.get("error")
        detail = error.get("message") if isinstance(error, dict) else "no choices"
        raise ProviderError(f"the endpoint answered without a choice: {str(detail)[:300]}")
    choice = choices[0]
    message = choice.get("message") or {}
    text = content_text(message.get("content"))
    meter.text(text)
    thought = message.get("reasoning_content") or message.get("reasoning")
    on_reasoning = reasoning_sink(on_text)
    if isinstance(thought, str) and thought:
        meter.text(thought)
        if on_reasoning is not None:
            on_reasoning(thought)
    calls = []
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call.get("function") or {}
        name, arguments = str(function.get("name") or ""), function.get("arguments") or ""
        arguments = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
        meter.arguments(name)
        meter.arguments(arguments)
        calls.append(ToolCall(str(call.get("id") or f"call_{index}"), name, arguments))
    if text and on_text is not None:
        on_text(text)
    usage = data.get("usage") or {}
    finish = choice.get("finish_reason") or ("tool_calls" if calls else "stop")
    return ModelResponse(text, Usage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0), str(finish),
                         tuple(calls))


async def _streamed(response: httpx2.Response, on_text: Callable[[str], None] | None, meter: AnswerMeter) -> ModelResponse:
    """A streamed chat completion: text deltas go to `on_text`, tool-call deltas (split across
    chunks by `index`) are assembled; every piece is counted against the budget as it comes."""
    on_reasoning = reasoning_sink(on_text)
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage = Usage()
    finish: str | None = None
    async for _, data in sse_events(response, meter.budget):
        if data == b"[DONE]":
            break
        chunk = loads(data)
        if chunk.get("error") is not None and not chunk.get("choices"):
            error = chunk["error"]
            raise ProviderError(f"the stream reported an error: {str(error.get('message') if isinstance(error, dict) else error)[:300]}",
                                retryable=True)
        counts = chunk.get("usage")
        if counts:
            usage = Usage(counts.get("prompt_tokens") or 0, counts.get("completion_tokens") or 0)
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            # DeepSeek and vLLM send `reasoning_content`, Ollama and OpenRouter `reasoning`
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                meter.text(thought)
                if on_reasoning is not None:
                    on_reasoning(thought)
            content = delta.get("content")
            if content:
                meter.text(content)
                text.append(content)
                if on_text is not None:
                    on_text(content)
            for piece in delta.get("tool_calls") or ():
                _add_piece(calls, piece, meter)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    if finish is None:  # the body ended without a finish_reason (and without [DONE]): cut off
        raise ProviderError("the stream ended before the model finished (no finish_reason)", retryable=True)
    tool_calls = tuple(
        ToolCall(slot["id"] or f"call_{index}", slot["name"], "".join(slot["arguments"]))
        for index, slot in sorted(calls.items())
    )
    return ModelResponse("".join(text), usage, str(finish), tool_calls)


def _add_piece(calls: dict[int, dict[str, Any]], piece: dict[str, Any], meter: AnswerMeter) -> None:
    """One tool-call delta into its call's slot (a new index opens a slot, which counts too)."""
    index = int(piece.get("index") or 0)
    slot = calls.get(index)
    if slot is None:
        meter.arguments(" " * CALL_SLOT_BYTES)
        slot = calls[index] = {"id": "", "name": "", "arguments": []}
    if piece.get("id"):
        slot["id"] = str(piece["id"])
    function = piece.get("function")
    if function:
        name, arguments = function.get("name"), function.get("arguments")
        if name:
            meter.arguments(name)
            slot["name"] += name
        if arguments:
            meter.arguments(arguments)
            slot["arguments"].append(arguments)
