"""The hot route, answered without the router: `POST /v1/tools/{name}/call`.

A tool call is most of the service's traffic, and FastAPI's way to reach its endpoint —
exception and exit-stack middlewares, the router trying each route and each included
router (twice: once to match, once to handle), the route's request handler with its two
exit stacks and dependency solving — cost more instructions than the endpoint itself
(bench/request_cost.py). `DirectRoute` sits just inside `Access` (keys, peers and body caps
are checked as for every request), matches the route's own path regex and calls the same
endpoint with the same `Request`; the app's exception handlers answer what it raises, as
they would behind the router, and a crash with the app's 500 handler (as Starlette's
`ServerErrorMiddleware` would: `ServiceApp` puts that layer behind this one). The route stays
declared on the app for /openapi.json.

What it buys, by `python -m bench.request_cost --opcodes json` (bytecodes per JSON call, one
session): 6,445 with it, 11,331 through the router (43 %).
"""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, Collection, Mapping

from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import get_route_path
from starlette.types import ASGIApp, Receive, Scope, Send

Handler = Callable[[Request, Any], Response | Awaitable[Response]]  # as the app keeps them: sync or async


class DirectRoute:
    def __init__(self, app: ASGIApp, *, route: APIRoute, handlers: Mapping[Any, Handler]):
        self.app = app
        self.route = route
        self.match = route.path_regex.match
        self.methods: Collection[str] = route.methods or frozenset()
        self.endpoint: Callable[[Request], Awaitable[Response]] = route.endpoint
        # Exception and 500 are ServerErrorMiddleware's: behind this layer (ServiceApp), so answered here.
        self.handlers = {cls: handler for cls, handler in handlers.items() if cls not in (Exception, 500)}
        self.crash: Handler | None = handlers.get(500) or handlers.get(Exception)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in self.methods:
            await self.app(scope, receive, send)
            return
        found = self.match(get_route_path(scope) if scope.get("root_path") else scope["path"])
        if found is None:
            await self.app(scope, receive, send)
            return
        scope["path_params"] = found.groupdict()
        scope["route"] = self.route  # as the router sets it: the request span is named by its path
        scope["endpoint"] = self.endpoint
        request = Request(scope, receive, send)
        try:
            response = await self.endpoint(request)
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                await self._crashed(request, exc, send)
                raise  # as ServerErrorMiddleware: the HTTP server logs it
            response = await _answer(handler, request, exc)
        await response(scope, receive, send)

    async def _crashed(self, request: Request, exc: Exception, send: Send) -> None:
        """Answer an unhandled exception with the app's 500 handler (nothing was sent yet)."""
        if self.crash is not None:
            response = await _answer(self.crash, request, exc)
        else:
            response = PlainTextResponse("Internal Server Error", status_code=500)
        await response(request.scope, request.receive, send)

    def _handler(self, exc: Exception) -> Handler | None:
        """The app's handler for `exc`, looked up as Starlette does: by status, then along its classes."""
        status = getattr(exc, "status_code", None) if isinstance(exc, HTTPException) else None
        if status is not None and status in self.handlers:
            return self.handlers[status]
        for cls in type(exc).__mro__:
            handler = self.handlers.get(cls)
            if handler is not None:
                return handler
        return None


async def _answer(handler: Handler, request: Request, exc: Exception) -> Response:
    """The handler's response: the app may hold sync handlers beside async ones."""
    response = handler(request, exc)
    return await response if inspect.isawaitable(response) else response
