"""Python skills of the skills test project: every calling convention."""

import asyncio
import threading


def sync_plain(input):
    return {"kind": "sync", "text": input["text"].upper()}


def sync_ctx(input, ctx):
    ctx.progress("counted", chars=len(input["text"]))
    return {"kind": "sync+ctx", "step": ctx.step_id, "skill": ctx.skill, "thread": threading.current_thread().name}


async def async_plain(input):
    await asyncio.sleep(0)
    return {"kind": "async", "text": input["text"][::-1]}


async def async_ctx(input, ctx):
    ctx.progress("half way", percent=50)
    await asyncio.sleep(0)
    ctx.progress("done", percent=100)
    return {"kind": "async+ctx", "run_id": ctx.run_id, "attempt": ctx.attempt}
