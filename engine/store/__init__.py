"""The run store: every run, its events, tool logs, model exchanges and tool settings.

SQLite (`RunStore`, the embedded default) or PostgreSQL (`PostgresStore`, shared by several
processes; psycopg is imported only when a postgresql:// URL is opened). `open_store` opens
the one a URL names; `store_url` says which URL a project uses.
"""

from .base import Store
from .errors import StoreError
from .open import open_store
from .queries import AmbiguousRunId, RunRecord
from .sqlite import RunStore
from .urls import store_url

__all__ = ["AmbiguousRunId", "RunRecord", "RunStore", "Store", "StoreError", "open_store", "store_url"]
