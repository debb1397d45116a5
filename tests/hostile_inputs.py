"""A corpus of hostile caller inputs, and the small project they are aimed at. Every door's
tests may drive it (tests/security/test_hostile_doors.py runs it against each one).

(No tests here; the name keeps it beside the tests that import it.)

A caller holds a key with the caller role: it names a tool and its arguments, or asks an agent
for an answer matching an `output_schema` it writes itself. Each input below is one of those,
built to hurt:

| input | what it sends | what must happen |
|---|---|---|
| `backtracking-arguments` | `{"email": "aaaa…!"}` to a tool whose YAML pattern backtracks in Python's `re` | `invalid_arguments`, "does not match", explained at once |
| `backtracking-output-schema` | an `output_schema` whose `const` fails its own `^(a+)+$` | `invalid_output`, "does not match", at once |
| `ref-fan-out` | 2.6 KB of `output_schema`: ten `$ref`s per level, six levels (a million nodes followed) | refused, naming the `$ref` fan-out limit |
| `schema-url` | `$schema` (and a remote `$ref`) naming a loopback "metadata" URL | refused, "not a known draft"; the URL is never asked |
| `oversized-schema` | a 70 KB `output_schema` | refused, naming `limits.max_schema_bytes` |
| `references-in-arguments` | reference syntax (`${env:…}`, `${file:…}`, `$${…}`, `{{ … }}`, `$toolArgs…`) in every key and value of a tool's arguments | the call succeeds; the text is never resolved: shown as written, but for the values under keys that name a secret (`${env:DOORS_TOKEN}`), `[REDACTED]` wherever they show, alike on every door |
| `references-in-output-schema` | the same in every field of an `output_schema` and the prompt | the answer holds the text as written |
| `references-in-tool-name` | a tool named `${env:…}` | unknown tool; the name is quoted as written |

The project holds two planted secrets the way an operator would: `DOORS_TOKEN` in its
environment and a secret file, both read by reference into a fetch tool's `defaultHeaders`.
A door that resolved a caller's reference, or echoed what the engine loaded, would show one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.safety.redaction import REDACTED
from secrets_support import plant

TOKEN_ENV = "DOORS_TOKEN"
REDOS = "^(a+)+$"
EMAIL = "^([a-zA-Z0-9]+[._-]?)*[a-zA-Z0-9]+@example\\.com$"  # realistic, and the same shape
EVIL = "a" * 27 + "!"  # 2**27 steps for Python's re (tens of seconds); microseconds for a linear engine


@dataclass(frozen=True)
class Secrets:
    """The planted values, and the file holding one of them."""

    token: str
    file_value: str
    file: Path

    @property
    def values(self) -> tuple[str, str]:
        return self.token, self.file_value

    def references(self) -> list[str]:
        """Every way a caller might spell "read me the secret"."""
        return [f"${{env:{TOKEN_ENV}}}", f"${{file:{self.file}}}", f"$${{env:{TOKEN_ENV}}}", f"${{ env:{TOKEN_ENV} }}",
                "${env:HOME}", "{{ env.DOORS_TOKEN }}", "{{ config }}", "$toolArgs.email", "${file:/proc/self/environ}"]


def plant_secrets(root: Path) -> Secrets:
    secrets_dir = root / "secrets"
    secrets_dir.mkdir(parents=True, exist_ok=True)
    secret_file = secrets_dir / "partner-token"
    value = plant("doors-file")
    secret_file.write_text(value + "\n", encoding="utf-8")
    return Secrets(token=plant("doors-env"), file_value=value, file=secret_file)


def project_files(secrets: Secrets) -> dict[str, str]:
    """`signup` (an email pattern), `echo` (says back its arguments), `partner` (holds the secrets)."""
    return {
        "tools.yaml": f"""
            tools:
              signup:
                description: Sign a user up by email.
                workflow: signupFlow
                parameters:
                  type: object
                  properties:
                    email: {{type: string, pattern: {json.dumps(EMAIL)}}}
                  required: [email]
              echo:
                type: python
                description: Says back what it was given.
                config: {{function: "door_helpers:echo"}}
              partner:
                type: fetch
                description: The partner API (never called here; its keys are loaded).
                config:
                  allowedDomains: [partner.example]
                  defaultHeaders:
                    X-Api-Key: "${{env:{TOKEN_ENV}}}"
                    X-Partner-Token: "${{file:{secrets.file}}}"
        """,
        "skills.yaml": """
            skills:
              greet:
                kind: template
                input: {type: object, properties: {email: {}}}
                template: "{{ email }}"
        """,
        "workflows.yaml": """
            workflows:
              signupFlow:
                steps:
                  - {id: greet, skill: greet, input: {email: $toolArgs.email}}
        """,
        "door_helpers.py": """
            def echo(text: str = "", extra: dict | None = None) -> dict:
                return {"text": text, "extra": extra or {}}
        """,
        "config/models.yaml": "default: mock\nmodels:\n  mock: {provider: mock}\n",
        "config/engine.yaml": "store: {path: .skillyard/runs.db}\n",
    }


@dataclass(frozen=True)
class Hostile:
    """One hostile input. `tool`+`arguments` go to the call doors; `output_schema`+`prompt` to the
    agent doors. `expect`: text the door's answer (or error) must hold."""

    name: str
    expect: str
    tool: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    prompt: str = "answer it"
    refused: bool = True  # the door refuses it (an error), rather than answering

    @property
    def is_call(self) -> bool:
        return self.tool is not None


def fan_out(per_level: int, levels: int) -> dict[str, Any]:
    """`per_level` $refs to the next level's definition, `levels` deep: tiny written, huge followed."""
    defs = {f"l{n}": {"type": "object", "required": [f"p{i}" for i in range(per_level)],
                      "properties": {f"p{i}": {"$ref": f"#/$defs/l{n + 1}"} if n + 1 < levels else {"type": "string"}
                                     for i in range(per_level)}}
            for n in range(levels)}
    return {"$defs": defs, "$ref": "#/$defs/l0"}


def everywhere(references: list[str]) -> dict[str, Any]:
    """Reference syntax in every key and value, nested, in lists."""
    return {"text": " ".join(references), "extra": {ref: {"value": ref, "list": [ref, {ref: ref}]} for ref in references}}


def schema_everywhere(references: list[str]) -> dict[str, Any]:
    joined = " ".join(references)
    return {"type": "object", "title": joined, "description": joined, "required": ["said"],
            "properties": {"said": {"type": "string", "const": joined, "description": joined, "default": joined,
                                    "examples": references, "enum": [joined]},
                           **{ref: {"type": "string", "description": ref} for ref in references}}}


def corpus(secrets: Secrets, metadata_url: str) -> list[Hostile]:
    """Every hostile input, for one project's planted `secrets` and a loopback URL no compile may ask."""
    refs = secrets.references()
    return [
        Hostile("backtracking-arguments", "does not match", tool="signup", arguments={"email": EVIL}),
        Hostile("backtracking-output-schema", "does not match", prompt="say it",
                output_schema={"type": "string", "const": EVIL, "pattern": REDOS}),
        Hostile("ref-fan-out", "$ref fan-out limit", output_schema=fan_out(10, 6)),
        Hostile("schema-url", "not a known draft",
                output_schema={"$schema": metadata_url, "type": "object",
                               "properties": {"x": {"$ref": metadata_url + "x.json"}}}),
        Hostile("oversized-schema", "limits.max_schema_bytes", output_schema={"type": "string", "description": "x" * 70_000}),
        # Five of the references name a secret as a key (`${env:DOORS_TOKEN}` reads `env_doors_token`): their values
        # are hidden wherever they show, on every door alike; the others stay as written, never resolved.
        Hostile("references-in-arguments", " ".join(refs[4:5] + [REDACTED] + refs[6:]), tool="echo",
                arguments=everywhere(refs), refused=False),
        Hostile("references-in-output-schema", " ".join(refs[:2]), prompt="say " + " ".join(refs),
                output_schema=schema_everywhere(refs), refused=False),
        Hostile("references-in-tool-name", f"${{env:{TOKEN_ENV}}}", tool=f"${{env:{TOKEN_ENV}}}", arguments={}),
    ]


NAMES = ["backtracking-arguments", "backtracking-output-schema", "ref-fan-out", "schema-url", "oversized-schema",
         "references-in-arguments", "references-in-output-schema", "references-in-tool-name"]
