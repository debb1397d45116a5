"""The built-in `fetch` tool type: read a web page or API safely.

    config.py    FetchConfig (the YAML `config:`), input schema, description
    guard.py     the SSRF guard: schemes, credentials, domain lists, address ranges, resolving
    parse.py     bounded decompression, charset detection, HTML → Markdown, JSON
    executor.py  FetchExecutor: request, redirects hop by hop, size cap, timeouts, result
"""

from __future__ import annotations

from typing import Any

from ...runtime.contracts import ToolType
from .config import FetchConfig, description, input_schema, private_networks
from .executor import FetchExecutor, FetchResult
from .guard import NetworkPolicy, Refused, refusal_reason, system_resolver, vet

# What a successful fetch returns: for checking the data flow out of a fetch step.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string"},
        "final_url": {"type": "string"},
        "status_code": {"type": "integer"},
        "reason": {"type": "string"},
        "content_type": {"type": ["string", "null"]},
        "charset": {"type": ["string", "null"]},
        "bytes": {"type": "integer"},
        "truncated": {"type": "boolean"},
        "max_bytes": {"type": "integer"},
        "redirects": {"type": "integer"},
        "duration_ms": {"type": "number"},
        "format": {"enum": ["markdown", "text", "json", "binary"]},
        "content": {},
        "title": {"type": "string"},
        "degraded": {"type": "boolean"},
        "degraded_reason": {"type": "string"},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["url", "final_url", "status_code", "content_type", "bytes", "truncated", "duration_ms", "format", "content"],
}

FETCH = ToolType(
    name="fetch",
    config_model=FetchConfig,
    input_schema=input_schema,
    description=description,
    create=FetchExecutor,
    output_schema=lambda config: OUTPUT_SCHEMA,
    runs_code=False,
    private_networks=private_networks,
)

__all__ = [
    "FETCH",
    "OUTPUT_SCHEMA",
    "FetchConfig",
    "FetchExecutor",
    "FetchResult",
    "NetworkPolicy",
    "Refused",
    "refusal_reason",
    "system_resolver",
    "vet",
]
