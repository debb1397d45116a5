"""The client under test of the official MCP conformance suite (`@modelcontextprotocol/conformance`).

The suite starts a server for one scenario and runs `python tests/mcp_conformance_client.py URL`
with MCP_CONFORMANCE_SCENARIO set. This writes a project whose config/mcp.yaml names that URL
and goes through skillyard's own doors (`skillyard mcp list`, `skillyard call --yes`), so the
scenario exercises the client the engine really uses: connection, routing, router, elicitation.

(No tests here; tests/mcp/test_mcp_client_conformance.py runs the suite with it.)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from engine.cli.main import main

# What each scenario's server offers, and the call that exercises it (None: connect and list only).
CALLS: dict[str, tuple[str, dict[str, object]] | None] = {
    "initialize": None,
    "tools_call": ("add_numbers", {"a": 2, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


def run(url: str, scenario: str) -> int:
    if scenario not in CALLS:
        print(f"scenario {scenario!r} is not one this client plays: {', '.join(CALLS)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="skillyard-conformance-") as tmp:
        root = Path(tmp)
        (root / "config").mkdir()
        (root / "tools.yaml").write_text("tools: {}\n", encoding="utf-8")
        servers = {"mcpServers": {"peer": {"url": url, "prefix": "", "timeout": "20s", "startup_timeout": "20s"}}}
        (root / "config" / "mcp.yaml").write_text(json.dumps(servers), encoding="utf-8")
        call = CALLS[scenario]
        if call is None:
            return main(["mcp", "list", "--dir", str(root)])
        tool, args = call
        return main(["call", tool, "--args-json", json.dumps(args), "--dir", str(root), "--no-store", "--yes"])


if __name__ == "__main__":
    sys.exit(run(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
