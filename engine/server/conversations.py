"""What the agent and sessions routes share about sessions (each router stands alone)."""

from __future__ import annotations

from typing import Any

from ..errors import ErrorCode
from .api import ApiError
from .auth import Principal
from .service import Service

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"


def visible_to(principal: Principal) -> str | None:
    """Whose sessions `principal` may see: its own (by key name); None, an admin's: all (as runs)."""
    return None if principal.is_admin else principal.name


def sessions_of(service: Service) -> Any:
    """The store's sessions, or 409 `no_store`."""
    store = service.engine.store
    if store is None:
        raise ApiError(ErrorCode.NO_STORE, "sessions are kept in the run store, and this service runs without one "
                       "(store.enabled in config/engine.yaml)")
    return store.sessions
