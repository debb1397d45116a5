"""A run id prefix reaches only the caller's own runs (security review, issue 28 item 6).

Bob's prefix is looked up among Bob's runs: one that matches only Alice's is 404 (as her full
id is), one that matches several of his is 409 with their number, not their ids. Through every
runs endpoint that takes an id (show, events, cancel, approvals), Bob never learns an id of
Alice's, and cannot touch her run. Admins look among all runs. The app in process (httpx's
ASGITransport) with three keys and a SQLite store in tmp_path.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

pytest.importorskip("fastapi")
import httpx  # noqa: E402

from engine import Engine  # noqa: E402

KEY_A, KEY_B, KEY_O = ("prefix-alice-key-0123456789abcdef0123", "prefix-bob-key-0123456789abcdef012345",
                       "prefix-ops-key-0123456789abcdef012345")
KEYS = f"alice:caller:{KEY_A},bob:caller:{KEY_B},ops:admin:{KEY_O}"
ALICE, BOB, OPS = ({"Authorization": f"Bearer {key}"} for key in (KEY_A, KEY_B, KEY_O))
FILES = {
    "tools.yaml": """
        tools:
          note:
            description: Returns what it was given.
            type: python
            config: {function: "prefix_iso_tools:note"}
          asked:
            description: Like note, after a person approves.
            type: python
            confirm: true
            config: {function: "prefix_iso_tools:note"}
    """,
    "prefix_iso_tools.py": """
        def note(text: str = "") -> str:
            return text
    """,
}


@pytest.fixture
def app(tmp_path: Path) -> Any:
    from engine.server import create_app

    for name, text in FILES.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"))
    engine = Engine.from_dir(tmp_path, store=tmp_path / "runs.db")
    yield create_app(engine, api_keys=KEYS, mcp=False, approval_timeout=30)
    engine.close()


@contextlib.asynccontextmanager
async def served(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000", timeout=30) as client:
            yield client


async def call(client: httpx.AsyncClient, headers: dict[str, str], tool: str = "note") -> str:
    answer = await client.post(f"/v1/tools/{tool}/call", json={"text": "x"}, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.headers["x-run-id"]


async def pending_call(client: httpx.AsyncClient, run_id: str) -> str:
    """The id of the call of `run_id` that waits for approval (asked by its owner, Alice)."""
    for _ in range(500):
        pending = (await client.get(f"/v1/runs/{run_id}", headers=ALICE)).json().get("pending_approvals")
        if pending:
            return str(pending[0])
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never asked for approval")


def unique_prefix(run_id: str, others: list[str]) -> str:
    """The shortest prefix of `run_id` that is no other run's."""
    for length in range(len("run_") + 1, len(run_id)):
        if not any(other.startswith(run_id[:length]) for other in others):
            return run_id[:length]
    raise AssertionError("ids share all but their last character")


def test_a_prefix_reaches_only_the_callers_runs(app: Any) -> None:
    async def main() -> None:
        async with served(app) as client:
            alices = [await call(client, ALICE) for _ in range(3)]
            waiting = asyncio.ensure_future(client.post("/v1/tools/asked/call", params={"background": "true"},
                                                        json={"text": "y"}, headers=ALICE))
            bobs = [await call(client, BOB) for _ in range(2)]
            for _ in range(500):
                listed = (await client.get("/v1/runs", headers=ALICE)).json()
                if len(listed) == 4:
                    break
                await asyncio.sleep(0.01)
            asked = next(run["id"] for run in listed if run["name"] == "asked")
            alices.append(asked)
            call_id = await pending_call(client, asked)
            everyone = alices + bobs
            try:
                await check_bob(client, alices, bobs, asked, call_id)
                await check_owner_and_admin(client, alices, everyone)
                # Alice's own prefix still answers her pending call
                mine = unique_prefix(asked, [r for r in everyone if r != asked])
                approved = await client.post(f"/v1/runs/{mine}/approvals/{call_id}", json={"approve": True}, headers=ALICE)
                assert approved.status_code == 200, approved.text
                assert (await asyncio.wait_for(waiting, 10)).json()["data"] == "y"
            finally:
                if not waiting.done():
                    await client.post(f"/v1/runs/{asked}/cancel", headers=ALICE)
                    await asyncio.wait_for(waiting, 10)

    asyncio.run(main())


async def check_bob(client: httpx.AsyncClient, alices: list[str], bobs: list[str], asked: str, call_id: str) -> None:
    answers: list[httpx.Response] = []

    async def bob(method: str, path: str, **kwargs: Any) -> httpx.Response:
        answer = await client.request(method, path, headers={**BOB, "Accept": "application/json"}, **kwargs)
        answers.append(answer)
        return answer

    # "run_" matches all six runs, two of them Bob's: 409, with two, on every endpoint
    for method, path, body in (("GET", "/v1/runs/run_", None), ("GET", "/v1/runs/run_/events", None),
                               ("POST", "/v1/runs/run_/cancel", None),
                               ("POST", f"/v1/runs/run_/approvals/{call_id}", {"approve": True})):
        answer = await bob(method, path, json=body)
        assert answer.status_code == 409, (path, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "ambiguous_run_id" and error["details"] == {"matches": 2}, error
        assert "matches 2 runs" in error["message"] and "give more of the id" in error["message"]
        assert not any(run_id in answer.text for run_id in bobs), "the count only, not which"

    # a prefix that matches one run, Alice's: the same 404 as an id nobody has, everywhere
    for alices_run in alices:
        prefix = unique_prefix(alices_run, bobs)
        nobody = "run_zzzz"
        for method, path, body in (("GET", "/v1/runs/{}", None), ("GET", "/v1/runs/{}/events", None),
                                   ("POST", "/v1/runs/{}/cancel", None),
                                   ("POST", "/v1/runs/{}/approvals/" + call_id, {"approve": True})):
            theirs = await bob(method, path.format(prefix), json=body)
            unknown = await bob(method, path.format(nobody), json=body)
            assert theirs.status_code == unknown.status_code == 404, (path, theirs.text)
            assert theirs.text.replace(prefix, "?") == unknown.text.replace(nobody, "?")

    # a prefix of one of Bob's own runs still finds it
    own = unique_prefix(bobs[0], alices + bobs[1:])
    found = await bob("GET", f"/v1/runs/{own}")
    assert found.status_code == 200 and found.json()["id"] == bobs[0]

    for answer in answers:
        leaked = [run_id for run_id in alices if run_id in answer.text]
        assert not leaked, f"{answer.request.url.path} told bob {leaked}: {answer.text}"
    assert await pending_call(client, asked) == call_id, "bob's approvals and cancels did not reach alice's run"


async def check_owner_and_admin(client: httpx.AsyncClient, alices: list[str], everyone: list[str]) -> None:
    """Alice's own ambiguity is counted among her runs; an admin's among all."""
    for headers, count in ((ALICE, len(alices)), (OPS, len(everyone))):
        answer = await client.get("/v1/runs/run_", headers=headers)
        assert answer.status_code == 409 and answer.json()["error"]["details"] == {"matches": count}, answer.text
        assert not any(run_id in answer.text for run_id in everyone)
    prefix = unique_prefix(alices[0], [r for r in everyone if r != alices[0]])
    assert (await client.get(f"/v1/runs/{prefix}", headers=OPS)).json()["id"] == alices[0]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store of each backend (PostgreSQL: this module's database, used once)."""
    return f"sqlite:///{tmp_path}/runs.db" if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


def test_the_store_counts_an_ambiguous_prefix_among_one_owners_runs(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lookup itself: `Store.run(prefix, principal=…)`, and the count of a wide prefix."""
    from engine.runtime.events import Event
    from engine.store import AmbiguousRunId, open_store

    with open_store(store_url) as store:
        for index in range(7):
            run_id = f"run_p{index}"
            store.listener(Event(type="tool_call_start", run_id=run_id, seq=1, ts=1, tool_call_id="c",
                                 data={"tool": "t", "arguments": {}}))
            store.listener(Event(type="tool_call_result", run_id=run_id, seq=2, ts=2, tool_call_id="c",
                                 data={"data": 1, "metadata": {}}))
            store.record_owner(run_id, "alice" if index < 5 else "bob")
        store.flush()
        with pytest.raises(AmbiguousRunId) as everyone:
            store.run("run_p")
        assert everyone.value.count == 7 and "run_p0" in str(everyone.value), "the local user's view lists some"
        with pytest.raises(AmbiguousRunId) as bobs:
            store.run("run_p", principal="bob")
        assert bobs.value.count == 2 and "run_p0" not in str(bobs.value)
        assert store.run("run_p0", principal="bob") is None and store.run("run_p3", principal="bob") is None
        assert store.run("run_p6", principal="bob").id == "run_p6"  # type: ignore[union-attr]
        assert store.run("run_p0", principal="alice").principal == "alice"  # type: ignore[union-attr]
        monkeypatch.setattr("engine.store.queries.COUNT_MATCHES", 3)  # a wide prefix is counted up to a bound
        with pytest.raises(AmbiguousRunId) as wide:
            store.run("run_")
        assert wide.value.count == 3 and wide.value.counted == "3 or more"
