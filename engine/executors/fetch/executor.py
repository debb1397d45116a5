"""The fetch executor: one guarded HTTP request (plus redirects), capped, decoded, converted.

    args ──▶ request (method, headers, body) ──▶ for each hop: guard.vet → connect to the
    vetted address (Host / SNI = the name) → redirect? vet the next hop : read ≤ cap bytes
    ──▶ decode charset ──▶ parse mode ──▶ FetchResult (data + the text a model reads)

Every failure becomes a StepFailure with one of fetch's codes (ErrorCode.BLOCKED, INVALID_URL,
INVALID_ARGUMENTS, HTTP_ERROR, FETCH_FAILED, FETCH_TIMEOUT); the router turns it into a
ToolResult. An error of httpx, zlib or the resolver becomes one in `_translate` only.
Proxy environment variables are never read (trust_env=False).

A URL as shown (progress, errors, the result's `url` / `final_url`, the model's header line)
has the values of sensitive query parameters replaced (`?api_key=[REDACTED]`); the request
itself goes to the URL as given.
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import ssl
import time
import zlib
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx

from ...errors import ErrorCode, StepFailure
from ...safety.redaction import Redactor
from .config import BODY_METHODS, FetchConfig, check_header, human_size, is_credential_header
from .guard import InvalidURL, Refused, Resolver, Target, refusal_reason, system_resolver, vet
from .parse import (
    ACCEPT_ENCODING,
    BoundedDecoder,
    UnsupportedEncoding,
    decode_text,
    html_to_markdown,
    is_html,
    looks_binary,
    parse_json_noted,
)

USER_AGENT = "skillyard-fetch/0.1"
_ACCEPT = {
    "markdown": "text/html,application/xhtml+xml;q=0.9,text/*;q=0.8,*/*;q=0.5",
    "json": "application/json,*/*;q=0.5",
    "raw": "*/*",
}
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_PROGRESS_EVERY = 64 * 1024
_EXCERPT = 2048
_ORIGIN_BOUND_HEADERS = ("authorization", "cookie")


class FetchResult(dict[str, Any]):
    """The data of a successful fetch (a plain JSON object) that also renders the model's text.

    Keys: url, final_url, status_code, reason, content_type, charset, bytes, truncated,
    duration_ms, redirects, format (markdown | text | json | binary), content, and when they
    apply title, degraded, degraded_reason.
    """

    def result_metadata(self) -> dict[str, Any]:
        """What the router copies into ToolResult.metadata (status, type, size, url: what a caller checks without reading the content)."""
        return {key: self[key] for key in ("status_code", "content_type", "bytes", "final_url", "truncated") if key in self}

    def render_model_text(self, result: Any = None) -> str:
        """A header with status and size, then the content: the model sees first whether the fetch worked."""
        kind = self.get("content_type") or "no content type"
        shown_as = {"markdown": " as Markdown", "json": " as JSON", "binary": ", binary"}.get(self["format"], "")
        lines = [f"[HTTP {self['status_code']} {self['reason']} · {self['bytes']:,} bytes · {kind}{shown_as} · {self['final_url']}]"]
        if self["truncated"]:
            lines.append(f"[Cut off: the response is larger than this tool's {human_size(self['max_bytes'])} limit; only the start is shown.]")
        if self.get("degraded"):
            lines.append(f"[{self.get('degraded_reason', 'could not be parsed')}; the raw text follows.]")
        lines.extend(f"[{note}]" for note in self.get("notes", ()))
        content = self["content"]
        if self["format"] == "binary":
            lines.append("(binary content, not shown)")
        elif isinstance(content, str):
            lines.append(content)
        else:
            lines.append(json.dumps(content, ensure_ascii=False))
        return "\n".join(lines)


_PLAIN_REDACTOR = Redactor()


class _Progress:
    """Where a call is (for timeout and error messages), and how it shows URLs."""

    __slots__ = ("bytes", "url", "stage", "redactor", "encoding")

    def __init__(self, url: str, run: Any):
        project = getattr(run, "project", None)
        self.redactor: Redactor = getattr(project, "redactor", None) or _PLAIN_REDACTOR
        self.bytes = 0
        self.url = self.show(url)  # as shown: sensitive query values replaced
        self.stage = "resolving"
        self.encoding = ""  # of the body being read (gzip, br…)

    def show(self, url: Any) -> str:
        return self.redactor.redact_url(str(url))


class FetchExecutor:
    kind = "fetch"

    def __init__(
        self,
        config: FetchConfig,
        *,
        resolver: Resolver | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: Any = True,
    ):
        """`resolver` (name → addresses) and `transport` are seams for tests; `verify` as in httpx."""
        self.config = config
        self.policy = config.policy
        self.resolver: Resolver = resolver or system_resolver
        self._configured = frozenset(name.lower() for name in config.default_headers)  # bound to the first origin
        self._transport = transport
        self._verify = verify

    def _ssl_context(self) -> Any:
        if self._transport is not None or self._verify is not True:
            return self._verify
        return _default_ssl_context()

    # ─── the call ───────────────────────────────────────────────────────────────────────

    async def execute(self, args: dict[str, Any], run: Any) -> FetchResult:
        cfg = self.config
        method, headers, content = self._request_parts(args)
        url = args.get("url")
        if not isinstance(url, str):
            raise StepFailure(ErrorCode.INVALID_ARGUMENTS, "`url` is required: an absolute http:// or https:// URL")
        started = time.perf_counter()
        progress = _Progress(str(url), run)
        try:
            async with asyncio.timeout(cfg.timeout):
                return await self._fetch(str(url), method, headers, content, run, progress, started)
        except TimeoutError:
            raise StepFailure(
                ErrorCode.FETCH_TIMEOUT,
                f"{method} {progress.url}: no complete response within {cfg.timeout:g}s, this tool's total time limit "
                f"(stopped while {progress.stage}; {progress.bytes:,} bytes had arrived)",
                {"url": progress.show(url), "final_url": progress.url, "bytes": progress.bytes, "timeout_s": cfg.timeout},
            ) from None

    def _request_parts(self, args: dict[str, Any]) -> tuple[str, dict[str, str], bytes | None]:
        cfg = self.config
        method = str(args.get("method") or cfg.default_method).upper()
        if method not in cfg.allowed_methods:
            raise StepFailure(ErrorCode.INVALID_ARGUMENTS, f"method {method} is not allowed; use one of {', '.join(cfg.allowed_methods)}")
        headers: dict[str, str] = {"User-Agent": USER_AGENT, "Accept": _ACCEPT[cfg.parse_mode]}
        given = args.get("headers") or {}
        if not isinstance(given, dict):
            raise StepFailure(ErrorCode.INVALID_ARGUMENTS, "headers must be an object of name: value strings")
        for name, value in [*cfg.default_headers.items(), *given.items()]:
            problem = check_header(name, value)
            if problem:
                raise StepFailure(ErrorCode.INVALID_ARGUMENTS, problem)
            for existing in [k for k in headers if k.lower() == name.lower()]:
                del headers[existing]
            headers[name] = value
        body = args.get("body")
        if body is None:
            return method, headers, None
        if method not in BODY_METHODS:
            raise StepFailure(ErrorCode.INVALID_ARGUMENTS, f"a {method} request carries no body; use POST, PUT, PATCH or DELETE")
        if isinstance(body, str):
            return method, headers, body.encode("utf-8")
        if not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = "application/json"
        return method, headers, json.dumps(body, ensure_ascii=False).encode("utf-8")

    async def _fetch(
        self, url: str, method: str, headers: dict[str, str], content: bytes | None, run: Any, progress: _Progress, started: float
    ) -> FetchResult:
        cfg = self.config
        client = httpx.AsyncClient(
            transport=self._transport,
            verify=self._ssl_context(),
            trust_env=False,  # no proxy or certificate settings from the environment
            follow_redirects=False,  # every hop goes back through the guard
            timeout=httpx.Timeout(cfg.timeout, connect=min(cfg.timeout, 10.0)),
        )
        async with client:
            current: str | httpx.URL = url
            previous: Target | None = None
            for hop in range(cfg.max_redirects + 1):
                target = await self._vet(current, previous, run, progress)
                progress.url = shown = progress.show(target.url)
                async with self._send(client, target, method, headers, content, run, progress) as response:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        if hop == cfg.max_redirects:
                            raise StepFailure(
                                ErrorCode.FETCH_FAILED,
                                f"{progress.show(url)} redirects more than {cfg.max_redirects} times "
                                f"(last hop: HTTP {response.status_code} to {progress.show(location)})",
                                {"url": progress.show(url), "final_url": shown, "status_code": response.status_code},
                            )
                        try:
                            current = target.url.join(location)
                        except (httpx.InvalidURL, ValueError) as exc:
                            where = f"{shown} redirects to an unusable location {progress.show(location)!r}"
                            raise _translate(exc, progress, "redirect", where, {}) from None
                        method, headers, content = _redirected(response.status_code, method, headers, content, target.url, current,
                                                               self._configured)
                        run.tool_progress(
                            "redirect",
                            f"HTTP {response.status_code}: redirect {hop + 1} of at most {cfg.max_redirects} to {progress.show(current)}",
                            status_code=response.status_code,
                            location=progress.show(current),
                            hop=hop + 1,
                        )
                        previous = target
                        continue
                    if not 200 <= response.status_code < 300:
                        await self._fail_status(response, url, progress)
                    body, truncated = await self._read(response, run, progress)
                    return await self._result(progress.show(url), shown, response, body, truncated, hop, started, run)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def _vet(self, url: str | httpx.URL, previous: Target | None, run: Any, progress: _Progress) -> Target:
        show = progress.show
        hop = f"the redirect from {show(previous.url)} to {show(url)}" if previous else show(url)
        try:
            target = await vet(url, self.policy, self.resolver)
        except Refused as exc:
            reason = _hide(str(exc), url, show)
            raise StepFailure(ErrorCode.BLOCKED, f"{hop} is refused: {reason}", {"url": show(url), "reason": reason, "redirect": previous is not None}) from None
        except InvalidURL as exc:
            reason = _hide(str(exc), url, show)
            if previous is not None:
                raise StepFailure(ErrorCode.FETCH_FAILED, f"{hop} cannot be followed: {reason}", {"url": show(url)}) from None
            raise StepFailure(ErrorCode.INVALID_URL, reason, {"url": show(url)}) from None
        except OSError as exc:  # socket.gaierror and its kin, from the resolver
            raise _translate(exc, progress, "resolve", hop, {"url": show(url)}) from None
        shown = ", ".join(str(a) for a in target.addresses[:4])
        private = [a for a in target.addresses if refusal_reason(a)]
        verdict = "public" if not private else "allowed by allowPrivateNetworks"
        if target.is_ip_literal:
            message = f"{target.host} is {verdict}"
        else:
            message = f"{target.host} resolved to {shown}{' …' if len(target.addresses) > 4 else ''}: {verdict}"
        run.tool_progress("resolved", message, host=target.host, addresses=[str(a) for a in target.addresses])
        return target

    @asynccontextmanager
    async def _send(
        self, client: httpx.AsyncClient, target: Target, method: str, headers: dict[str, str], content: bytes | None, run: Any, progress: _Progress
    ) -> AsyncIterator[httpx.Response]:
        """Connect to the vetted addresses in turn (never to anything the name resolves to later)."""
        progress.stage = "connecting and waiting for the response"
        shown = progress.url
        request_headers = {**headers, "Host": target.host_header, "Accept-Encoding": ACCEPT_ENCODING}
        extensions = {"sni_hostname": target.host} if target.url.scheme == "https" and not target.is_ip_literal else {}
        last_error: Exception | None = None
        response: httpx.Response | None = None
        client.cookies.clear()  # the jar is keyed by the IP we connect to: never share it across hops
        for address in target.addresses:
            request = client.build_request(
                method, target.url.copy_with(host=str(address)), headers=request_headers, content=content, extensions=extensions
            )
            try:
                response = await client.send(request, stream=True)
                break
            except httpx.ConnectError as exc:  # the next address may answer
                last_error = exc
            except httpx.HTTPError as exc:
                raise _translate(exc, progress, "connect", f"{method} {shown}", {"url": shown, "address": str(address)},
                                 request.url) from None
        if response is None:
            assert last_error is not None  # vet gives at least one address: each one failed to connect
            tried = ", ".join(str(a) for a in target.addresses)
            raise _translate(last_error, progress, "connect", f"{method} {shown}: could not connect ({tried})", {"url": shown},
                             target.url)
        try:
            progress.stage = "waiting for the body"
            run.tool_progress(
                "response",
                f"HTTP {response.status_code} {response.reason_phrase} from {shown} ({response.headers.get('content-type', 'no content type')})",
                status_code=response.status_code,
                url=shown,
                content_length=_int(response.headers.get("content-length")),
            )
            yield response
        finally:
            await response.aclose()

    async def _read(self, response: httpx.Response, run: Any, progress: _Progress) -> tuple[bytes, bool]:
        """At most `maxResponseSize` bytes after decompression, whatever Content-Length says."""
        cap = self.config.max_response_size
        chunks, decoder = self._body(response)
        body = bytearray()
        truncated = False
        next_report = _PROGRESS_EVERY
        progress.stage = "reading the body"
        progress.encoding = decoder.name
        try:
            async for chunk in chunks:
                room = cap - len(body)
                piece = decoder.decode(chunk, room + 1)
                if len(piece) > room:
                    body += piece[:room]
                    truncated = True
                    break
                body += piece
                progress.bytes = len(body)
                if len(body) >= next_report:
                    next_report = len(body) + _PROGRESS_EVERY
                    run.tool_progress("downloading", f"{len(body) // 1024:,} KB received", bytes=len(body))
        except zlib.error as exc:
            raise _translate(exc, progress, "body", progress.url, {"url": progress.url}) from None
        except httpx.HTTPError as exc:
            raise _translate(exc, progress, "body", progress.url, {"url": progress.url, "bytes": len(body)}) from None
        progress.bytes = len(body)
        note = f", cut off at the {human_size(cap)} limit" if truncated else ""
        run.tool_progress("downloaded", f"{len(body):,} bytes received{note}", bytes=len(body), truncated=truncated)
        return bytes(body), truncated

    def _body(self, response: httpx.Response) -> tuple[AsyncIterator[bytes], BoundedDecoder]:
        """The raw body chunks and the decoder for them."""
        if response.is_stream_consumed:  # a fake transport's body, already in memory and decoded
            return _once(response.content), BoundedDecoder(None)
        try:
            return response.aiter_raw(), BoundedDecoder(response.headers.get("content-encoding"))
        except UnsupportedEncoding as exc:
            raise StepFailure(ErrorCode.FETCH_FAILED, f"{_PLAIN_REDACTOR.redact_url(str(response.request.url))}: {exc}") from None

    async def _fail_status(self, response: httpx.Response, url: str, progress: _Progress) -> None:
        excerpt = ""
        try:
            chunks, decoder = self._body(response)
            raw = bytearray()
            async for chunk in chunks:
                raw += decoder.decode(chunk, _EXCERPT - len(raw))
                if len(raw) >= _EXCERPT:
                    break
            excerpt, _ = decode_text(bytes(raw), response.headers.get("content-type"), complete=False)
        except (httpx.HTTPError, StepFailure, zlib.error):
            pass  # the status is the news; the body is only a courtesy
        reason = response.reason_phrase or ""
        raise StepFailure(
            ErrorCode.HTTP_ERROR,
            f"{response.request.method} {progress.url} answered HTTP {response.status_code} {reason}".rstrip(),
            {
                "url": progress.show(url),
                "final_url": progress.url,
                "status_code": response.status_code,
                "content_type": response.headers.get("content-type"),
                "body_excerpt": excerpt,
            },
        )

    # ─── the result ─────────────────────────────────────────────────────────────────────

    async def _result(
        self, url: str, final_url: str, response: httpx.Response, body: bytes, truncated: bool, redirects: int, started: float, run: Any
    ) -> FetchResult:
        """`url` and `final_url` as shown (sensitive query values replaced)."""
        content_type = response.headers.get("content-type")
        data = FetchResult(
            url=url,
            final_url=final_url,
            status_code=response.status_code,
            reason=response.reason_phrase,
            content_type=content_type,
            charset=None,
            bytes=len(body),
            truncated=truncated,
            max_bytes=self.config.max_response_size,
            redirects=redirects,
            duration_ms=0.0,
        )
        if looks_binary(body, content_type):
            data.update(format="binary", content="")
        else:
            text, charset = decode_text(body, content_type, complete=not truncated)
            data["charset"] = charset
            await self._parse(data, text, content_type, str(response.request.url), run)
        data["duration_ms"] = round((time.perf_counter() - started) * 1000, 2)
        return data

    async def _parse(self, data: FetchResult, text: str, content_type: str | None, final_url: str, run: Any) -> None:
        mode = self.config.parse_mode
        if mode == "json":
            value, problem, note = parse_json_noted(text)
            data.update(format="json" if problem is None else "text", content=value)
            if note is not None:  # lone surrogates became U+FFFD: say so to the model and in the data
                data["notes"] = [note]
            if problem:
                data.update(degraded=True, degraded_reason=problem + (" (the response was cut off)" if data["truncated"] else ""))
            return
        if mode == "markdown" and is_html(text, content_type):
            converted = await asyncio.to_thread(html_to_markdown, text, final_url)  # CPU work off the loop
            data.update(format="markdown", content=converted.text)
            if converted.title:
                data["title"] = converted.title
            if converted.degraded:
                data.update(degraded=True, degraded_reason="the HTML is nested too deeply to convert; plain text follows")
            run.tool_progress(
                "converted", f"{len(text):,} characters of HTML converted to {len(converted.text):,} characters of Markdown",
                html_chars=len(text), markdown_chars=len(converted.text),
            )
            return
        data.update(format="text", content=text)


def _translate(exc: Exception, progress: _Progress, phase: str, where: str, details: dict[str, Any],
               url: Any = None) -> StepFailure:
    """The one place a fetch turns a foreign error (httpx's, zlib's, the resolver's OSError) into
    its StepFailure, as httpx maps httpcore's in its transport. `phase`: where the call was —
    "resolve", "redirect" (reading a Location), "connect" (sending; `url`: what the error may
    quote, shown redacted), "body" (`progress.bytes` had arrived). `where` opens the message."""
    if isinstance(exc, httpx.TimeoutException):
        after = f" after {progress.bytes:,} bytes" if phase == "body" else ""
        return StepFailure(ErrorCode.FETCH_TIMEOUT, f"{where}: {_timeout_kind(exc)} timed out{after}", details)
    if phase == "resolve":
        why = (exc.strerror or exc) if isinstance(exc, socket.gaierror) else exc
        text = f"the host name could not be resolved ({why})"
    elif phase == "redirect":
        text = str(exc)
    elif isinstance(exc, zlib.error):
        text = f"the {progress.encoding} body is corrupt ({exc})"
    elif phase == "body":
        text = f"the response broke off after {progress.bytes:,} bytes ({exc})"
    elif isinstance(exc, httpx.ConnectError):  # no address answered
        text = _hide(str(exc), url, progress.show)
    else:
        text = _hide(f"{type(exc).__name__}: {exc}", url, progress.show)
    return StepFailure(ErrorCode.FETCH_FAILED, f"{where}: {text}", details)


def _hide(text: str, url: Any, show: Any) -> str:
    """`text` (an error message that may quote the URL) with the URL as shown."""
    raw = str(url)
    shown = show(raw)
    return text.replace(raw, shown) if shown != raw else text


def _redirected(
    status: int, method: str, headers: dict[str, str], content: bytes | None, source: httpx.URL, target: httpx.URL,
    configured: frozenset[str] = frozenset(),
) -> tuple[str, dict[str, str], bytes | None]:
    """What the next hop sends: RFC 9110 method rewriting, and to another origin neither
    credentials nor any header of the tool's `defaultHeaders` (`configured`, lower case): the
    operator wrote them for the first origin, not for wherever it points."""
    if status == 303 and method != "HEAD" or status in (301, 302) and method == "POST":
        method, content = "GET", None
        headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    if (source.scheme, source.host, source.port) != (target.scheme, target.host, target.port):
        headers = {k: v for k, v in headers.items()
                   if k.lower() not in _ORIGIN_BOUND_HEADERS and k.lower() not in configured and not is_credential_header(k)}
    return method, headers, content


@functools.lru_cache(maxsize=1)
def _default_ssl_context() -> ssl.SSLContext:
    """Built once (loading the CA bundle is slow) and shared: an SSLContext is safe to reuse."""
    return httpx.create_ssl_context()  # certifi's CAs, or SSL_CERT_FILE / SSL_CERT_DIR if set


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _timeout_kind(exc: httpx.TimeoutException) -> str:
    return {
        httpx.ConnectTimeout: "connecting",
        httpx.ReadTimeout: "waiting for data",
        httpx.WriteTimeout: "sending the request",
        httpx.PoolTimeout: "waiting for a connection",
    }.get(type(exc), "the request")


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
