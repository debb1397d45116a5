"""The HTTP/SSE service, the web page and the MCP server around an Engine.

    app.py         create_app(engine): the FastAPI app (routes, errors, status codes)
    hub.py         RunHub: live runs, their event buffers, followers and approvals
    sse.py         the SSE frame format and a response that notices a client leaving
    auth.py        API keys (hashed, compared in constant time) and roles
    mcp_server.py  the tools as an MCP server (stdio, and streamable HTTP at /mcp)
    static/        the web page (plain HTML, CSS and JavaScript: no build step)

Needs the `server` extra (fastapi, uvicorn, mcp); importing `engine` never imports this.
"""

from .app import create_app

__all__ = ["create_app"]
