"""`GET /metrics`: the Prometheus text format, for an admin key.

`Access` asks for a key only under /v1 and /mcp, so this route checks the key itself, with the
same helpers: no key 401, a caller key 403. With no keys configured, `Access` has already
limited the server to loopback clients, each acting as admin.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..api import ApiError
from ..auth import ApiKeys, presented_key


def router(registry: Any, keys: ApiKeys) -> APIRouter:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    routes = APIRouter()

    @routes.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        if keys:
            principal = keys.principal_of(presented_key(request.headers))
            if principal is None:
                raise ApiError(401, "unauthorized", "an admin API key is required: send `Authorization: Bearer KEY`")
            if not principal.is_admin:
                raise ApiError(403, "forbidden", "this needs an API key with the admin role")
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return routes
