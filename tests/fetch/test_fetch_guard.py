"""The SSRF guard: every refusal happens before any connection; no server is needed for most."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Iterator

import httpx
import pytest

from engine.errors import StepFailure
from engine.executors.fetch import FetchConfig, FetchExecutor
from engine.executors.fetch.guard import (
    NetworkPolicy,
    Refused,
    domain_matches,
    normalise_domain,
    parse_host,
    refusal_reason,
    vet,
)
from fetch_support import FakeRun, FixedResolver, LoopbackServer, fetch_project, serving

PUBLIC = "93.184.216.34"


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    yield from serving()


class NoNetwork(httpx.AsyncBaseTransport):
    """A transport that records and refuses: proof that nothing was sent."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        raise AssertionError(f"a connection was attempted to {request.url}")


def run_fetch(executor: FetchExecutor, **args: object) -> object:
    return asyncio.run(executor.execute(args, FakeRun()))


def refused(url: str, *, resolver: dict | None = None, **config: object) -> str:
    transport = NoNetwork()
    executor = FetchExecutor(FetchConfig(**config), resolver=FixedResolver(resolver or {}), transport=transport)
    with pytest.raises(StepFailure) as caught:
        run_fetch(executor, url=url)
    assert transport.requests == []
    return f"{caught.value.code}: {caught.value.message}"


# ─── addresses ─────────────────────────────────────────────────────────────────────────

REFUSED_LITERALS = [
    "127.0.0.1", "127.1", "0x7f.1", "0x7f000001", "2130706433", "017700000001", "127.0.0.1.",
    "10.0.0.1", "10.1", "172.16.5.4", "172.31.255.255", "192.168.1.1", "100.64.0.1", "100.127.255.254",
    "169.254.169.254", "0.0.0.0", "0", "0.1.2.3", "224.0.0.1", "239.255.255.250", "255.255.255.255", "240.0.0.1",
    "192.0.2.1", "198.51.100.7", "203.0.113.9", "198.18.0.1", "192.0.0.8", "192.88.99.1",
    "[::1]", "[::]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::ffff:10.0.0.1]", "[::127.0.0.1]",
    "[64:ff9b::7f00:1]", "[64:ff9b::a9fe:a9fe]", "[2002:7f00:1::]", "[2002:c0a8:101::1]", "[fe80::1]", "[fc00::1]",
    "[fd12:3456::1]", "[ff02::1]", "[2001:db8::1]", "[3fff::1]", "[2001::1]", "[100::1]", "[fec0::1]", "[64:ff9b:1::1]",
]


@pytest.mark.parametrize("host", REFUSED_LITERALS)
def test_private_and_special_addresses_are_refused_before_connecting(host: str) -> None:
    message = refused(f"http://{host}:8080/latest/meta-data/")
    assert message.startswith("blocked: "), message
    assert "only public addresses" in message


@pytest.mark.parametrize("spelling", ["127.1", "0x7f.1", "2130706433", "017700000001", "0x7F.0.0.1", "127.0.1"])
def test_odd_ipv4_spellings_are_read_like_a_resolver_reads_them(spelling: str) -> None:
    assert parse_host(spelling) == ipaddress.IPv4Address("127.0.0.1")
    assert f"{spelling.lower()} means 127.0.0.1, which is loopback" in refused(f"http://{spelling}/")


def test_dotted_octal_is_understood_even_where_the_url_parser_rejects_it() -> None:
    assert parse_host("0177.0.0.01") == ipaddress.IPv4Address("127.0.0.1")
    assert refused("http://0177.0.0.01/").startswith("invalid_url: ")  # httpx refuses the URL itself


@pytest.mark.parametrize("host", ["256.0.0.1", "1.2.3.4.5", "08.0.0.1", "foo.123", "0x1g.1", "exa mple.com"])
def test_malformed_hosts_are_invalid_not_resolved(host: str) -> None:
    resolver = FixedResolver({})
    executor = FetchExecutor(FetchConfig(), resolver=resolver, transport=NoNetwork())
    with pytest.raises(StepFailure) as caught:
        run_fetch(executor, url=f"http://{host}/")
    assert caught.value.code == "invalid_url"
    assert resolver.calls == []


def test_embedded_ipv4_is_judged_by_what_it_embeds() -> None:
    assert refusal_reason(ipaddress.ip_address("::ffff:8.8.8.8")) is None
    assert refusal_reason(ipaddress.ip_address("64:ff9b::808:808")) is None
    assert refusal_reason(ipaddress.ip_address("2002:808:808::1")) is None
    why = refusal_reason(ipaddress.ip_address("64:ff9b::7f00:1"))
    assert why is not None and "NAT64 form of 127.0.0.1" in why and "loopback" in why
    assert "6to4 form of 127.0.0.1" in (refusal_reason(ipaddress.ip_address("2002:7f00:1::")) or "")


def test_public_addresses_pass() -> None:
    for address in ["8.8.8.8", PUBLIC, "1.1.1.1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e"]:
        assert refusal_reason(ipaddress.ip_address(address)) is None, address


# ─── names and resolving ───────────────────────────────────────────────────────────────


def test_a_name_is_refused_if_any_address_it_resolves_to_is_private() -> None:
    message = refused("http://mixed.test/", resolver={"mixed.test": [PUBLIC, "10.0.0.7"]})
    assert message == "blocked: http://mixed.test/ is refused: mixed.test resolves to 10.0.0.7, which is private (10.0.0.0/8); only public addresses may be fetched " \
        '(to reach it on purpose, list its network under the tool\'s config, e.g. allowPrivateNetworks: ["10.0.0.7/32"])'


def test_localhost_by_name_is_refused_through_its_address() -> None:
    assert "localhost resolves to 127.0.0.1" in refused("http://localhost/", resolver={"localhost": ["127.0.0.1", "::1"]})


def test_a_name_that_does_not_resolve_fails_without_connecting() -> None:
    message = refused("http://nowhere.test/")
    assert message.startswith("fetch_failed: http://nowhere.test/: the host name could not be resolved")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("ftp://example.com/file", "blocked: ftp://example.com/file is refused: the ftp:// scheme is not allowed"),
        ("file:///etc/passwd", "blocked: file:///etc/passwd is refused: the file:// scheme is not allowed"),
        ("gopher://example.com/", "blocked: gopher://example.com/ is refused: the gopher:// scheme is not allowed"),
        ("http://user:secret@example.com/", "blocked: http://user:[REDACTED]@example.com/ is refused: URLs with credentials"),
        ("http://user@example.com/", "blocked: http://user@example.com/ is refused: URLs with credentials"),
        ("/relative/path", "invalid_url: '/relative/path' is not an absolute URL"),
        ("example.com", "invalid_url: 'example.com' is not an absolute URL"),
        ("http://[fe80::1%25eth0]/", "invalid_url: IPv6 zone ids are not allowed"),
        ("http://exa\\mple.com/", "invalid_url: the URL contains control characters or backslashes"),
        ("http://example.com/\r\nX-Injected: 1", "invalid_url: the URL contains control characters or backslashes"),
    ],
)
def test_schemes_credentials_and_shapes(url: str, expected: str) -> None:
    assert refused(url, resolver={"example.com": [PUBLIC]}).startswith(expected)


# ─── allow and block lists ─────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("name", "pattern", "matches"),
    [
        ("docs.python.org", "*.python.org", True),
        ("a.b.python.org", "*.python.org", True),
        ("python.org", "*.python.org", False),  # subdomains only (seed 000)
        ("evilpython.org", "*.python.org", False),
        ("example.com", "example.com", True),
        ("www.example.com", "example.com", False),
        ("example.com.evil.test", "example.com", False),
        ("anything.test", "*", True),
    ],
)
def test_domain_patterns(name: str, pattern: str, matches: bool) -> None:
    assert domain_matches(name, normalise_domain(pattern)) is matches


def test_domain_patterns_are_normalised() -> None:
    assert normalise_domain(" Docs.Python.ORG. ") == "docs.python.org"
    assert normalise_domain("*.Bücher.de") == "*.xn--bcher-kva.de"
    for bad in ["*example.com", "ex*ample.com", "*.", "exa mple.com", "*.127.0.0.1"]:
        with pytest.raises(ValueError):
            normalise_domain(bad)


def vet_now(url: str, policy: NetworkPolicy, table: dict[str, list[str]]) -> object:
    return asyncio.run(vet(url, policy, FixedResolver(table)))


def test_allowed_and_blocked_lists() -> None:
    config = FetchConfig(allowedDomains=["*.python.org", "example.com"], blockedDomains=["bugs.python.org"])
    table = {name: [PUBLIC] for name in ["docs.python.org", "example.com", "bugs.python.org", "python.org", "other.test"]}
    assert vet_now("https://docs.python.org/3/", config.policy, table).host == "docs.python.org"
    assert vet_now("https://EXAMPLE.com./", config.policy, table).host == "example.com"
    with pytest.raises(Refused, match=r"bugs.python.org is on this tool's blocked list \(bugs.python.org\)"):
        vet_now("https://bugs.python.org/", config.policy, table)  # blocked wins over *.python.org
    with pytest.raises(Refused, match="python.org is not on this tool's allowed list"):
        vet_now("https://python.org/", config.policy, table)
    with pytest.raises(Refused, match="not on this tool's allowed list"):
        vet_now("https://other.test/", config.policy, table)


def test_international_names_are_checked_and_resolved_in_their_idna_form() -> None:
    policy = FetchConfig(allowedDomains=["bücher.de"]).policy
    target = vet_now("http://Bücher.de/", policy, {"xn--bcher-kva.de": [PUBLIC]})
    assert target.host == "xn--bcher-kva.de" and target.host_header == "xn--bcher-kva.de"
    with pytest.raises(Refused, match="not on this tool's allowed list"):
        vet_now("http://bucher.de/", policy, {"bucher.de": [PUBLIC]})


def test_lists_apply_to_ip_literals_by_their_canonical_form() -> None:
    config = FetchConfig(blockedDomains=["93.184.216.34"])
    with pytest.raises(Refused, match=r"1572395042 \(= 93.184.216.34\) is on this tool's blocked list"):
        vet_now("http://1572395042/", config.policy, {})
    allowed_only_names = FetchConfig(allowedDomains=["example.com"])
    with pytest.raises(Refused, match="not on this tool's allowed list"):
        vet_now(f"http://{PUBLIC}/", allowed_only_names.policy, {})


def test_the_list_check_runs_before_resolving() -> None:
    resolver = FixedResolver({"other.test": [PUBLIC]})
    executor = FetchExecutor(FetchConfig(allowedDomains=["example.com"]), resolver=resolver, transport=NoNetwork())
    with pytest.raises(StepFailure, match="not on this tool's allowed list"):
        run_fetch(executor, url="http://other.test/")
    assert resolver.calls == []


# ─── allowPrivateNetworks ──────────────────────────────────────────────────────────────


def test_allow_private_networks_opens_exactly_the_listed_ranges() -> None:
    policy = FetchConfig(allowPrivateNetworks=["127.0.0.0/8", "fd00:1::/64"]).policy
    assert vet_now("http://127.0.0.1/", policy, {}).addresses == (ipaddress.ip_address("127.0.0.1"),)
    assert vet_now("http://0x7f.2/", policy, {}).host == "127.0.0.2"
    assert vet_now("http://[::ffff:127.0.0.1]/", policy, {}).host == "::ffff:7f00:1"  # same host, other spelling
    assert vet_now("http://[fd00:1::5]/", policy, {}).host == "fd00:1::5"
    for url in ["http://10.0.0.1/", "http://169.254.169.254/", "http://[::1]/", "http://[fd00:2::5]/"]:
        with pytest.raises(Refused):
            vet_now(url, policy, {})


def test_refusals_reach_the_model_as_blocked_with_advice(tmp_path, server) -> None:
    engine = fetch_project(tmp_path, {"allowedDomains": ["example.com"]})
    result = engine.call_tool_sync("readPage", {"url": server.url("/")})
    assert not result.ok and result.error.code == "blocked"
    text = result.model_text()
    assert text.startswith("[readPage failed: blocked] ")
    assert "127.0.0.1 is not on this tool's allowed list (example.com)" in text
    assert "retrying it will not help" in text
    assert server.seen == []  # refused before any connection


@pytest.mark.parametrize("spelling", ["127.0.0.1", "127.1", "0x7f.1", "2130706433", "017700000001", "[::ffff:127.0.0.1]"])
def test_loopback_server_sees_nothing_from_refused_spellings(tmp_path, server, spelling: str) -> None:
    engine = fetch_project(tmp_path, {})
    result = engine.call_tool_sync("readPage", {"url": f"http://{spelling}:{server.port}/"})
    assert result.error is not None and result.error.code == "blocked", result
    assert server.seen == []
