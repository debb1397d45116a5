"""The MCP connections of this process, by project and server, and who hears of their changes.

Light on purpose (no MCP import): the Engine subscribes to changes of its project's tool
sources whether or not the project has any.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

_LOCK = threading.Lock()
_CONNECTIONS: dict[tuple[str, str], Any] = {}  # (project root, server name) → McpConnection
_LISTENERS: dict[str, list["weakref.WeakMethod[Callable[[], None]]"]] = {}


def watch_tool_sources(root: str | Path, relink: Callable[[], None]) -> None:
    """`relink` (a bound method, held weakly) is called when a tool source of `root` changes."""
    with _LOCK:
        _LISTENERS.setdefault(str(root), []).append(weakref.WeakMethod(relink))


def tool_sources_changed(root: str | Path) -> None:
    with _LOCK:
        alive = [ref for ref in _LISTENERS.get(str(root), []) if ref() is not None]
        _LISTENERS[str(root)] = alive
    for ref in alive:
        method = ref()
        if method is not None:
            method()


def connections(root: str | Path) -> dict[str, Any]:
    with _LOCK:
        return {name: conn for (where, name), conn in _CONNECTIONS.items() if where == str(root)}


def swap(root: str | Path, name: str, make: Callable[[], Any], same: Callable[[Any], bool]) -> Any:
    """The connection of `name` in `root`: the current one when `same` says so, else a new one."""
    key = (str(root), name)
    with _LOCK:
        current = _CONNECTIONS.get(key)
        if current is not None and same(current):
            return current
        _CONNECTIONS[key] = fresh = make()
    if current is not None:
        current.close()
    return fresh


def close_others(root: str | Path, keep: set[str]) -> None:
    """Close the connections of servers `root` no longer configures."""
    with _LOCK:
        gone = [key for key in _CONNECTIONS if key[0] == str(root) and key[1] not in keep]
        closing = [_CONNECTIONS.pop(key) for key in gone]
    for conn in closing:
        conn.close()


def close_all() -> None:
    with _LOCK:
        closing = list(_CONNECTIONS.values())
        _CONNECTIONS.clear()
    for conn in closing:
        conn.close()
