"""A labelled corpus of real agent sentences (tests/data/conversation_corpus.jsonl) that pins what the
scripted user and the answer grader must understand of the agent's free text.

Every row is labelled by what a careful human reader understands, not by what the code does. A row the
code gets wrong today carries ``known_failure`` (the cause, in the code's terms) and is marked
``xfail(strict=True)``: a fix flips it to passing, and the field must then be removed from the row.

Kinds (see each row's fields):

* ``answer``: :func:`~scaleenv.reward.facts.fact_stated_in` on ``messages`` equals ``expect``;
* ``report``: :class:`~scaleenv.env.judge.Progress` after ``messages`` has ``done == expect_done``;
* ``acts``: questions / go-ahead / which / cannot of ``message``;
* ``consent``: :func:`~scaleenv.reward.procedure.names_change` equals ``expect``;
* ``yes_no``: :func:`~scaleenv.reward.procedure.reply_says` reads ``reply`` as ``expect``;
* ``reply``: the scripted user of profile ``profile`` (defined here) answers ``message`` through the
  responders ``expect["responders"]`` (one per question, in order), its reply reads as ``expect["says"]``
  and holds ``expect["contains"]`` when given.

Convention for ``acts``: a sentence ending in "?" addressed to the user is a question (courtesy closers
such as "Anything else?" included); a closing courtesy statement without "?" ("Let me know if you need
anything else.") is not.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from scaleenv.env.judge import Progress, asks_which, is_action_confirmation, questions, says_cannot
from scaleenv.formats.task import AnswerFact, Objective
from scaleenv.reward.facts import fact_stated_in
from scaleenv.reward.procedure import names_change, reply_says

CORPUS = Path(__file__).parent / "data" / "conversation_corpus.jsonl"

KINDS = {"answer", "report", "acts", "consent", "yes_no", "reply"}
STYLES = {"terse", "verbose", "markdown", "numbered", "multi_question", "explanation", "number_words", "us_date",
          "iso_date", "spoken_date", "currency", "abbreviation", "quotes_parens", "table", "casual"}
FIELDS = {
    "answer": {"fact", "messages", "expect"},
    "report": {"objectives", "messages", "expect_done"},
    "acts": {"message", "expect"},
    "consent": {"proposal", "tool", "args", "expect"},
    "yes_no": {"reply", "expect"},
    "reply": {"profile", "message", "expect"},
}
COMMON = {"id", "kind", "style", "note"}


def _load() -> list[dict[str, Any]]:
    with CORPUS.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


ROWS = _load()


def _param(row: dict[str, Any]) -> Any:
    marks = []
    if row.get("known_failure"):
        marks.append(pytest.mark.xfail(strict=True, reason=row["known_failure"]))
    return pytest.param(row, id=row["id"], marks=marks)


def _by(kind: str) -> list[Any]:
    return [_param(r) for r in ROWS if r["kind"] == kind]


# ------------------------------------------------------------------------------------- the corpus itself

def test_corpus_is_well_formed() -> None:
    assert len(ROWS) >= 320
    ids = [r["id"] for r in ROWS]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    for r in ROWS:
        assert r["kind"] in KINDS, r["id"]
        assert r["style"] in STYLES, r["id"]
        assert isinstance(r["note"], str) and r["note"].strip() and "\n" not in r["note"], r["id"]
        extra = set(r) - COMMON - FIELDS[r["kind"]] - {"known_failure"}
        assert not extra, (r["id"], extra)
        assert FIELDS[r["kind"]] <= set(r), r["id"]
        if "known_failure" in r:
            assert isinstance(r["known_failure"], str) and r["known_failure"].strip(), r["id"]
        if r["kind"] == "report":
            assert len(r["objectives"]) == len(r["expect_done"]), r["id"]
        if r["kind"] == "yes_no":
            assert r["expect"] in ("yes", "no", "neither"), r["id"]


# ------------------------------------------------------------------------------------------------ checks

@pytest.mark.parametrize("row", _by("answer"))
def test_answer(row: dict[str, Any]) -> None:
    f = row["fact"]
    fact = AnswerFact(name=f["name"], value=f["value"], rivals=f["rivals"])
    assert fact_stated_in(fact, row["messages"]) == row["expect"], row["note"]


@pytest.mark.parametrize("row", _by("report"))
def test_report(row: dict[str, Any]) -> None:
    p = Progress([Objective(**o) for o in row["objectives"]])
    for m in row["messages"]:
        p.update(m)
    assert p.done == row["expect_done"], row["note"]


def _acts(message: str) -> dict[str, bool]:
    qs = questions(message)
    return {"question": bool(qs), "go_ahead": any(is_action_confirmation(q) for q in qs),
            "which": any(asks_which(q) for q in qs), "cannot": says_cannot(message)}


@pytest.mark.parametrize("row", _by("acts"))
def test_acts(row: dict[str, Any]) -> None:
    assert _acts(row["message"]) == row["expect"], row["note"]


@pytest.mark.parametrize("row", _by("consent"))
def test_consent(row: dict[str, Any]) -> None:
    assert names_change(row["proposal"], row["tool"], row["args"]) == row["expect"], row["note"]


def _said(reply: str) -> str:
    return reply_says(reply)


@pytest.mark.parametrize("row", _by("yes_no"))
def test_yes_no(row: dict[str, Any]) -> None:
    assert _said(row["reply"]) == row["expect"], row["note"]


# ------------------------------------------------------------------------------------------ the user's replies

_REX_GOAL = "Please book a checkup for my pet Rex on 2026-05-10 and pay 120.50 for it."
_CASE_GOAL = ("I'd like to add a new support case (subject: Cannot make international calls, details: I see an "
              "unknown charge on this month's statement.) for my account.")
PROFILES: dict[str, dict[str, Any]] = {
    "pet_rex": {
        "domain": "pet_care",
        "profile": {
            "persona": "You are Jerry Ware.", "goals": [_REX_GOAL],
            "known": {"owner email": "jerry@example.com", "owner full name": "Jerry Ware", "pet name": "Rex",
                      "pet birth date": "2019-03-02", "amount": 120.5},
            "identity": ["owner email", "owner full name"],
            "objectives": [{"kind": "write", "text": _REX_GOAL, "done_words": ["booked", "paid"],
                            "subject": ["checkup", "pet"]}]},
    },
    "telecom_case": {
        "domain": "telecom",
        "profile": {
            "persona": "You are Natasha Robinson.", "goals": [_CASE_GOAL],
            "known": {"customer email": "nrobinson@example.com", "customer full name": "Natasha Robinson",
                      "subject": "Cannot make international calls",
                      "details": "I see an unknown charge on this month's statement."},
            "identity": ["customer email", "customer full name"],
            "pushback": "Really? Can't you make an exception just this once?",
            "objectives": [{"kind": "write", "text": _CASE_GOAL, "done_words": ["registered", "opened"],
                            "subject": ["support case"]}]},
    },
}
"""The users the ``reply`` rows talk to (a task reduced to its user profile and domain)."""


def _user_of(name: str) -> Any:
    import asyncio
    import random

    from scaleenv.env.users import ScriptedUser, UserContext
    from scaleenv.formats.task import Task
    from synth_helpers import context

    spec = PROFILES[name]
    task = Task.model_validate({"id": f"{spec['domain']}/00000", "domain": spec["domain"], "instruction": "x",
                                "initial_patch": {}, "gold_chain": [], "tools": [], "difficulty": {},
                                "verification": {}, "user_profile": spec["profile"]})
    user = ScriptedUser(patience=5, varied=False)
    user.reset(UserContext(task=task, rng=random.Random(0), spec=context(spec["domain"]).spec))
    asyncio.run(user.opening())
    return user


@pytest.mark.parametrize("row", _by("reply"))
def test_reply(row: dict[str, Any]) -> None:
    import asyncio

    user = _user_of(row["profile"])
    out = asyncio.run(user.reply(row["message"]))
    want = row["expect"]
    assert (user.responders, reply_says(out)) == (want["responders"], want["says"]), (row["note"], out)
    if "contains" in want:
        assert want["contains"] in out, (row["note"], out)
