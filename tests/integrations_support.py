"""Shared helpers of the integration tests: one small universe per test process, gold plays."""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

from scaleenv.formats.task import Task
from scaleenv.integrations.session import answer_text, gold_calls, task_source
from scaleenv.synth.build import BuildConfig, prepare_out, run_build

DOMAINS = ["pet_care", "wedding_planning"]


@functools.cache
def small_universe() -> Path:
    """A two-domain universe with three verified tasks per domain (built once per process)."""
    root = Path(tempfile.mkdtemp(prefix="scaleenv-int-"))
    atexit.register(shutil.rmtree, root, True)
    cfg = BuildConfig(out=root / "universe", domains=list(DOMAINS), tasks_per_domain=3, seed=0)
    prepare_out(cfg)
    run_build(cfg)
    return cfg.out


def tasks(universe: Path) -> list[Task]:
    return task_source(universe).tasks()


def gold(universe: Path, task: Task) -> list[tuple[str, dict[str, Any]]]:
    """The task's gold chain as literal calls (references resolved from the verified replay)."""
    return gold_calls(task, task_source(universe).worlds(task).outputs)


@functools.cache
def _careful(universe: Path, task_id: str) -> tuple[tuple[tuple[str, str], ...], int]:
    """The oracle's tool-channel calls before its last domain call, and how many reports it sent after."""
    import random

    from scaleenv.env.policies import OracleAgent, play_tools
    from scaleenv.integrations.session import USER_TOOL, Session

    source = task_source(universe)
    task = source.task(task_id)
    s = Session(source, task)
    try:
        play_tools(s, OracleAgent(), random.Random(0), max_actions=4 * len(task.gold_chain) + 40)
        for _ in range(len(task.user_profile.goals)):  # a request the oracle answered before it was said
            if s.done:
                break
            s.call(USER_TOOL, {"message": answer_text(task)})
        assert s.evaluate().score == 1.0 and s.done, s.evaluate().diff
        seq: list[tuple[str, str]] = []
        for m in s.log[1:]:  # after the opening request
            if m["role"] == "assistant" and m.get("tool_calls"):
                fn = m["tool_calls"][0]["function"]
                seq.append((fn["name"], fn["arguments"]))
            elif m["role"] == "assistant" and m.get("content"):
                seq.append((USER_TOOL, json.dumps({"message": m["content"]})))
    finally:
        s.close()
    last = max(i for i, (name, _) in enumerate(seq) if name != USER_TOOL)
    return tuple(seq[: last + 1]), len(seq) - last - 1


def careful(universe: Path, task: Task) -> list[tuple[str, dict[str, Any]]]:
    """What a careful agent calls on the tool channel before its final report, recorded from the oracle
    talking to the scripted user: the gold chain's literal calls, with the identity question and a
    confirmation naming each change sent through the user tool where the domain's policy asks for them
    (the gold calls alone score 0 in conversational mode: the procedure is checked on every channel)."""
    return [(name, json.loads(args)) for name, args in _careful(universe, task.id)[0]]


def reports_after(universe: Path, task: Task) -> int:
    """How many times the careful agent reports (:func:`answer`) after :func:`careful`'s calls before the
    user is satisfied: once, or once per request still to come when the user says them one at a time."""
    return _careful(universe, task.id)[1]


def answer(task: Task) -> str:
    return answer_text(task)


def hermes(calls: list[tuple[str, dict[str, Any]]], text: str = "") -> str:
    """A completion in hermes format: one <tool_call> block per call, then text."""
    blocks = "".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>\n" for n, a in calls)
    return blocks + text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_write(universe: Path, task: Task) -> tuple[str, dict[str, Any]]:
    spec = task_source(universe).spec(task.domain)
    for name, args in gold(universe, task):
        tool = spec.tool(name)
        if tool is not None and tool.kind == "write":
            return name, args
    raise AssertionError(f"task {task.id} has no write in its gold chain")


def partial_case(universe: Path, *, conversational: bool = False) -> tuple[Task, list[tuple[str, dict[str, Any]]], float]:
    """A task, the gold calls up to its first goal write, and the partial reward they earn (strictly
    between 0 and 1), as a Session computes it: what every adapter must report under reward_shape.

    ``conversational``: the calls a careful agent makes up to that write (:func:`careful`: the identity
    question and the confirmation sent to the user first) and their reward as an adapter that talks with
    the scripted user scores it (the policy's procedure is checked: it holds, so nothing is taken off)."""
    from scaleenv.integrations.session import USER_TOOL, Session

    source = task_source(universe)
    for task in tasks(universe):
        spec = source.spec(task.domain)
        calls = careful(universe, task) if conversational else gold(universe, task)
        prefix: list[tuple[str, dict[str, Any]]] = []
        steps = iter(task.gold_chain)
        for name, args in calls:
            prefix.append((name, args))
            if name == USER_TOOL:
                continue
            call = next(steps)
            tool = spec.tool(name)
            if call.purpose == "goal" and tool is not None and tool.kind == "write":
                break
        if conversational:
            score = conversational_score(universe, task, prefix)
        else:
            s = Session(source, task, user=None, mode="solo", reward_shape="partial")
            try:
                for name, args in prefix:
                    s.call(name, args)
                score = s.evaluate().score
            finally:
                s.close()
        if 0.0 < score < 1.0:
            return task, prefix, score
    raise AssertionError("no task of the small universe earns a partial reward from its first write")


def conversational_score(universe: Path, task: Task, calls: list[tuple[str, dict[str, Any]]]) -> float:
    """The partial reward of ``calls`` in a conversational Session with the scripted user (how the
    SkyRL and verl adapters run a row): the policy's procedure is checked."""
    from scaleenv.integrations.session import Session

    s = Session(task_source(universe), task, user="scripted", mode="conversational", reward_shape="partial")
    try:
        for name, args in calls:
            s.call(name, args)
        return float(s.evaluate().score)
    finally:
        s.close()


def write_task(universe: Path) -> Task:
    """A task whose gold chain writes (refusals and questions have none) and that its first write alone does
    not finish (a second write or a value to state: a session that made only that write scores 0), whatever
    families the build drew."""
    def writes(t: Task) -> int:
        spec = task_source(universe).spec(t.domain)
        return sum(1 for c in t.gold_chain if (tool := spec.tool(c.tool)) is not None and tool.kind == "write")

    return next(t for t in tasks(universe) if writes(t) >= 2 or (writes(t) == 1 and t.answer_facts))
