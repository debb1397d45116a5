"""The enabled tools as an MCP server (the official `mcp` SDK), over stdio or streamable HTTP.

- `tools/list`: the enabled, allowed tools (`Engine.tool_schemas("mcp")`), read at every
  request, so an admin change or a reload shows at once.
- `tools/call`: through the router like every other front door. The engine's progress events
  (`tool_progress_delta`, `skill_progress_delta`) become `notifications/progress` for a
  client that sent a progress token; the message is the event's own ("step 2 of 3 started:
  render", "receiving the answer: 1,204 chars so far"). A failed call is an MCP tool error (`isError: true`)
  whose text is the router's model-facing explanation, code first; an unknown tool is a
  JSON-RPC error -32602 ("Unknown tool: …"), as every MCP revision from 2024-11-05 to
  2026-07-28 says (tools § Error Handling: unknown tools are protocol errors).
- A cancelled request (`notifications/cancelled`, or a closed response stream at 2026-07-28)
  cancels the running call: the router records it as `cancelled`.
- On `/mcp` of the HTTP service each call counts against the service's live-run caps
  (`server.max_live_runs`, `server.max_live_runs_per_key`, by the caller's key name), the
  same count as `POST /v1/tools/{name}/call`: a call over a cap is a JSON-RPC error
  -32000 whose message starts `too_many_runs:` and whose data is
  `{"code": "too_many_runs", "message": …}`. `skillyard mcp` (stdio) has no caps: its one
  client is the local user who started the process, and it loads only that process.
- Tools with `confirm: true` ask the client through elicitation. A client that declines is
  a denial (`confirmation_denied`); a client that cannot be asked (no elicitation capability,
  or no back channel for server requests) fails the call with `approval_unavailable`, not a
  fake denial. `approve_all=True` (`skillyard mcp --yes`) approves every call itself.

Nothing is written to stdout except protocol messages: the engine logs to stderr.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..errors import ErrorCode, StepFailure
from ..runs.payloads import SkillProgressDelta, ToolProgressDelta
from ..runtime.ids import new_id

if TYPE_CHECKING:
    from .._engine import Engine
    from .hub import RunHub

SERVER_NAME = "skillyard"
TOO_MANY_RUNS = -32000  # JSON-RPC's implementation-defined server error range


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("skillyard")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0"


def build_mcp_server(engine: "Engine", *, approve_all: bool = False, hub: "RunHub | None" = None) -> Any:
    """A low-level `mcp.server.Server` whose tools are the engine's enabled tools; with `hub`
    (the HTTP service's), each call holds a place under its live-run caps while it runs."""
    import mcp_types as types
    from mcp.server import Server

    from .hub import commit_wait

    counted = _caps(hub) if hub is not None else _uncounted
    commit = commit_wait(engine)  # the result goes out once the run is committed (store.durability)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t["name"], description=t.get("description") or "", input_schema=t["inputSchema"])
                for t in engine.tool_schemas("mcp")
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> Any:
        progress = 0

        async def on_event(event: Any) -> None:
            nonlocal progress
            if event.type not in ("tool_progress_delta", "skill_progress_delta"):
                return
            progress += 1
            progressed: ToolProgressDelta | SkillProgressDelta = event.data
            message = str(progressed["message"] or progressed.get("stage") or event.type)
            if event.skill:
                message = f"{event.skill}: {message}"
            try:
                await ctx.session.report_progress(progress, None, message)
            except Exception:  # noqa: BLE001 - a client that went away must not fail the call
                pass

        async def approve(tool: Any, args: dict[str, Any], tool_call_id: str) -> bool:
            if approve_all:
                return True
            return await _elicit_approval(ctx, tool.name, args)

        caller, run_id = _caller(ctx), new_id("run")
        if caller is not None and engine.store is not None:  # its owner, as the hub records one for the HTTP routes
            engine.store.record_owner(run_id, caller)
        with counted(caller):
            called = await engine.call_tool(params.name, params.arguments or {}, on_event=on_event, approve=approve,
                                            run_id=run_id, principal=caller)
        result = called.as_shown()  # as every other door answers it: redacted like the run's events
        recorded = commit() if commit is not None else None
        if recorded is not None:
            await recorded
        if not result.ok and result.error is not None and result.error.code == ErrorCode.UNKNOWN_TOOL:
            raise _unknown_tool(params.name, result.error.details.get("available_tools") or [])
        if result.ok:
            data = result.data
            text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str, indent=2)
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)],
                structured_content=data if isinstance(data, dict) else None,
                is_error=False,
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text=result.model_text())], is_error=True)

    return Server(
        SERVER_NAME,
        version=_version(),
        instructions="Tools declared in YAML and run by skillyard. Each call is validated against its JSON Schema.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


@contextlib.contextmanager
def _uncounted(caller: str | None) -> Iterator[None]:
    yield


def _caller(ctx: Any) -> str | None:
    """Who makes a call over `/mcp`: the key name `Access` put in its HTTP request's scope (the
    run's owner, as for the HTTP routes: only that key sees it); None over stdio (no request)."""
    request = getattr(ctx, "request", None)
    if request is None:
        return None
    from .access import request_principal

    return request_principal(request).name


def _caps(hub: "RunHub") -> Callable[[str | None], contextlib.AbstractContextManager[None]]:
    """A call's place under the hub's live-run caps, counted for its caller (the key name of
    the HTTP request that carries it, `_caller`); over a cap, the JSON-RPC error."""
    from .hub import TooManyRuns

    @contextlib.contextmanager
    def counted(caller: str | None) -> Iterator[None]:
        principal = caller or ""
        try:
            hub.reserve(principal)
        except TooManyRuns as exc:
            raise _too_many_runs(exc.message) from None
        try:
            yield
        finally:
            hub.release(principal)

    return counted


def _too_many_runs(message: str) -> Exception:
    from mcp.shared.exceptions import MCPError

    code = ErrorCode.TOO_MANY_RUNS
    return MCPError(TOO_MANY_RUNS, f"{code}: {message}", {"code": code, "message": message})


APPROVAL_UNAVAILABLE = "approval needed: this client cannot answer elicitation"


def _unknown_tool(name: str, available: list[str]) -> Exception:
    """The spec's protocol error for a tool the server does not offer (JSON-RPC -32602)."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    listed = ", ".join(available) or "none"
    return MCPError(types.INVALID_PARAMS, f"Unknown tool: {name} (available tools: {listed})", {"available_tools": available})


def _cannot_ask(tool: str, why: str) -> StepFailure:
    return StepFailure(
        ErrorCode.APPROVAL_UNAVAILABLE,
        f"{APPROVAL_UNAVAILABLE} ({why}); {tool!r} needs a person's approval: use a client that supports "
        "elicitation, or start the server with --yes to approve every call",
    )


async def _elicit_approval(ctx: Any, tool: str, args: dict[str, Any]) -> bool:
    """The user's answer through elicitation; raises `approval_unavailable` when nobody can be asked."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError, NoBackChannelError

    if not ctx.session.check_client_capability(types.ClientCapabilities(elicitation=types.ElicitationCapability())):
        raise _cannot_ask(tool, "it did not declare the elicitation capability")
    try:
        answer = await ctx.session.elicit_form(
            f"Allow {tool} with {json.dumps(args, ensure_ascii=False, default=str)[:500]}?",
            {"type": "object", "properties": {"approve": {"type": "boolean", "title": f"Run {tool}"}}, "required": ["approve"]},
        )
    except NoBackChannelError:
        raise _cannot_ask(tool, "this connection has no channel for server requests") from None
    except MCPError as exc:  # the client answered the request with an error: it could not ask its user
        raise _cannot_ask(tool, f"the client answered {exc.code}: {exc.message[:200]}") from None
    return answer.action == "accept" and bool((answer.content or {}).get("approve"))


def preload() -> None:
    """Import the SDK parts the server uses (slow: run it in a worker thread)."""
    import mcp_types  # noqa: F401
    from mcp.server import Server  # noqa: F401
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager  # noqa: F401


SESSION_IDLE_SECONDS = 600  # a stateful /mcp session nobody used for this long is closed
MAX_SESSIONS = 1000


def streamable_http_app(engine: "Engine", *, loopback_only: bool, hub: "RunHub | None" = None) -> tuple[Any, Any]:
    """(ASGI app, session manager) for MCP over streamable HTTP; run `manager.run()` in the
    host application's lifespan. With `loopback_only`, the SDK's DNS-rebinding protection
    accepts loopback Host/Origin headers only; with `hub`, calls count against its caps.

    Stateful (an `Mcp-Session-Id` per initialized client) so that what the handshake-era
    protocol (2025-11-25 and before) sends on a later POST reaches the call it is about: a
    `notifications/cancelled` cancels the running call, an elicitation answer reaches the
    waiting approval. 2026-07-28 requests are self-contained and need no session."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    security = None
    if loopback_only:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    manager = StreamableHTTPSessionManager(app=build_mcp_server(engine, hub=hub), stateless=False, security_settings=security,
                                           session_idle_timeout=SESSION_IDLE_SECONDS, max_sessions=MAX_SESSIONS)
    return StreamableHTTPASGIApp(manager), manager
