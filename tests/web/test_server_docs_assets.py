"""`/docs` from the package's own files (issue 28, item 10): the page that shares its origin with
the web page keeping the API key in `localStorage` loads no script, stylesheet or image from
another host, works offline, and carries the root path when mounted or served under one.

In process for every layout; once in headless Chromium against a real uvicorn serving the app
mounted in a parent, recording every request the page makes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import subprocess
import sys
import textwrap
import time
import tomllib
from fnmatch import fnmatch
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import pytest

import child_processes

pytest.importorskip("fastapi")
import httpx  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Mount  # noqa: E402

from engine import Engine  # noqa: E402
from server_helpers import free_port, write_project  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "engine" / "server" / "static"
KEYS = "ops:admin:ops-admin-key-0123456789abcdef0123"
CONTENT_TYPES = {".js": ("text/javascript", "application/javascript"), ".css": ("text/css",), ".png": ("image/png",),
                 ".json": ("application/json",)}


def _fastapi_mount(app: Any) -> Any:
    parent = FastAPI()
    parent.mount("/skillyard", app)
    return parent


# name: (wrap the service app, the transport's root_path, the prefix of every URL of the app)
LAYOUTS: dict[str, tuple[Callable[[Any], Any], str, str]] = {
    "root": (lambda app: app, "", ""),
    "root-path": (lambda app: app, "/api", "/api"),
    "mount": (lambda app: Starlette(routes=[Mount("/skillyard", app=app)]), "", "/skillyard"),
    "root-path-and-mount": (_fastapi_mount, "/api", "/api/skillyard"),
}


class _Urls(HTMLParser):
    """Every URL an HTML page would load or point to: src, href, and data-*-url attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is not None and (name in ("src", "href", "srcset", "action") or name.endswith("-url")):
                self.urls.append((tag, name, value))


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Any]:
    engine = Engine.from_dir(write_project(tmp_path))
    yield engine
    engine.close()


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_docs_loads_every_asset_from_this_app_under_its_root_path(engine: Any, layout: str) -> None:
    from engine.server import create_app

    wrap, root_path, prefix = LAYOUTS[layout]
    app = wrap(create_app(engine, api_keys=KEYS, mcp=False))

    async def go() -> tuple[httpx.Response, dict[str, httpx.Response]]:
        transport = httpx.ASGITransport(app=app, root_path=root_path)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
            page = await http.get(f"{prefix}/docs")  # public, like the page: no key
            parser = _Urls()
            parser.feed(page.text)
            for _, _, url in parser.urls:  # checked before any is fetched
                parts = urlsplit(url)
                assert not parts.scheme and not parts.netloc and url.startswith(f"{prefix}/"), url  # this host, under the prefix
            return page, {url: await http.get(url) for _, _, url in parser.urls}

    page, assets = asyncio.run(go())
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert len(assets) == 5, assets  # the stylesheet, the icon, the document, Swagger UI and its start-up
    for url, answer in assets.items():
        assert answer.status_code == 200, (url, answer.status_code)
        wanted = CONTENT_TYPES[Path(urlsplit(url).path).suffix]
        assert answer.headers["content-type"].split(";")[0] in wanted, (url, answer.headers["content-type"])
    policy = page.headers.get("content-security-policy", "")  # and nothing else may load, should a file ask
    assert "script-src 'self';" in policy and "http" not in policy and "'unsafe-eval'" not in policy
    spec = assets[f"{prefix}/openapi.json"].json()
    if prefix:  # "Try it out" calls the API under the prefix
        assert spec["servers"][0]["url"] == prefix
    assert "SwaggerUIBundle" in assets[f"{prefix}/static/swagger/swagger-ui-bundle.js"].text


def test_the_vendored_swagger_ui_is_unchanged_and_shipped_in_the_wheel() -> None:
    """The digests recorded in static/swagger/README.md are the files' (an update records its
    own), and pyproject's package-data covers every file under static/ (a wheel without them
    would serve /docs with 404s)."""
    recorded = dict((name, digest) for digest, name in
                    re.findall(r"^\s+([0-9a-f]{64})  (\S+)$", (STATIC / "swagger" / "README.md").read_text(), re.M))
    assert set(recorded) == {"swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"}
    for name, digest in recorded.items():
        assert hashlib.sha256((STATIC / "swagger" / name).read_bytes()).hexdigest() == digest, name
    assert not re.search(r"https?://", (STATIC / "docs.js").read_text())
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["engine.server"]
    for path in STATIC.rglob("*"):
        if path.is_file():
            relative = path.relative_to(STATIC.parent).as_posix()
            assert any(fnmatch(relative, glob) and relative.count("/") == glob.count("/") for glob in globs), relative


# ─── in a browser, offline ───────────────────────────────────────────────────────────────

EMBED = """
    import os

    from starlette.applications import Starlette
    from starlette.routing import Mount

    from engine import Engine
    from engine.server import create_app

    service = create_app(Engine.from_dir(os.environ["DOCS_PROJECT"]), api_keys=os.environ["DOCS_KEYS"], mcp=False)
    app = Starlette(routes=[Mount("/skillyard", app=service)], lifespan=lambda _: service.router.lifespan_context(service))
"""


@contextlib.contextmanager
def _embedded_server(tmp_path: Path) -> Iterator[str]:
    """uvicorn serving a parent app with the service mounted at /skillyard; its base URL."""
    (tmp_path / "embed.py").write_text(textwrap.dedent(EMBED))
    port = free_port()
    env = {**os.environ, "DOCS_PROJECT": str(write_project(tmp_path / "project")), "DOCS_KEYS": KEYS}
    log = (tmp_path / "uvicorn.log").open("w")
    process = child_processes.start([sys.executable, "-m", "uvicorn", "embed:app", "--app-dir", str(tmp_path),
                                     "--host", "127.0.0.1", "--port", str(port)],
                                    stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (tmp_path / "uvicorn.log").read_text()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/skillyard/healthz", timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        child_processes.stop(process)
        log.close()


@pytest.mark.slow
def test_docs_renders_in_chromium_with_every_request_to_this_host(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    sync_api = pytest.importorskip("playwright.sync_api")
    from test_web_ui import ARGS, CHROMIUM

    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with _embedded_server(tmp_path) as base, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = browser.new_page()
            requested: list[str] = []
            problems: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            here = urlsplit(base).netloc  # offline: a request for another host is recorded and never leaves
            page.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).netloc == here else route.abort())
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
            page.goto(f"{base}/skillyard/docs")
            page.wait_for_selector(".opblock-summary-path", timeout=20000)  # the operations, read from /openapi.json
            paths = page.eval_on_selector_all(".opblock-summary-path", "nodes => nodes.map(n => n.textContent)")
            servers = page.eval_on_selector_all(".servers select option", "nodes => nodes.map(n => n.value)")
        finally:
            browser.close()
    assert "/v1/tools/{name}/call" in [p.replace("\u200b", "") for p in paths]
    assert servers == ["/skillyard"]  # "Try it out" calls the API where it is mounted
    assert not problems, problems  # no script error, no Content-Security-Policy violation
    assert {urlsplit(url).netloc for url in requested} == {urlsplit(base).netloc}, requested
    loaded = {urlsplit(url).path for url in requested}
    assert {"/skillyard/docs", "/skillyard/static/swagger/swagger-ui-bundle.js", "/skillyard/static/swagger/swagger-ui.css",
            "/skillyard/static/docs.js", "/skillyard/openapi.json"} <= loaded
