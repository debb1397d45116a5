"""The SSRF guard: decide whether a URL may be fetched, and to which address to connect.

    vet(url) ──▶ scheme http/https? no credentials? host well-formed?
             ──▶ blockedDomains / allowedDomains (on the name and on the canonical IP)
             ──▶ host is an IP literal (any spelling a resolver accepts) → judge that IP
                 host is a name → resolve once, judge EVERY address
             ──▶ Target(url, addresses)   the executor connects to these addresses only

An address is refused unless it is public unicast: loopback, private, link-local, CGNAT,
unspecified, multicast, broadcast, benchmark, documentation and other reserved ranges are
refused, and so are IPv6 forms that embed such an IPv4 address (IPv4-mapped, IPv4-compatible,
NAT64 64:ff9b::/96, 6to4 2002::/16). `allowPrivateNetworks` opens chosen CIDRs on purpose.

Because the caller connects to the vetted address itself (sending the name as Host header
and TLS SNI), a DNS answer that changes between the check and the connection cannot move it.
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Sequence, Union

import httpx

from ...errors import SkillyardError

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
# hostname → its addresses (as strings). Sync or async; injectable for tests.
Resolver = Callable[[str], Union[Sequence[str], Awaitable[Sequence[str]]]]


class Refused(SkillyardError):
    """The URL may not be fetched (code `blocked`); the message says why."""


class InvalidURL(SkillyardError):
    """The URL cannot be understood as an absolute http(s) URL (code `invalid_url`)."""


# ─── address classification ─────────────────────────────────────────────────────────────

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# (network, why it is refused). Order matters only for the name given in the message.
_REFUSED_V4: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("0.0.0.0/8"), "'this network' / unspecified"),
    (_V4("10.0.0.0/8"), "private"),
    (_V4("100.64.0.0/10"), "carrier-grade NAT (shared)"),
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("169.254.0.0/16"), "link-local (cloud metadata lives here)"),
    (_V4("172.16.0.0/12"), "private"),
    (_V4("192.0.0.0/24"), "IETF protocol assignments"),
    (_V4("192.0.2.0/24"), "documentation (TEST-NET-1)"),
    (_V4("192.31.196.0/24"), "AS112"),
    (_V4("192.52.193.0/24"), "AMT"),
    (_V4("192.88.99.0/24"), "6to4 relay anycast"),
    (_V4("192.168.0.0/16"), "private"),
    (_V4("192.175.48.0/24"), "AS112"),
    (_V4("198.18.0.0/15"), "benchmarking"),
    (_V4("198.51.100.0/24"), "documentation (TEST-NET-2)"),
    (_V4("203.0.113.0/24"), "documentation (TEST-NET-3)"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("240.0.0.0/4"), "reserved"),
    (_V4("255.255.255.255/32"), "broadcast"),
)

_REFUSED_V6: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    (_V6("64:ff9b:1::/48"), "local-use NAT64"),
    (_V6("100::/64"), "discard-only"),
    (_V6("2001::/23"), "IETF protocol assignments (incl. Teredo)"),
    (_V6("2001:db8::/32"), "documentation"),
    (_V6("3fff::/20"), "documentation"),
    (_V6("5f00::/16"), "segment routing"),
    (_V6("fc00::/7"), "unique local (private)"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("fec0::/10"), "site-local (deprecated)"),
    (_V6("ff00::/8"), "multicast"),
)

_GLOBAL_UNICAST_V6 = _V6("2000::/3")
_NAT64 = _V6("64:ff9b::/96")
_IPV4_COMPATIBLE = _V6("::/96")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 address stands for, and the form, if it embeds one."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, "IPv4-mapped"
    if ip.sixtofour is not None:
        return ip.sixtofour, "6to4"
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "NAT64"
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:  # ::/128 and ::1 are judged as themselves
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "IPv4-compatible"
    return None


def refusal_reason(ip: IPAddress, allowed: Iterable[IPNetwork] = ()) -> str | None:
    """Why `ip` may not be reached (`loopback (127.0.0.0/8)`), or None when it is public or allowed."""
    allowed = tuple(allowed)
    if _in_any(ip, allowed):
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return "an address with a zone id"
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            inner, form = embedded
            why = refusal_reason(inner, allowed)
            return f"the {form} form of {inner}, which is {why}" if why else None
        for network, why in _REFUSED_V6:
            if ip in network:
                return f"{why} ({network})"
        if ip not in _GLOBAL_UNICAST_V6:
            return "outside global unicast space (2000::/3)"
    else:
        for network4, why in _REFUSED_V4:
            if ip in network4:
                return f"{why} ({network4})"
    if not ip.is_global:
        return "not a public address"
    return None


def _in_any(ip: IPAddress, networks: tuple[IPNetwork, ...]) -> bool:
    for network in networks:
        if ip.version == network.version and ip in network:
            return True
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            return _in_any(embedded[0], networks)
    return False


# ─── host parsing ───────────────────────────────────────────────────────────────────────

_NUMERIC_LABEL = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
_NAME_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")


def parse_ipv4_like(host: str) -> ipaddress.IPv4Address | None:
    """Read `host` the way inet_aton (and so getaddrinfo) does, or None if it is a name.

    Accepts 1 to 4 parts, each decimal, octal (leading 0) or hex (0x): `127.1`, `0x7f.1`,
    `2130706433`, `017700000001`, `0177.0.0.01`. Raises InvalidURL for a numeric host that
    is no valid address (`256.1.1.1`, `08.1`) — a resolver might still do something with it.
    """
    labels = host.split(".")
    if labels and labels[-1] == "" and len(labels) > 1:
        labels = labels[:-1]  # one trailing dot, as in `127.0.0.1.`
    if not all(_NUMERIC_LABEL.match(label) for label in labels):
        if _NUMERIC_LABEL.match(labels[-1]):  # WHATWG: such a host is an error, not a name
            raise InvalidURL(f"host {host!r} ends in a number but is not an IP address")
        return None
    if len(labels) > 4:
        raise InvalidURL(f"host {host!r} has {len(labels)} numeric parts; an IPv4 address has at most 4")
    values = []
    for label in labels:
        try:
            if label.startswith("0x"):
                values.append(int(label[2:] or "0", 16))
            elif len(label) > 1 and label.startswith("0"):
                values.append(int(label, 8))
            else:
                values.append(int(label, 10))
        except ValueError:
            raise InvalidURL(f"host {host!r}: {label!r} is not a valid number") from None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        raise InvalidURL(f"host {host!r} is out of range for an IPv4 address")
    number = last
    for position, value in enumerate(head):
        number |= value << (8 * (3 - position))
    return ipaddress.IPv4Address(number)


def parse_host(host: str) -> IPAddress | str:
    """An IP address (however spelled) or a normalised domain name; InvalidURL otherwise."""
    if not host:
        raise InvalidURL("the URL has no host")
    if ":" in host:  # only an IPv6 literal contains a colon here
        if "%" in host:
            raise InvalidURL(f"IPv6 zone ids are not allowed ({host!r})")
        try:
            return ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidURL(f"{host!r} is not a valid IPv6 address") from None
    host = host.lower()
    ip = parse_ipv4_like(host)
    if ip is not None:
        return ip
    name = host[:-1] if host.endswith(".") else host
    if len(name) > 253 or not all(_NAME_LABEL.match(label) for label in name.split(".")):
        raise InvalidURL(f"{host!r} is not a valid host name")
    return name


def normalise_domain(pattern: str) -> str:
    """A domain pattern as written in config → lowercase ASCII (IDNA), no trailing dot."""
    text = pattern.strip().lower()
    if text in ("*", ""):
        return text
    wildcard = text.startswith("*.")
    body = text[2:] if wildcard else text
    body = body[:-1] if body.endswith(".") else body
    try:
        ip = ipaddress.ip_address(body)
    except ValueError:
        ip = None
    if ip is not None:
        if wildcard:
            raise ValueError(f"{pattern!r}: a wildcard cannot prefix an IP address")
        return str(ip)
    if "*" in body:
        raise ValueError(f"{pattern!r}: '*' may only stand alone or start a pattern as '*.'")
    try:
        ascii_body = body.encode("idna").decode("ascii") if not body.isascii() else body
    except UnicodeError as exc:
        raise ValueError(f"{pattern!r} is not a valid domain name: {exc}") from None
    if not ascii_body or not all(_NAME_LABEL.match(label) for label in ascii_body.split(".")):
        raise ValueError(f"{pattern!r} is not a valid domain name")
    return f"*.{ascii_body}" if wildcard else ascii_body


def domain_matches(name: str, pattern: str) -> bool:
    """`*` matches all; `*.example.com` matches subdomains only; anything else matches exactly."""
    if pattern == "*":
        return True
    if pattern.startswith("*."):
        return name.endswith(pattern[1:]) and len(name) > len(pattern) - 1
    return name == pattern


# ─── resolving ──────────────────────────────────────────────────────────────────────────


async def system_resolver(host: str) -> list[str]:
    """All addresses the system resolver gives for `host`, in its order, without duplicates."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    seen: dict[str, None] = {}
    for info in infos:
        seen.setdefault(str(info[4][0]), None)
    return list(seen)


@dataclass(frozen=True, slots=True)
class Target:
    """A vetted URL: where it may connect (in order) and what to say as Host / SNI."""

    url: httpx.URL
    host: str  # normalised name or canonical IP text
    addresses: tuple[IPAddress, ...]
    is_ip_literal: bool

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.url.scheme == "https" else 80
        port = self.url.port
        return host if port in (None, default) else f"{host}:{port}"


@dataclass(frozen=True)
class NetworkPolicy:
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()
    allow_private: tuple[IPNetwork, ...] = ()

    def check_name(self, name: str, *, shown: str) -> None:
        for pattern in self.blocked_domains:
            if domain_matches(name, pattern):
                raise Refused(f"{shown} is on this tool's blocked list ({pattern})")
        if self.allowed_domains and not any(domain_matches(name, p) for p in self.allowed_domains):
            raise Refused(f"{shown} is not on this tool's allowed list ({', '.join(self.allowed_domains)})")

    def check_address(self, ip: IPAddress, *, host: str) -> None:
        why = refusal_reason(ip, self.allow_private)
        if why:
            where = f"{ip}" if str(ip) == host else f"{host} resolves to {ip}, which"
            raise Refused(private_refusal(where, why, ip))


def parse_url(url: str | httpx.URL) -> httpx.URL:
    if isinstance(url, httpx.URL):
        return url
    if not isinstance(url, str) or not url.strip():
        raise InvalidURL("the URL is empty")
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c == "\\" for c in url):
        raise InvalidURL("the URL contains control characters or backslashes")
    try:
        return httpx.URL(url.strip())
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise InvalidURL(f"{url!r} is not a valid URL: {exc}") from None


async def vet(url: str | httpx.URL, policy: NetworkPolicy, resolver: Resolver) -> Target:
    """Check one URL (a first request or a redirect hop); Refused / InvalidURL if it may not go."""
    parsed = parse_url(url)
    scheme = parsed.scheme
    if scheme not in ("http", "https"):
        if not scheme:
            raise InvalidURL(f"{str(url)!r} is not an absolute URL; write http:// or https://")
        raise Refused(f"the {scheme}:// scheme is not allowed; only http:// and https://")
    if parsed.userinfo:
        raise Refused("URLs with credentials (user:password@) are not allowed")
    host = parse_host(parsed.raw_host.decode("ascii", "replace"))  # IDNA-encoded, as DNS sees it
    if isinstance(host, str):
        policy.check_name(host, shown=host)
        answers = resolver(host)
        if inspect.isawaitable(answers):
            answers = await answers
        addresses = tuple(_address(a, host) for a in answers)
        if not addresses:
            raise OSError(f"{host} has no addresses")
        for ip in addresses:
            policy.check_address(ip, host=host)
        return Target(parsed, host, addresses, is_ip_literal=False)
    canonical = str(host)
    respelled = canonical != parsed.host.lower()
    policy.check_name(canonical, shown=f"{parsed.host} (= {canonical})" if respelled else canonical)
    why = refusal_reason(host, policy.allow_private)
    if why:
        where = f"{parsed.host} means {canonical}, which" if respelled else canonical
        raise Refused(private_refusal(where, why, host))
    return Target(parsed, canonical, (host,), is_ip_literal=True)


def private_refusal(where: str, why: str, ip: IPAddress) -> str:
    """The refusal of a non-public address, naming the setting that opens it on purpose."""
    example = "" if getattr(ip, "scope_id", None) else f', e.g. allowPrivateNetworks: ["{ip}/{ip.max_prefixlen}"]'
    return (f"{where} is {why}; only public addresses may be fetched "
            f"(to reach it on purpose, list its network under the tool's config{example})")


def _address(text: str, host: str) -> IPAddress:
    try:
        return ipaddress.ip_address(str(text))
    except ValueError:
        raise Refused(f"{host} resolved to {text!r}, which is not an IP address") from None
