"""What every router of the service shares: the error shape, its documentation, helpers.

Every error body is `{"error": {"code", "message", "details"?}}` — or, for a tool call, the
ToolResult itself, whose `error.code` is the router's. Every code is an `ErrorCode` member,
whose `status` is the answer's HTTP status.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, TypeVar

import orjson
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ..errors import ErrorCode, SkillyardError
from ..safety.untrusted import scrub_surrogates
from ..store import AmbiguousRunId, StoreError

T = TypeVar("T")


class ApiError(SkillyardError):
    """A refusal with a stable code, rendered by the app's handler. Its HTTP status is the
    code's own (`ErrorCode.status`), unless `status` names the one place a code answers
    with another (say why there)."""

    def __init__(self, code: ErrorCode, message: str, *, status: int | None = None, headers: dict[str, str] | None = None,
                 **details: Any):
        super().__init__(message)
        self.status = code.status if status is None else status
        self.code, self.message, self.details = code, message, details
        self.headers = headers

    def response(self, headers: dict[str, str] | None = None) -> JSONResponse:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return JSONResponse({"error": body}, status_code=self.status, headers=headers or self.headers)


class ErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


_TEXTS = {
    401: "No API key, or an unknown one",
    403: "The key's role may not do this",
    404: "Not found",
    409: "Conflict",
    413: "Body too large",
    422: "Invalid request",
    429: "Too many live runs; retry after Retry-After seconds",
    501: "Not supported",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of an operation: 401 and 403 always, plus `statuses`."""
    return {s: {"model": ErrorResponse, "description": _TEXTS.get(s, "Error")} for s in (401, 403, *statuses)}


SSE_DOC = {"text/event-stream": {"schema": {"type": "string", "description": "id: seq / event: type / data: event JSON"}}}


def jsonable(value: Any) -> Any:
    """What json.dumps(default=str) makes of it (data from tools may hold any object), with
    lone surrogates as U+FFFD: a JSON body is UTF-8, which cannot carry them."""
    return scrub_surrogates(json.loads(json.dumps(value, ensure_ascii=False, default=str)))[0]


_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def json_body(value: Any) -> bytes:
    """The UTF-8 JSON of `value` in one pass, as `jsonable` would make it (`default=str`);
    `jsonable`'s slower round trip only for what orjson refuses (lone surrogates, integers
    beyond 64 bits)."""
    try:
        return orjson.dumps(value, default=str, option=_ORJSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":")).encode()


async def store_call(read: Callable[[], T], *, ambiguous: bool = False) -> T:
    """Run a store read in a thread; a store that fails is 503, an ambiguous id prefix 409
    (how many runs it matches, never which: their ids are not the caller's to learn)."""
    try:
        return await asyncio.to_thread(read)
    except AmbiguousRunId as exc:
        if not ambiguous:
            raise ApiError(ErrorCode.STORE_UNAVAILABLE, "a run id lookup matched several runs") from None
        raise ApiError(ErrorCode.AMBIGUOUS_RUN_ID, f"run id prefix {exc.prefix!r} matches {exc.counted} runs; "
                       "give more of the id", matches=exc.count) from None
    except StoreError as exc:
        raise ApiError(ErrorCode.STORE_UNAVAILABLE, str(exc)) from None
