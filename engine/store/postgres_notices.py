"""PostgreSQL's notices: LISTEN/NOTIFY, heard by every process sharing the database.

`PostgresNotices` keeps one connection that LISTENs on every channel someone listens to, on a
thread of its own, and calls the callbacks there; `notify` is a NOTIFY in a transaction of its
own. The writer sends nothing here: the statement that inserts a batch of events NOTIFYs
EVENTS_CHANNEL itself (postgres.py). Imported with postgres.py only (psycopg).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable

import psycopg
from psycopg import sql as pgsql

from ..logging import logger
from .database import RETRY_MAX_S, Statement

CONNECT_TIMEOUT_S = 5  # opening the store, and each attempt to (re)connect
LISTEN_POLL_S = 0.2  # the listener thread looks for new channels (and stop) this often


class PostgresNotices:
    """One connection that LISTENs on every channel someone listens to, on a thread of its own.

    The thread waits for notices at most LISTEN_POLL_S at a time, then LISTENs on channels
    added meanwhile (a connection is used by one thread at a time). It reconnects with
    backoff when the connection is lost.
    """

    def __init__(self, url: str, where: str, transaction: Callable[[list[Statement]], list[int]]) -> None:
        """`transaction`: the database's (notify() sends in a transaction of its own)."""
        self._url = url
        self._where = where
        self._transaction = transaction
        self._lock = threading.Lock()
        self._callbacks: dict[str, list[Callable[[str], None]]] = {}
        self._listening: set[str] = set()
        self._changed = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._stop = False

    def notify(self, channel: str, payload: str) -> None:
        """NOTIFY `channel` (every process listening on this database hears it, this one too).
        The payload must be shorter than 8,000 bytes (PostgreSQL's limit)."""
        self._transaction([("SELECT pg_notify(?, ?)", (channel, payload))])

    def listen(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """As LocalNotices.listen, across processes. After the listening connection was lost and
        made again, every callback gets the payload "*": notices may have been missed, re-read."""
        with self._changed:
            self._callbacks.setdefault(channel, []).append(callback)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="skillyard-store-listen", daemon=True)
                self._thread.start()
            if not self._changed.wait_for(lambda: channel in self._listening or self._stop, timeout=CONNECT_TIMEOUT_S + 2):
                logger.error("run store: not listening yet (the database cannot be reached); notices will come once it is",
                             store=self._where, channel=channel)

        def stop() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._callbacks.get(channel, []).remove(callback)

        return stop

    def close(self) -> None:
        with self._changed:
            self._stop = True
            self._changed.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)

    def _run(self) -> None:
        backoff = 0.1
        reconnected = False
        while not self._stop:
            try:
                with psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as db:
                    with self._lock:
                        self._listening = set()
                    if reconnected:
                        self._dispatch_all("*")
                    backoff = 0.1
                    self._serve(db)
            except psycopg.Error as exc:
                if self._stop:
                    return
                logger.warning("run store: the listening connection was lost; connecting again", store=self._where,
                               error=type(exc).__name__)
                reconnected = True
                time.sleep(backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)

    def _serve(self, db: psycopg.Connection[Any]) -> None:
        while not self._stop:
            with self._lock:
                new = [channel for channel in self._callbacks if channel not in self._listening]
            for channel in new:
                db.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(channel)))
            if new:
                with self._changed:
                    self._listening.update(new)
                    self._changed.notify_all()
            for notice in db.notifies(timeout=LISTEN_POLL_S):
                self._dispatch(notice.channel, notice.payload)

    def _dispatch_all(self, payload: str) -> None:
        with self._lock:
            channels = list(self._callbacks)
        for channel in channels:
            self._dispatch(channel, payload)

    def _dispatch(self, channel: str, payload: str) -> None:
        with self._lock:
            callbacks = list(self._callbacks.get(channel, ()))
        for callback in callbacks:
            try:
                callback(payload)
            except Exception as exc:  # noqa: BLE001 - a listener's bug must not stop the others
                logger.error("run store: a notification listener failed", channel=channel, error=f"{type(exc).__name__}: {exc}")
