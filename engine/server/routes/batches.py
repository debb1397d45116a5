"""`/v1/batches`: the batches `skillyard batch` recorded in the run store, and their cases' runs.

A caller sees the batches of its own key name; an admin sees every batch (those run from the
CLI have no key name). Each case names its run (`GET /v1/runs/{run_id}` opens its timeline)
and carries that run's status, error code and duration.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi import Path as PathParam

from ...errors import ErrorCode
from ..access import current_principal
from ..api import ApiError, error_responses, store_call
from ..auth import Principal
from ..service import Service


def router(service: Service) -> APIRouter:
    store = service.engine.store
    api = APIRouter(tags=["batches"])

    def need_store() -> Any:
        if store is None:
            # 404, not the admin's 409: without a store there are no batches to find
            raise ApiError(ErrorCode.NO_STORE, "this server runs without a run store (--no-store): no batches are recorded",
                           status=404)
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
            raise ApiError(ErrorCode.NOT_FOUND, f"no batch {batch_id!r}")
        count = max(1, len(batch["cases"]))
        runs = await store_call(lambda: found.runs(batch=batch_id, limit=count))
        return {**batch, "cases": with_runs(batch["cases"], runs)}

    return api


def with_runs(cases: list[dict[str, Any]], runs: list[Any]) -> list[dict[str, Any]]:
    """Each case with its run's status, error code and duration (what the page lists per case)."""
    by_id = {run.id: run for run in runs}
    out = []
    for case in cases:
        run = by_id.get(case["run_id"])
        error = run.error if run is not None and isinstance(run.error, dict) else {}
        out.append({**case, "status": run.status if run is not None else None,
                    "error_code": error.get("code"), "duration_ms": run.duration_ms if run is not None else None})
    return out
