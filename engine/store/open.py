"""Opening the store a URL names: SQLite by default, PostgreSQL by URL.

psycopg is imported only when a postgresql:// URL is opened, so the default stays
dependency-light. Which URL a project uses is urls.py's `store_url`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..safety.redaction import Redactor
from .base import Store
from .errors import StoreError
from .urls import is_postgres, sqlite_path, store_exists

if TYPE_CHECKING:
    from .tool_settings import ToolSetting


def open_store(url: str | Path, *, redactor: Redactor | None = None, redacted_events: bool = False) -> Store:
    """Open the store at `url` (sqlite:///<absolute path> or postgresql://…; a bare path is a
    SQLite file). StoreError, naming the store without its password, if it cannot open."""
    if url is None or not str(url).strip():  # str(None) would quietly make a SQLite file named "None"
        raise StoreError("no store given: pass a sqlite:/// or postgresql:// URL, or a path")
    text = str(url)
    if is_postgres(text):
        from .postgres import PostgresStore

        return PostgresStore(text, redactor=redactor, redacted_events=redacted_events)
    from .sqlite import RunStore

    return RunStore(sqlite_path(text) or Path(text), redactor=redactor, redacted_events=redacted_events)


def read_tool_settings(url: str, *, redactor: Redactor | None = None) -> "dict[str, ToolSetting]":
    """The tool settings kept in the store at `url`, read and closed again ({} when there is
    no store there yet): for a process that records no runs (`--no-store`, `store.enabled:
    false`) but must still honour what `skillyard tools enable|disable|set|add` decided."""
    if not store_exists(url):
        return {}
    store = open_store(url, redactor=redactor)
    try:
        return dict(store.tool_settings())
    finally:
        store.close()
