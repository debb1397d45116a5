"""An exception raised by the user's code, as the frames of the user's code.

When a python skill or a python tool raises, the error a person reads should point at their
own line, not at the engine that called it. `failure_details(exc)` gives the `details` of
that error:

    {"exception": "ValueError",
     "frames": [{"file": "capabilities/stats.py", "line": 12, "function": "count",
                 "source": "raise ValueError(\\"empty text\\")"}]}

- Only file, line, function name and the source line: never a local variable.
- Frames of the engine, the standard library and site-packages are left out (the user's own
  package counts as theirs even when installed), unless debugging is on (`--debug`,
  `SKILLYARD_DEBUG=1`): then every frame is kept and the others say `"origin"`.
- A source line that names a sensitive identifier (`password = "…"`) has its string literals
  replaced, and the current run's known secrets are hidden, before the details exist: they
  are bound for the caller's ToolResult, events, the store and HTTP bodies.

Runs only on the failure path; nothing here is on the per-call path.
"""

from __future__ import annotations

import linecache
import os
import re
import site
import sysconfig
from pathlib import Path
from types import TracebackType
from typing import Any, Iterable

from .redaction import REDACTED, Redactor, active_scrubber

MAX_FRAMES = 30  # the innermost ones; a RecursionError would otherwise bring ~1,000
MAX_SOURCE_CHARS = 200
_ENGINE_DIR = str(Path(__file__).resolve().parents[1]) + os.sep  # engine/, this file being in engine/safety/
_STRING = re.compile(r"""(?i)(?:(?<![a-z0-9_])[rbfu]{1,2})?("""
                     r'''"""[\s\S]*?(?:"""|$)|\'\'\'[\s\S]*?(?:\'\'\'|$)|"(?:[^"\\]|\\.)*(?:"|$)|'(?:[^'\\]|\\.)*(?:'|$))''')
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFAULT_REDACTOR = Redactor()


class _Debug:
    on: bool = os.environ.get("SKILLYARD_DEBUG", "").lower() in ("1", "true", "yes", "on")


def set_debug(on: bool) -> None:
    """Keep the engine's and libraries' frames too (`--debug`): for reporting a bug in skillyard."""
    _Debug.on = on


def debug_enabled() -> bool:
    return _Debug.on


def _library_dirs() -> tuple[str, ...]:
    """The standard library and every site-packages directory: frames there are not the user's."""
    paths = sysconfig.get_paths()
    found = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    try:
        found.update(site.getsitepackages())
        found.add(site.getusersitepackages())
    except AttributeError:  # an embedded or virtualenv-patched `site` without them
        pass
    return tuple(str(Path(p).resolve()) + os.sep for p in found if p)


_LIBRARY_DIRS = _library_dirs()


def package_root(function: Any) -> str | None:
    """Where the package that defines `function` is installed, when that is site-packages (link time).

    Frames there are the user's although site-packages is not; a package anywhere else needs
    no root (frames outside the engine and the libraries are the user's anyway).
    """
    code = getattr(function, "__code__", None) or getattr(getattr(function, "__call__", None), "__code__", None)  # noqa: B004 - its code, not whether it is callable
    module = getattr(function, "__module__", None)
    if code is None or not module or code.co_filename.startswith("<"):
        return None
    root = Path(code.co_filename).resolve().parent
    for _ in range(module.count(".")):
        root = root.parent
    shown = str(root) + os.sep
    if not shown.startswith(_LIBRARY_DIRS) or shown in _LIBRARY_DIRS or shown.startswith(_ENGINE_DIR):
        return None  # not installed; or a module loose in site-packages (its root would be all of it)
    return shown


def origin(filename: str, user_roots: Iterable[str] = ()) -> str:
    """`user`, `engine` or `library` (standard library, site-packages, frozen or generated code)."""
    if filename.startswith("<"):
        return "library"
    path = os.path.realpath(filename)
    if path.startswith(_ENGINE_DIR):  # first: a project may hold the engine (a checkout) or a venv
        return "engine"
    if path.startswith(_LIBRARY_DIRS):
        return "user" if any(path.startswith(root) for root in user_roots) else "library"
    return "user"


def failure_details(exc: BaseException, user_roots: Iterable[str] = (), redactor: Redactor | None = None) -> dict[str, Any]:
    """`details` for the error of `exc`: its type and the user's frames ({} when there are none)."""
    roots = tuple(user_roots)
    scrubber = active_scrubber()  # the current run's: its project's sensitive keys, its known secrets
    if redactor is None:
        redactor = scrubber.redactor if scrubber is not None else _DEFAULT_REDACTOR
    frames = []
    for filename, line, function in _walk(exc.__traceback__):
        where = origin(filename, roots)
        if where != "user" and not _Debug.on:
            continue
        frame: dict[str, Any] = {"file": _shown_path(filename), "line": line, "function": function,
                                 "source": source_line(filename, line, redactor)}
        if where != "user":
            frame["origin"] = where
        frames.append(frame)
    if not frames:
        return {}
    details: dict[str, Any] = {"exception": type(exc).__name__, "frames": frames[-MAX_FRAMES:]}
    if len(frames) > MAX_FRAMES:
        details["frames_omitted"] = len(frames) - MAX_FRAMES
    return scrubber.known_secrets(details) if scrubber is not None else details


def last_user_frame(details: dict[str, Any]) -> dict[str, Any] | None:
    """The innermost frame of the user's own code in `details`, or None."""
    frames = details.get("frames") if isinstance(details, dict) else None
    if not isinstance(frames, list):
        return None
    for frame in reversed(frames):
        if isinstance(frame, dict) and "origin" not in frame:
            return frame
    return None


def _walk(tb: TracebackType | None) -> Iterable[tuple[str, int, str]]:
    while tb is not None:
        code = tb.tb_frame.f_code
        yield code.co_filename, tb.tb_lineno, code.co_name
        tb = tb.tb_next


def _shown_path(filename: str) -> str:
    """Relative to the working directory when the file is under it (shorter, and no home path)."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
    return filename if relative.startswith("..") else relative


def source_line(filename: str, line: int, redactor: Redactor | None = None) -> str:
    """The stripped source line, its string literals hidden when it names a sensitive identifier."""
    text = linecache.getline(filename, line).strip()
    if len(text) > MAX_SOURCE_CHARS:
        text = text[: MAX_SOURCE_CHARS - 1] + "…"
    return mask_literals(text, redactor or _DEFAULT_REDACTOR)


def mask_literals(text: str, redactor: Redactor) -> str:
    """`password = "s3cret"` → `password = "[REDACTED]"`; a line with no sensitive name stays."""
    if "'" not in text and '"' not in text:
        return text
    code = _STRING.sub(" ", text)
    if not any(redactor.is_sensitive(name) for name in _IDENTIFIER.findall(code)):
        return text
    return _STRING.sub(f'"{REDACTED}"', text)
