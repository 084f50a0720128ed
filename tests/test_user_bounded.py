"""The scripted user reads a bounded message in time linear in its length (issue 42, case 7: a message of many
confirmation sentences took time quadratic in its length, 48.8 s for 18 KB), and over MCP one session's slow
request does not hold up another's. No timings: the tests count the work done."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable
from typing import Any

import pytest

import scaleenv.env.judge as judge
import scaleenv.env.vocabulary as vocabulary
from scaleenv.env.judge import asks_which
from scaleenv.env.responders import _open_question, _undictated
from scaleenv.env.users import (
    MESSAGE_LIMIT,
    TOO_LONG,
    ScriptedUser,
    UserContext,
)
from scaleenv.formats.task import Objective, Task
from scaleenv.formats.trajectory import STOP
from scaleenv.integrations.mcp_server import SessionWorlds
from synth_helpers import context

GOAL = "Please book a checkup for my pet Rex on 2026-05-10 and pay 120.50 for it."


def _task() -> Task:
    return Task.model_validate({
        "id": "pet_care/00000", "domain": "pet_care", "instruction": "x", "initial_patch": {}, "gold_chain": [],
        "tools": [], "difficulty": {}, "verification": {},
        "user_profile": {
            "persona": "You are Jerry Ware.", "goals": [GOAL],
            "known": {"owner email": "jerry@example.com", "owner full name": "Jerry Ware", "pet name": "Rex",
                      "pet birth date": "2019-03-02", "amount": 120.5},
            "identity": ["owner email", "owner full name"],
            "objectives": [Objective(kind="write", text=GOAL, done_words=["booked", "paid"],
                                     subject=["checkup", "pet"]).model_dump()]},
    })


def _user(patience: int = 2) -> ScriptedUser:
    user = ScriptedUser(patience=patience, varied=False)
    user.reset(UserContext(task=_task(), rng=random.Random(0), spec=context("pet_care").spec))
    asyncio.run(user.opening())
    return user


def _reply(user: ScriptedUser, text: str) -> str:
    return asyncio.run(user.reply(text))


def _confirmations(n: int) -> str:
    """``n`` go-ahead questions, each naming records and values of its own (none the user's)."""
    return " ".join(f"Shall I go ahead and book PET-{i:04d} for Rex on 2026-06-{i % 28 + 1:02d} for {200 + i}.25? "
                    f"Its owner e-mail is owner{i}@example.org." for i in range(n))


# ------------------------------------------------------------------ the bound


def test_a_message_over_the_limit_gets_a_short_reply_and_no_yes():
    user = _user()
    head = "Done: the checkup for Rex is booked and 120.50 is paid. Shall I go ahead? What is your email? "
    long = head + "x" * (MESSAGE_LIMIT + 1 - len(head))
    assert len(long) == MESSAGE_LIMIT + 1
    reply = _reply(user, long)
    assert reply == TOO_LONG
    assert "Yes" not in reply and "jerry@example.com" not in reply and STOP not in reply
    assert user.progress.done == [False]  # the report in it counts for nothing
    # the same words within the limit are read: a report, so the user is done
    assert _reply(user, head.split(" Shall")[0]).endswith(STOP)


def test_a_message_at_the_limit_is_read():
    user = _user()
    question = "Shall I go ahead?"
    text = "Fine. " * ((MESSAGE_LIMIT - len(question)) // 6) + question
    assert len(text) <= MESSAGE_LIMIT
    assert _reply(user, text).startswith("Yes, please go ahead.")


def test_long_messages_end_the_conversation_like_any_other_message_that_gets_nowhere():
    user = _user(patience=2)
    long = "Shall I go ahead? " * (MESSAGE_LIMIT // 10)
    assert [_reply(user, long) for _ in range(2)] == [TOO_LONG, TOO_LONG]
    assert _reply(user, long).endswith(STOP)


# ------------------------------------------------------------------ linear work


def test_the_whole_message_is_checked_for_wrong_values_once_not_once_per_question(monkeypatch):
    calls: list[int] = []
    checked = ScriptedUser.wrong_fact

    def counted(self: ScriptedUser, text: str) -> str | None:
        calls.append(len(text))
        return checked(self, text)

    monkeypatch.setattr(ScriptedUser, "wrong_fact", counted)
    user = _user()
    text = _confirmations(30)
    assert len(text) < MESSAGE_LIMIT
    reply = _reply(user, text)
    assert len(calls) == 1  # one scan of the whole message, not one per go-ahead question
    # the wrong date and amount are still caught, and said once
    assert reply.startswith("No, that is not right:") and reply.count("No, that is not right") == 1


def _normalised_per_char(monkeypatch: pytest.MonkeyPatch, text: str) -> float:
    """Characters the user normalises (:func:`~scaleenv.env.vocabulary.norm`) to reply to ``text``, per character
    of ``text``."""
    read = [0]
    plain = vocabulary.norm

    def counted(s: str) -> str:
        read[0] += len(s)
        return plain(s)

    monkeypatch.setattr(vocabulary, "norm", counted)
    monkeypatch.setattr(judge, "norm", counted)
    user = _user(patience=100)
    _reply(user, text)
    return read[0] / len(text)


@pytest.mark.parametrize("question", [
    "Which pet do you mean, PET-{i:04d}?",  # a record named before "which": read from the whole message
    "I see PET-{i:04d}. What is its birth date?",  # "its": the noun taken from the whole message
])
def test_a_reply_reads_each_character_a_bounded_number_of_times(monkeypatch, question: str):
    def message(n: int) -> str:
        return " ".join(question.format(i=i) for i in range(n))

    few, many = (_normalised_per_char(monkeypatch, message(n)) for n in (10, 80))
    assert len(message(80)) < MESSAGE_LIMIT
    assert many <= few, (few, many)  # eight times the questions: no more reading per character


def test_quoted_text_and_open_questions_are_found_in_one_pass():
    assert _undictated('Shall I set the note to "Or later." (or never): either, or both?') == \
        "Shall I set the note to  : either, or both?"
    assert _undictated("Shall I send it with the text: see you then or later") == "Shall I send it with the text"
    assert _undictated("Shall I (a (b) go") == "Shall I  go"
    unclosed = "Shall I note ( this ( or ( that ? or not"
    assert _undictated(unclosed) == unclosed
    sentence = "I booked it. What priority would you like for it, or should I leave the default?"
    assert _open_question(sentence) == sentence.index("What")
    assert _open_question("What is it. Would you like it?") is None  # the question word before a stop
    assert _open_question("Shall I go ahead?") is None
    assert asks_which("Which of the two bookings is it?") and asks_which("which booking is the one you meant?")
    assert not asks_which("Which booking? Is it the first?")


# ------------------------------------------------------------------ MCP: no session waits on another


def _anyio() -> Any:
    return pytest.importorskip("anyio")  # with the mcp extra (the server needs it), and with openai


class _Fake:
    def __init__(self, closed: list[_Fake]):
        self.closed = closed

    def close(self) -> None:
        self.closed.append(self)


def test_a_session_at_work_does_not_hold_up_another():
    anyio = _anyio()
    closed: list[_Fake] = []
    worlds = SessionWorlds(lambda: _Fake(closed), 2)  # type: ignore[arg-type, return-value]
    slow, quick = worlds.get("slow"), worlds.get("quick")
    gate, started = threading.Event(), threading.Event()
    released: list[bool] = []

    def held(_: object) -> str:
        started.set()
        released.append(gate.wait(20))  # returns once the other session's request is done (or never on the loop)
        return "slow"

    def free(_: object) -> str:
        gate.set()
        return "quick"

    async def main() -> list[str]:
        out: list[str] = []

        async def first() -> None:
            out.append(await worlds.run(slow, held))  # type: ignore[arg-type]

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await anyio.to_thread.run_sync(started.wait, 30)
            out.append(await worlds.run(quick, free))  # type: ignore[arg-type]
        return out

    assert anyio.run(main) == ["quick", "slow"]
    assert released == [True]


def test_one_sessions_requests_run_one_at_a_time_in_order():
    anyio = _anyio()
    worlds = SessionWorlds(lambda: _Fake([]), 1)  # type: ignore[arg-type, return-value]
    session = worlds.get("a")
    running: list[int] = []
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def work(n: int) -> Callable[[object], int]:
        def run(_: object) -> int:
            with lock:
                running.append(n)
                seen.append((n, len(running)))
            threading.Event().wait(0.01)
            with lock:
                running.remove(n)
            return n
        return run

    async def main() -> list[int]:
        done: list[int] = []

        async def one(n: int) -> None:
            done.append(await worlds.run(session, work(n)))  # type: ignore[arg-type]

        async with anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(one, n)
                await anyio.sleep(0)
        return done

    assert anyio.run(main) == [0, 1, 2, 3, 4]
    assert all(at_once == 1 for _, at_once in seen)


def test_a_session_evicted_at_work_is_closed_when_its_request_ends():
    anyio = _anyio()
    closed: list[_Fake] = []
    worlds = SessionWorlds(lambda: _Fake(closed), 1)  # type: ignore[arg-type, return-value]
    busy = worlds.get("a")
    gate, started = threading.Event(), threading.Event()

    def held(_: object) -> None:
        started.set()
        gate.wait(30)

    async def main() -> list[Any]:
        states: list[Any] = []

        async def first() -> None:
            await worlds.run(busy, held)  # type: ignore[arg-type]

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await anyio.to_thread.run_sync(started.wait, 30)
            worlds.get("b")  # evicts "a", which is at work
            states.append(list(closed))
            gate.set()
        states.append(list(closed))
        return states

    during, after = anyio.run(main)
    assert during == [] and after == [busy]


def test_the_mcp_server_does_a_tool_call_off_the_event_loop(monkeypatch):
    pytest.importorskip("mcp")
    anyio = _anyio()
    from types import SimpleNamespace

    from integrations_support import small_universe, tasks
    from scaleenv.integrations.mcp_server import build_mcp_server
    from scaleenv.integrations.session import USER_TOOL, Session, task_source

    u = small_universe()
    task = tasks(u)[0]
    server = build_mcp_server(task_source(u), task)
    gate, started = threading.Event(), threading.Event()
    released: list[bool] = []
    call = Session.call

    def slow_call(self: Session, name: str, args: dict[str, Any]) -> Any:
        if args.get("message") == "slow":
            started.set()
            released.append(gate.wait(20))  # on the event loop, nothing else could run until it gave up
        return call(self, name, args)

    monkeypatch.setattr(Session, "call", slow_call)
    handlers = server.scaleenv_handlers

    def ctx(sid: str) -> SimpleNamespace:
        return SimpleNamespace(session=SimpleNamespace(_connection=SimpleNamespace(session_id=sid)), request=None)

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(handlers["call_tool"], ctx("a"), SimpleNamespace(name=USER_TOOL, arguments={"message": "slow"}))
            await anyio.to_thread.run_sync(started.wait, 30)
            listed = await handlers["list_tools"](None, None)
            assert USER_TOOL in {t.name for t in listed.tools}
            res = await handlers["call_tool"](ctx("b"), SimpleNamespace(name=USER_TOOL, arguments={"message": "Hello"}))
            assert not getattr(res, "is_error", False)
            gate.set()

    anyio.run(main)
    assert released == [True]
