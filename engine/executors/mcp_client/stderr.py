"""A stdio server's stderr, line by line into the engine's log (redacted there like every line)."""

from __future__ import annotations

import os
import threading
from types import TracebackType
from typing import IO

from ...logging import logger

MAX_LINE = 4000


class StderrToLog:
    """A pipe whose write end is the child's stderr; a thread logs what it reads."""

    def __init__(self, server: str):
        self.server = server
        read_fd, write_fd = os.pipe()
        self.file: IO[str] = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "r", errors="replace")
        threading.Thread(target=self._pump, name=f"skillyard-mcp-stderr-{server}", daemon=True).start()

    def _pump(self) -> None:
        with self._reader:
            for line in self._reader:
                logger.info("MCP server stderr", server=self.server, line=line.rstrip("\n")[:MAX_LINE])

    def __enter__(self) -> "StderrToLog":
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.file.close()  # the child holds its own copy; the reader ends when both are closed
