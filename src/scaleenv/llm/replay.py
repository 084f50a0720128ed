"""Answer a relay queue from another queue's recorded answers: a deterministic replay of a hand run.

A build run by hand through :mod:`scaleenv.llm.relay` leaves every prompt and its answer in a queue
directory. To measure what changed prompts cost without a reader, run the same build against a new
relay queue and answer each request with the recorded answer to the *same question*: the same role
about the same subject (the tool a code, test, debug or patch prompt names, the task number of a
chain prompt, the chain of a state or instruction prompt), the k-th such request getting the k-th
recorded answer. A request with no recorded counterpart (the dynamics changed: another tool needs a
patch, the gate is asked once more) gets the recorded answer of its role whose prompt reads most
alike, and is counted as ``nearest`` so a report can say how much of the replay was exact.
"""

from __future__ import annotations

import difflib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaleenv.llm.parse import ParseError, parse_json
from scaleenv.llm.relay import Queue, RelayError, answer

_TOOL = re.compile(r"^Tool name: (\w+)$", re.M)
_TASK = re.compile(r"^Task number: (\d+)$", re.M)
_CHAIN = re.compile(r"```python\n(.*?)```", re.S)
_BATCH = re.compile(r"^Tasks: ([\d, ]+)", re.M)
_TASK_BLOCK = re.compile(r"```python[^\n]*\n\s*#\s*task\s+(\d+)[^\n]*\n(.*?)```", re.S | re.I)


_MERGED = '"code" and "tests"'


def merged_code_tests(role: str, body: dict[str, Any]) -> bool:
    """Whether a code request asks for the tool's code and its tests in one reply."""
    return role == "code" and _MERGED in _user_text(body)


def _object_text(text: str) -> str:
    """The JSON object of an answer as written: from its first "{" to its last "}"."""
    return text[text.index("{"):text.rindex("}") + 1]


def batch_tasks(body: dict[str, Any]) -> list[str]:
    """The task numbers a batched chain prompt asks chains for ('Tasks: 4, 5, 6, 7'; [] for another prompt)."""
    m = _BATCH.search(_user_text(body))
    return [t for t in re.split(r"[,\s]+", m.group(1)) if t] if m else []


def _user_text(body: dict[str, Any]) -> str:
    msgs = body.get("messages") or []
    return str(msgs[1].get("content") or "") if len(msgs) > 1 and isinstance(msgs[1], dict) else ""


def subject(role: str, body: dict[str, Any]) -> str:
    """What a request is about, stable across rewordings of its prompt ('' when nothing names it)."""
    text = _user_text(body)
    if role in ("code", "test", "debug", "patch"):
        m = _TOOL.search(text)
        return m.group(1) if m else ""
    if role == "chain":
        m = _TASK.search(text)
        return m.group(1) if m else ""
    if role in ("state", "instruction"):
        m = _CHAIN.search(text)
        return re.sub(r"\s+", "", m.group(1).replace("'", '"')) if m else ""
    if role in ("domain", "tool_schema", "database"):
        return role
    return ""


@dataclass
class _Recorded:
    number: int
    role: str
    subject: str
    text: str
    answer: str


@dataclass
class Replayer:
    """Recorded answers of one queue, handed out to the requests of another (thread-safe)."""

    recorded: list[_Recorded]
    used: dict[tuple[str, str], int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"exact": 0, "nearest": 0, "unanswered": 0})
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_queue(cls, directory: str | Path) -> Replayer:
        q = Queue(directory)
        out = []
        for n in q.numbers():
            ans = q.answer_of(n)
            if ans is None or not ans.strip():
                continue
            rec = q.request(n)
            body = rec.get("body") or {}
            role = str(rec.get("role") or "")
            tasks = batch_tasks(body) if role == "chain" else []
            if tasks:  # a batched chain answer: one recorded chain per task it answered
                for t, code in _TASK_BLOCK.findall(ans):
                    out.append(_Recorded(n, role, t, _user_text(body), f"```python\n{code.strip()}\n```"))
                continue
            if merged_code_tests(role, body):  # one answer for the code and one for the tests
                try:
                    both = parse_json(ans, dict)
                except ParseError:
                    both = {}
                if isinstance(both.get("code"), dict) and isinstance(both.get("tests"), dict):
                    subj = subject(role, body)
                    out.append(_Recorded(n, "code", subj, _user_text(body), json.dumps(both["code"])))
                    out.append(_Recorded(n, "test", subj, _user_text(body), json.dumps(both["tests"])))
                    continue
            out.append(_Recorded(n, role, subject(role, body), _user_text(body), ans))
        if not out:
            raise RelayError(f"{directory}: no answered requests to replay")
        return cls(out)

    def answer_for(self, role: str, body: dict[str, Any]) -> str | None:
        """The recorded answer for this request, or None when its role was never answered."""
        tasks = batch_tasks(body) if role == "chain" else []
        if tasks:
            return self._batch_answer(tasks)
        if role == "state" and batch_tasks(body):
            return self._state_batch_answer(body)
        if merged_code_tests(role, body):
            return self._merged_answer(body)
        subj = subject(role, body)
        with self.lock:
            if subj:
                same = [r for r in self.recorded if r.role == role and r.subject == subj]
                k = self.used.get((role, subj), 0)
                if k < len(same):
                    self.used[(role, subj)] = k + 1
                    self.counts["exact"] += 1
                    return same[k].answer
            pool = [r for r in self.recorded if r.role == role]
            if not pool:
                self.counts["unanswered"] += 1
                return None
            text = _user_text(body)
            best = max(pool, key=lambda r: (difflib.SequenceMatcher(None, r.text, text, autojunk=False).quick_ratio(),
                                            -r.number))
            self.counts["nearest"] += 1
            return best.answer

    def _merged_answer(self, body: dict[str, Any]) -> str | None:
        """A request for a tool's code and tests at once: the recorded code answer and test answer of
        that tool in one object (each the k-th of its tool, else the role's most alike, counted nearest)."""
        code = self.answer_for("code", {"messages": [{}, {"content": _user_text(body).replace(_MERGED, "")}]})
        tests = self.answer_for("test", body)
        if code is None or tests is None:
            return None
        try:
            parse_json(code, dict), parse_json(tests, dict)
        except ParseError:
            return None
        # each part as it was written (its layout kept, so the replay's token figures are the reader's)
        return f'{{"code": {_object_text(code)},\n "tests": {_object_text(tests)}}}'

    def _state_batch_answer(self, body: dict[str, Any]) -> str | None:
        """A batched state request: each task's recorded state answer (found by its chain, as a single
        state request is), as one {"tasks": {N: answer}} object; the tasks without one are left out."""
        parts = []
        sections = re.findall(r"^Task (\d+): .*?```python\n(.*?)```", _user_text(body), re.M | re.S)
        with self.lock:
            for n, chain in sections:
                subj = re.sub(r"\s+", "", chain.replace("'", '"'))
                same = [r for r in self.recorded if r.role == "state" and r.subject == subj]
                k = self.used.get(("state", subj), 0)
                if k < len(same):
                    self.used[("state", subj)] = k + 1
                    parts.append(f'"{n}": {_object_text(same[k].answer)}')
            if not parts:
                self.counts["unanswered"] += 1
                return None
            self.counts["exact" if len(parts) == len(sections) else "nearest"] += 1
        return '{"tasks": {' + ",\n ".join(parts) + "}}"

    def _batch_answer(self, tasks: list[str]) -> str | None:
        """A batched chain request: each task's recorded chain (from a batched or a single chain
        answer), labelled "# task N"; exact when every task has one, else nearest (the tasks without
        one are left out: the build sends them back alone)."""
        blocks = []
        with self.lock:
            for t in tasks:
                same = [r for r in self.recorded if r.role == "chain" and r.subject == t]
                k = self.used.get(("chain", t), 0)
                if k < len(same):
                    self.used[("chain", t)] = k + 1
                    m = _CHAIN.search(same[k].answer)
                    code = m.group(1) if m else same[k].answer
                    blocks.append(f"```python\n# task {t}\n{code.strip()}\n```")
            if not blocks:
                self.counts["unanswered"] += 1
                return None
            self.counts["exact" if len(blocks) == len(tasks) else "nearest"] += 1
        return "\n".join(blocks)

    def serve(self, queue: str | Path, idle: float = 30.0, poll: float = 0.1,
              stop: threading.Event | None = None) -> dict[str, int]:
        """Answer ``queue``'s pending requests as they arrive until none came for ``idle`` seconds
        (or ``stop`` is set); a request nobody recorded an answer for is left pending."""
        q = Queue(queue)
        skipped: set[int] = set()
        last = time.monotonic()
        while not (stop is not None and stop.is_set()):
            todo = [n for n in q.pending() if n not in skipped]
            for n in todo:
                rec = q.request(n)
                text = self.answer_for(str(rec.get("role") or ""), rec.get("body") or {})
                if text is None:
                    skipped.add(n)
                    continue
                answer(queue, n, text)
            if todo:
                last = time.monotonic()
            elif time.monotonic() - last > idle:
                break
            time.sleep(poll)
        return dict(self.counts)
