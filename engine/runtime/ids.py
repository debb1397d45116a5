"""Run and call ids: 80 bits, random from the OS, without a system call per id.

`secrets.token_hex` asks the OS for randomness on every call (about 1 µs, twice per tool
call). Here one `os.urandom` read serves 400 ids. The ids stay unique across processes; a
forked child drops the parent's unread bytes so the two never share ids.

A run id starts with the time it was made (44 bits of milliseconds, then 36 random bits:
the same length and alphabet): the store's indexes keyed by run id (the runs table, tool
logs, owners, events) then grow at one end. With random ids every run dirtied a random
page of each such index, written to the WAL at each commit: the SQLite writer's cost per
call doubled as the file grew (docs/performance.md). Ids made close in time share their
first digits, so a prefix given to `skillyard runs show` needs a few more of them. Run ids
are no secret: who may see a run is checked against who started it.
"""

from __future__ import annotations

import os
import threading
import time

_ID_BYTES = 10
_BUFFER_IDS = 400


class _RandomIds:
    __slots__ = ("_lock", "_buffer", "_next")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer = b""
        self._next = 0

    def forget(self) -> None:
        self._lock = threading.Lock()  # a lock held by another thread at fork time stays held in the child
        self._buffer = b""
        self._next = 0

    def __call__(self, prefix: str) -> str:
        with self._lock:
            start = self._next
            if start + _ID_BYTES > len(self._buffer):
                self._buffer = os.urandom(_ID_BYTES * _BUFFER_IDS)
                start = 0
            self._next = start + _ID_BYTES
            chunk = self._buffer[start : start + _ID_BYTES]
        if prefix == "run":  # time first (see the module's doc)
            return f"run_{time.time_ns() // 1_000_000:011x}{chunk.hex()[:9]}"
        return f"{prefix}_{chunk.hex()}"


new_id = _RandomIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=new_id.forget)
