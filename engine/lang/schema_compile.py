"""Every JSON Schema validator the engine builds is built here, and none retrieves anything.

Both validator libraries fetch what a schema names by default: jsonschema-rs GETs an unknown
`$schema` and a remote `$ref` over HTTP, Python's `jsonschema` a remote `$ref` (with a
warning). A caller's `output_schema` or an MCP server's `inputSchema` naming
`http://169.254.169.254/…` would make the server fetch it and tell, by its answer, what it
found. So a `$schema` must be one of the drafts both libraries carry (`schema_uri_problem`,
checked before either sees the schema), and every compile gets a retriever that refuses.
"""

from __future__ import annotations

from typing import Any, NoReturn

import jsonschema
import jsonschema_rs
import referencing
import referencing.exceptions
from jsonschema_specifications import REGISTRY as _SPECIFICATIONS  # type: ignore[import-untyped]  # the package ships no type hints

# The meta-schema URIs both libraries carry, written as the specifications write them.
_DRAFTS = ("https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2019-09/schema",
           "http://json-schema.org/draft-07/schema", "http://json-schema.org/draft-06/schema",
           "http://json-schema.org/draft-04/schema")
KNOWN_DRAFTS = frozenset(_DRAFTS) | frozenset(uri + "#" for uri in _DRAFTS)


class _RetrievalRefused(Exception):
    """A schema named a document outside itself; the engine never fetches one. (jsonschema-rs
    wraps it in its own error: it never reaches a caller as such.)"""


def _refuse(uri: str) -> NoReturn:
    raise _RetrievalRefused(f"{uri!r} is outside this schema, and schemas are never fetched; "
                           "use a local reference (#/$defs/…) or one of the known $schema drafts")


def _no_resource(uri: str) -> NoReturn:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs init


_RS_OFFLINE = jsonschema_rs.Registry([], retriever=_refuse)
# The drafts' own meta-schemas (the reference's meta-check needs them), nothing retrieved.
_PY_OFFLINE: referencing.Registry[Any] = _SPECIFICATIONS.combine(
    referencing.Registry(retrieve=_no_resource))  # type: ignore[call-arg]  # attrs init


def schema_uri_problem(value: Any) -> str | None:
    """Why `value`, found under a `$schema` key, is refused (None: a known draft)."""
    if value in KNOWN_DRAFTS:
        return None
    return (f"$schema {value!r} is not a known draft; write {_DRAFTS[0]!r} (or another draft's URI) "
            "or leave $schema out (schemas are never fetched)")


# jsonschema-rs's default regex engine falls back to backtracking for look-arounds and
# back-references ((?=(a+)+$)b took 1.3 s on 30,000 characters): every pattern runs on the
# linear engine instead, so no text a caller, a model or a server sends can make it backtrack.
_LINEAR_PATTERNS = jsonschema_rs.RegexOptions()


def fast_validator(schema: Any, **options: Any) -> Any:
    """jsonschema-rs's validator for `schema` (it gives every verdict), with a refusing retriever
    and patterns matched in linear time."""
    return jsonschema_rs.validator_for(schema, retriever=_refuse, pattern_options=_LINEAR_PATTERNS, **options)


def meta_is_valid(schema: Any) -> bool:
    """jsonschema-rs's meta-schema verdict on `schema`, with a refusing registry."""
    return bool(jsonschema_rs.meta.is_valid(schema, registry=_RS_OFFLINE))


def reference_validator(cls: Any, schema: Any) -> Any:
    """An instance of `cls` (a `jsonschema` validator class) on `schema` that resolves only the
    drafts' own meta-schemas."""
    validator: jsonschema.protocols.Validator = cls(schema, registry=_PY_OFFLINE)
    return validator
