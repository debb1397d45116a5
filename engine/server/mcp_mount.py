"""`/mcp` on the HTTP service: the MCP SDK's streamable-HTTP app, started on first use."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from starlette.types import Receive, Scope, Send

from .._engine import Engine
from .access import PRINCIPAL_KEY, send_unauthorized
from .auth import Principal
from .hub import RunHub


class LazyMCP:
    """`/mcp`: the MCP SDK is imported (in a worker thread: it takes seconds) and its session
    manager started on the first MCP request, so a service nobody reaches over MCP pays nothing.
    Its calls count against `hub`'s live-run caps, as the service's own calls do."""

    def __init__(self, engine: Engine, *, loopback_only: bool, hub: RunHub | None = None):
        self.engine = engine
        self.loopback_only = loopback_only
        self.hub = hub
        self._app: Any = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal: Principal | None = scope.get(PRINCIPAL_KEY)
        if principal is None:  # `Access` let no one in here: nobody, never the admin `local`
            await send_unauthorized(send)
            return
        if self._app is None:
            async with self._lock:
                if self._app is None:
                    await self._start()
        await self._app({**scope, "user": _session_owner(principal)}, receive, send)

    async def _start(self) -> None:
        from . import mcp_server

        await asyncio.to_thread(mcp_server.preload)
        app, manager = mcp_server.streamable_http_app(self.engine, loopback_only=self.loopback_only, hub=self.hub)
        started = asyncio.Event()

        async def run() -> None:
            async with manager.run():
                started.set()
                await self._stop.wait()

        self._task = asyncio.get_running_loop().create_task(run(), name="skillyard-mcp")
        waiter = asyncio.ensure_future(started.wait())
        await asyncio.wait((waiter, self._task), return_when=asyncio.FIRST_COMPLETED)
        if not started.is_set():
            waiter.cancel()
            self._task.result()  # raises what went wrong
        self._app = app

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, 5)


def _session_owner(principal: Principal) -> Any:
    """Who opens an MCP session, as the SDK compares it: the principal (key name) that `Access`
    put in the scope, so a session answers 404 to requests of any other principal."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(AccessToken(token="-", client_id=f"principal:{principal.name}", scopes=[]))
