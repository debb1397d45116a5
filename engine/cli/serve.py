"""`skillyard serve` (HTTP/SSE service + web page) and `skillyard mcp` (MCP over stdio).

Both need the `server` extra: `pip install 'skillyard[server]'`.
"""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any, Sequence

from ..errors import ConfigError, UsageError
from .common import EXIT_OK, EXIT_USAGE, SETTINGS_STILL_APPLY, add_backend_argument, open_engine

SERVICE_GC_THRESHOLD = 10_000  # allocations between two collections of the youngest generation (see settle_heap)


def add_serve_parsers(commands: Any) -> None:
    serve = commands.add_parser("serve", help="run the HTTP/SSE service, the web page and /mcp")
    serve.add_argument("--dir", default=".", help="project directory (default: current directory)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to bind (default 127.0.0.1; any other needs API keys in SKILLYARD_API_KEYS)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--no-store", action="store_true", help="do not record runs in the run store" + SETTINGS_STILL_APPLY)
    serve.add_argument("--access-log", action="store_true", help="log every request to stderr")
    serve.add_argument("--approval-timeout", type=float, default=600.0, metavar="SECONDS",
                       help="deny a confirmation nobody answered within this time (default 600)")
    serve.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                       help="serve Prometheus metrics on 127.0.0.1:PORT (a port of its own, without API keys)")
    serve.add_argument("--reload", action="store_true",
                       help="relink when the project's files change (a broken tool keeps its last good version)")
    add_backend_argument(serve)
    serve.set_defaults(handler=cmd_serve)
    mcp = commands.add_parser("mcp", help="serve the enabled tools to an MCP client over stdio")
    mcp.add_argument("--dir", default=".", help="project directory (default: current directory)")
    mcp.add_argument("--yes", action="store_true",
                     help="approve tools that ask for confirmation (default: ask the client, deny if it cannot answer)")
    mcp.add_argument("--no-store", action="store_true", help="do not record runs in the run store" + SETTINGS_STILL_APPLY)
    add_backend_argument(mcp)
    mcp.set_defaults(handler=cmd_mcp)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _need(module: str, command: str) -> None:
    try:
        __import__(module)
    except ImportError:
        raise UsageError(f"`skillyard {command}` needs the {module} package: pip install 'skillyard[server]'") from None


def _open(ns: argparse.Namespace) -> Any:
    from ..logging import configure_logging
    engine = open_engine(ns)
    settings = engine.project.settings.logging
    configure_logging(settings.format, settings.level, engine.project.redactor)
    return engine


def cmd_serve(ns: argparse.Namespace) -> int:
    _need("fastapi", "serve")
    _need("uvicorn", "serve")
    import uvicorn

    from ..server.auth import KeyConfigError, is_loopback_host, load_api_keys

    if not 0 <= ns.port <= 65535:
        raise UsageError(f"--port {ns.port}: use a port between 0 and 65535")
    try:
        engine = _open(ns)
    except ConfigError as exc:
        return _config_failed(exc)
    try:
        keys = load_api_keys(settings=engine.project.settings)
    except KeyConfigError as exc:
        engine.close()
        raise UsageError(f"API keys: {exc}") from None
    if not keys and not is_loopback_host(ns.host):
        engine.close()
        _say(f"error: refusing to serve on {ns.host} without API keys: anyone who can reach it could run every tool.\n"
             "  Set SKILLYARD_API_KEYS=admin:LONG_RANDOM_KEY,caller:OTHER_KEY (or server.api_keys in config/engine.yaml),\n"
             "  or bind a loopback address: --host 127.0.0.1")
        return EXIT_USAGE
    from ..server import create_app

    try:
        if ns.metrics_port is not None and not 0 <= ns.metrics_port <= 65535:
            raise UsageError(f"--metrics-port {ns.metrics_port}: use a port between 0 and 65535")
        try:
            app = create_app(engine, api_keys=keys, approval_timeout=ns.approval_timeout, metrics_port=ns.metrics_port)
        except OSError as exc:  # the metrics port is taken
            if ns.metrics_port is None:
                raise
            raise UsageError(f"--metrics-port {ns.metrics_port}: cannot listen on 127.0.0.1:{ns.metrics_port} "
                             f"({exc.strerror or exc}); choose another port") from None
        where = f"http://{'[' + ns.host + ']' if ':' in ns.host else ns.host}:{ns.port}"
        enabled = sum(1 for t in engine.project.tools.values() if t.enabled)
        _say(f"skillyard: serving {enabled} tool(s) from {engine.project.root} on {where}  "
             f"(web page {where}/ · API docs {where}/docs · MCP {where}/mcp)")
        if keys:
            _say(f"skillyard: {len(keys.entries)} API key(s) configured; requests need Authorization: Bearer KEY")
        else:
            _say("skillyard: no API keys configured — serving on loopback only, and every local request acts as admin")
        observability = app.state.observability
        if observability is not None and observability.metrics_port is not None:
            _say(f"skillyard: Prometheus metrics on http://127.0.0.1:{observability.metrics_port}/metrics")
        for name, issues in sorted(engine.project.broken.items()):
            _say(f"skillyard: tool {name!r} cannot run until its configuration is fixed:")
            for issue in issues:
                _say(f"  {issue}")
        if ns.reload:
            from ..server.watch import ProjectWatcher

            ProjectWatcher(engine, _say).start()
            _say("skillyard: --reload: watching the project's YAML and Python files")
        if engine.store is None:
            _say("skillyard: the run store is off — run history and replay cover this process's recent runs only")
        level = engine.project.settings.logging.level
        settle_heap()
        uvicorn.run(app, host=ns.host, port=ns.port, log_level=level, access_log=ns.access_log,
                    timeout_graceful_shutdown=3, server_header=False)
    finally:
        engine.close()
    return EXIT_OK


def settle_heap() -> None:
    """Set the garbage collector for a long-running service. Its heap is mostly what it loaded
    at start (project, schemas, templates, modules): frozen, full collections no longer walk
    it. A request's objects, and the recent runs the hub keeps, live a few hundred requests at
    most: with a youngest generation of SERVICE_GC_THRESHOLD allocations (Python's default
    is 700) most die before a collection looks at them, so they are neither walked in every
    young collection nor promoted into the old generation, whose growth sets off full ones."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(SERVICE_GC_THRESHOLD, *gc.get_threshold()[1:])


def cmd_mcp(ns: argparse.Namespace) -> int:
    import asyncio

    _need("mcp", "mcp")
    from ..server.mcp_stdio import serve_stdio

    try:
        engine = _open(ns)
    except ConfigError as exc:
        return _config_failed(exc)
    try:
        asyncio.run(serve_stdio(engine, approve_all=ns.yes))
    except KeyboardInterrupt:
        pass
    finally:
        engine.close()
    return EXIT_OK


def _config_failed(error: ConfigError) -> int:
    for issue in error.issues:
        _say(str(issue))
    count = len(error.issues)
    _say(f"{count} problem{'s' if count != 1 else ''} found; nothing was started.")
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m engine.cli.serve serve|mcp …` (the same as `skillyard serve|mcp …`)."""
    parser = argparse.ArgumentParser(prog="skillyard", description="Serve a skillyard project over HTTP or MCP.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_serve_parsers(commands)
    ns = parser.parse_args(argv)
    try:
        return int(ns.handler(ns))
    except UsageError as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
