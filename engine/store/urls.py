"""Which store a project uses, as a URL: SQLite by default, PostgreSQL by URL (open.py opens it).

One resolution order everywhere (the Engine, the service, every CLI command): the environment
variable SKILLYARD_STORE_URL, then `store.url` in config/engine.yaml, then `store.path`
(a SQLite file). A URL is shown in messages without its password (`display_url`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping
from urllib.parse import urlsplit, urlunsplit

from .errors import StoreError

if TYPE_CHECKING:
    from ..spec.settings import StoreSettings

ENV_URL = "SKILLYARD_STORE_URL"
_SQLITE = "sqlite:///"
_POSTGRES = ("postgresql://", "postgres://")


def store_url(root: Path, store: StoreSettings, environ: Mapping[str, str] | None = None) -> str:
    """The project's store as a URL: env SKILLYARD_STORE_URL > store.url > store.path.

    `store` is the project's StoreSettings. A SQLite URL comes back with an absolute path
    (relative ones are relative to the project root).
    """
    env = os.environ if environ is None else environ
    url = env.get(ENV_URL) or store.url
    if not url:
        return _SQLITE + str((root / store.path).resolve())
    if url.startswith(_POSTGRES):
        return url
    if url.startswith(_SQLITE) and len(url) > len(_SQLITE):
        return _SQLITE + str((root / url[len(_SQLITE):]).resolve())
    source = f"the environment variable {ENV_URL}" if env.get(ENV_URL) else "store.url in config/engine.yaml"
    raise StoreError(f"{source} is {display_url(url)!r}, not a store URL: use sqlite:///<path> (relative to the project) "
                     "or postgresql://user@host:port/db")


def is_postgres(url: str) -> bool:
    return url.startswith(_POSTGRES)


def sqlite_path(url: str) -> Path | None:
    """The file of a sqlite:/// URL (None for other URLs)."""
    return Path(url[len(_SQLITE):]) if url.startswith(_SQLITE) else None


def store_exists(url: str) -> bool:
    """Whether there may be runs to read (a SQLite file that is not there yet has none)."""
    path = sqlite_path(url)
    return path is None or path.exists()


def display_url(url: str) -> str:
    """The URL as messages show it: without its password (nor a password= query parameter)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unreadable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = (userinfo.split(":", 1)[0] + (":***" if ":" in userinfo else "")) + "@" + host
    query = "&".join(
        (item.split("=", 1)[0] + "=***") if item.lower().startswith(("password=", "sslpassword=")) else item
        for item in parts.query.split("&")
    ) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
