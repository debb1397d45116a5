"""Runs: list, read, follow (SSE with Last-Event-ID resume), approve, cancel.

A caller sees, follows, approves and cancels only the runs its key name started; admins
see all. A run that is not the caller's answers 404, exactly like one that does not exist.
An id prefix is looked up among the runs the caller may see only: a prefix that matches one
of another caller's runs is 404 too, and one that matches several of the caller's is 409
with their number, not their ids.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Literal

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from ...errors import ErrorCode
from ...executors.mcp_client.answers import answer_values
from ...runtime.result import ToolResult
from ..access import current_principal
from ..api import SSE_DOC, ApiError, error_responses, jsonable, store_call
from ..auth import Principal
from ..hub import LiveRun
from ..live import stream
from ..replicas import FULL_ID_CHARS
from ..service import Service
from ..sse import HEARTBEAT_S, EventStreamResponse, parse_last_event_id, stored_frames, wants_event_stream

RunId = PathParam(max_length=200)


class ApprovalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    approve: bool
    values: dict[str, Any] | None = Field(default=None, description=(
        "For an `input_required` question (an MCP server's elicitation): the values of its `requested_schema`; "
        "omitted fields take the schema's defaults. Only with `approve: true`."))


def _unknown(run_id: str) -> ApiError:
    return ApiError(ErrorCode.UNKNOWN_RUN, f"there is no run {run_id!r}")


def _not_pending(run_id: str, tool_call_id: str) -> ApiError:
    return ApiError(ErrorCode.NOT_PENDING, f"no confirmation is pending for call {tool_call_id!r} of run {run_id!r} "
                                           "(answered already, timed out, or never asked)")


def _owner(principal: Principal) -> str | None:
    """Whose runs `principal` may see in the store: its own (by key name); None, an admin's: all."""
    return None if principal.is_admin else principal.name


async def _service(request: Request) -> Service:
    """The service the request reached (`create_app` keeps it in the app's state). `async`: a
    plain `def` dependency would cost a thread hand-off per request."""
    return request.app.state.service


def router() -> APIRouter:
    """The runs routes, in the order the OpenAPI document lists them."""
    api = APIRouter()
    api.add_api_route("/v1/runs", list_runs, methods=["GET"], tags=["runs"],
                      summary="Recent runs, newest first (a caller's own)", responses=error_responses())
    api.add_api_route("/v1/runs/{run_id}", get_run, methods=["GET"], tags=["runs"],
                      summary="One run (an unambiguous id prefix works too)", responses=error_responses(404, 409))
    api.add_api_route(
        "/v1/runs/{run_id}/events", run_events, methods=["GET"], tags=["runs"],
        summary="A run's events as SSE; resumes after Last-Event-ID",
        description="Replays the run's events with seq greater than `Last-Event-ID` (or `after`), then, while the run "
        "is live, follows it to its end. With `Accept: application/json` (not text/event-stream) returns the list "
        "recorded so far. An unambiguous id prefix works too. Closing the stream never cancels the run.",
        responses={200: {"content": SSE_DOC, "description": "The events"}, **error_responses(404, 409)},
    )
    api.add_api_route("/v1/runs/{run_id}/approvals/{tool_call_id}", approve, methods=["POST"], tags=["runs"],
                      summary="Answer a pending confirmation of one tool call", responses=error_responses(404, 409, 422))
    api.add_api_route("/v1/runs/{run_id}/cancel", cancel, methods=["POST"], tags=["runs"], summary="Cancel a live run",
                      responses=error_responses(404, 409))
    return api


def _live_run(service: Service, run_id: str, principal: Principal) -> LiveRun | None:
    live = service.hub.runs.get(run_id)
    return live if live is not None and principal.may_see(live.principal) else None


async def list_runs(
    tool: str | None = Query(None, max_length=200, description="Only runs of this tool (or agent model)"),
    status: Literal["running", "ok", "error", "cancelled", "interrupted"] | None = Query(None),
    since_ms: int | None = Query(None, ge=0, le=10**14, description="Only runs started at or after (ms since epoch)"),
    limit: int = Query(50, ge=1, le=500),
    principal: Principal = Depends(current_principal),
    service: Service = Depends(_service),
) -> list[dict[str, Any]]:
    hub, store = service.hub, service.engine.store
    owner = _owner(principal)
    if store is None:
        runs = [r.summary() for r in reversed(hub.runs.values()) if principal.may_see(r.principal)]
        runs = [r for r in runs if (tool is None or r["name"] == tool) and (status is None or r["status"] == status)
                and (since_ms is None or r["started_at"] >= since_ms)]
        return runs[:limit]

    def read() -> list[dict[str, Any]]:
        store.flush()
        records = store.runs(tool=tool, status=status, since_ms=since_ms, limit=limit, principal=owner)
        return [record.to_dict() for record in records]

    records = await store_call(read)
    for record in records:
        live = hub.runs.get(record["id"])
        record["live"] = bool(live and not live.done) or record["status"] == "running"
        record["pending_approvals"] = live.pending_approvals if live else []
    return jsonable(records)


async def get_run(run_id: str = RunId, principal: Principal = Depends(current_principal),
                  service: Service = Depends(_service)) -> dict[str, Any]:
    engine, hub, store = service.engine, service.hub, service.engine.store
    live = hub.runs.get(run_id)
    if store is not None:

        def read() -> tuple[Any, list[dict[str, Any]]]:
            store.flush()
            record = store.run(run_id, principal=_owner(principal))
            if record is None:
                return None, []
            return record, store.tool_logs(run_id=record.id, limit=500)

        record, logs = await store_call(read, ambiguous=True)
        if record is not None:
            elsewhere = record.status == "running" and record.id not in engine.runs
            pending = await service.replicas.pending(record) if elsewhere else []
            live = live or hub.runs.get(record.id)
            out = {**record.to_dict(), "tool_calls": list(reversed(logs))}
            out["live"] = bool(live and not live.done) or record.status == "running"
            out["pending_approvals"] = live.pending_approvals if live else pending
            out["last_seq"] = live.last_seq if live else None
            return jsonable(out)
    if live is None or not principal.may_see(live.principal):
        raise _unknown(run_id)
    return jsonable({**live.summary(), "input": None, "output": _shown(live), "last_seq": live.last_seq})


def _shown(live: LiveRun) -> Any:
    """A live run's result as its events show it (redacted like a stored run's output)."""
    result = live.run.result
    return result.as_shown().to_dict() if isinstance(result, ToolResult) else live.result


async def run_events(
    request: Request,
    run_id: str = RunId,
    after: int = Query(0, ge=0, le=10**12, description="Only events with a greater seq"),
    last_event_id: str | None = Header(None, alias="Last-Event-ID", max_length=40),
    principal: Principal = Depends(current_principal),
    service: Service = Depends(_service),
) -> Any:
    hub, replicas, store = service.hub, service.replicas, service.engine.store
    after = max(after, parse_last_event_id(last_event_id))
    accept = request.headers.get("accept") or ""
    as_json = "application/json" in accept and not wants_event_stream(accept)
    live = _live_run(service, run_id, principal)
    if live is None and store is not None:

        owner = _owner(principal)
        record = await replicas.wait_stored(run_id, owner) if len(run_id) == FULL_ID_CHARS else None

        def read() -> tuple[Any, list[dict[str, Any]]] | None:
            store.flush()
            found = record or store.run(run_id, principal=owner)  # the full id of a prefix, or None
            if found is None:
                return None
            return found, store.events(found.id, after_seq=after)

        found = await store_call(read, ambiguous=True)
        if found is None:
            raise _unknown(run_id)
        stored, events = found
        live = _live_run(service, stored.id, principal)  # a prefix of a run that is still live here: follow it
        if live is None:
            if as_json or stored.status != "running":
                return jsonable(events) if as_json else _replay(stored.id, events)
            follow = replicas.follow(stored.id, after, heartbeat=HEARTBEAT_S)  # it runs on another replica
            return EventStreamResponse(follow, headers={"X-Run-Id": stored.id})
    if live is None:
        raise _unknown(run_id)
    if as_json:
        held = live.events_after(after)
        if held is None and store is not None:  # memory let the older ones go: the store has them all
            found_id = live.run_id

            def stored() -> list[dict[str, Any]]:
                store.flush()
                return store.events(found_id, after_seq=after)

            held = await store_call(stored)
        return jsonable(held or [])
    return stream(hub, live, after, cancel_on_disconnect=False)


async def approve(
    body: ApprovalRequest,
    run_id: str = RunId,
    tool_call_id: str = PathParam(max_length=200),
    principal: Principal = Depends(current_principal),
    service: Service = Depends(_service),
) -> dict[str, Any]:
    run = service.engine.runs.get(run_id)
    if run is not None and principal.may_see(run.principal):
        if tool_call_id not in run.pending_approvals:
            raise _not_pending(run_id, tool_call_id)
        if not run.answer(tool_call_id, body.approve, _checked_values(body, run.pending_input_schema(tool_call_id))):
            raise _not_pending(run_id, tool_call_id)
    else:  # a run of another replica (answered there, through the store's notices), or on Temporal
        record = await _stored_run(service, run_id, principal)
        if body.values is not None:  # the values would have to travel through the store's notices
            raise ApiError(ErrorCode.INVALID_REQUEST, "values can only answer a question of a run on the replica "
                           "running it", field="values")
        if tool_call_id not in await service.replicas.pending(record):
            raise _not_pending(run_id, tool_call_id)
        await service.replicas.answer(record, tool_call_id, body.approve)
    return {"run_id": run_id, "tool_call_id": tool_call_id, "approved": body.approve}


def _checked_values(body: ApprovalRequest, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The values of an answer, checked against the question's requested schema (defaults applied)."""
    if body.values is None:
        return None
    if not body.approve:
        raise ApiError(ErrorCode.INVALID_REQUEST, "`values` go with `approve: true` only", field="values")
    if schema is None:
        raise ApiError(ErrorCode.INVALID_REQUEST, "this confirmation is a yes or no: it takes no `values`", field="values")
    content, problems = answer_values(schema, body.values)
    if problems:
        first = problems[0]
        field = first.pointer.lstrip("/").split("/")[0] or None
        raise ApiError(ErrorCode.INVALID_ARGUMENTS, f"values{'.' + field if field else ''}: {first.message}",
                       field=field, violations=[p.as_dict() for p in problems])
    return content


async def cancel(run_id: str = RunId, principal: Principal = Depends(current_principal),
                 service: Service = Depends(_service)) -> dict[str, Any]:
    run = service.engine.runs.get(run_id)
    live = _live_run(service, run_id, principal)
    if (run is not None and principal.may_see(run.principal)) or live is not None:
        if not service.hub.cancel(run_id):
            raise ApiError(ErrorCode.NOT_RUNNING, f"run {run_id!r} is not running")
    else:  # a run of another replica
        record = await _stored_run(service, run_id, principal)
        if record.status != "running":
            raise ApiError(ErrorCode.NOT_RUNNING, f"run {run_id!r} is not running (it is {record.status})")
        await service.replicas.cancel(record)
    return {"run_id": run_id, "cancelled": True}


async def _stored_run(service: Service, run_id: str, principal: Principal) -> Any:
    """The stored run `run_id` if the caller may see it; else 404, as if it did not exist."""
    if service.engine.store is None:
        raise ApiError(ErrorCode.UNKNOWN_RUN, f"run {run_id!r} is not live in this server")
    record = await service.replicas.wait_stored(run_id, _owner(principal))
    if record is None:
        raise _unknown(run_id)
    return record


def _replay(run_id: str, events: list[dict[str, Any]]) -> EventStreamResponse:
    async def frames() -> AsyncIterator[bytes | None]:
        for chunk in stored_frames(events):
            yield chunk

    return EventStreamResponse(frames(), headers={"X-Run-Id": run_id})
