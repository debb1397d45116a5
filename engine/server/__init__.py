"""The HTTP/SSE service, the web page and the MCP server around an Engine.

    app.py         create_app(engine): assembles the FastAPI app from the parts below
    access.py      Access: peer, key and role checks and body caps, before any route runs
    auth.py        API keys (hashed, compared in constant time), their names (principals) and roles
    api.py         the error shape and helpers every router shares
    service.py     what the routers share: engine, hub, keys, limits, replicas
    routes/        one router per concern: tools, agent, runs, admin, mcp
    hub.py         RunHub: the live runs of this process and their followers (SSE frames)
    live.py        answering a request with a run: its SSE stream, or its end
    replicas.py    runs of other processes sharing the store: follow, approve, cancel
    sse.py         the SSE frame format and a response that notices a client leaving
    mcp_server.py  the tools as an MCP server (stdio, and streamable HTTP at /mcp)
    mcp_mount.py   /mcp, started on its first request
    mcp_stdio.py   MCP over stdio (`skillyard mcp`), with a guard against malformed lines
    static/        the web page (plain HTML, CSS and JavaScript: no build step)

fastapi, uvicorn and the MCP SDK are dependencies of skillyard; `import engine` never
imports this package.
"""

from .app import create_app

__all__ = ["create_app"]
