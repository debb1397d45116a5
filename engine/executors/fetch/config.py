"""The `config:` of a `type: fetch` tool, validated at load time, and the input schema it implies."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ...spec.models import Duration
from .guard import IPNetwork, NetworkPolicy, normalise_domain

Method = Literal["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
ALL_METHODS: tuple[Method, ...] = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

MAX_TIMEOUT = 60.0
MAX_RESPONSE_SIZE = 1024 * 1024  # 1 MB
DEFAULT_RESPONSE_SIZE = 100 * 1024
MAX_REDIRECTS = 20

# Headers the engine sets itself: a caller may not choose where or how bytes travel.
RESERVED_HEADERS = frozenset(
    {
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te",
        "trailer", "accept-encoding", "proxy-authorization", "proxy-connection", "expect",
    }
)
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]i?[bB]?|[bB])?\s*$")
_SIZE_UNITS = {"b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2}


def parse_size(value: Any) -> int:
    """`102400`, `200KB`, `1.5MB`, `512 KiB` → bytes. KB and MB are 1024-based."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 200KB or 1MB")
    if isinstance(value, int):
        size = value
    elif isinstance(value, float) and value.is_integer():
        size = int(value)
    elif isinstance(value, str) and (match := _SIZE_RE.match(value)):
        size = int(float(match.group(1)) * _SIZE_UNITS[(match.group(2) or "b").lower()])
    else:
        raise ValueError(f"{value!r} is not a size; write bytes (102400) or e.g. 200KB or 1MB")
    if size <= 0:
        raise ValueError("a size must be greater than zero")
    if size > MAX_RESPONSE_SIZE:
        raise ValueError(f"{value} is more than the 1MB ceiling for a fetched response")
    return size


def human_size(size: int) -> str:
    if size >= 1024 * 1024 and size % (1024 * 1024) == 0:
        return f"{size // (1024 * 1024)} MB"
    if size >= 1024:
        return f"{size / 1024:g} KB"
    return f"{size} bytes"


def _size_text(size: int) -> int | str:
    """For writing a config back: `200KB`, `1MB`, or plain bytes when not a whole KB."""
    if size % (1024 * 1024) == 0:
        return f"{size // (1024 * 1024)}MB"
    return f"{size // 1024}KB" if size % 1024 == 0 else size


Size = Annotated[int, BeforeValidator(parse_size), PlainSerializer(_size_text)]


_CREDENTIAL_HEADER = re.compile(r"^(?:authorization|cookie|.*[-_](?:key|token|secret|auth)|.*password.*)$", re.IGNORECASE)


def is_credential_header(name: str) -> bool:
    """`Authorization`, `Cookie`, `X-Api-Key`, `Private-Token`…: a header that proves who is asking."""
    return bool(_CREDENTIAL_HEADER.match(name))


def check_header(name: str, value: Any) -> str | None:
    """What is wrong with one request header, or None."""
    if not isinstance(name, str) or not _HEADER_NAME.match(name):
        return f"{name!r} is not a valid header name"
    if name.lower() in RESERVED_HEADERS or name.lower().startswith("proxy-"):
        return f"header {name!r} is set by the engine and cannot be chosen"
    if not isinstance(value, str):
        return f"header {name!r} must be a string"
    if any(c in value for c in "\r\n\0"):
        return f"header {name!r} contains a line break or NUL"
    return None


class FetchConfig(BaseModel):
    """Settings of one `type: fetch` tool (YAML keys are camelCase)."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)

    default_method: Method = Field("GET", description="Method used when the call gives none.")
    allowed_methods: tuple[Method, ...] = Field(ALL_METHODS, description="Methods a call may choose.")
    allowed_domains: tuple[str, ...] = Field((), description="Only these hosts (empty: any). `*.example.com` matches subdomains only.")
    # after allowedDomains: a credential among them is bound to those hosts (checked below)
    default_headers: dict[str, str] = Field(default_factory=dict, description="Headers sent with every request. One "
                                            "holding a reference or named like a credential needs allowedDomains.")
    timeout: Duration = Field(10.0, description="Total time for one fetch, redirects included (at most 60s).")
    max_response_size: Size = Field(DEFAULT_RESPONSE_SIZE, description="Bytes kept after decompression (at most 1MB); the rest is cut off.")
    blocked_domains: tuple[str, ...] = Field((), description="Never these hosts; wins over allowedDomains.")
    parse_mode: Literal["raw", "markdown", "json"] = Field("markdown", description="raw text, HTML → Markdown, or JSON.")
    allow_private_networks: tuple[str, ...] = Field((), description="CIDRs deliberately reachable although not public, e.g. 10.1.0.0/16.")
    max_redirects: int = Field(5, ge=0, le=MAX_REDIRECTS, description="Redirect hops followed, each checked like the first URL.")

    @field_validator("timeout")
    @classmethod
    def _timeout_ceiling(cls, value: float) -> float:
        if value > MAX_TIMEOUT:
            raise ValueError(f"{value:g}s is more than the 60s ceiling for a fetch")
        return value

    @field_validator("allowed_domains", "blocked_domains", mode="before")
    @classmethod
    def _domains(cls, value: Any) -> Any:
        return _each(value, _domain_pattern)

    @field_validator("allow_private_networks", mode="before")
    @classmethod
    def _networks(cls, value: Any) -> Any:
        return _each(value, _cidr)

    @field_validator("default_headers")
    @classmethod
    def _headers(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        for name, header in value.items():
            problem = check_header(name, header)
            if problem:
                raise ValueError(problem)
        read = (info.context or {}).get("read_by_reference") or (lambda text: False)
        bound = [name for name, header in value.items() if is_credential_header(name) or read(header)]
        if bound and not info.data.get("allowed_domains"):
            raise ValueError(f"{', '.join(bound)} carries a credential (a reference, or a credential's name) and would go to "
                             "any URL a caller names; list the hosts it is for in allowedDomains")
        return value

    @model_validator(mode="after")
    def _method_allowed(self) -> "FetchConfig":
        if not self.allowed_methods:
            raise ValueError("allowedMethods must name at least one method")
        if self.default_method not in self.allowed_methods:
            raise ValueError(f"defaultMethod {self.default_method} is not in allowedMethods ({', '.join(self.allowed_methods)})")
        return self

    @property
    def policy(self) -> NetworkPolicy:
        networks: tuple[IPNetwork, ...] = tuple(ipaddress.ip_network(n) for n in self.allow_private_networks)
        return NetworkPolicy(self.allowed_domains, self.blocked_domains, networks)


def private_networks(raw: Any) -> tuple[str, ...]:
    """The `allowPrivateNetworks` of a config as written (either spelling), each item as text."""
    if not isinstance(raw, dict):
        return ()
    value = raw.get("allowPrivateNetworks", raw.get("allow_private_networks", ()))
    items = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else [value]
    return tuple(str(item) for item in items)


def input_schema(config: FetchConfig) -> dict[str, Any]:
    """What a model may pass: the URL, and where the config allows it, method, headers, body."""
    where = f" Allowed hosts: {', '.join(config.allowed_domains)}." if config.allowed_domains else ""
    properties: dict[str, Any] = {
        "url": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4096,
            "description": f"Absolute http:// or https:// URL to fetch.{where}",
        },
    }
    if len(config.allowed_methods) > 1:
        properties["method"] = {
            "type": "string",
            "enum": list(config.allowed_methods),
            "description": f"HTTP method (default {config.default_method}).",
        }
    properties["headers"] = {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": "Extra request headers.",
    }
    if BODY_METHODS & set(config.allowed_methods):
        properties["body"] = {
            "type": ["string", "object", "array"],
            "description": "Request body: a string is sent as is; an object or array is sent as JSON.",
        }
    return {"type": "object", "properties": properties, "required": ["url"], "additionalProperties": False}


def description(config: FetchConfig, yaml_description: str) -> str:
    """The YAML description, plus the limits a model should know before calling."""
    notes = []
    if config.allowed_domains:
        notes.append(f"Only these hosts can be fetched: {', '.join(config.allowed_domains)}.")
    notes.append(
        {
            "markdown": "HTML pages are returned as Markdown.",
            "json": "The response is parsed as JSON.",
            "raw": "The response text is returned as is.",
        }[config.parse_mode]
    )
    notes.append(f"Responses are cut off after {human_size(config.max_response_size)}.")
    return " ".join([yaml_description.rstrip(), *notes])


def _each(value: Any, normalise: Any) -> Any:
    """One string or a list of them → a tuple of normalised, de-duplicated items (else: as is)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return value  # pydantic reports the wrong type
    return tuple(dict.fromkeys(normalise(item) for item in value))


def _domain_pattern(item: Any) -> str:
    if not isinstance(item, str):
        raise ValueError(f"{item!r} is not a domain pattern")
    return normalise_domain(item)


def _cidr(item: Any) -> str:
    try:
        return str(ipaddress.ip_network(str(item).strip(), strict=True))
    except ValueError as exc:
        raise ValueError(f"{item!r} is not a network in CIDR form such as 10.0.0.0/8 ({exc})") from None
