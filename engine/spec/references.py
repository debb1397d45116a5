"""Secrets by reference: `${env:NAME}`, `${env:NAME:-default}`, `${file:/path}` and `${NAME}`.

A config value names where a secret lives instead of holding it, so tools.yaml, the store and
every listing keep the reference and never the value. References are resolved once, at load:

- `${env:NAME}` reads the environment, then a `.env` file beside the project (python-dotenv;
  it never overrides the real environment and is never written into `os.environ`);
- `${env:NAME:-default}` gives the default when NAME is set nowhere;
- `${file:/run/secrets/x}` reads a file (Docker/Kubernetes secrets), its final newline dropped;
  a relative path is read from the project directory;
- `${NAME}`, the short form, is read like `${env:NAME}` in config values only (a tool's
  `config`, models, MCP servers, engine settings): in prompts and templates `${x}` is text.

Every resolved piece is a known secret of the project (hidden in every sink from the start),
and `Resolver.shown` maps each resolved string back to the text as written, for listings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import IssueCollector, Location, SkillyardError

YamlPath = tuple[Any, ...]

# `${env:NAME}`, `${env:NAME:-default}`, `${file:PATH}`, `${NAME}` (group 4: short form only)
_REFERENCE = re.compile(r"\$\{(?:env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?|file:([^}]+)|([A-Za-z_][A-Za-z0-9_]*))\}")
_LONG_ONLY_MARKERS = ("${env:", "${file:")
MAX_FILE_BYTES = 64 * 1024  # a secret, not a document
_MISSING_HINT = "set it in the environment or in .env beside the project, or give a default: ${env:NAME:-default}"


class MissingReference(SkillyardError):
    """A reference that cannot be read: the message names the variable or file."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message = message
        self.hint = hint


def has_reference(text: str, *, short_form: bool = True) -> bool:
    """True when `text` holds a reference (for refusing plain secrets in admin changes)."""
    match = _REFERENCE.search(text)
    return match is not None and (short_form or match.group(4) is None)


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
            if short is not None and not short_form:
                return match.group(0)
            value = self._file(file) if file is not None else self._env(env or short, default, match.group(0))
            self.secrets.add(value)
            return value

        resolved = _REFERENCE.sub(replace, text)
        if resolved != text:
            self.shown[resolved] = text
        return resolved

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


__all__ = ["MissingReference", "Resolver", "has_reference", "plain_secret_paths"]
