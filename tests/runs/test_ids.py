"""Run and call ids: unique, 80 bits (a run id's first 44 its time), never shared by a forked child and its parent."""

from __future__ import annotations

import os
import re
import sys
import time

import pytest

from engine.runtime.ids import new_id


def test_ids_have_a_prefix_and_80_bits() -> None:
    for prefix in ("run", "call"):
        ids = [new_id(prefix) for _ in range(5_000)]  # spans many buffer refills
        assert all(re.fullmatch(rf"{prefix}_[0-9a-f]{{20}}", i) for i in ids)
        assert len(set(ids)) == len(ids)


def test_a_run_id_begins_with_its_time_so_later_runs_sort_after() -> None:
    """The store's indexes keyed by run id grow at one end (see engine/runtime/ids.py)."""
    before = time.time_ns() // 1_000_000
    first = new_id("run")
    time.sleep(0.002)
    second = new_id("run")
    assert before <= int(first[4:15], 16) <= time.time_ns() // 1_000_000
    assert first < second
    calls = [new_id("call") for _ in range(200)]
    assert calls != sorted(calls)  # a call id stays all random


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs a plain POSIX fork")
def test_a_forked_child_does_not_repeat_its_parents_next_ids() -> None:
    new_id("call")  # the parent now holds unread random bytes that a child would inherit
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.write(write_end, " ".join(new_id("call") for _ in range(3)).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    child = os.read(read_end, 4096).decode().split()
    os.close(read_end)
    parent = [new_id("call") for _ in range(3)]
    assert len(child) == 3 and not set(child) & set(parent)
