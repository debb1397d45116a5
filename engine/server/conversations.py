"""What the agent and sessions routes share about sessions (each router stands alone)."""

from __future__ import annotations

from typing import Any

from ..errors import ErrorCode
from .api import ApiError
from .auth import Principal
from .service import Service

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"


def visible_to(principal: Principal) -> str | None:
    """Whose sessions `principal` may list when it asks for all: its own (by key name); None, an admin's: all (as runs)."""
    return None if principal.is_admin else principal.name


def owner_for(principal: Principal, owner: str | None) -> str:
    """Whose session a route reads or deletes: the caller's own; an admin may name another
    owner. A caller naming another is answered 404, as a session that does not exist (it says
    nothing of other callers' sessions)."""
    if owner is None or owner == principal.name:
        return principal.name
    if not principal.is_admin:
        raise ApiError(ErrorCode.UNKNOWN_SESSION, "there is no such session of yours")
    return owner


def sessions_of(service: Service) -> Any:
    """The store's sessions, or 409 `no_store`."""
    store = service.engine.store
    if store is None:
        raise ApiError(ErrorCode.NO_STORE, "sessions are kept in the run store, and this service runs without one "
                       "(store.enabled in config/engine.yaml)")
    return store.sessions
