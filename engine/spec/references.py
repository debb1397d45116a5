"""Secrets by reference: `${env:NAME}`, `${env:NAME:-default}`, `${file:/path}` and `${NAME}`.

A config value names where a secret lives instead of holding it, so tools.yaml, the store and
every listing keep the reference and never the value. References are resolved once, at load:

- `${env:NAME}` reads the environment, then a `.env` file beside the project (python-dotenv;
  it never overrides the real environment and is never written into `os.environ`);
- `${env:NAME:-default}` gives the default when NAME is set nowhere;
- `${file:/run/secrets/x}` reads a file (Docker/Kubernetes secrets), its final newline dropped;
  a relative path is read from the project directory;
- `${NAME}`, the short form, is read like `${env:NAME}`;
- `$${` is a literal `${` (in every string of the project's files).

References are read in configuration values only (a tool's `config`, models, MCP servers,
engine and server settings). A description, title, parameter schema or prompt is text: a
definition from elsewhere (`tools import`, an admin) cannot make a listing read a secret.

Every resolved piece is a known secret of the project (hidden in every sink from the start),
and `Resolver.shown` maps each resolved string back to the text as written, for listings and
for errors about a value (which name the reference, never what it read).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import IssueCollector, Location, SkillyardError

YamlPath = tuple[Any, ...]

# `$${` (the escape: no group), `${env:NAME}`, `${env:NAME:-default}`, `${file:PATH}`, `${NAME}` (group 4)
_REFERENCE = re.compile(r"\$\$\{|\$\{(?:env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?|file:([^}]+)|([A-Za-z_][A-Za-z0-9_]*))\}")
_LONG_ONLY_MARKERS = ("${env:", "${file:", "$${")
ESCAPE = "$${"
MAX_FILE_BYTES = 64 * 1024  # a secret, not a document
_MISSING_HINT = "set it in the environment or in .env beside the project, or give a default: ${env:NAME:-default}"


class MissingReference(SkillyardError):
    """A reference that cannot be read: the message names the variable or file."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message = message
        self.hint = hint


def references_in(text: str, *, short_form: bool = True) -> Iterator[str]:
    """Each reference in `text` as `env:NAME` or `file:PATH` (an escaped `$${` is none)."""
    for match in _REFERENCE.finditer(text):
        env, _default, file, short = match.groups()
        if file is not None:
            yield f"file:{file.strip()}"
        elif env is not None or (short is not None and short_form):
            yield f"env:{env or short}"


def has_reference(text: str, *, short_form: bool = True) -> bool:
    """True when `text` holds a reference (for refusing plain secrets in admin changes)."""
    return next(references_in(text, short_form=short_form), None) is not None


def literal(value: Any) -> Any:
    """`value` (a description, a schema: text, never read) with each escaped `$${` as `${`."""
    if isinstance(value, str):
        return value.replace(ESCAPE, "${") if ESCAPE in value else value
    if isinstance(value, dict):
        return {key: literal(item) for key, item in value.items()}
    if isinstance(value, list):
        return [literal(item) for item in value]
    return value


def escape(value: Any) -> tuple[Any, int]:
    """`value` with every `${` written `$${` (text from elsewhere stays text), and how many."""
    if isinstance(value, str):
        count = value.count("${")
        return (value.replace("${", ESCAPE), count) if count else (value, 0)
    if isinstance(value, dict):
        out, total = {}, 0
        for key, item in value.items():
            out[key], count = escape(item)
            total += count
        return out, total
    if isinstance(value, list):
        pairs = [escape(item) for item in value]
        return [item for item, _ in pairs], sum(count for _, count in pairs)
    return value, 0


def unlisted_references(value: Any, allowed: Iterable[str], root: Path) -> list[str]:
    """The references in `value`'s strings that match none of the operator's globs `allowed`
    (`env:PARTNER_*`, `file:/run/secrets/partner-*`), as written. A file's path is matched
    both as written (made absolute, `..` folded) and with its links followed."""
    globs = tuple(allowed)
    found = [written for written in references_in_strings(value)
             if not all(any(fnmatch.fnmatchcase(name, glob) for glob in globs) for name in _names(written[2:-1], root))]
    return list(dict.fromkeys(found))


def references_in_strings(value: Any) -> Iterator[str]:
    """Each reference in `value`'s strings, written as `${env:NAME}` / `${file:PATH}`."""
    for text in _strings(value):
        for reference in references_in(text):
            yield "${" + reference + "}"


def _names(reference: str, root: Path) -> list[str]:
    if not reference.startswith("file:"):
        return [reference]
    path = Path(reference[len("file:"):])
    path = path if path.is_absolute() else root / path
    return [f"file:{os.path.normpath(path)}", f"file:{path.resolve()}"]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


class Resolver:
    """Reads references for one project load; remembers the secrets it read."""

    def __init__(self, root: Path, environ: Mapping[str, str] | None = None):
        self.root = root
        self.environ = os.environ if environ is None else environ
        self._dotenv: dict[str, str] | None = None
        self.secrets: set[str] = set()
        self.shown: dict[str, str] = {}  # resolved string → as written

    @property
    def dotenv(self) -> dict[str, str]:
        """`.env` beside the project, read on the first reference that needs it."""
        if self._dotenv is None:
            from dotenv import dotenv_values

            path = self.root / ".env"
            values = dotenv_values(path) if path.is_file() else {}
            self._dotenv = {k: v for k, v in values.items() if v is not None}
        return self._dotenv

    def variable(self, name: str) -> str | None:
        value = self.environ.get(name)
        return value if value is not None else self.dotenv.get(name)

    def text(self, text: str, *, short_form: bool) -> str:
        """`text` with its references replaced; raises MissingReference for the first it cannot read."""
        if "${" not in text or (not short_form and not any(m in text for m in _LONG_ONLY_MARKERS)):
            return text

        def replace(match: re.Match[str]) -> str:
            env, default, file, short = match.groups()
            if env is None and file is None and short is None:
                return "${"  # the escape
            if short is not None and not short_form:
                return match.group(0)
            value = self._file(file) if file is not None else self._env(env or short, default, match.group(0))
            self.secrets.add(value)
            return value

        resolved = _REFERENCE.sub(replace, text)
        if resolved != text:
            self.shown[resolved] = text  # an escape too: a listing shows `$${`, which reads back the same
        return resolved

    def written(self, value: Any) -> str | None:
        """The text as written of `value` when it was read from a reference, else None."""
        written = self.shown.get(value) if isinstance(value, str) and self.shown else None
        return written if written is not None and has_reference(written) else None

    def _env(self, name: str, default: str | None, written: str) -> str:
        value = self.variable(name)
        if value is not None:
            return value
        if default is not None:
            return default
        raise MissingReference(f"{written} needs the environment variable {name}, which is not set", _MISSING_HINT)

    def _file(self, written: str) -> str:
        path = Path(written.strip())
        path = path if path.is_absolute() else self.root / path
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise MissingReference(f"${{file:{written}}} cannot be read: {exc.strerror or exc}",
                                   "mount the secret file there, or fix the path") from None
        if len(data) > MAX_FILE_BYTES:
            raise MissingReference(f"${{file:{written}}} is larger than {MAX_FILE_BYTES} bytes", "point it at the secret itself")
        return data.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r")

    def resolve(self, value: Any, locate: Callable[[YamlPath], Location], issues: IssueCollector, *,
                short_form: bool, path: YamlPath = (), defer: Callable[[YamlPath], bool] | None = None) -> tuple[Any, bool]:
        """A copy of `value` with every string's references read, and whether all could be.

        A reference that cannot be read is reported at its own path and left as written;
        under a path `defer` accepts it is left as written silently (a model's `api_key` is
        read again at first use, which names the variable then).
        """
        if isinstance(value, str):
            try:
                return self.text(value, short_form=short_form), True
            except MissingReference as exc:
                if defer is not None and defer(path):
                    return value, True
                issues.add(locate(path), exc.message, exc.hint)
                return value, False
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            ok = True
            for key, item in value.items():
                out[key], good = self.resolve(item, locate, issues, short_form=short_form, path=path + (key,), defer=defer)
                ok = ok and good
            return out, ok
        if isinstance(value, list):
            items = [self.resolve(item, locate, issues, short_form=short_form, path=path + (i,), defer=defer)
                     for i, item in enumerate(value)]
            return [item for item, _ in items], all(good for _, good in items)
        return value, True

    def as_written(self, value: Any) -> Any:
        """`value` with every resolved string put back as written (for listings: never the secret)."""
        if not self.shown:
            return value
        if isinstance(value, str):
            return self.shown.get(value, value)
        if isinstance(value, dict):
            return {key: self.as_written(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.as_written(item) for item in value]
        return value


def plain_secret_paths(value: Any, is_sensitive: Callable[[str], bool], path: str = "") -> list[str]:
    """Paths (`defaultHeaders.Authorization`) of plain strings under sensitive keys: a value an
    admin change may not store (a reference such as `${env:TOKEN}` or `Bearer ${env:TOKEN}` may)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and is_sensitive(key) and isinstance(item, (str, int, float)) and not isinstance(item, bool):
                if item != "" and not has_reference(str(item)):
                    found.append(where)
            else:
                found.extend(plain_secret_paths(item, is_sensitive, where))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(plain_secret_paths(item, is_sensitive, f"{path}[{index}]"))
    return found


__all__ = ["ESCAPE", "MissingReference", "Resolver", "escape", "has_reference", "literal", "plain_secret_paths",
           "references_in", "references_in_strings", "unlisted_references"]
