"""Issue 16 §2: an error raised by the user's Python code points at the user's code.

`error.details` carries the user's frames (file:line in function, source line), never a local
variable, never a frame of the engine, the standard library or site-packages (unless
debugging); `run-workflow` prints the last user frame, `--verbose` the user's traceback;
`runs show` and the HTTP body carry the same; an embedding application sees no traceback.
A planted password (an argument) and a planted literal (in the source) are grepped in every
sink: stdout, stderr, the run store's files, the HTTP body and the server's log.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from engine import Engine
from engine.safety.redaction import Redactor
from engine.safety.user_frames import MAX_FRAMES, failure_details, mask_literals, origin, package_root, set_debug
from secrets_support import leaks, plant, python, run_id_of, sink_files, skillyard, write

LITERAL = plant("literal")

PROJECT = {
    "tools.yaml": """
        tools:
          login:
            type: python
            description: Log a user in (raises, quoting what it was given).
            config: {function: mine.secure:login}
          countWords:
            description: Count the words of a JSON list (a python skill whose helper raises in the stdlib).
            parameters:
              type: object
              properties: {text: {type: string}}
              required: [text]
            workflow: countWords
          deep:
            type: python
            description: Recurses until Python gives up.
            config: {function: mine.secure:deep}
    """,
    "skills.yaml": """
        skills:
          countWords:
            kind: python
            function: mine.secure:count
            input: {type: object, properties: {text: {type: string}}, required: [text]}
    """,
    "workflows.yaml": """
        workflows:
          countWords:
            steps:
              - {id: count, skill: countWords, input: {text: $toolArgs.text}}
            output: $steps.count.output
    """,
    "mine/__init__.py": "",
    "mine/helpers.py": """
        import json


        def parse(text):
            return json.loads(text)
    """,
    "mine/secure.py": f'''
        from mine.helpers import parse


        def login(user: str, password: str) -> dict:
            kept = {{"user": user, "password": password}}  # a local that no detail may show
            if password != "{LITERAL}":
                raise PermissionError(f"login refused for {{user}} with {{password}} ({{len(kept)}} fields)")
            return {{"user": user}}


        def count(input):
            words = parse(input["text"])
            return {{"count": len(words)}}


        def deep(n: int = 0) -> int:
            return deep(n + 1)
    ''',
}
# Lines in mine/secure.py (write() dedents and drops the first newline: line 1 is the import).
LOGIN_RAISE, COUNT_PARSE, HELPER_LOADS = 7, 12, 5


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    root = write(tmp_path / "project", PROJECT)
    yield root
    for name in [n for n in sys.modules if n == "mine" or n.startswith("mine.")]:
        del sys.modules[name]  # each test's project is a fresh copy of the package
    sys.path[:] = [p for p in sys.path if p != str(root)]


def _call(project: Path, tool: str, args: dict[str, Any]) -> Any:
    engine = Engine.from_dir(project, store=False)
    try:
        return engine.call_tool_sync(tool, args)
    finally:
        engine.close()


def _names(frames: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return [(Path(f["file"]).name, f["line"], f["function"]) for f in frames]


def test_a_python_skill_error_carries_only_the_users_frames(project: Path) -> None:
    result = _call(project, "countWords", {"text": "not json"})
    error = result.error
    assert error is not None and error.code == "execution_error"
    assert error.message.startswith("skill 'countWords' raised JSONDecodeError")
    details = error.details
    assert details["exception"] == "JSONDecodeError"
    # count → parse; the json module's and the engine's frames are left out
    assert _names(details["frames"]) == [("secure.py", COUNT_PARSE, "count"), ("helpers.py", HELPER_LOADS, "parse")]
    assert [f["source"] for f in details["frames"]] == ['words = parse(input["text"])', "return json.loads(text)"]
    assert all(set(f) == {"file", "line", "function", "source"} for f in details["frames"])


def test_a_python_tool_error_shows_no_local_no_password_and_no_literal(project: Path) -> None:
    secret = plant("argument")
    result = _call(project, "login", {"user": "bob", "password": secret})
    error = result.error
    assert error is not None and error.code == "execution_error"
    assert error.message == "PermissionError: login refused for bob with [REDACTED] (2 fields)"
    (frame,) = error.details["frames"]
    assert (Path(frame["file"]).name, frame["line"], frame["function"]) == ("secure.py", LOGIN_RAISE, "login")
    assert frame["source"] == 'raise PermissionError(f"login refused for {user} with {password} ({len(kept)} fields)")'
    text = json.dumps(result.to_dict())
    assert secret not in text and LITERAL not in text and "kept =" not in text


def test_a_literal_on_a_line_that_names_a_secret_is_hidden(project: Path) -> None:
    """The frame's source is the `if password != "…"` line when the comparison itself raises."""

    class Odd(str):
        def __ne__(self, other: object) -> bool:
            raise ValueError("cannot compare")

    sys.path.insert(0, str(project))
    from mine.secure import login  # type: ignore[import-not-found]

    with pytest.raises(ValueError) as caught:
        login("bob", Odd("x"))
    details = failure_details(caught.value, [str(project) + os.sep])
    sources = [f["source"] for f in details["frames"]]
    assert 'if password != "[REDACTED]":' in sources and not any(LITERAL in s for s in sources)


def test_masking_keeps_lines_without_a_sensitive_name() -> None:
    redactor = Redactor()
    assert mask_literals('raise ValueError("empty text")', redactor) == 'raise ValueError("empty text")'
    assert mask_literals("api_key = 'k-123' + \"x\"", redactor) == 'api_key = "[REDACTED]" + "[REDACTED]"'
    assert mask_literals('authorization = {"Bearer": f"{t}"}', redactor) == 'authorization = {"[REDACTED]": "[REDACTED]"}'
    assert mask_literals('token_value = "abc"', redactor) == 'token_value = "[REDACTED]"'
    assert mask_literals('print(f"the password is {p}")', redactor) == 'print(f"the password is {p}")'  # inside a string only


def test_origin_of_frames() -> None:
    assert origin(json.__file__) == "library"
    assert origin(httpx.__file__) == "library"  # site-packages
    assert origin(sys.modules["engine"].__file__ or "") == "engine"
    assert origin(__file__) == "user"
    assert origin("<frozen importlib._bootstrap>") == "library"
    # an installed package of the user's: its root makes its frames theirs
    root = package_root(httpx.get)
    assert root is not None and root.rstrip(os.sep).endswith("httpx")
    assert origin(httpx.__file__, [root]) == "user"
    # a project that holds the engine (a checkout) or its virtualenv: those frames stay theirs
    checkout = str(Path(sys.modules["engine"].__file__ or "").parent.parent) + os.sep
    assert origin(sys.modules["engine"].__file__ or "", [checkout]) == "engine"
    assert origin(json.__file__, [checkout]) == "library"
    assert package_root(_names) is None  # this test file is not installed: no root needed


def test_recursion_keeps_the_innermost_frames(project: Path) -> None:
    result = _call(project, "deep", {})
    details = result.error.details  # type: ignore[union-attr]
    assert details["exception"] == "RecursionError"
    assert len(details["frames"]) == MAX_FRAMES and details["frames_omitted"] > 100
    assert {f["function"] for f in details["frames"]} == {"deep"}


def test_debug_keeps_the_engines_frames_marked(project: Path) -> None:
    set_debug(True)
    try:
        result = _call(project, "countWords", {"text": "not json"})
    finally:
        set_debug(False)
    frames = result.error.details["frames"]  # type: ignore[union-attr]
    origins = [f.get("origin", "user") for f in frames]
    assert origins[0] == "engine" and "library" in origins  # the executor, then json's decoder
    assert [n for n, o in zip(_names(frames), origins, strict=True) if o == "user"] == [
        ("secure.py", COUNT_PARSE, "count"), ("helpers.py", HELPER_LOADS, "parse")]


# ─── the sinks: CLI, store, embedding application, HTTP ─────────────────────────────────


@pytest.mark.slow
def test_run_workflow_prints_the_last_user_frame_and_verbose_the_traceback(project: Path) -> None:
    secret = plant("cli")
    args = ["call", "login", "--args-json", json.dumps({"user": "bob", "password": secret})]
    plain = skillyard(*args, cwd=project)
    assert plain.returncode == 1 and plain.stdout == ""
    assert f"  at mine/secure.py:{LOGIN_RAISE} in login\n" in plain.stderr
    assert 'raise PermissionError(f"login refused' in plain.stderr and "Traceback" not in plain.stderr

    verbose = skillyard(*args, "--verbose", "--quiet", "--no-store", cwd=project)
    lines = verbose.stderr.splitlines()
    start = lines.index("Traceback (your code, most recent call last):")
    assert lines[start + 1] == f'  File "mine/secure.py", line {LOGIN_RAISE}, in login'
    assert lines[start + 3] == "PermissionError: login refused for bob with [REDACTED] (2 fields)"

    quiet = skillyard(*args, "--quiet", "--no-store", cwd=project)
    assert quiet.stderr.strip().splitlines()[-1] == "error: execution_error: PermissionError: login refused for bob with [REDACTED] (2 fields)"
    assert "at mine/secure.py" not in quiet.stderr.splitlines()[-1] and "Traceback" not in quiet.stderr  # --quiet: no frame

    deep = skillyard("call", "countWords", "--arg", "text=nope", "--verbose", "--no-store", cwd=project)
    assert f'  File "mine/secure.py", line {COUNT_PARSE}, in count' in deep.stderr
    assert f'  File "mine/helpers.py", line {HELPER_LOADS}, in parse' in deep.stderr
    assert "json/decoder.py" not in deep.stderr and "engine/" not in deep.stderr

    for debug_args, env in ((["--debug"], None), ([], {"SKILLYARD_DEBUG": "1"})):
        debug = skillyard("call", "countWords", "--arg", "text=nope", "--verbose", "--quiet", "--no-store", *debug_args,
                          cwd=project, env=env)
        assert "Traceback (most recent call last):" in debug.stderr and "  [engine]" in debug.stderr
        assert "json/decoder.py" in debug.stderr and "  [library]" in debug.stderr

    shown = skillyard("runs", "show", run_id_of(plain.stderr), cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert f"at mine/secure.py:{LOGIN_RAISE} in login" in shown.stdout
    exported = skillyard("runs", "export", run_id_of(plain.stderr), cwd=project)
    error = [json.loads(line) for line in exported.stdout.splitlines()][-1]["data"]["error"]
    assert error["details"]["frames"][0]["line"] == LOGIN_RAISE
    texts = [plain.stdout, plain.stderr, verbose.stdout, verbose.stderr, quiet.stderr, shown.stdout, exported.stdout]
    assert sink_files(project), "the CLI records runs by default"
    for planted in (secret, LITERAL):
        assert leaks(planted, texts, sink_files(project)) == []


EMBED = """
    import json, sys
    from engine import Engine

    engine = Engine.from_dir({root!r}, store={store!r})
    result = engine.call_tool_sync("login", {{"user": "bob", "password": {secret!r}}})
    engine.close()
    assert result.error.code == "execution_error", result
    with open({out!r}, "w") as handle:  # what the application does with the result is its own business
        json.dump(result.to_dict(), handle)
"""


@pytest.mark.slow
def test_an_embedding_application_sees_no_traceback_and_no_secret(project: Path, tmp_path: Path) -> None:
    secret = plant("embed")
    out = tmp_path / "result.json"
    done = python(EMBED.format(root=str(project), store=str(tmp_path / "runs.db"), secret=secret, out=str(out)), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr and 'File "' not in done.stderr
    assert "tool execution failed" in done.stderr and "at=" in done.stderr  # one warning line, through the engine's logger
    assert len(done.stderr.strip().splitlines()) == 1
    result = json.loads(out.read_text())
    assert result["error"]["details"]["frames"][0]["function"] == "login"
    for planted in (secret, LITERAL):
        assert leaks(planted, [done.stdout, done.stderr, out.read_text()], sink_files(tmp_path)) == []


@pytest.mark.slow
def test_the_http_body_carries_the_same_frames(project: Path) -> None:
    pytest.importorskip("fastapi")
    from server_helpers import running_server

    key, secret = plant("bearer"), plant("served")
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
    with running_server(project, keys=f"admin:{key}") as server:
        failed = httpx.post(f"{server.url}/v1/tools/login/call", json={"user": "bob", "password": secret},
                            headers=headers, timeout=30)
        skill = httpx.post(f"{server.url}/v1/tools/countWords/call", json={"text": "nope"}, headers=headers, timeout=30)
    log = server.log.read_text()
    error = failed.json()["error"]
    assert error["message"] == "PermissionError: login refused for bob with [REDACTED] (2 fields)"
    assert _names(error["details"]["frames"]) == [("secure.py", LOGIN_RAISE, "login")]
    assert _names(skill.json()["error"]["details"]["frames"]) == [
        ("secure.py", COUNT_PARSE, "count"), ("helpers.py", HELPER_LOADS, "parse")]
    assert "Traceback" not in log and "kept =" not in log
    for planted in (secret, LITERAL, key):
        assert leaks(planted, [log, failed.text, skill.text], sink_files(project)) == []


def test_the_projects_own_sensitive_keys_hide_literals_in_a_skills_source(write_yaml_project: Any) -> None:
    literal = plant("pin")
    root = write_yaml_project({
        "config/engine.yaml": "redaction: {sensitive_keys: [password, pin_code]}\n",
        "tools.yaml": """
            tools:
              unlock:
                description: Unlock (a python skill that raises on the line holding a literal).
                parameters: {type: object, properties: {}}
                workflow: unlock
        """,
        "skills.yaml": "skills:\n  unlock:\n    kind: python\n    function: pins_mod:unlock\n",
        "workflows.yaml": "workflows:\n  unlock:\n    steps:\n      - {id: u, skill: unlock, input: {}}\n",
        "pins_mod.py": f'''
            def unlock(input):
                pin_code = int("{literal}")
                return {{"pin": pin_code}}
        ''',
    })
    try:
        result = _call(root, "unlock", {})
    finally:
        sys.modules.pop("pins_mod", None)
        sys.path[:] = [p for p in sys.path if p != str(root)]
    (frame,) = result.error.details["frames"]  # type: ignore[union-attr]
    assert (frame["function"], frame["line"], frame["source"]) == ("unlock", 2, 'pin_code = int("[REDACTED]")')
    assert literal not in frame["source"]
