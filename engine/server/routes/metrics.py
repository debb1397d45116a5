"""`GET /metrics`: the Prometheus text format, for an admin key (`Access` checks it)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from ..access import current_principal


def router(registry: Any) -> APIRouter:
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    routes = APIRouter()

    @routes.get("/metrics", include_in_schema=False, dependencies=[Depends(current_principal)])  # 401 if Access let no one in
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return routes
