"""Run and call ids: 80 random bits from the OS, without a system call per id.

`secrets.token_hex` asks the OS for randomness on every call (about 1 µs, twice per tool
call). Here one `os.urandom` read serves 400 ids. The ids stay unpredictable and unique
across processes; a forked child drops the parent's unread bytes so the two never share ids.
"""

from __future__ import annotations

import os
import threading

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
        return f"{prefix}_{chunk.hex()}"


new_id = _RandomIds()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=new_id.forget)
