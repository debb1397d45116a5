"""Argument values are data: template syntax inside them is never evaluated.

tests/projects/ssti declares `capture: {provider: capture}`; the provider registered here
records every request, so the test sees exactly what a model would receive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from engine import Engine, ModelRequest, ModelResponse, register_provider

PROJECT = Path(__file__).resolve().parents[1] / "projects" / "ssti"

PAYLOADS = [
    "{{7*7}}",
    "{{ 7*7 }}",
    "{{ config }}",
    "{{ config.items() }}",
    "{% for x in ().__class__.__base__.__subclasses__() %}{{x}}{% endfor %}",
    "{{ self.__init__.__globals__ }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{% raw %}{{7*7}}{% endraw %}",
    "{# comment #}{{ 7*'7' }}",
    "${7*7}",
    "#{7*7}",
    "<%= 7*7 %>",
    "{{ jdText }}",
    "{% if true %}seven times seven{% endif %}",
]


class CaptureProvider:
    """Records each request; answers with a fixed text."""

    def __init__(self, requests: list[ModelRequest]):
        self.requests = requests

    async def request(self, request: ModelRequest, on_text: Callable[[str], None] | None = None) -> ModelResponse:
        self.requests.append(request)
        if on_text is not None:
            on_text("ok")
        return ModelResponse(text="ok")


CAPTURED: list[ModelRequest] = []
register_provider("capture", lambda spec: CaptureProvider(CAPTURED))


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.from_dir(PROJECT)


def user_message(request: ModelRequest) -> str:
    [user] = [m.content for m in request.messages if m.role == "user"]
    return user


def ask(engine: Engine, tool: str, args: dict[str, Any]) -> ModelRequest:
    CAPTURED.clear()
    result = engine.call_tool_sync(tool, args)
    assert result.ok, result.error
    [request] = CAPTURED
    return request


@pytest.mark.parametrize("payload", PAYLOADS)
def test_prompt_skill_sends_the_payload_verbatim(engine: Engine, payload: str) -> None:
    request = ask(engine, "analyze", {"jdText": payload})
    user = user_message(request)
    assert user.strip() == f"Job description:\n{payload}"
    for message in request.messages:
        assert "49" not in message.content
        assert "7777777" not in message.content
        assert "<class" not in message.content and "<module" not in message.content


@pytest.mark.parametrize("payload", PAYLOADS[:6])
def test_payload_in_an_optional_argument_is_also_data(engine: Engine, payload: str) -> None:
    request = ask(engine, "analyze", {"jdText": "plain", "candidateProfile": payload})
    assert f"Candidate: {payload}" in user_message(request)
    assert "49" not in user_message(request)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_template_skill_to_string_keeps_the_payload(engine: Engine, payload: str) -> None:
    result = engine.call_tool_sync("render", {"jdText": payload})
    assert result.ok, result.error
    assert result.data == f"Text: {payload}"


@pytest.mark.parametrize("payload", PAYLOADS)
def test_template_skill_to_json_keeps_the_payload(engine: Engine, payload: str) -> None:
    result = engine.call_tool_sync("renderJson", {"jdText": payload})
    assert result.ok, result.error
    assert result.data == {"text": payload, "length": len(payload)}


@pytest.mark.parametrize("payload", PAYLOADS[:5])
def test_rendered_text_fed_to_a_prompt_is_still_data(engine: Engine, payload: str) -> None:
    request = ask(engine, "renderThenAsk", {"jdText": payload})
    assert f"Text: {payload}" in user_message(request)
    assert "49" not in user_message(request)


def test_the_default_project_sends_the_payload_verbatim_to_mock() -> None:
    """Through the repo's own workflow: the extract step's prompt holds the payload as typed."""
    root = Path(__file__).resolve().parents[2]
    engine = Engine.from_dir(root)
    payload = "{{7*7}} {{ config }} ${7*7}"
    result = engine.call_tool_sync("analyzeJobAndGeneratePlan", {"jdText": payload})
    assert result.ok, result.error
    skill = engine.project.skills["extractJobRequirements"]
    [_, user] = skill.render({"jdText": payload})
    assert payload in user.content and "49" not in user.content
