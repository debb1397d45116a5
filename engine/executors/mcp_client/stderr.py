"""A stdio server's stderr, line by line into the engine's log (redacted there like every line).

The child is untrusted: it may write without end and never a newline. The pipe is read in
chunks; of each line the first MAX_TEXT characters are kept and the rest is dropped until
the next newline, so what is held at once is one chunk and one cut line, whatever it writes.
"""

from __future__ import annotations

import codecs
import os
import threading
from types import TracebackType
from typing import TextIO

from ...logging import logger
from .budgets import MAX_TEXT

CHUNK = 64 * 1024


class LineCutter:
    """Bytes in, whole lines out, each at most `limit` characters (the rest of a long line dropped)."""

    def __init__(self, limit: int = MAX_TEXT):
        self.limit = limit
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._line: list[str] = []
        self._kept = 0  # characters of the current line kept so far
        self._cut = False  # the current line went past the limit

    def feed(self, data: bytes, final: bool = False) -> list[str]:
        """The lines `data` completes (and with `final`, the last one, unterminated)."""
        text = self._decoder.decode(data, final)
        lines: list[str] = []
        start = 0
        while start <= len(text):
            end = text.find("\n", start)
            piece = text[start:] if end < 0 else text[start:end]
            self._keep(piece)
            if end < 0:
                break
            lines.append(self._take())
            start = end + 1
        if final and (self._kept or self._cut):
            lines.append(self._take())
        return lines

    def _keep(self, piece: str) -> None:
        room = self.limit - self._kept
        if len(piece) > room:
            piece, self._cut = piece[:room], True
        if piece:
            self._line.append(piece)
            self._kept += len(piece)

    def _take(self) -> str:
        line = "".join(self._line).rstrip("\r") + ("…" if self._cut else "")
        self._line, self._kept, self._cut = [], 0, False
        return line


class StderrToLog:
    """A pipe whose write end is the child's stderr; a thread logs what it reads."""

    def __init__(self, server: str):
        self.server = server
        read_fd, write_fd = os.pipe()
        self.file: TextIO = os.fdopen(write_fd, "w")  # (stdio_client's errlog is a TextIO)
        self._read_fd = read_fd
        threading.Thread(target=self._pump, name=f"skillyard-mcp-stderr-{server}", daemon=True).start()

    def _pump(self) -> None:
        cutter = LineCutter()
        try:
            while True:
                data = os.read(self._read_fd, CHUNK)
                for line in cutter.feed(data, final=not data):
                    logger.info("MCP server stderr", server=self.server, line=line)
                if not data:
                    break
        finally:
            os.close(self._read_fd)

    def __enter__(self) -> "StderrToLog":
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.file.close()  # the child holds its own copy; the reader ends when both are closed
