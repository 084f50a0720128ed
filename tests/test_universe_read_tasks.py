"""Reading a task file checks each line: a valid task comes back, one without its state hashes is an
error naming the file and line (the check once called ``Verification.get``, a dict method the typed
model does not have, so every task file raised AttributeError)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaleenv.errors import UniverseError
from scaleenv.formats.task import Task
from scaleenv.universe import read_tasks


def _task(n: int, **verification: str) -> Task:
    return Task(id=f"d/{n:05d}", domain="d", instruction="Tell me my balance.", user_profile={"goals": ["balance"]},
                initial_patch={}, gold_chain=[], tools=[], difficulty={}, verification=verification)


def test_read_tasks_returns_the_tasks_of_a_file(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    tasks = [_task(0, initial_hash="a1", expected_hash="b1"), _task(1, initial_hash="a2", expected_hash="b2")]
    path.write_text("".join(t.to_jsonl() + "\n" for t in tasks), encoding="utf-8")
    got = list(read_tasks(path))
    assert [t.id for t in got] == ["d/00000", "d/00001"]
    assert [t.verification.expected_hash for t in got] == ["b1", "b2"]


@pytest.mark.parametrize("missing", ["initial_hash", "expected_hash"])
def test_read_tasks_refuses_a_task_without_its_state_hashes(tmp_path: Path, missing: str) -> None:
    path = tmp_path / "d.jsonl"
    hashes = {"initial_hash": "a", "expected_hash": "b"}
    del hashes[missing]
    path.write_text(_task(0, initial_hash="a", expected_hash="b").to_jsonl() + "\n"
                    + _task(1, **hashes).to_jsonl() + "\n", encoding="utf-8")
    with pytest.raises(UniverseError, match=rf"d\.jsonl: line 2: invalid task \(verification\.{missing} is missing\)"):
        list(read_tasks(path))
