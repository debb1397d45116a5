"""`/v1/batches`: the batches `skillyard batch` recorded in the run store, and their cases' runs.

A caller sees the batches of its own key name; an admin sees every batch (those run from the
CLI have no key name). Each case names its run: `GET /v1/runs/{run_id}` opens its timeline.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path as PathParam, Query

from ..access import current_principal
from ..api import ApiError, error_responses, store_call
from ..auth import Principal
from ..service import Service


def router(service: Service) -> APIRouter:
    store = service.engine.store
    api = APIRouter(tags=["batches"])

    def need_store() -> Any:
        if store is None:
            raise ApiError(404, "no_store", "this server runs without a run store (--no-store): no batches are recorded")
        return store

    @api.get("/v1/batches", summary="Recent batches, newest first, with their pass rate", responses=error_responses())
    async def list_batches(limit: int = Query(20, ge=1, le=500),
                           principal: Principal = Depends(current_principal)) -> list[dict[str, Any]]:
        owner = None if principal.is_admin else principal.name
        found = need_store()
        return await store_call(lambda: found.batches(limit=limit, principal=owner))

    @api.get("/v1/batches/{batch_id}", summary="One batch and the run of each of its cases", responses=error_responses(404))
    async def get_batch(batch_id: str = PathParam(max_length=100),
                        principal: Principal = Depends(current_principal)) -> dict[str, Any]:
        found = need_store()
        batch = await store_call(lambda: found.batch(batch_id))
        if batch is None or not principal.may_see(batch["principal"]):
            raise ApiError(404, "not_found", f"no batch {batch_id!r}")
        return batch

    return api
