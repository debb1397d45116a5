"""Sessions: list, read, delete the caller's conversations (POST /v1/agent's `session_id` continues one).

A caller sees only the sessions its key name created; admins see all. Another caller's
session answers 404, exactly like one that does not exist (as runs do, routes/runs.py).
Sessions live in the run store: without one these routes answer 409 `no_store`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path as PathParam, Query
from fastapi.responses import Response

from ...errors import ErrorCode
from ..access import current_principal
from ..api import ApiError, error_responses, jsonable, store_call
from ..auth import Principal
from ..conversations import SESSION_ID_PATTERN, sessions_of, visible_to
from ..service import Service

SessionId = PathParam(pattern=SESSION_ID_PATTERN)


def router(service: Service) -> APIRouter:
    api = APIRouter()

    @api.get("/v1/sessions", tags=["sessions"], summary="The caller's sessions, most recently used first",
             responses=error_responses(409))
    async def list_sessions(limit: int = Query(100, ge=1, le=1000),
                            principal: Principal = Depends(current_principal)) -> Any:
        sessions = sessions_of(service)
        return jsonable(await store_call(lambda: sessions.list(visible=visible_to(principal), limit=limit)))

    @api.get("/v1/sessions/{session_id}", tags=["sessions"],
             summary="One session: its messages (OpenAI chat format) and the run of each turn",
             responses=error_responses(404, 409))
    async def get_session(session_id: str = SessionId, principal: Principal = Depends(current_principal)) -> Any:
        sessions = sessions_of(service)
        found = await store_call(lambda: sessions.get(session_id, visible=visible_to(principal)))
        if found is None:
            raise ApiError(ErrorCode.UNKNOWN_SESSION, f"there is no session {session_id!r}")
        return jsonable(found)

    @api.delete("/v1/sessions/{session_id}", tags=["sessions"], status_code=204, summary="Delete a session",
                responses=error_responses(404, 409))
    async def delete_session(session_id: str = SessionId, principal: Principal = Depends(current_principal)) -> Response:
        sessions = sessions_of(service)
        if not await store_call(lambda: sessions.delete(session_id, visible=visible_to(principal))):
            raise ApiError(ErrorCode.UNKNOWN_SESSION, f"there is no session {session_id!r}")
        return Response(status_code=204)

    return api
