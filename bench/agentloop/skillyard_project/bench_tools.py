"""The benchmark's one python skill: the harness's shared `lookup` (a small dict, counted)."""

from bench.agentloop.plugins.common import lookup as _lookup


async def lookup(input):
    return await _lookup(input["key"])
