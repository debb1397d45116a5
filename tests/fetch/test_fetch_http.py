"""The fetch executor against real HTTP servers on loopback: redirects, rebinding, limits, parsing."""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import time
import tracemalloc
import zlib
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine.errors import StepFailure
from engine.executors.fetch import FetchConfig, FetchExecutor
from engine.runtime.result import ToolResult
from fetch_support import FakeRun, FixedResolver, LoopbackServer, fetch_project, free_port_on, send, serving

LOOPBACK = ["127.0.0.0/8"]
MB = 1024 * 1024


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    yield from serving()


def fetch(url: str, *, resolver: Any = None, transport: Any = None, verify: Any = True, run: FakeRun | None = None, **config: Any) -> Any:
    config.setdefault("allowPrivateNetworks", LOOPBACK)
    executor = FetchExecutor(FetchConfig(**config), resolver=resolver, transport=transport, verify=verify)
    return asyncio.run(executor.execute({"url": url}, run or FakeRun()))


def fetch_args(args: dict[str, Any], *, run: FakeRun | None = None, **config: Any) -> Any:
    config.setdefault("allowPrivateNetworks", LOOPBACK)
    executor = FetchExecutor(FetchConfig(**config))
    return asyncio.run(executor.execute(args, run or FakeRun()))


def failure(url: str, **kwargs: Any) -> StepFailure:
    with pytest.raises(StepFailure) as caught:
        fetch(url, **kwargs)
    return caught.value


def as_result(data: Any) -> ToolResult:
    return ToolResult(True, "readPage", "run_1", "call_1", data)


# ─── pages → Markdown ──────────────────────────────────────────────────────────────────

PAGE = b"""<!doctype html>
<html><head><title>Release notes</title>
<style>body { color: red }</style><script>alert("tracking")</script>
<link rel="stylesheet" href="/s.css"></head>
<body>
<nav><a href="javascript:void(0)">menu</a></nav>
<h1>What's new</h1>
<p>Read the <a href="/docs/intro.html">introduction</a> or the <a href="https://example.com/x">other site</a>.</p>
<table><thead><tr><th>Name</th><th>Value</th></tr></thead>
<tbody><tr><td>alpha</td><td>1</td></tr><tr><td>beta</td><td>2</td></tr></tbody></table>
<pre><code class="language-python">def greet(name):
    return f"hi {name}"
</code></pre>
<ul><li>first</li><li>second</li></ul>
<img src="data:image/png;base64,AAAA" alt="inline chart"><img src="/logo.png" alt="logo">
<noscript>enable javascript</noscript>
<script type="application/ld+json">{"@type": "Thing"}</script>
</body></html>"""


def test_html_becomes_readable_markdown(server) -> None:
    server.routes["/page"] = lambda h: send(h, 200, PAGE)
    run = FakeRun()
    data = fetch(server.url("/page"), run=run)
    md = data["content"]
    base = server.url("")
    assert data["format"] == "markdown" and data["title"] == "Release notes"
    assert md.startswith("menu\n\n# What's new\n\n")  # a javascript: link keeps its text, not its target
    assert f"[introduction]({base}/docs/intro.html)" in md
    assert "[other site](https://example.com/x)" in md
    assert "| Name | Value |\n| --- | --- |\n| alpha | 1 |\n| beta | 2 |" in md
    assert '```python\ndef greet(name):\n    return f"hi {name}"\n```' in md
    assert "- first\n- second" in md
    assert f"![logo]({base}/logo.png)" in md and "[inline chart]" in md and "base64" not in md
    for gone in ("alert", "tracking", "color: red", "enable javascript", "@type", "javascript:", "s.css"):
        assert gone not in md, gone
    assert {"resolved", "response", "downloaded", "converted"} <= set(run.stages())


def test_success_text_has_a_header_with_status_and_size_then_the_content(server) -> None:
    server.routes["/page"] = lambda h: send(h, 200, PAGE)
    data = fetch(server.url("/page"))
    text = as_result(data).model_text()
    header, body = text.split("\n", 1)
    assert header == f"[HTTP 200 OK · {len(PAGE):,} bytes · text/html; charset=utf-8 as Markdown · {server.url('/page')}]"
    assert body == data["content"]
    assert json.loads(json.dumps(data)) == dict(data)  # plain JSON for events, stores, workflows


def test_non_html_in_markdown_mode_is_returned_as_text(server) -> None:
    server.routes["/t"] = lambda h: send(h, 200, b"# already markdown\n<b>not html</b>", "text/markdown")
    data = fetch(server.url("/t"))
    assert data["format"] == "text" and data["content"] == "# already markdown\n<b>not html</b>"


def test_raw_mode_keeps_the_html(server) -> None:
    server.routes["/page"] = lambda h: send(h, 200, PAGE)
    data = fetch(server.url("/page"), parseMode="raw")
    assert data["format"] == "text" and data["content"] == PAGE.decode()


def test_binary_content_is_not_dumped_as_text(server) -> None:
    server.routes["/img"] = lambda h: send(h, 200, b"\x89PNG\r\n\x1a\n\0\0\0", "image/png")
    data = fetch(server.url("/img"))
    assert data["format"] == "binary" and data["content"] == "" and data["bytes"] == 11
    assert "(binary content, not shown)" in as_result(data).model_text()


# ─── charsets ──────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("body", "content_type", "text", "charset"),
    [
        ("café crème".encode("latin-1"), "text/plain; charset=ISO-8859-1", "café crème", "cp1252"),
        ("“quotes” €".encode("cp1252"), "text/plain; charset=windows-1252", "“quotes” €", "cp1252"),
        ("日本語のテキスト".encode("shift_jis"), "text/plain; charset=Shift_JIS", "日本語のテキスト", "shift_jis"),
        ("naïve ünïcode".encode("utf-8"), "text/plain", "naïve ünïcode", "utf-8"),
        ("déjà vu".encode("cp1252"), "text/plain", "déjà vu", "cp1252"),  # not UTF-8: the legacy default
        ("\ufeffbom".encode("utf-8"), "text/plain; charset=latin-1", "bom", "utf-8-sig"),  # a BOM wins
    ],
)
def test_text_is_decoded_by_the_declared_or_detected_charset(server, body: bytes, content_type: str, text: str, charset: str) -> None:
    server.routes["/t"] = lambda h: send(h, 200, body, content_type)
    data = fetch(server.url("/t"), parseMode="raw")
    assert (data["content"], data["charset"]) == (text, charset)


def test_html_meta_charset_is_honoured(server) -> None:
    html = '<html><head><meta charset="windows-1251"></head><body><p>Привет, мир</p></body></html>'.encode("cp1251")
    server.routes["/ru"] = lambda h: send(h, 200, html, "text/html")
    data = fetch(server.url("/ru"))
    assert data["content"] == "Привет, мир" and data["charset"] == "cp1251"


# ─── JSON ──────────────────────────────────────────────────────────────────────────────


def test_json_mode_parses(server) -> None:
    server.routes["/api"] = lambda h: send(h, 200, b'{"items": [1, 2], "name": "\xc3\xa9"}', "application/json")
    data = fetch(server.url("/api"), parseMode="json")
    assert data["format"] == "json" and data["content"] == {"items": [1, 2], "name": "é"} and "degraded" not in data
    assert as_result(data).model_text().endswith('\n{"items": [1, 2], "name": "é"}')


def test_json_mode_degrades_to_the_raw_text(server) -> None:
    server.routes["/api"] = lambda h: send(h, 200, b"<html>maintenance</html>", "text/html")
    data = fetch(server.url("/api"), parseMode="json")
    assert data["degraded"] is True and data["content"] == "<html>maintenance</html>" and data["format"] == "text"
    assert data["degraded_reason"] == "not valid JSON: Expecting value at line 1 column 1"
    lines = as_result(data).model_text().splitlines()
    assert lines[1] == "[not valid JSON: Expecting value at line 1 column 1; the raw text follows.]"
    assert lines[2] == "<html>maintenance</html>"


# ─── status codes ──────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("status", [404, 410, 500, 503])
def test_non_2xx_is_a_failure_that_carries_the_status(tmp_path, server, status: int) -> None:
    server.routes["/gone"] = lambda h: send(h, status, b'{"error": "no such page"}', "application/json")
    engine = fetch_project(tmp_path, {"allowPrivateNetworks": LOOPBACK})
    result = engine.call_tool_sync("readPage", {"url": server.url("/gone")})
    assert not result.ok and result.error.code == "http_error"
    assert result.error.details["status_code"] == status
    assert result.error.details["body_excerpt"] == '{"error": "no such page"}'
    text = result.model_text()
    assert text.startswith(f"[readPage failed: http_error] GET {server.url('/gone')} answered HTTP {status} ")
    assert "retrying the same URL will not help" in text


# ─── redirects ─────────────────────────────────────────────────────────────────────────


def redirect(to: str, status: int = 302) -> Any:
    return lambda h: send(h, status, b"", "text/plain", Location=to)


def test_redirects_are_followed_and_reported(server) -> None:
    server.routes["/old"] = redirect("/middle", 301)
    server.routes["/middle"] = redirect("new?x=1", 307)
    server.routes["/new"] = lambda h: send(h, 200, b"<p>arrived</p>")
    run = FakeRun()
    data = fetch(server.url("/old"), run=run)
    assert data["content"] == "arrived" and data["redirects"] == 2
    assert data["url"] == server.url("/old") and data["final_url"] == server.url("/new?x=1")
    assert run.stages().count("redirect") == 2 and run.stages().count("resolved") == 3


def test_a_redirect_to_a_refused_address_is_refused_at_the_hop() -> None:
    port = free_port_on("127.0.0.2", "127.0.0.1")
    allowed = LoopbackServer(host="127.0.0.2", port=port).start()
    refused = LoopbackServer(host="127.0.0.1", port=port).start()
    try:
        allowed.routes["/"] = redirect(refused.url("/admin"))
        refused.routes["/admin"] = lambda h: send(h, 200, b"secrets")
        error = failure(allowed.url("/"), allowPrivateNetworks=["127.0.0.2/32"])
        assert error.code == "blocked"
        assert error.message == (
            f"the redirect from {allowed.url('/')} to {refused.url('/admin')} is refused: "
            "127.0.0.1 is loopback (127.0.0.0/8); only public addresses may be fetched "
            '(to reach it on purpose, list its network under the tool\'s config, e.g. allowPrivateNetworks: ["127.0.0.1/32"])'
        )
        assert error.details["redirect"] is True
        assert len(allowed.seen) == 1 and refused.seen == []
    finally:
        allowed.stop()
        refused.stop()


@pytest.mark.parametrize(
    "location",
    ["http://169.254.169.254/latest/meta-data/", "http://[::ffff:169.254.169.254]/", "http://0xa9fea9fe/", "file:///etc/passwd", "http://internal.test/"],
)
def test_redirect_hops_get_the_full_check(server, location: str) -> None:
    server.routes["/r"] = redirect(location)
    error = failure(server.url("/r"), allowPrivateNetworks=["127.0.0.1/32"], resolver=FixedResolver({"internal.test": ["10.0.0.5"]}))
    assert error.code == "blocked", error


def test_redirect_to_a_host_outside_the_allowed_list_is_refused(server) -> None:
    server.routes["/r"] = redirect("https://evil.test/")
    resolver = FixedResolver({"site.test": ["127.0.0.1"], "evil.test": ["93.184.216.34"]})
    error = failure(f"http://site.test:{server.port}/r", allowedDomains=["site.test"], resolver=resolver)
    assert error.code == "blocked" and "evil.test is not on this tool's allowed list (site.test)" in error.message


def test_too_many_redirects(server) -> None:
    server.routes["/loop"] = redirect("/loop")
    error = failure(server.url("/loop"), maxRedirects=2)
    assert error.code == "fetch_failed" and "redirects more than 2 times" in error.message
    assert len(server.seen) == 3


def test_no_redirects_when_max_redirects_is_zero(server) -> None:
    server.routes["/r"] = redirect("/elsewhere")
    error = failure(server.url("/r"), maxRedirects=0)
    assert error.code == "fetch_failed" and len(server.seen) == 1


def test_redirects_rewrite_methods_and_drop_credentials_across_origins() -> None:
    port = free_port_on("127.0.0.2", "127.0.0.3")
    first = LoopbackServer(host="127.0.0.2", port=port).start()
    second = LoopbackServer(host="127.0.0.3", port=port).start()
    try:
        first.routes["/submit"] = redirect("/done", 303)
        first.routes["/done"] = redirect(second.url("/elsewhere"), 302)
        second.routes["/elsewhere"] = lambda h: send(h, 200, b"ok", "text/plain")
        data = fetch_args(
            {"url": first.url("/submit"), "method": "POST", "body": {"q": 1}, "headers": {"Authorization": "Bearer s3cret"}},
        )
        assert data["content"] == "ok"
        assert [(s.method, s.path) for s in first.seen] == [("POST", "/submit"), ("GET", "/done")]
        assert first.seen[0].body == b'{"q": 1}' and first.seen[0].headers["content-type"] == "application/json"
        assert first.seen[1].headers["authorization"] == "Bearer s3cret"  # same origin keeps it
        assert [(s.method, s.path) for s in second.seen] == [("GET", "/elsewhere")]
        assert "authorization" not in second.seen[0].headers and "content-type" not in second.seen[0].headers
    finally:
        first.stop()
        second.stop()


# ─── DNS rebinding: the connection goes to the vetted address ──────────────────────────


def test_rebinding_cannot_redirect_the_connection_on_the_wire() -> None:
    port = free_port_on("127.0.0.2", "127.0.0.1")
    vetted = LoopbackServer(host="127.0.0.2", port=port).start()
    target = LoopbackServer(host="127.0.0.1", port=port).start()
    try:
        vetted.routes["/"] = lambda h: send(h, 200, b"<p>the vetted server</p>")
        target.routes["/"] = lambda h: send(h, 200, b"<p>the rebinding target</p>")
        # First answer: an allowed address; every later answer: 127.0.0.1, which is not allowed.
        resolver = FixedResolver({"rebind.test": [["127.0.0.2"], ["127.0.0.1"]]})
        data = fetch(f"http://rebind.test:{port}/", resolver=resolver, allowPrivateNetworks=["127.0.0.2/32"])
        assert data["content"] == "the vetted server"
        assert target.seen == []
        assert vetted.seen[0].headers["host"] == f"rebind.test:{port}"
        assert resolver.calls == ["rebind.test"]  # resolved once: nothing else asks the resolver again
    finally:
        vetted.stop()
        target.stop()


def test_rebinding_from_public_to_loopback_never_reaches_loopback(server) -> None:
    server.routes["/"] = lambda h: send(h, 200, b"loopback secrets")
    connected: list[tuple[str, str]] = []

    def public_internet(request: httpx.Request) -> httpx.Response:
        connected.append((request.url.host, request.headers["host"]))
        return httpx.Response(200, headers={"content-type": "text/plain"}, content=b"public page")

    resolver = FixedResolver({"rebind.test": [["93.184.216.34"], ["127.0.0.1"]]})
    data = fetch(f"http://rebind.test:{server.port}/", resolver=resolver, transport=httpx.MockTransport(public_internet), allowPrivateNetworks=[])
    assert data["content"] == "public page"
    assert connected == [("93.184.216.34", f"rebind.test:{server.port}")]
    assert server.seen == [] and resolver.calls == ["rebind.test"]


def test_addresses_are_tried_in_order_and_all_are_vetted(server) -> None:
    server.routes["/"] = lambda h: send(h, 200, b"second address", "text/plain")
    resolver = FixedResolver({"multi.test": ["127.0.0.4", "127.0.0.1"]})
    # Nothing listens on 127.0.0.4: the fetch moves on to the next vetted address.
    data = fetch(f"http://multi.test:{server.port}/", resolver=resolver)
    assert data["content"] == "second address"
    refused = failure(f"http://multi.test:{server.port}/", resolver=FixedResolver({"multi.test": ["127.0.0.4", "10.0.0.1"]}))
    assert refused.code == "blocked" and server.seen[1:] == []


def test_ipv6_addresses_are_connected_to_in_brackets() -> None:
    six = LoopbackServer(host="::1").start()
    try:
        six.routes["/"] = lambda h: send(h, 200, b"over IPv6", "text/plain")
        resolver = FixedResolver({"six.test": ["::1"]})
        assert fetch(f"http://six.test:{six.port}/", resolver=resolver, allowPrivateNetworks=["::1/128"])["content"] == "over IPv6"
        assert fetch(six.url("/"), allowPrivateNetworks=["::1/128"])["final_url"] == f"http://[::1]:{six.port}/"
        assert six.seen[0].headers["host"] == f"six.test:{six.port}" and six.seen[1].headers["host"] == f"[::1]:{six.port}"
        assert failure(six.url("/")).code == "blocked"  # 127.0.0.0/8 does not open ::1
    finally:
        six.stop()


# ─── size cap ──────────────────────────────────────────────────────────────────────────


def flood(h: Any, *, total: int, content_length: int | None, chunked: bool = False, chunk: bytes = b"x" * 65536) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    if content_length is not None:
        h.send_header("Content-Length", str(content_length))
    if chunked:
        h.send_header("Transfer-Encoding", "chunked")
    h.send_header("Connection", "close")
    h.end_headers()
    sent = 0
    while sent < total:
        if chunked:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        else:
            h.wfile.write(chunk)
        sent += len(chunk)
    if chunked:
        h.wfile.write(b"0\r\n\r\n")


@pytest.mark.parametrize(
    ("shape", "expected_bytes", "truncated"),
    [
        ({"content_length": 10}, 10, False),  # a lying Content-Length: the framing ends the body at 10
        ({"content_length": None}, 100 * 1024, True),  # no Content-Length: read until close, capped
        ({"content_length": None, "chunked": True}, 100 * 1024, True),
        ({"content_length": 50 * MB}, 100 * 1024, True),  # honest but too big
    ],
)
def test_a_50_mb_body_stops_at_the_cap(server, shape: dict[str, Any], expected_bytes: int, truncated: bool) -> None:
    server.routes["/big"] = lambda h: flood(h, total=50 * MB, **shape)
    started = time.perf_counter()
    data = fetch(server.url("/big"), parseMode="raw", maxResponseSize="100KB")
    assert (data["bytes"], data["truncated"]) == (expected_bytes, truncated)
    assert len(data["content"]) == expected_bytes
    assert time.perf_counter() - started < 5
    if truncated:
        assert "[Cut off: the response is larger than this tool's 100 KB limit; only the start is shown.]" in as_result(data).model_text()


def bomb(wbits: int, megabytes: int = 32) -> bytes:
    """`megabytes` of zeros, compressed to about a thousandth of that."""
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(MB)
    return b"".join(packer.compress(block) for _ in range(megabytes)) + packer.flush()


@pytest.mark.parametrize(("encoding", "wbits"), [("gzip", 31), ("deflate", 15)])
def test_a_compression_bomb_stops_at_the_cap_after_decompression(server, encoding: str, wbits: int) -> None:
    payload = bomb(wbits)
    assert len(payload) < 64 * 1024  # small on the wire ...
    server.routes["/bomb"] = lambda h: send(h, 200, payload, "text/plain", Content_Encoding=encoding)
    tracemalloc.start()
    try:
        data = fetch(server.url("/bomb"), parseMode="raw", maxResponseSize="100KB")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data["bytes"] == 100 * 1024 and data["truncated"] is True  # ... and capped once inflated
    assert peak < 8 * MB, f"peak memory {peak / MB:.1f} MB: decompression was not bounded"
    assert server.seen[0].headers["accept-encoding"] == "gzip, deflate"


def test_raw_deflate_and_multi_member_gzip_decode(server) -> None:
    raw = zlib.compressobj(wbits=-15)
    raw_deflate = raw.compress(b"raw deflate body") + raw.flush()
    server.routes["/raw"] = lambda h: send(h, 200, raw_deflate, "text/plain", Content_Encoding="deflate")
    server.routes["/multi"] = lambda h: send(h, 200, gzip.compress(b"one ") + gzip.compress(b"two"), "text/plain", Content_Encoding="gzip")
    assert fetch(server.url("/raw"), parseMode="raw")["content"] == "raw deflate body"
    assert fetch(server.url("/multi"), parseMode="raw")["content"] == "one two"


def test_an_unsupported_content_encoding_fails_clearly(server) -> None:
    server.routes["/br"] = lambda h: send(h, 200, b"\x0b\x02\x80hello\x03", "text/plain", Content_Encoding="br")
    error = failure(server.url("/br"))
    assert error.code == "fetch_failed" and "Content-Encoding 'br', which is not supported" in error.message


def test_a_body_shorter_than_its_content_length_is_a_failure(server) -> None:
    def short(h: Any) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "1000")
        h.send_header("Connection", "close")
        h.end_headers()
        h.wfile.write(b"only this")

    server.routes["/short"] = short
    error = failure(server.url("/short"))
    assert error.code == "fetch_failed" and "broke off after 9 bytes" in error.message


# ─── timeouts ──────────────────────────────────────────────────────────────────────────


def test_a_dripping_server_hits_the_total_timeout(server) -> None:
    def drip(h: Any) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "1000")
        h.send_header("Content-Type", "text/plain")
        h.end_headers()
        for _ in range(1000):
            h.wfile.write(b"x")
            h.wfile.flush()
            time.sleep(0.1)  # faster than the read timeout: only the total limit can stop it

    server.routes["/drip"] = drip
    started = time.perf_counter()
    error = failure(server.url("/drip"), timeout="1s")
    elapsed = time.perf_counter() - started
    assert error.code == "fetch_timeout"
    assert "no complete response within 1s, this tool's total time limit (stopped while reading the body;" in error.message
    assert 0 < error.details["bytes"] < 20
    assert 0.9 < elapsed < 2.5


def test_a_silent_server_hits_the_timeout(server) -> None:
    server.routes["/silent"] = lambda h: time.sleep(3)
    started = time.perf_counter()
    error = failure(server.url("/silent"), timeout="500ms")
    assert error.code == "fetch_timeout" and time.perf_counter() - started < 2


# ─── requests ──────────────────────────────────────────────────────────────────────────


def test_headers_methods_and_bodies(server) -> None:
    server.routes["/echo"] = lambda h: send(h, 200, b"{}", "application/json")
    fetch_args(
        {"url": server.url("/echo"), "method": "PUT", "body": "plain text", "headers": {"X-Trace": "abc", "user-agent": "mine/1"}},
        defaultHeaders={"X-Team": "docs", "X-Trace": "default"},
        parseMode="json",
    )
    seen = server.seen[0]
    assert seen.method == "PUT" and seen.body == b"plain text"
    assert seen.headers["x-team"] == "docs" and seen.headers["x-trace"] == "abc" and seen.headers["user-agent"] == "mine/1"
    assert seen.headers["accept"].startswith("application/json")
    head = fetch_args({"url": server.url("/echo"), "method": "HEAD"})
    assert head["status_code"] == 200 and head["content"] == "" and head["bytes"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"headers": {"Host": "internal.example"}}, "header 'Host' is set by the engine"),
        ({"headers": {"Proxy-Authorization": "x"}}, "header 'Proxy-Authorization' is set by the engine"),
        ({"headers": {"X-Bad": "a\r\nInjected: 1"}}, "contains a line break"),
        ({"method": "GET", "body": "x"}, "a GET request carries no body"),
        ({"method": "DELETE"}, "method DELETE is not allowed; use one of GET, HEAD"),
    ],
)
def test_bad_request_arguments_are_refused_before_connecting(server, args: dict[str, Any], message: str) -> None:
    with pytest.raises(StepFailure) as caught:
        fetch_args({"url": server.url("/"), **args}, allowedMethods=["GET", "HEAD"])
    assert caught.value.code == "invalid_arguments" and message in caught.value.message
    assert server.seen == []


def test_proxy_environment_variables_are_ignored(server, monkeypatch) -> None:
    proxy = LoopbackServer().start()
    try:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy.url("/"))
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        server.routes["/"] = lambda h: send(h, 200, b"direct", "text/plain")
        assert fetch(server.url("/"))["content"] == "direct"
        assert proxy.seen == [] and len(server.seen) == 1
    finally:
        proxy.stop()


# ─── HTTPS: connect to the vetted IP, verify the certificate against the name ───────────


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, Path]:
    import shutil

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not available to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=skillyard test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", *ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=secure.test")
    (d / "ext.cnf").write_text("subjectAltName=DNS:secure.test\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n")
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "leaf.pem", "-days", "2", "-extfile", "ext.cnf")
    return {"ca": d / "ca.pem", "cert": d / "leaf.pem", "key": d / "leaf.key"}


@pytest.mark.slow
def test_https_connects_to_the_vetted_ip_with_sni_and_verifies_the_name(certificates) -> None:
    import ssl

    names: list[str | None] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates["cert"], certificates["key"])
    context.sni_callback = lambda sock, name, ctx: names.append(name)
    tls = LoopbackServer(ssl_context=context).start()
    try:
        tls.routes["/"] = lambda h: send(h, 200, b"<p>over TLS</p>")
        trust = ssl.create_default_context(cafile=str(certificates["ca"]))
        resolver = FixedResolver({"secure.test": ["127.0.0.1"], "wrong.test": ["127.0.0.1"]})
        data = fetch(f"https://secure.test:{tls.port}/", resolver=resolver, verify=trust)
        assert data["content"] == "over TLS" and data["final_url"] == f"https://secure.test:{tls.port}/"
        assert names == ["secure.test"] and tls.seen[0].headers["host"] == f"secure.test:{tls.port}"
        error = failure(f"https://wrong.test:{tls.port}/", resolver=resolver, verify=trust)
        assert error.code == "fetch_failed" and "certificate" in error.message.lower()
    finally:
        tls.stop()


# ─── end to end: run-workflow as a subprocess ──────────────────────────────────────────


@pytest.mark.slow
def test_run_workflow_fetches_a_page_end_to_end(tmp_path, server) -> None:
    import shutil
    import sys

    server.routes["/doc"] = lambda h: send(h, 200, PAGE)
    (tmp_path / "tools.yaml").write_text(
        "tools:\n"
        "  readPage:\n"
        "    type: fetch\n"
        "    description: Read a public web page as Markdown.\n"
        "    config:\n"
        "      parseMode: markdown\n"
        "      timeout: 10s\n"
        "      maxResponseSize: 200KB\n"
        "      allowPrivateNetworks: [\"127.0.0.0/8\"]\n"
    )
    script = shutil.which("run-workflow")
    command = [script] if script else [sys.executable, "-c", "import sys; from engine.cli.main import run_workflow_main; sys.exit(run_workflow_main())"]
    ok = subprocess.run([*command, "readPage", "--arg", f"url={server.url('/doc')}", "--dir", str(tmp_path), "--quiet"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert data["status_code"] == 200 and data["format"] == "markdown" and "| alpha | 1 |" in data["content"]
