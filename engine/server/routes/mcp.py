"""`/mcp`: the project's tools over MCP streamable HTTP (keys are checked by `Access`)."""

from __future__ import annotations

import importlib.util

from starlette.routing import Route

from ..mcp_mount import LazyMCP
from ..service import Service


def mcp_route(service: Service) -> tuple[Route, LazyMCP] | None:
    """The route and its app (whose `stop()` the lifespan awaits); None without the MCP SDK."""
    if importlib.util.find_spec("mcp") is None:
        return None
    app = LazyMCP(service.engine, loopback_only=not service.keys, hub=service.hub)
    return Route("/mcp", endpoint=app, include_in_schema=False), app
