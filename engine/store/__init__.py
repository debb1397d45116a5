"""The run store: every run, its events, tool logs and model exchanges, in SQLite."""

from .sqlite import RunRecord, RunStore, StoreError

__all__ = ["RunRecord", "RunStore", "StoreError"]
