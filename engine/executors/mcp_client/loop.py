"""The one background event loop every MCP connection of this process lives on."""

from __future__ import annotations

import asyncio
import threading

_LOCK = threading.Lock()
_LOOP: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """Started on first use, in a daemon thread: connections outlive the loop of any one call."""
    global _LOOP
    with _LOCK:
        if _LOOP is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="skillyard-mcp-client", daemon=True).start()
            _LOOP = loop
        return _LOOP
