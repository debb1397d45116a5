"""One MCP server's connection: started, initialized, its tools listed, kept alive, restarted.

Every connection lives on one background event loop (`loop.py`), whatever loop the engine's
calls run on: the MCP SDK's sessions are long-lived task groups that must outlive any one call.
A connection tells its listeners when its state or its tools change (a server that died, came
back, or sent `notifications/tools/list_changed`), so the project is linked again with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import mcp_types as types

from ...logging import logger
from ...spec.mcp_config import McpServerSpec
from .budgets import LIST_CHANGED_DEBOUNCE
from .calls import CallRouting
from .loop import background_loop
from .stderr import StderrToLog

PING_EVERY = 5.0  # seconds between liveness checks of an idle connection
BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)  # waits between restarts, the last one repeated
CLIENT_INFO = types.Implementation(name="skillyard", version="1")


class McpConnection:
    """The live side of one `mcpServers` entry (state: starting, ready, failed, closed)."""

    def __init__(self, name: str, spec: McpServerSpec, root: Path, on_change: Callable[[], None]):
        self.name = name
        self.spec = spec
        self.root = root
        self.state = "starting"
        self.reason = ""
        self.tools: list[types.Tool] = []
        self.tool_problems: dict[str, str] = {}  # its tools' problems at the last link, by the server's name (`mcp list`)
        self.attempts = 0
        self.routing = CallRouting(name, spec)
        self._on_change = on_change
        self._session: Any = None
        self._first = threading.Event()  # the first outcome (ready or failed) is known
        self._stop: asyncio.Event | None = None
        self._dead: asyncio.Event | None = None
        self._http: Any = None  # a Streamable HTTP server's StatusWatch (http_status.py), for the session in hand
        self._relist: asyncio.Task[None] | None = None  # the one pending `tools/list_changed` reload
        self._relist_wanted = False
        self._task = asyncio.run_coroutine_threadsafe(self._serve(), background_loop())

    def wait_first_outcome(self) -> None:
        self._first.wait(self.spec.startup_timeout + 5)

    def close(self) -> None:
        """Stop the server (stdio) or end the session (HTTP); calls in flight fail."""
        self.state = "closed"
        loop = background_loop()
        if self._stop is not None:
            loop.call_soon_threadsafe(self._stop.set)
        else:
            self._task.cancel()

    # ─── the connection's life, on the background loop ────────────────────────────────

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        while not self._stop.is_set():
            self._dead = asyncio.Event()
            try:
                await self._session_once()
            except Exception as exc:  # noqa: BLE001 - any failure of the server or its transport: restart it
                self._failed(self._refusal() or _describe(exc))
            if self._stop.is_set():
                break
            if self.state == "ready":
                self._failed("the server closed the connection")
            wait = BACKOFF[min(self.attempts, len(BACKOFF) - 1)]
            self.attempts += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), wait)
        self._session = None

    async def _session_once(self) -> None:
        from mcp.client.session import ClientSession

        async with contextlib.AsyncExitStack() as stack:
            # asyncio.timeout, not wait_for: the SDK's task groups are entered and left in this task
            async with asyncio.timeout(self.spec.startup_timeout):
                read, write = await self._open_transport(stack)
                session = await stack.enter_async_context(ClientSession(
                    read, write, client_info=CLIENT_INFO, elicitation_callback=self.routing.elicit,
                    logging_callback=self.routing.log, message_handler=self._message, sampling_callback=self.routing.sample,
                ))
                await self._ready(session)
            await self._keep_alive(session)

    async def _open_transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        spec = self.spec
        if spec.url is not None:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            from .http_status import StatusWatch

            self._http = StatusWatch()
            client = await stack.enter_async_context(create_mcp_http_client(headers=dict(spec.headers), auth=self._http))
            streams = await stack.enter_async_context(streamable_http_client(spec.url, http_client=client))
            return streams[0], streams[1]
        from mcp.client.stdio import StdioServerParameters, stdio_client

        errlog = stack.enter_context(StderrToLog(self.name))
        cwd = Path(spec.cwd) if spec.cwd else self.root
        params = StdioServerParameters(command=spec.command or "", args=list(spec.args), env=child_environment(spec.env),
                                       cwd=cwd if cwd.is_absolute() else self.root / cwd)
        streams = await stack.enter_async_context(stdio_client(params, errlog=errlog.file))
        return streams[0], streams[1]

    def _refusal(self) -> str | None:
        """`unauthorized: …` when the HTTP server refused our requests (its key is wrong or missing)."""
        from .http_status import REFUSALS

        refused = self._http.refused if self._http is not None else None
        if refused is None:
            return None
        return (f"unauthorized: MCP server {self.name!r} answered {REFUSALS[refused]}; check the `headers` of its entry "
                "in config/mcp.yaml (e.g. its Authorization)")

    async def _ready(self, session: Any) -> None:
        await session.initialize()
        self.tools = await _list_all(session)
        self._session = session
        self.routing.session = session
        self.state, self.reason, self.attempts = "ready", "", 0
        logger.info("MCP server ready", server=self.name, tools=len(self.tools))
        self._changed()

    async def _keep_alive(self, session: Any) -> None:
        assert self._stop is not None and self._dead is not None
        while not self._stop.is_set() and not self._dead.is_set():
            waits = [asyncio.ensure_future(self._stop.wait()), asyncio.ensure_future(self._dead.wait())]
            done, pending = await asyncio.wait(waits, timeout=PING_EVERY, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            if not done:
                await asyncio.wait_for(session.send_ping(), PING_EVERY)

    async def _message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and self._session is not None:
            self._relist_wanted = True
            if self._relist is None or self._relist.done():
                self._relist = asyncio.ensure_future(self._list_again())
        elif isinstance(message, Exception):
            logger.warning("MCP server sent something unreadable", server=self.name, error=_describe(message))

    async def _list_again(self) -> None:
        """The tools listed again after `tools/list_changed`: one reload pending at a time, each
        after LIST_CHANGED_DEBOUNCE, however many notices came meanwhile (a flood relinks the
        project once a second at most)."""
        while self._relist_wanted:
            await asyncio.sleep(LIST_CHANGED_DEBOUNCE)
            self._relist_wanted = False
            session = self._session
            if session is None:
                return
            try:
                self.tools = await _list_all(session)
            except Exception as exc:  # noqa: BLE001 - the session failed meanwhile: its restart lists them
                logger.warning("MCP server's tools could not be listed again", server=self.name, error=_describe(exc))
                return
            logger.info("MCP server's tools changed", server=self.name, tools=len(self.tools))
            self._changed()

    def connection_lost(self) -> None:
        """A call found the connection gone: restart now rather than at the next ping."""
        if self._dead is not None:
            background_loop().call_soon_threadsafe(self._dead.set)

    def _failed(self, reason: str) -> None:
        if self.state == "closed":
            return
        self.state, self.reason = "failed", reason
        self._session = self.routing.session = None
        logger.warning("MCP server is not available", server=self.name, reason=reason)
        self._changed()

    def _changed(self) -> None:
        self._first.set()
        self._on_change()

    # ─── calls, from any loop ─────────────────────────────────────────────────────────

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> "asyncio.Future[Any]":
        """`coroutine` on the background loop, as a future of the caller's loop (cancel it to cancel the call)."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, background_loop()))

    @property
    def session(self) -> Any:
        return self._session


async def _list_all(session: Any) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor = None
    for _ in range(100):  # pages; a server that never stops paging is cut off
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def child_environment(env: dict[str, str]) -> dict[str, str]:
    """What a stdio server is given: its own `env` and PATH; never this process's secrets. (The
    SDK adds its short list of harmless variables: HOME, LOGNAME, SHELL, TERM, USER.)"""
    return {"PATH": os.environ.get("PATH", os.defpath), **env}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions[:3])
    if isinstance(exc, TimeoutError):
        return "did not answer in time (startup_timeout)"
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if str(exc) else text
