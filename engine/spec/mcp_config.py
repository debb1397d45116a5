"""`config/mcp.yaml` (or `config/mcp.json`): MCP servers whose tools become skillyard tools.

The file has the `mcpServers` shape desktop clients use, so a block can be pasted as is:
stdio servers (`command`, `args`, `env`, `cwd`) and Streamable HTTP servers (`url`,
`headers`), plus skillyard's own keys per server (enabled, include/exclude, prefix, confirm,
timeout, startup_timeout, sampling). References (`${env:…}`) are read like everywhere else.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any, Callable

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from ..errors import IssueCollector
from .common import Duration, _Spec
from .references import Resolver
from .yaml_source import SourceMap, YamlLoadError, load_yaml_file

SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,48}$")


class McpSamplingSpec(_Spec):
    """Who answers a server's sampling requests, and how many it may make (`sampling: mock` is
    short for `sampling: {model: mock}`)."""

    model: str = Field(description="A model of config/models.yaml that answers the server's sampling requests.")
    max_requests: int = Field(default=3, ge=1, le=100, description="Most sampling requests one tool call may make, "
                              "and most in flight at once for the server; the next one is refused.")
    max_input_chars: int = Field(default=100_000, ge=1, le=10_000_000, description="Most characters one sampling "
                                 "request's messages (and system prompt) may hold together; a bigger one is refused "
                                 "without a model call: the model's context is not the server's to fill.")


class McpServerSpec(_Spec):
    """One MCP server: a command to start (stdio) or a URL to connect to (Streamable HTTP)."""

    command: str | None = Field(default=None, description="stdio: the program to start.")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="stdio: its environment (plus PATH; nothing else of ours).")
    cwd: str | None = Field(default=None, description="stdio: its working directory (relative: to the project).")
    url: str | None = Field(default=None, description="Streamable HTTP: the endpoint, e.g. http://127.0.0.1:8000/mcp.")
    headers: dict[str, str] = Field(default_factory=dict, description="Streamable HTTP: headers sent with every request.")
    type: str | None = Field(default=None, description="Optional, as desktop clients write it: stdio, http or streamable-http.")
    enabled: bool = True
    include: list[str] = Field(default_factory=list, description="Globs of the server's tool names to use (empty: all).")
    exclude: list[str] = Field(default_factory=list, description="Globs of tool names to leave out; wins over include.")
    prefix: str | None = Field(default=None, description="Put before each tool's name (default: `<server>_`).")
    confirm: list[str] = Field(default_factory=list, description="Globs of tool names (as the server names them) that need approval.")
    timeout: Duration | None = Field(default=None, description="Time limit of one call (default: limits.tool_timeout).")
    startup_timeout: Duration = Field(default=30.0, description="Time to start, initialize and list tools.")
    sampling: McpSamplingSpec | None = Field(default=None, description="A model of config/models.yaml that answers the "
                                             "server's sampling requests, or `{model, max_requests}` (default: declined).")

    @field_validator("sampling", mode="before")
    @classmethod
    def _sampling_model(cls, value: Any) -> Any:
        return {"model": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServerSpec":
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a stdio server) or `url` (a Streamable HTTP server)")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        if self.type not in (None, "stdio", "http", "streamable-http", "streamableHttp"):
            raise ValueError(f"type {self.type!r} is not supported: use stdio or http (Streamable HTTP)")
        if self.prefix is not None and not re.match(r"^[A-Za-z0-9_-]{0,32}$", self.prefix):
            raise ValueError(f"prefix {self.prefix!r} may only hold letters, digits, '_' and '-' (at most 32)")
        return self

    def tool_prefix(self, server: str) -> str:
        return f"{server}_" if self.prefix is None else self.prefix


_ADAPTER = TypeAdapter(McpServerSpec)


def mcp_files(root: Path) -> list[Path]:
    return [p for p in (root / "config" / "mcp.yaml", root / "config" / "mcp.yml", root / "config" / "mcp.json") if p.is_file()]


def load_mcp_servers(file: Path, display: str, resolver: Resolver, issues: IssueCollector,
                     report_pydantic_errors: Callable[..., None]) -> list[tuple[str, McpServerSpec, SourceMap]]:
    """The servers of `config/mcp.yaml`, each validated on its own (problems at their line, written
    by the loader's `report_pydantic_errors`). `display`: the file as problems name it. JSON is
    YAML, so one reader serves both."""
    try:
        data, source = load_yaml_file(file, display)
    except YamlLoadError as exc:
        issues.issues.append(exc.issue)
        return []
    if data is None:
        return []
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        issues.add(source.locate(()), "expected a mapping with an `mcpServers:` key", "start the file with `mcpServers:`, each server a name under it")
        return []
    for key in data:
        if key != "mcpServers":
            issues.add(source.locate((key,), key=True), f"unknown top-level key {key!r}", "only `mcpServers:` is allowed here")
    servers: list[tuple[str, McpServerSpec, SourceMap]] = []
    for name, raw in (data.get("mcpServers") or {}).items():
        path = ("mcpServers", name)
        if not SERVER_NAME_RE.match(str(name)):
            issues.add(source.locate(path, key=True), f"invalid MCP server name {name!r}", "use 1-48 letters, digits, '_' or '-'")
            continue
        raw, readable = resolver.resolve(raw, source.locate, issues, short_form=True, path=path)
        if not readable:
            continue
        try:
            servers.append((str(name), _ADAPTER.validate_python(raw), source))
        except ValidationError as exc:
            report_pydantic_errors(exc.errors(), source, path, raw, issues)
    return servers


def check_sampling_models(servers: list[tuple[str, McpServerSpec, SourceMap]], models: Collection[str],
                          issues: IssueCollector) -> None:
    """`sampling:` must name a model of config/models.yaml: a load error at its line otherwise."""
    for name, spec, source in servers:
        model = spec.sampling.model if spec.sampling is not None else None
        if model is not None and model not in models:
            close = difflib.get_close_matches(model, list(models), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known models: {', '.join(sorted(models)[:10]) or 'none'}"
            issues.add(source.locate(("mcpServers", name, "sampling")),
                       f"MCP server {name!r}: sampling model {model!r} is not a model of config/models.yaml", hint)


def as_dict(spec: McpServerSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json")


__all__ = ["McpSamplingSpec", "McpServerSpec", "load_mcp_servers", "mcp_files"]
