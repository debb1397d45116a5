"""API keys, the principals they name, and roles for the HTTP service.

Keys come from `SKILLYARD_API_KEYS` (`alice:admin:KEY1,bob:caller:KEY2`; the older
`admin:KEY1` form names the key `admin-<8 hex of its digest>`), from `server.api_keys` in
`config/engine.yaml` (`{name, role, key}`), or from `create_app(api_keys=...)`. Only SHA-256
digests are kept in memory; a key may also be given as its digest (`alice:admin:sha256:<64
hex>`), so the plain key need not be written anywhere. Every check hashes the presented key
and compares it with every stored digest using `hmac.compare_digest`, so the time taken says
nothing about which key or prefix matched.

A key's *name* is the principal: runs record who started them, and a caller sees, follows,
approves and cancels only its own runs. Several keys may share a name (a rotation: old and
new key act as one principal); a name has one role.

Roles: `caller` may list and call tools, run the agent, and read, approve and cancel its own
runs; `admin` may also see every run, change tools and reload the project. With no keys
configured every request is treated as the admin `local` — which is why the service then
answers loopback peers only (see `access.py`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, NamedTuple

from ..errors import SkillyardError

Role = Literal["admin", "caller"]
ROLES: tuple[Role, ...] = ("admin", "caller")
ENV_VAR = "SKILLYARD_API_KEYS"
_DIGEST = re.compile(r"^sha256:([0-9a-fA-F]{64})$")
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


class KeyConfigError(SkillyardError, ValueError):
    """The API key configuration cannot be used; the message says what to fix."""


_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,64}$")


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


@dataclass(frozen=True)
class Principal:
    """Who makes a request: the name of its key, and that key's role."""

    name: str
    role: Role

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    def may_see(self, owner: str | None) -> bool:
        """Admins see every run; a caller only the runs it started."""
        return self.role == "admin" or owner == self.name


LOCAL = Principal("local", "admin")  # every request, when no keys are configured


class KeyEntry(NamedTuple):
    name: str
    role: Role
    digest: bytes


@dataclass(frozen=True)
class ApiKeys:
    """The configured keys as (name, role, SHA-256 digest) entries."""

    entries: tuple[KeyEntry, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.entries)

    @classmethod
    def parse(cls, spec: str | Iterable[Any] | Mapping[str, Any] | None) -> "ApiKeys":
        """`"alice:admin:K1,bob:caller:K2"` (or `"admin:K1"`), a list of such items or of
        `{"name", "role", "key"}` dicts, or a `{role: key | [keys]}` mapping. A key written
        `sha256:<hex>` is a digest."""
        if spec is None:
            return cls()
        items: list[tuple[str | None, str, str]] = []
        nested: list[KeyEntry] = []
        if isinstance(spec, str):
            items.extend(_parse_text_entry(part.strip()) for part in spec.split(",") if part.strip())
        elif isinstance(spec, Mapping):
            for role, keys in spec.items():
                for key in [keys] if isinstance(keys, str) else list(keys or []):
                    items.append((None, str(role), str(key)))
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
                items.append((item.get("name"), str(role), _expand(str(key or ""))))
        return cls(_checked_names(nested + [_entry(name, role, key) for name, role, key in items]))

    def __add__(self, other: "ApiKeys") -> "ApiKeys":
        return ApiKeys(self.entries + other.entries)

    def principal_of(self, key: str | None) -> Principal | None:
        """Who presents `key`, or None. Constant time in which entry matches."""
        if not key:
            return None
        presented = digest(key)
        found: KeyEntry | None = None
        for entry in self.entries:
            if hmac.compare_digest(presented, entry.digest) and (found is None or found.role != "admin"):
                found = entry
        return None if found is None else Principal(found.name, found.role)

    def role_of(self, key: str | None) -> Role | None:
        """The role of a presented key, or None."""
        principal = self.principal_of(key)
        return None if principal is None else principal.role


def _parse_text_entry(part: str) -> tuple[str | None, str, str]:
    """`name:role:key` or `role:key` (a first field that is a role is the role)."""
    first, sep, rest = part.partition(":")
    if not sep:
        raise KeyConfigError(f"API key entry {_mask(part)!r} has no role: write NAME:ROLE:KEY with ROLE admin or caller")
    if first.strip() in ROLES:
        return None, first.strip(), rest.strip()
    role, sep, key = rest.partition(":")
    if not sep or role.strip() not in ROLES:
        raise KeyConfigError(f"unknown API key role {first.strip()!r} in {_mask(part)!r}: write NAME:ROLE:KEY or ROLE:KEY "
                             "with ROLE admin or caller")
    return first.strip(), role.strip(), key.strip()


def _entry(name: str | None, role: str, key: str) -> KeyEntry:
    if role not in ROLES:
        raise KeyConfigError(f"unknown API key role {role!r}: use admin or caller")
    if not key:
        raise KeyConfigError(f"an API key for role {role} is empty")
    match = _DIGEST.match(key)
    if match:
        hashed = bytes.fromhex(match.group(1))
    elif len(key) < 16:
        raise KeyConfigError(f"an API key for role {role} is shorter than 16 characters; use a long random key "
                             "(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    else:
        hashed = digest(key)
    if name is None:
        name = f"{role}-{hashed.hex()[:8]}"  # stable across restarts and replicas, and says nothing of the key
    elif not _NAME.match(name):
        raise KeyConfigError(f"API key name {name!r}: use 1-64 letters, digits, '_', '.', '@' or '-'")
    return KeyEntry(name, role, hashed)


def _checked_names(entries: list[KeyEntry]) -> tuple[KeyEntry, ...]:
    roles: dict[str, str] = {}
    for entry in entries:
        if roles.setdefault(entry.name, entry.role) != entry.role:
            raise KeyConfigError(f"API key name {entry.name!r} has two roles ({roles[entry.name]} and {entry.role}): "
                                 "a name is one principal with one role")
    return tuple(entries)


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


_AUTHORITY = r"(\[[0-9A-Fa-f:.]+\]|[^/:\[\]]+)(?::(\d{1,5}))?"  # host, port: no nested quantifier
_ORIGIN = re.compile(rf"^(https?)://{_AUTHORITY}/?$", re.I)
_HOST = re.compile(rf"^{_AUTHORITY}$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def same_origin(origin: str, scheme: str, host: str | None) -> bool:
    """Whether an `Origin` header names the request's own origin: the scheme, host and port the
    request was made to (the connection's scheme, the `Host` header). Another port of the same
    machine is another origin: a page on `localhost:3000` is not the service on 8000, nor is
    `localhost` the origin `127.0.0.1`. `null` (a sandboxed or file page) is no one's."""
    asked, own = _ORIGIN.match(origin.strip()), _HOST.match(host.strip()) if host is not None else None
    if asked is None or own is None:
        return False
    scheme = "https" if scheme.lower() in ("https", "wss") else "http"
    asked_scheme = asked.group(1).lower()
    return (asked_scheme == scheme and asked.group(2).lower() == own.group(1).lower()
            and int(asked.group(3) or _DEFAULT_PORTS[asked_scheme]) == int(own.group(2) or _DEFAULT_PORTS[scheme]))
