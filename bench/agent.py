"""`python -m bench.agent [--quick]`: the agent loop's own cost per iteration (issue 3).

A loopback server speaks the OpenAI chat-completions streaming protocol: asked without a
tool result it streams one tool call, asked after one it streams a short answer. In the same
run we time (1) the raw `openai` SDK call to that server and (2) `engine.agent(...).run()`
doing two iterations (tool call → trivial python tool → answer). The engine's overhead per
iteration is (agent run − the two raw calls it contains) / 2. Target: under 1 ms (median).
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import openai

from engine import Engine
from engine.runtime.agent import AgentLimits


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "bench",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answered = request["messages"][-1]["role"] == "tool"
        if answered:
            parts = [_chunk({"role": "assistant", "content": "Done"}), _chunk({"content": "."}, "stop")]
        else:
            call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "echo", "arguments": '{"text": "hi"}'}}
            parts = [_chunk({"role": "assistant", "tool_calls": [call]}), _chunk({}, "tool_calls")]
        usage = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "bench", "choices": [],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}
        body = b"".join(parts) + b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _project(root: Path, port: int) -> Path:
    (root / "tools.yaml").write_text(
        "tools:\n  echo:\n    description: Echo the text.\n"
        "    parameters: {type: object, properties: {text: {type: string}}, required: [text], additionalProperties: false}\n"
        "    workflow: echo\n"
    )
    (root / "skills.yaml").write_text(
        "skills:\n  echo:\n    kind: python\n    function: bench_agent_echo:echo\n"
        "    input: {type: object, properties: {text: {type: string}}, required: [text]}\n"
    )
    (root / "workflows.yaml").write_text("workflows:\n  echo:\n    steps:\n      - {id: e, skill: echo, input: {text: $toolArgs.text}}\n")
    (root / "bench_agent_echo.py").write_text("def echo(input):\n    return {'text': input['text']}\n")
    (root / "config").mkdir()
    (root / "config" / "models.yaml").write_text(
        f"default: local\nmodels:\n  local: {{provider: openai, model: bench, base_url: 'http://127.0.0.1:{port}/v1', api_key: x}}\n"
    )
    return root


async def _raw(client: openai.AsyncOpenAI, answered: bool) -> int:
    messages: list[dict] = [{"role": "user", "content": "hi"}]
    if answered:
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        ]
    tools = [{"type": "function", "function": {"name": "echo", "description": "Echo the text.", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"], "additionalProperties": False}}}]
    started = time.perf_counter_ns()
    # The same request the engine sends: messages, tools, tool_choice, streaming with usage.
    stream = await client.chat.completions.create(model="bench", messages=messages, stream=True,  # type: ignore[arg-type]
                                                  stream_options={"include_usage": True}, tools=tools,  # type: ignore[arg-type]
                                                  tool_choice="auto")
    async for _ in stream:
        pass
    return time.perf_counter_ns() - started


async def run(quick: bool) -> int:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    root = _project(Path(tempfile.mkdtemp(prefix="skillyard-bench-agent-")), server.server_address[1])
    sys.path.insert(0, str(root))
    engine = Engine.from_dir(root)
    agent = engine.agent("local", limits=AgentLimits(max_steps=4))
    client = openai.AsyncOpenAI(api_key="x", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", max_retries=0)
    rounds, per_round = (2, 20) if quick else (5, 200)
    for _ in range(10):
        await agent.run("hi")
        await _raw(client, False)
    raw: list[int] = []
    loop: list[int] = []
    for _ in range(rounds):
        for _ in range(per_round):
            raw.append(await _raw(client, False) + await _raw(client, True))
            started = time.perf_counter_ns()
            result = await agent.run("hi")
            loop.append(time.perf_counter_ns() - started)
            assert result.stop_reason == "answer" and result.steps == 2
    server.shutdown()
    raw_ms, loop_ms = statistics.median(raw) / 1e6, statistics.median(loop) / 1e6
    overhead = (loop_ms - raw_ms) / 2
    print("Agent loop: 2 iterations (tool call → python tool → answer) against a loopback OpenAI-compatible server")
    print(f"  raw SDK, the same two requests   median {raw_ms:7.3f} ms   ({len(raw):,} pairs)")
    print(f"  engine.agent(...).run()          median {loop_ms:7.3f} ms   ({len(loop):,} runs)")
    verdict = "n/a (quick)" if quick else ("PASS" if overhead < 1.0 else "MISS")
    print(f"  → engine overhead per iteration: {overhead:.3f} ms   target < 1 ms   {verdict}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agent", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few runs; target not judged")
    return asyncio.run(run(parser.parse_args(argv).quick))


if __name__ == "__main__":
    sys.exit(main())
