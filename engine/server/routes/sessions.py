"""Sessions: list, read, delete the caller's conversations (POST /v1/agent's `session_id` continues one).

A session's name is its owner's (the key name that created it): two callers naming `ticket-1`
have two sessions. Everyone lists, reads and deletes its own (the conversations it can
continue); an admin names another owner with `?owner=NAME`, or lists every owner's with `?all=true`. Naming another owner without the admin role
answers 404, exactly like a session that does not exist (as runs do, routes/runs.py).
Sessions live in the run store: without one these routes answer 409 `no_store`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi import Path as PathParam
from fastapi.responses import Response

from ...errors import ErrorCode
from ..access import current_principal
from ..api import ApiError, error_responses, jsonable, store_call
from ..auth import Principal
from ..conversations import SESSION_ID_PATTERN, owner_for, sessions_of, visible_to
from ..service import Service

SessionId = PathParam(pattern=SESSION_ID_PATTERN)
Owner = Query(None, max_length=64, description="Whose session (admins only; default: the caller's own)")


def router(service: Service) -> APIRouter:
    api = APIRouter()

    @api.get("/v1/sessions", tags=["sessions"], summary="The caller's sessions, most recently used first",
             description="An admin lists another owner's with `?owner=NAME`, everyone's with `?all=true`.",
             responses=error_responses(409))
    async def list_sessions(limit: int = Query(100, ge=1, le=1000), owner: str | None = Owner,
                            everyone: bool = Query(False, alias="all", description="Every owner's sessions (admins only)"),
                            principal: Principal = Depends(current_principal)) -> Any:
        sessions = sessions_of(service)
        whose = visible_to(principal) if everyone else owner_for(principal, owner)
        return jsonable(await store_call(lambda: sessions.list(visible=whose, limit=limit)))

    @api.get("/v1/sessions/{session_id}", tags=["sessions"],
             summary="One session: its messages (OpenAI chat format) and the run of each turn",
             responses=error_responses(404, 409))
    async def get_session(session_id: str = SessionId, owner: str | None = Owner,
                          principal: Principal = Depends(current_principal)) -> Any:
        sessions, whose = sessions_of(service), owner_for(principal, owner)
        found = await store_call(lambda: sessions.get(session_id, owner=whose))
        if found is None:
            raise ApiError(ErrorCode.UNKNOWN_SESSION, f"there is no session {session_id!r}")
        return jsonable(found)

    @api.delete("/v1/sessions/{session_id}", tags=["sessions"], status_code=204, summary="Delete a session",
                responses=error_responses(404, 409))
    async def delete_session(session_id: str = SessionId, owner: str | None = Owner,
                             principal: Principal = Depends(current_principal)) -> Response:
        sessions, whose = sessions_of(service), owner_for(principal, owner)
        if not await store_call(lambda: sessions.delete(session_id, owner=whose)):
            raise ApiError(ErrorCode.UNKNOWN_SESSION, f"there is no session {session_id!r}")
        return Response(status_code=204)

    return api
