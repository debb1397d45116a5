"""The enabled tools as an MCP server (the official `mcp` SDK), over stdio or streamable HTTP.

- `tools/list`: the enabled, allowed tools (`Engine.tool_schemas("mcp")`), read at every
  request, so an admin change or a reload shows at once.
- `tools/call`: through the router like every other front door. The engine's progress events
  (`tool_progress_delta`, `skill_progress_delta`) become `notifications/progress` for a
  client that sent a progress token; the message is the event's own ("step 2 of 3 started:
  render", "1,204 chars received"). A failed call is an MCP tool error (`isError: true`)
  whose text is the router's model-facing explanation, code first.
- Tools with `confirm: true` ask the client through elicitation when it supports it;
  otherwise they are denied (`confirmation_denied`), unless the server was started with
  `approve_all=True` (`skillyard mcp --yes`).

Nothing is written to stdout except protocol messages: the engine logs to stderr.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._engine import Engine

SERVER_NAME = "skillyard"


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("skillyard")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        return "0"


def build_mcp_server(engine: "Engine", *, approve_all: bool = False) -> Any:
    """A low-level `mcp.server.Server` whose tools are the engine's enabled tools."""
    import mcp_types as types
    from mcp.server import Server

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
            message = str(event.data.get("message") or event.data.get("stage") or event.type)
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

        result = await engine.call_tool(params.name, params.arguments or {}, on_event=on_event, approve=approve)
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


async def _elicit_approval(ctx: Any, tool: str, args: dict[str, Any]) -> bool:
    import mcp_types as types

    try:
        if not ctx.session.check_client_capability(types.ClientCapabilities(elicitation=types.ElicitationCapability())):
            return False
        answer = await ctx.session.elicit_form(
            f"Allow {tool} with {json.dumps(args, ensure_ascii=False, default=str)[:500]}?",
            {"type": "object", "properties": {"approve": {"type": "boolean", "title": f"Run {tool}"}}, "required": ["approve"]},
        )
    except Exception:  # noqa: BLE001 - no back channel, client refused: the call is denied, not failed
        return False
    return answer.action == "accept" and bool((answer.content or {}).get("approve"))


async def serve_stdio(engine: "Engine", *, approve_all: bool = False) -> None:
    """Serve MCP over this process's stdin/stdout until the client closes them."""
    from mcp.server.stdio import stdio_server

    server = build_mcp_server(engine, approve_all=approve_all)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def preload() -> None:
    """Import the SDK parts the server uses (slow: run it in a worker thread)."""
    import mcp_types  # noqa: F401
    from mcp.server import Server  # noqa: F401
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager  # noqa: F401


def streamable_http_app(engine: "Engine", *, loopback_only: bool) -> tuple[Any, Any]:
    """(ASGI app, session manager) for MCP over streamable HTTP; run `manager.run()` in the
    host application's lifespan. With `loopback_only`, the SDK's DNS-rebinding protection
    accepts loopback Host/Origin headers only."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    security = None
    if loopback_only:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    manager = StreamableHTTPSessionManager(app=build_mcp_server(engine), stateless=True, security_settings=security)
    return StreamableHTTPASGIApp(manager), manager
