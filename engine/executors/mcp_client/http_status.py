"""What a Streamable HTTP server answered our requests: the SDK reports a 401 only as "Server
returned an error response", so the connection watches the status itself (an httpx Auth
flow: the client's public hook that sees every response) to say `unauthorized`."""

from __future__ import annotations

from collections.abc import Generator

import httpx2

REFUSALS = {401: "401 Unauthorized", 403: "403 Forbidden"}


class StatusWatch(httpx2.Auth):
    """Adds nothing to a request; remembers the last refusal (401/403) among the answers."""

    def __init__(self) -> None:
        self.refused: int | None = None

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        response = yield request
        if response.status_code in REFUSALS:
            self.refused = response.status_code
