"""API keys and roles for the HTTP service.

Keys come from `SKILLYARD_API_KEYS` (`admin:KEY1,caller:KEY2`), from `server.api_keys` in
`config/engine.yaml` when the project's settings have that section, or from
`create_app(api_keys=...)`. Only SHA-256 digests are kept in memory; a key may also be given
as its digest (`admin:sha256:<64 hex>`), so the plain key need not be written anywhere.
Every check hashes the presented key and compares it with every stored digest using
`hmac.compare_digest`, so the time taken says nothing about which key or prefix matched.

Roles: `caller` may list and call tools, run the agent, read runs and answer approvals;
`admin` may also change tools and reload the project. With no keys configured every request
is treated as admin — which is why the service then binds loopback only, and refuses
requests whose `Host` or `Origin` is not a loopback name (so a web page cannot reach it
through DNS rebinding or a cross-site form post).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping

Role = Literal["admin", "caller"]
ROLES: tuple[Role, ...] = ("admin", "caller")
ENV_VAR = "SKILLYARD_API_KEYS"
_DIGEST = re.compile(r"^sha256:([0-9a-fA-F]{64})$")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


class KeyConfigError(ValueError):
    """The API key configuration cannot be used; the message says what to fix."""


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


@dataclass(frozen=True)
class ApiKeys:
    """The configured keys as (role, SHA-256 digest) pairs."""

    entries: tuple[tuple[Role, bytes], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.entries)

    @classmethod
    def parse(cls, spec: str | Iterable[Any] | Mapping[str, Any] | None) -> "ApiKeys":
        """`"admin:K1,caller:K2"`, a list of such items or of `{"role", "key"}` dicts, or a
        `{role: key | [keys]}` mapping. A key written `sha256:<hex>` is a digest."""
        if spec is None:
            return cls()
        items: list[tuple[str, str]] = []
        nested: list[tuple[Role, bytes]] = []
        if isinstance(spec, str):
            for part in spec.split(","):
                part = part.strip()
                if not part:
                    continue
                role, sep, key = part.partition(":")
                if not sep:
                    raise KeyConfigError(f"API key entry {_mask(part)!r} has no role: write ROLE:KEY with ROLE admin or caller")
                items.append((role.strip(), key.strip()))
        elif isinstance(spec, Mapping):
            for role, keys in spec.items():
                for key in [keys] if isinstance(keys, str) else list(keys or []):
                    items.append((str(role), str(key)))
        else:
            for item in spec:
                if isinstance(item, str):
                    nested.extend(cls.parse(item).entries)
                    continue
                if not isinstance(item, Mapping):  # a settings object (pydantic model)
                    dump = getattr(item, "model_dump", None)
                    item = dump() if callable(dump) else {"role": getattr(item, "role", None), "key": getattr(item, "key", None)}
                role, key = item.get("role"), item.get("key")
                if not key and item.get("key_sha256"):
                    key = str(item["key_sha256"])
                    key = key if key.startswith("sha256:") else f"sha256:{key}"
                items.append((str(role), _expand(str(key or ""))))
        entries: list[tuple[Role, bytes]] = nested
        for role, key in items:
            if role not in ROLES:
                raise KeyConfigError(f"unknown API key role {role!r}: use admin or caller")
            if not key:
                raise KeyConfigError(f"an API key for role {role} is empty")
            match = _DIGEST.match(key)
            if match:
                entries.append((role, bytes.fromhex(match.group(1))))  # type: ignore[arg-type]
            elif len(key) < 16:
                raise KeyConfigError(f"an API key for role {role} is shorter than 16 characters; use a long random key "
                                     "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
            else:
                entries.append((role, digest(key)))  # type: ignore[arg-type]
        return cls(tuple(entries))

    def __add__(self, other: "ApiKeys") -> "ApiKeys":
        return ApiKeys(self.entries + other.entries)

    def role_of(self, key: str | None) -> Role | None:
        """The role of a presented key, or None. Constant time in which entry matches."""
        if not key:
            return None
        presented = digest(key)
        found: Role | None = None
        for role, stored in self.entries:
            if hmac.compare_digest(presented, stored) and found != "admin":
                found = role
        return found


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand(value: str) -> str:
    """`${NAME}` → the environment variable (keys in config files should not be literal)."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise KeyConfigError(f"an API key refers to the environment variable {name}, which is not set")
        return os.environ[name]

    return _ENV_REF.sub(replace, value)


def _mask(text: str) -> str:
    return text[:3] + "…" if len(text) > 3 else text


def load_api_keys(explicit: Any = None, *, settings: Any = None, environ: Mapping[str, str] | None = None) -> ApiKeys:
    """Keys from the argument, else the environment, plus the project's `server.api_keys`."""
    environ = os.environ if environ is None else environ
    keys = ApiKeys.parse(explicit) if explicit is not None else ApiKeys.parse(environ.get(ENV_VAR) or None)
    server = getattr(settings, "server", None)
    configured = getattr(server, "api_keys", None) if server is not None else None
    if configured:
        keys = keys + ApiKeys.parse(configured)
    return keys


def presented_key(headers: Mapping[str, str]) -> str | None:
    """`Authorization: Bearer KEY` or `X-API-Key: KEY`."""
    value = headers.get("authorization")
    if value:
        scheme, _, token = value.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return headers.get("x-api-key") or None


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost (a bind address or a Host header without its port)."""
    host = host.strip().lower().strip("[]")
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_header_name(value: str) -> str:
    """`127.0.0.1:8000` → `127.0.0.1`; `[::1]:8000` → `::1`."""
    value = value.strip()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def loopback_origin(origin: str) -> bool:
    """An `Origin` header naming a loopback host (`http://127.0.0.1:8000`), or `null`-free."""
    match = re.match(r"^https?://(\[[^\]]+\]|[^/:]+)(:\d+)?/?$", origin.strip(), re.I)
    return bool(match) and is_loopback_host(match.group(1))  # type: ignore[union-attr]
