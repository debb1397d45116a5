"""The `anthropic` provider: Anthropic's Messages API through the official `anthropic` SDK.

How the engine's neutral types map onto the wire:

| engine                                   | Anthropic Messages API                                  |
|------------------------------------------|---------------------------------------------------------|
| tool `{name, description, parameters}`   | `tools[] {name, description, input_schema}`             |
| `ModelResponse.tool_calls`               | `tool_use` content blocks `{id, name, input}`           |
| `finish_reason "tool_calls"`             | `stop_reason "tool_use"` (`end_turn` → `stop`, `max_tokens` → `length`) |
| `ChatMessage(role="tool")`               | `tool_result` block in a user message; consecutive results share one; a failed call sets `is_error: true` |
| `ChatMessage(role="system")`             | the top-level `system` field                            |
| `tool_choice` auto / required / none / X | `{type: auto}` / `{type: any}` / `{type: none}` / `{type: tool, name: X}` |

The answer is streamed when the caller takes text as it comes (`on_text`; the model's
`stream:` may force either), else it is one plain message. The SDK sends the body as built
here and retries; the answer is read here (bounded_http.py) within the request's budget
(`limits.max_tool_args_bytes`, `limits.max_answer_chars`: LimitExceeded past it), a plain
message as the events a stream of it would have sent. Each event is read in order: `message_start` (input usage), `content_block_start`
(a text or `tool_use` block), `content_block_delta` (`text_delta` → `on_text`;
`input_json_delta` → the call's argument text, kept raw so the router can report malformed
JSON to the model), `content_block_stop`, `message_delta` (`stop_reason`, output usage),
`message_stop`. A stream that ends before `message_stop`, a dropped connection, an `error`
event or a read that exceeds the model's `timeout` is a `ProviderError` — never a hang.

Retries are the SDK's: before the stream starts, HTTP 408/409/429/5xx/529, timeouts and
connection failures are retried up to `options.max_retries` times (default 2), waiting the
server's `retry-after-ms` / `retry-after` when it gives one (up to 60 s), else exponential
backoff with jitter (0.5 s, doubling, at most 8 s); `x-should-retry: true|false` overrides.
The key goes as `x-api-key`, and the SDK reads no credential of its own (environment,
profiles); its OpenTelemetry spans are off (the engine's own carry the call).

Structured output (a prompt skill with an output schema, an agent with a typed answer): by
default (`options.structured_output: tool`) the request carries one forced tool, `json_output`,
whose `input_schema` is the output schema, and the tool's input comes back as the answer text —
Anthropic's documented way to get schema-shaped JSON. Beside an agent's own tools it is one
more tool and `tool_choice: auto` becomes `any`: the model calls a tool, or answers through
`json_output`. A non-object schema is wrapped as `{"value": …}` and unwrapped.
With `structured_output: prompt` only the skill's own instruction asks for JSON; either way
the skill validates the answer and asks for a repair when it does not match.

Options (`config/models.yaml` → `options:`): `max_retries`, `anthropic_version` (default
`2023-06-01`), `structured_output` (`tool` | `prompt`), `headers` (extra HTTP headers, e.g.
`anthropic-beta`). `max_tokens` is required by the API; it defaults to 4096.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from typing import Any, Callable

import anthropic
import httpx2  # the HTTP client under the SDK (its fork of httpx): what a broken stream raises

from ..spec.models import ModelSpec
from .base import (
    AnswerMeter,
    ChatMessage,
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

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
DEFAULT_THINKING_BUDGET = 2048
OUTPUT_TOOL = "json_output"
RETRY_STATUSES = frozenset({408, 409, 429})  # plus every 5xx (529 is "overloaded"): what the SDK retries too
_FINISH = {"tool_use": "tool_calls", "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}
_SDK_ARGUMENTS = frozenset({"model", "max_tokens", "messages", "stream"})
_RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})
_INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
POOL = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)  # the SDK's own client's pool
BLOCK_SLOT = 64  # what each content block of an answer counts against its budget beside its text


# ─── adapters: engine messages ⇄ Anthropic messages ─────────────────────────────────────


def to_anthropic_messages(messages: tuple[ChatMessage, ...] | list[ChatMessage]) -> tuple[str | None, list[dict[str, Any]]]:
    """Engine messages → (`system`, `messages`) of the Messages API.

    System messages join into the top-level `system`. Consecutive tool results go into one
    user message of `tool_result` blocks; a user message right after them joins it as a text
    block (tool results must come first in that message). Empty assistant messages are left
    out (the API refuses empty content).
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    open_results: list[dict[str, Any]] | None = None  # the content of a user message collecting tool results
    for message in messages:
        if message.role == "system":
            system.append(message.content)
            continue
        if message.role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}
            if message.is_error:
                block["is_error"] = True
            if open_results is None:
                open_results = [block]
                out.append({"role": "user", "content": open_results})
            else:
                open_results.append(block)
            continue
        if message.role == "user":
            if open_results is not None:
                open_results.append({"type": "text", "text": message.content})
            else:
                out.append({"role": "user", "content": message.content})
            open_results = None
            continue
        open_results = None
        if message.tool_calls:
            # thinking blocks (with their signature) and redacted_thinking go back first, untouched, as the API requires
            blocks: list[dict[str, Any]] = [dict(b) for b in message.reasoning]
            blocks += [{"type": "text", "text": message.content}] if message.content else []
            blocks.extend(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": _input_object(call.arguments)}
                for call in message.tool_calls
            )
            out.append({"role": "assistant", "content": blocks})
        elif message.content:
            out.append({"role": "assistant", "content": message.content})
    return ("\n\n".join(system) if system else None), out


def from_anthropic_messages(system: str | list[dict[str, Any]] | None, messages: list[dict[str, Any]]) -> list[ChatMessage]:
    """Messages API `system` + `messages` → engine messages (the other direction).

    A user message's `tool_result` blocks become tool messages (named after the `tool_use`
    they answer), its text blocks one user message after them. An assistant message's
    `tool_use` blocks become its tool calls, with `input` as JSON text.
    """
    out: list[ChatMessage] = []
    if system:
        out.append(ChatMessage("system", system if isinstance(system, str) else _join_text(system)))
    names: dict[str, str] = {}
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if message["role"] == "assistant":
            calls = tuple(
                ToolCall(b["id"], b["name"], json.dumps(b.get("input") or {}, ensure_ascii=False))
                for b in blocks
                if b.get("type") == "tool_use"
            )
            names.update((c.id, c.name) for c in calls)
            thinking = tuple(b for b in blocks if b.get("type") in ("thinking", "redacted_thinking"))
            out.append(ChatMessage("assistant", _join_text(blocks), tool_calls=calls, reasoning=thinking))
            continue
        results = [b for b in blocks if b.get("type") == "tool_result"]
        for block in results:
            call_id = block["tool_use_id"]
            out.append(ChatMessage("tool", _result_text(block.get("content")), tool_call_id=call_id, name=names.get(call_id),
                                   is_error=block.get("is_error") is True))
        texts = [b for b in blocks if b.get("type") == "text"]
        if texts or not results:
            out.append(ChatMessage("user", _join_text(texts)))
    return out


def to_anthropic_tools(tools: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """Neutral tools `{name, description, parameters}` → `{name, description, input_schema}`."""
    return [{"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools]


def to_anthropic_tool_choice(choice: str) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    return {"type": "tool", "name": choice}


def _input_object(arguments: str) -> dict[str, Any]:
    """A call's raw argument text → the `input` object the API requires (malformed → {})."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _join_text(blocks: list[dict[str, Any]]) -> str:
    return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")


def _result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return _join_text(content)


# ─── the provider ───────────────────────────────────────────────────────────────────────


class AnthropicProvider:
    def __init__(self, spec: ModelSpec):
        if spec.model is None:
            raise ProviderError("an anthropic model needs `model:` (e.g. claude-sonnet-4-5)")
        options = spec.options
        self.spec = spec
        base = (spec.base_url or DEFAULT_BASE_URL).rstrip("/")
        self.url = base + ("/messages" if base.endswith("/v1") else "/v1/messages")
        self.base_url = base[: -len("/v1")] if base.endswith("/v1") else base  # the SDK adds /v1/messages
        self.structured = str(options.get("structured_output", "tool"))
        if self.structured not in ("tool", "prompt"):
            raise ProviderError(f"options.structured_output: {self.structured!r}; use tool or prompt")
        try:
            self.max_retries = max(0, int(options.get("max_retries", 2)))
        except (TypeError, ValueError):
            raise ProviderError("options.max_retries must be a whole number") from None
        self.timeout_s = float(spec.timeout or 60.0)
        # The key goes as x-api-key, and only the model's own: the SDK would otherwise send it as a
        # bearer token, or look for one in the environment and on disk (profiles, federation).
        self.headers: dict[str, Any] = {
            **NO_COMPRESSION,
            "anthropic-version": str(options.get("anthropic_version", DEFAULT_VERSION)),
            "Authorization": anthropic.omit,
            "X-Api-Key": spec.api_key if spec.api_key else anthropic.omit,
        }
        extra = options.get("headers") or {}
        if not isinstance(extra, dict):
            raise ProviderError("options.headers must be a mapping of header names to values")
        self.headers.update({str(k): str(v) for k, v in extra.items()})
        # One SDK client per event loop: pooled connections belong to the loop that opened them.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anthropic.AsyncAnthropic] = weakref.WeakKeyDictionary()

    def build_body(self, request: ModelRequest, streamed: bool = True) -> dict[str, Any]:
        """The JSON body of a Messages API request (public for tests and inspection)."""
        system, messages = to_anthropic_messages(request.messages)
        body: dict[str, Any] = {
            "model": request.model or self.spec.model,
            "max_tokens": request.max_tokens or self.spec.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": messages,
        }
        if streamed:
            body["stream"] = True
        if system:
            body["system"] = system
        reasoning = self.spec.reasoning
        if reasoning is not None and reasoning.enabled:  # extended thinking
            body["thinking"] = {"type": "enabled", "budget_tokens": reasoning.budget_tokens or DEFAULT_THINKING_BUDGET}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.tools:
            body["tools"] = to_anthropic_tools(request.tools)
            body["tool_choice"] = to_anthropic_tool_choice(request.tool_choice)
        if request.output_schema is not None and self.structured == "tool":
            _force_output_tool(body, request.output_schema)
        return body

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        if not self.url.startswith(("http://", "https://")):
            raise ProviderError(f"base_url must start with http:// or https:// (got {self.url})")
        streamed = streams(self.spec.stream, on_text)
        body = self.build_body(request, streamed)
        forced = any(tool["name"] == OUTPUT_TOOL for tool in body.get("tools", ()))
        output = _OutputMode(request.output_schema) if forced else None
        stream = _Stream(on_text, output, AnswerMeter(request.budget))
        reading = READING.set(request.budget)
        try:
            return await self._answer(body, stream, streamed)
        except ProviderError as exc:  # an error body or proxy message may echo the key
            raise self._keyless(exc) from None
        except (anthropic.AnthropicError, httpx2.HTTPError, json.JSONDecodeError) as exc:
            raise self._keyless(self._translate(exc, stream)) from None
        except (AttributeError, TypeError, ValueError) as exc:  # an answer of the wrong shape
            raise self._keyless(ProviderError(f"the answer from {self.url} is not a Messages API answer: "
                                              f"{type(exc).__name__}: {str(exc)[:200]}")) from None
        finally:
            READING.reset(reading)

    async def _answer(self, body: dict[str, Any], stream: "_Stream", streamed: bool) -> ModelResponse:
        """One answer, streamed or plain, as the endpoint sent it. The SDK sends the body as it
        is and retries before the answer starts (429, 5xx, 529, connection failures, honouring
        retry-after); each event (or the plain message) goes to `stream`, within its budget."""
        response = await self._client().post("/v1/messages", cast_to=httpx2.Response, body=body, stream=True)
        stream.started = True
        budget = stream.meter.budget
        content_type = response.headers.get("content-type", "")
        if "text/event-stream" in content_type:
            try:
                async for _, data in sse_events(response, budget):
                    stream.feed(loads(data))
                    if stream.done:
                        break
            finally:
                await response.aclose()
            if not stream.done:
                raise ProviderError("the stream ended before message_stop (the connection closed early)", retryable=True)
            return stream.response()
        message = loads(await read_body(response, budget))
        if not isinstance(message, dict) or message.get("type") != "message":
            raise ProviderError(f"expected an event stream or a Messages API message from {self.url}, got "
                                f"{content_type or 'no content type'} that is neither")
        stream.feed_message(message)
        return stream.response()

    async def aclose(self) -> None:
        clients = list(self._clients.values())
        self._clients.clear()
        for client in clients:
            await client.close()

    def _client(self) -> anthropic.AsyncAnthropic:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = anthropic.AsyncAnthropic(
                api_key="sent-as-x-api-key",  # explicit, so the SDK reads no credential of its own; its header is omitted
                base_url=self.base_url, timeout=self.timeout_s, max_retries=self.max_retries,
                default_headers=self.headers, open_telemetry=False,  # the engine's spans, never the SDK's
                # The plain HTTP client, not the SDK's wrapper (whose __del__ closes on whatever loop runs then).
                http_client=anthropic.DefaultAsyncHttpxClient(
                    timeout=httpx2.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0)),
                    transport=BoundedTransport(httpx2.AsyncHTTPTransport(limits=POOL))),
            )
        return client

    def _translate(self, exc: Exception, stream: "_Stream") -> ProviderError:
        """The one place an error of the SDK (or of the httpx under it) becomes a ProviderError
        (`stream.started`: the server had answered, so a dropped connection broke the stream off)."""
        if isinstance(exc, json.JSONDecodeError):
            return ProviderError(f"the stream sent an event that is not JSON: {exc.doc[:120]!r}", retryable=True)
        if isinstance(exc, anthropic.APIStatusError):
            return _status_error(exc, stream.started)
        if isinstance(exc, (anthropic.APITimeoutError, httpx2.TimeoutException)):
            return ProviderError(f"{self.url} did not answer within {self.timeout_s:g}s", retryable=True)
        cause = exc.__cause__ if isinstance(exc, anthropic.APIConnectionError) and exc.__cause__ is not None else exc
        if isinstance(cause, httpx2.UnsupportedProtocol):
            return ProviderError(f"base_url must start with http:// or https:// (got {self.url})")
        if not stream.started:
            return ProviderError(f"cannot reach {self.url}: {type(cause).__name__}: {cause}", retryable=True)
        return ProviderError(f"the stream broke off: {type(cause).__name__}: {cause}", retryable=True)

    def _keyless(self, error: ProviderError) -> ProviderError:
        message = without_key(str(error), self.spec.api_key)
        return error if message == str(error) else ProviderError(message, retryable=error.retryable)


class _OutputMode:
    """Structured output through the forced `json_output` tool."""

    def __init__(self, schema: dict[str, Any] | None):
        self.wrapped = schema is not None and _object_schema(schema) is not schema

    def answer(self, arguments: str) -> str:
        if not self.wrapped:
            return arguments
        try:
            value = json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
        return json.dumps(value.get("value"), ensure_ascii=False) if isinstance(value, dict) else arguments


def _force_output_tool(body: dict[str, Any], schema: dict[str, Any]) -> None:
    """Structured output by a forced tool, `json_output`: alone, the request must call it; beside
    an agent's tools, the model must call some tool (`any`), `json_output` being its answer."""
    tools = body.setdefault("tools", [])
    tools.append({
        "name": OUTPUT_TOOL,
        "description": "Give your final answer as this tool's input. It must match the input schema exactly.",
        "input_schema": _object_schema(schema),
    })
    choice = body.get("tool_choice", {}).get("type")
    if len(tools) == 1 or choice == "none":
        body["tool_choice"] = {"type": "tool", "name": OUTPUT_TOOL}
    elif choice == "auto":
        body["tool_choice"] = {"type": "any"}


def _object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`input_schema` must describe an object; anything else is wrapped as `{"value": …}`."""
    if schema.get("type") == "object":
        return schema
    return {"type": "object", "properties": {"value": schema}, "required": ["value"]}

def _status_error(exc: "anthropic.APIStatusError", started: bool) -> ProviderError:
    """An error answer (after the SDK's retries), or an `error` event inside a started stream."""
    error = exc.body.get("error") if isinstance(exc.body, dict) else None
    error = error if isinstance(error, dict) else {}
    if started and exc.status_code < 400:  # an `error` event mid-stream
        kind = error.get("type", "error")
        return ProviderError(f"the stream reported {kind}: {error.get('message', '')}"[:300],
                             retryable=kind in _RETRYABLE_STREAM_ERRORS)
    status = exc.status_code
    if error.get("message"):
        kind = error.get("type")
        message = (f"{kind}: {error['message']}" if kind else str(error["message"]))[:300]
    else:
        message = (exc.response.text[:300] if exc.response is not None else "") or str(exc)[:300]
    retryable = status in RETRY_STATUSES or status >= 500
    should = exc.response.headers.get("x-should-retry") if exc.response is not None else None
    if should in ("true", "false"):
        retryable = should == "true"
    label = {401: "authentication failed", 403: "permission denied", 404: "not found (check model and base_url)",
             413: "request too large", 429: "rate limited", 529: "overloaded"}.get(status)
    return ProviderError(f"HTTP {status}{f' {label}' if label else ''}: {message}", retryable=retryable)


class _Stream:
    """Assembles one streamed message from its events."""

    def __init__(self, on_text: Callable[[str], None] | None, output: _OutputMode | None, meter: AnswerMeter):
        self.meter = meter  # every piece kept counts against the answer's budget as it comes
        self.on_text = on_text
        self.on_reasoning = reasoning_sink(on_text)
        self.output = output
        self.blocks: dict[int, dict[str, Any]] = {}
        self.input_parts: dict[str, int] = {}  # input, cache creation and cache read tokens
        self.input_tokens = 0
        self.output_tokens = 0
        self.stop_reason: str | None = None
        self.done = False
        self.started = False  # the server answered with a stream (then a dropped connection broke it off)

    def feed(self, payload: dict[str, Any]) -> None:
        """One event of the stream, as the SDK parsed it (its raw, typed event as a dict)."""
        kind = payload.get("type")
        if kind == "message_start":
            self._usage((payload.get("message") or {}).get("usage") or {})
        elif kind == "content_block_start":
            block = payload.get("content_block") or {}
            self._count_block(block)
            opened: dict[str, Any] = {
                "type": block.get("type"), "id": block.get("id"), "name": block.get("name"), "text": [], "json": [],
                "input": block.get("input"), "thinking": [block.get("thinking") or ""],
                "signature": [block.get("signature") or ""], "data": block.get("data")}
            self.blocks[int(payload.get("index", len(self.blocks)))] = opened
            if opened["type"] == "text" and block.get("text"):
                self._text(opened, block["text"])
        elif kind == "content_block_delta":
            slot = self.blocks.get(int(payload.get("index", -1)))
            delta = payload.get("delta") or {}
            if slot is None:
                raise ProviderError(f"the stream sent a delta for block {payload.get('index')} before its start", retryable=True)
            if delta.get("type") == "text_delta":
                self._text(slot, delta.get("text", ""))
            elif delta.get("type") == "input_json_delta":
                piece = delta.get("partial_json", "")
                self.meter.arguments(piece)
                slot["json"].append(piece)
                if self.output is not None and slot["name"] == OUTPUT_TOOL and piece and self.on_text is not None:
                    self.on_text(piece)  # structured output streams as the answer's progress
            elif delta.get("type") == "thinking_delta":
                piece = delta.get("thinking", "")
                self.meter.text(piece)
                slot["thinking"].append(piece)
                if piece and self.on_reasoning is not None:
                    self.on_reasoning(piece)
            elif delta.get("type") == "signature_delta":
                piece = delta.get("signature", "")
                self.meter.text(piece)
                slot["signature"].append(piece)
            # citations…: not part of the answer
        elif kind == "message_delta":
            self.stop_reason = (payload.get("delta") or {}).get("stop_reason") or self.stop_reason
            self._usage(payload.get("usage") or {})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            error = payload.get("error") or {}
            kind = error.get("type", "error")
            raise ProviderError(f"the stream reported {kind}: {error.get('message', '')}"[:300],
                                retryable=kind in _RETRYABLE_STREAM_ERRORS)
        # ping and unknown events are ignored, as the API asks

    def feed_message(self, message: dict[str, Any]) -> None:
        """A plain (not streamed) answer: its blocks as the events a stream of it would have sent."""
        self.feed({"type": "message_start", "message": {"usage": message.get("usage") or {}}})
        for index, block in enumerate(message.get("content") or ()):
            self.feed({"type": "content_block_start", "index": index, "content_block": block})
        self.stop_reason = message.get("stop_reason") or self.stop_reason
        self.done = True

    def _count_block(self, block: dict[str, Any]) -> None:
        """A new block, and what it brings whole (a plain answer's blocks come so), against the budget."""
        meter = self.meter
        if block.get("type") == "tool_use":
            meter.arguments(" " * BLOCK_SLOT)
            meter.arguments(str(block.get("name") or ""))
            if block.get("input"):
                meter.arguments(json.dumps(block["input"], ensure_ascii=False))
        else:
            meter.text(" " * BLOCK_SLOT)
            for key in ("thinking", "signature", "data"):  # text is counted as it is kept (_text)
                if isinstance(block.get(key), str):
                    meter.text(block[key])

    def _text(self, slot: dict[str, Any], text: str) -> None:
        self.meter.text(text)
        slot["text"].append(text)
        if text and self.on_text is not None and self.output is None:
            self.on_text(text)

    def _usage(self, usage: dict[str, Any]) -> None:
        """Counts are cumulative; a later event restates the ones it carries (null = unchanged)."""
        for key in _INPUT_KEYS:
            if usage.get(key) is not None:
                self.input_parts[key] = int(usage[key])
        self.input_tokens = sum(self.input_parts.values())
        if usage.get("output_tokens") is not None:
            self.output_tokens = int(usage["output_tokens"])

    def response(self) -> ModelResponse:
        ordered = [self.blocks[i] for i in sorted(self.blocks)]
        text = "".join("".join(b["text"]) for b in ordered if b["type"] == "text")
        calls = tuple(
            ToolCall(b["id"] or f"toolu_{i}", b["name"] or "", _arguments(b)) for i, b in enumerate(ordered) if b["type"] == "tool_use"
        )
        usage = Usage(self.input_tokens, self.output_tokens)
        if self.output is not None:
            answer = next((c for c in calls if c.name == OUTPUT_TOOL), None)
            if answer is not None:
                return ModelResponse(self.output.answer(answer.arguments), usage, "stop", ())
        finish = _FINISH.get(self.stop_reason or "", self.stop_reason or "stop")
        if calls and finish == "stop":
            finish = "tool_calls"
        return ModelResponse(text, usage, finish, calls, _thinking_blocks(ordered))


def _thinking_blocks(blocks: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The thinking blocks of an answer as the API wants them back: `thinking` with its
    `signature`, `redacted_thinking` with its `data`, untouched."""
    out: list[dict[str, Any]] = []
    for block in blocks:
        if block["type"] == "thinking":
            out.append({"type": "thinking", "thinking": "".join(block["thinking"]), "signature": "".join(block["signature"])})
        elif block["type"] == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": block["data"]})
    return tuple(out)


def _arguments(block: dict[str, Any]) -> str:
    if block["json"]:
        raw = "".join(block["json"])
        return raw if raw.strip() else "{}"
    return json.dumps(block["input"] or {}, ensure_ascii=False)


__all__ = [
    "AnthropicProvider",
    "from_anthropic_messages",
    "to_anthropic_messages",
    "to_anthropic_tool_choice",
    "to_anthropic_tools",
]
