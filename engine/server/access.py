"""Who may reach the service, decided before any route runs and before any body is read.

`Access` is one ASGI middleware in front of the whole app:

1. With no API keys, only loopback peers are served: the client address of the connection
   (ASGI `client`) must be loopback, the `Host` header must name a loopback host and an
   `Origin`, if any, must be the request's own origin (scheme, host and port): another local
   program's page (a dev server on `localhost:3000`) is another site. (An app embedded under `uvicorn.run(host="0.0.0.0")`
   would otherwise serve the network as admin: a `Host` header is whatever the client says.)
2. `/v1/*`, `/mcp` and `/metrics` need a key; `/v1/admin/*` and `/metrics` an admin key. The
   principal is put in the scope for the routes (`current_principal`). `/readyz` takes a key
   if one is sent (its figures are for admins) and never refuses.
3. Every request body is capped while it streams in: a `Content-Length` over the cap is
   refused at once, and a chunked body is cut off with 413 as soon as it passes the cap.
4. A body under `/v1/` must say it is JSON (`Content-Type: application/json`): 422 saying so
   otherwise. Every route there reads JSON, and the types a page of another site may send
   without a preflight (`text/plain`, forms) are exactly the ones refused.

All four happen before a route reads a byte of the body, so an unauthenticated client
cannot make the server buffer anything.

Paths are judged as the router matches them: without the root path (`get_route_path`), so
the app mounted under a prefix (`parent.mount("/skillyard", app)`) or served with
`uvicorn --root-path /api` guards exactly the routes it guards at `/`. And a route that finds
no principal in the scope refuses with 401: `LOCAL` (the admin of a server without keys) is
put there by `Access` only, never assumed from a missing entry.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from fastapi import Request
from starlette.exceptions import HTTPException
from starlette.routing import get_route_path  # the router's own rule: the path without the root path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ErrorCode, SkillyardError
from .api import ApiError
from .auth import LOCAL, ApiKeys, Principal, host_header_name, is_loopback_host, presented_key, same_origin

PRINCIPAL_KEY = "skillyard.principal"
HEADERS_KEY = "skillyard.headers"  # {name: first value}, bytes, set by Access
_PROTECTED = ("/v1/", "/mcp", "/metrics")
_ADMIN_ONLY = ("/v1/admin/", "/metrics")
_KEY_OPTIONAL = "/readyz"  # public, with more for a key (the route decides what)
KEY_REQUIRED = "an API key is required: send `Authorization: Bearer KEY` or `X-API-Key: KEY`"


class BodyTooLarge(HTTPException, SkillyardError):
    """Raised from `receive` when a body passes the cap: FastAPI re-raises HTTP exceptions
    from body parsing, so the app's handler answers 413 with the usual error shape."""

    def __init__(self, limit: int):
        super().__init__(413, f"the request body may be at most {limit} bytes")


def request_principal(request: Request) -> Principal:
    """Who made this request (set by `Access`); 401 when `Access` set no one. Never a default:
    a request that reached a route without passing `Access`'s check is nobody, not an admin."""
    principal: Principal | None = request.scope.get(PRINCIPAL_KEY)
    if principal is None:
        raise ApiError(ErrorCode.UNAUTHORIZED, KEY_REQUIRED)
    return principal


async def current_principal(request: Request) -> Principal:
    """The route dependency: who made this request (401 when no one). `async`: FastAPI runs a
    plain `def` dependency in its thread pool, a thread hand-off per request."""
    return request_principal(request)


def optional_principal(request: Request) -> Principal | None:
    """Who made this request, or None, on a public route that shows more to a valid key."""
    return request.scope.get(PRINCIPAL_KEY)


async def send_unauthorized(send: Send) -> None:
    """401 with the usual body, for an ASGI endpoint (no exception handlers) that found no principal."""
    await _send_error(send, ErrorCode.UNAUTHORIZED, KEY_REQUIRED, {"WWW-Authenticate": "Bearer"})


class Access:
    def __init__(self, app: ASGIApp, *, keys: ApiKeys, max_body_bytes: int, on_request: Any = None):
        self.app = app
        self.keys = keys
        self.max_body_bytes = max_body_bytes
        self.on_request = on_request  # called on the first HTTP request (the hub attaches then)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.on_request is not None:
            self.on_request()
            self.on_request = None  # attaching is done once: the lifespan attaches again after a restart
        headers = first_values(scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _send_error(send, *refusal)
            return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            await _send_error(send, ErrorCode.PAYLOAD_TOO_LARGE, f"the request body may be at most {self.max_body_bytes} bytes")
            return
        content_type = headers.get(b"content-type")
        if content_type != b"application/json" and _not_json_body(scope, content_type, headers, declared):
            await _send_error(send, ErrorCode.INVALID_REQUEST, not_json_message(content_type))
            return
        if declared is not None:
            # The HTTP server frames the body by its Content-Length: it cannot pass the cap, and
            # the request needs no counting wrappers around receive and send.
            await self.app(scope, receive, send)
            return
        await self._call_capped(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[ErrorCode, str, dict[str, str]] | None:
        """(code, message, headers) when the request may not go further."""
        if not self.keys:
            client = scope.get("client")
            fetch_site = headers.get(b"sec-fetch-site") if _route_path(scope).startswith(_PROTECTED) else None  # the page opens from a link
            refusal = _loopback_verdict(str(client[0]) if client else None, headers.get(b"host"), headers.get(b"origin"),
                                        scope.get("scheme", "http"), fetch_site)
            if refusal is None:
                scope[PRINCIPAL_KEY] = LOCAL
            return refusal
        path = get_route_path(scope)  # as the router will match it: mounted or not, the same routes are guarded
        protected = path.startswith(_PROTECTED)
        if not protected and path != _KEY_OPTIONAL:
            return None
        key = presented_key({name: value.decode("latin-1") for name, value in (
            ("authorization", headers.get(b"authorization")), ("x-api-key", headers.get(b"x-api-key"))) if value is not None})
        principal = self.keys.principal_of(key)
        if principal is None:
            if not protected:
                return None
            return ErrorCode.UNAUTHORIZED, "the API key is not valid" if key else KEY_REQUIRED, {"WWW-Authenticate": "Bearer"}
        if path.startswith(_ADMIN_ONLY) and not principal.is_admin:
            return ErrorCode.FORBIDDEN, "this needs an API key with the admin role", {}
        scope[PRINCIPAL_KEY] = principal
        return None

    async def _call_capped(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.max_body_bytes
        received = 0
        started = False

        async def capped_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, capped_receive, tracking_send)
        except BodyTooLarge:  # raised where no route handler turned it into a response (e.g. /mcp)
            if not started:
                await _send_error(send, ErrorCode.PAYLOAD_TOO_LARGE, f"the request body may be at most {limit} bytes")


@functools.lru_cache(maxsize=256)
def _loopback_verdict(client: str | None, host: bytes | None, origin: bytes | None, scheme: str,
                      fetch_site: bytes | None) -> tuple[ErrorCode, str, dict[str, str]] | None:
    """The refusal for this peer, Host and Origin, or None. Cached: a server without keys sees the
    same few loopback values on every request, and parsing addresses is most of the check's cost.
    An Origin must be the request's own (scheme, host, port), and a browser's `Sec-Fetch-Site`
    (sent on every request, GETs too, which carry no Origin) `same-origin` or `none` (typed in):
    a page served by another local program (a dev server on localhost:3000) is refused, as any
    other site is."""
    if client and not is_loopback_host(client):
        return ErrorCode.PEER_NOT_ALLOWED, ("no API keys are configured, so this server answers only loopback clients "
                                            "(set SKILLYARD_API_KEYS to serve others)"), {}
    host_text = host.decode("latin-1") if host is not None else None
    if host_text is not None and not is_loopback_host(host_header_name(host_text)):
        return ErrorCode.HOST_NOT_ALLOWED, ("no API keys are configured, so this server answers only requests to a "
                                            "loopback address (set SKILLYARD_API_KEYS to serve others)"), {}
    if (origin is not None and not same_origin(origin.decode("latin-1"), scheme, host_text)) or \
            fetch_site not in _OWN_FETCH_SITES:
        return ErrorCode.ORIGIN_NOT_ALLOWED, ("no API keys are configured, so only pages of this server's own origin "
                                              f"({scheme}://{host_text or '?'}) may call it; a page of another origin "
                                              "needs an API key"), {}
    return None


_OWN_FETCH_SITES = frozenset({None, b"same-origin", b"none"})  # Sec-Fetch-Site of a request of this origin's page, or none
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
_JSON_ROUTES = "/v1/"  # every body under /v1/ is JSON (/mcp checks its own, as the MCP transport says)


def json_type(content_type: bytes | None) -> bool:
    """Whether a `Content-Type` names JSON (`application/json`, with parameters or not, or `…+json`).
    The one rule for every JSON route: a body a browser may send another site without asking
    first (`text/plain`, a form) is never taken as a call's arguments."""
    if content_type == b"application/json":
        return True
    if content_type is None:
        return False
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))


def _not_json_body(scope: Scope, content_type: bytes | None, headers: dict[bytes, bytes], declared: bytes | None) -> bool:
    """A request to a JSON route that brings a body (a length, or chunks) not said to be JSON."""
    if scope["method"] not in _WITH_BODY or json_type(content_type):
        return False
    if declared == b"0" or (declared is None and b"transfer-encoding" not in headers):
        return False  # no body: a call without arguments
    return _route_path(scope).startswith(_JSON_ROUTES)


def _route_path(scope: Scope) -> str:
    """The path as the router matches it (without the root path of a mounted app)."""
    return get_route_path(scope) if scope.get("root_path") else scope["path"]


def not_json_message(content_type: bytes | None) -> str:
    sent = "no Content-Type" if content_type is None else f"Content-Type {content_type.decode('latin-1')[:80]!r}"
    return (f"this route reads a JSON body, and the request sent {sent}: send the body with "
            "`Content-Type: application/json` (curl: -H 'Content-Type: application/json')")


def request_headers(scope: Scope) -> dict[bytes, bytes]:
    """`first_values` of the request, as `Access` kept them."""
    headers = scope.get(HEADERS_KEY)
    return first_values(scope) if headers is None else headers


def first_values(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers by (lower-case) name, the first value of each, as every header
    read here and by the routes is taken. Kept in the scope: the call route reads `Accept` there."""
    raw = scope.get("headers", ())
    headers = dict(reversed(raw if raw.__class__ is list else list(raw)))  # reversed: the first value wins
    scope[HEADERS_KEY] = headers
    return headers


async def _send_error(send: Send, code: ErrorCode, message: str, headers: dict[str, str] | None = None) -> None:
    status = code.status
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    if status == 413:
        raw.append((b"connection", b"close"))  # the rest of the body is not read
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
