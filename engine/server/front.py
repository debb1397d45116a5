"""The app class of the service: the service's own middlewares first, Starlette's behind them.

FastAPI wraps every request in five layers before any middleware added with
`add_middleware` sees it — `FastAPI.__call__` (its own telemetry check), `Starlette.__call__`,
`ServerErrorMiddleware` (a send wrapper per message), FastAPI's exception-telemetry and
body-limit middlewares — and those cost a tool call more instructions than `Access` itself
(bench/request_cost.py). `ServiceApp` hands an HTTP request straight to the service's
middlewares (`RequestTelemetry` when on, `Access`, `DirectRoute`) and puts Starlette's and
FastAPI's layers behind them, around the router: every route but the hot one still passes
them all. `DirectRoute` answers a crash of the call route with the app's 500 handler, as
`ServerErrorMiddleware` would; a crash in `Access` itself reaches the HTTP server (uvicorn
answers 500). FastAPI's own telemetry is off (app.py), so skipping its check changes nothing.

What it buys: alone, under the 3 % a hot-path trick must buy — a JSON call's
instructions 745,600 with it and 756,200 without (callgrind, `python -m bench.request_cost
--cases json`, one session: 1.4 %), bytecodes 6,581 against 6,740 (2.4 %). But undoing it with
the other tricks under 3 % (the hub's listener swap, `one_turn`, module aliases) cost the
service about 5 % of its requests/s in `python -m bench.service` (ABBA, at once with the
empty app), which the performance rule forbids (the ratios may not fall: docs/performance.md); this and the hub's swap are the
two largest of those, so they stay.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send


class ServiceApp(FastAPI):
    def build_middleware_stack(self) -> ASGIApp:
        ours, self.user_middleware = self.user_middleware, []
        try:
            app = super().build_middleware_stack()  # error, telemetry, body-limit, exception, exit-stack → router
        finally:
            self.user_middleware = ours
        for cls, args, kwargs in reversed(ours):
            app = cls(app, *args, **kwargs)
        return app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.root_path:
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self  # as Starlette sets it (Request.app, url_for)
        stack = self.middleware_stack
        if stack is None:
            stack = self.middleware_stack = self.build_middleware_stack()
        await stack(scope, receive, send)
