"""`scaleenv build --llm-language MODEL`: procedural tasks' goals and persona rewritten by a model
(here a scripted one behind the local OpenAI-compatible server), checked, cached and resumable."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fake_openai import FakeOpenAI
from llm_fixture import role_of
from scaleenv.cli import app
from scaleenv.formats.task import Task
from scaleenv.synth.llm.language import apply_language, facts_of, language_problems
from scaleenv.universe import read_tasks

runner = CliRunner()


PLAN: dict[str, set[int]] = {"drop": set(), "leak": set()}
"""The task numbers whose rewrite first drops a goal (repaired) or leaks (falls back): set by the fixture
from the tasks the plain build makes, so that both cases occur whatever tasks the generator draws."""


def rewrite(messages: list[dict]) -> str:
    """A scripted language agent: natural wording that keeps the values; every task in PLAN["drop"]
    first drops a goal (repaired); every task in PLAN["leak"] leaks a withheld fact or invents an id
    (falls back). Keyed by the task's number, not by which request comes first (any of them may)."""
    assert role_of(messages) == "language"
    prompt = messages[1]["content"]
    n = int(re.search(r"\(task (\d+)\)", prompt).group(1))
    persona = re.search(r"Persona \(template\): (.*)", prompt).group(1)
    goals = re.findall(r"^\d+\. (.*)$", prompt.split("one per line:\n")[1].split("\n\n")[0], re.M)
    withheld = re.search(r"keeps back until the agent asks \(none of these values may appear\): (.*)", prompt).group(1)
    new = [f"Hello, hoping you can sort this out for me. {g}" for g in goals]
    if n in PLAN["leak"]:
        leak = withheld.split(": ", 1)[1].split(";")[0] if withheld != "none" else "REF-12345"
        new[0] += f" For reference: {leak}."
    elif n in PLAN["drop"] and len(messages) == 2 and len(new) > 1:
        new = new[:-1]
    return json.dumps({"persona": persona + " You have a busy week and want this done in one go.", "goals": new})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("lang")
    (root / "llm.json").write_text(json.dumps({"backoff": 0.01, "concurrency": 3}))
    plain = runner.invoke(app, ["build", "--domain", "pet_care", "--tasks-per-domain", "4", "--quiet",
                                "--out", str(root / "plain")])
    assert plain.exit_code == 0, plain.output
    attempts = sorted(t.attempt for t in _tasks(root / "plain"))
    PLAN["drop"], PLAN["leak"] = set(attempts[0::2]), set(attempts[1::2])
    with FakeOpenAI(rewrite) as srv:
        def build(out: str, *extra: str):
            return runner.invoke(app, ["build", "--domain", "pet_care", "--tasks-per-domain", "4", "--quiet",
                                       "--llm-language", "scripted-writer", "--base-url", srv.url, "--api-key-env",
                                       "SCALEENV_TEST_KEY", "--llm-cache", str(root / "cache"), "--llm-config",
                                       str(root / "llm.json"), "--out", str(root / out), *extra])

        res = build("u1")
        assert res.exit_code == 0, res.output
        yield root, srv, build


def _tasks(u: Path) -> list[Task]:
    return list(read_tasks(u / "tasks" / "pet_care.jsonl"))


def test_rewrites_keep_the_facts_and_a_failed_one_falls_back(built):
    root, _, _ = built
    new, old = _tasks(root / "u1"), _tasks(root / "plain")
    assert len(new) == len(old) == 4
    statuses = {t.attempt: t.verification.language["status"] for t in new}
    assert "rewritten" in statuses.values() and "template" in statuses.values()
    for t, o in zip(new, old, strict=True):
        assert t.gold_chain == o.gold_chain and t.initial_patch == o.initial_patch  # only the language changed
        assert t.user_profile.known == o.user_profile.known
        assert t.user_profile.withheld == o.user_profile.withheld
        assert len(t.user_profile.goals) == len(o.user_profile.goals)
        if statuses[t.attempt] == "template":
            assert t.attempt in PLAN["leak"] and t.user_profile == o.user_profile and t.instruction == o.instruction
            continue
        text = " ".join([t.user_profile.persona, *t.user_profile.goals]).lower()
        stated, withheld, answers = facts_of(o)
        assert all(v in text for v in stated.values()) and not any(v in text for v in withheld.values())
        assert not any(v in text for v in answers.values())
        assert t.instruction.startswith(t.user_profile.persona) and "busy week" in t.instruction
        assert t.instruction.endswith(o.instruction[o.instruction.index(" Facts you know:"):])
    res = runner.invoke(app, ["check", str(root / "u1"), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["gold_pass"] == 4


def test_language_tokens_are_accounted_per_task(built):
    root, srv, _ = built
    tok = json.loads((root / "u1" / "domains" / "pet_care" / "tokens.json").read_text())
    assert set(tok["by_role"]) == {"language"} and tok["by_role"]["language"]["calls"] == len(srv.requests)
    assert set(tok["by_task"]) == {t.id for t in _tasks(root / "u1")}
    assert tok["language"]["tasks"] == 4 and tok["language"]["template"] >= 1
    repairs = [r for r in srv.requests if len(r["messages"]) > 2]
    dropped = [t for t in _tasks(root / "u1") if t.attempt in PLAN["drop"] and len(t.user_profile.goals) > 1]
    if dropped:  # a task of PLAN["drop"] with two goals first answers with one short
        assert any("there must be exactly" in r["messages"][-1]["content"] for r in repairs)
    assert any("withheld until the agent asks" in r["messages"][-1]["content"] or "do not mention ids" in
               r["messages"][-1]["content"] for r in repairs)  # the leaks of the tasks that fall back


def test_a_rerun_is_free_and_gives_the_same_bytes(built):
    root, srv, build = built
    before = len(srv.requests)
    res = build("u2")
    assert res.exit_code == 0, res.output
    res = build("u1", "--resume")
    assert res.exit_code == 0, res.output
    assert len(srv.requests) == before
    for u in ("u1", "u2"):
        assert (root / u / "tasks" / "pet_care.jsonl").read_bytes() == (root / "u1" / "tasks" /
                                                                        "pet_care.jsonl").read_bytes()


def test_llm_language_and_llm_together_are_refused():
    res = runner.invoke(app, ["build", "--llm", "a", "--llm-language", "b", "--base-url", "http://127.0.0.1:9/v1",
                              "--domain", "x"])
    assert res.exit_code == 2 and "--llm-language" in res.output


def _task(**prof) -> Task:
    profile = {"persona": "You are Ada Park.", "known": {"owner email": "ada@example.com", "amount": 156.8,
                                                         "pet name": "Biscuit"},
               "withheld": ["pet name"], "goals": ["Add a bill of 156.8 for ada@example.com.", "Tell me my balance."],
               **prof}
    return Task(id="d/00000", domain="d", instruction="You are Ada Park. Add a bill of 156.8 for ada@example.com. "
                "Tell me my balance. Facts you know: amount: 156.8. Only reveal pet name if the agent asks for it.",
                user_profile=profile, initial_patch={}, gold_chain=[], answer_facts=[{"name": "balance",
                                                                                       "value": 412.5}],
                tools=[], difficulty={}, verification={"initial_hash": "x"})


@pytest.mark.parametrize("persona,goals,problem", [
    ("You are Ada Park.", ["Please bill 156.8 to ada@example.com."], "exactly 2 goals"),
    ("You are Ada Park.", ["Please bill 156.8 to me.", "What do I owe?"], "ada@example.com"),
    ("You are Ada Park.", ["Bill 156.8 to ada@example.com for Biscuit.", "What do I owe?"], "withheld"),
    ("You are Ada Park.", ["Bill 156.8 to ada@example.com.", "Is it 412.5?"], "learn"),
    ("You are Ada Park.", ["Bill 156.8 to ada@example.com, ref BIL-0042.", "What do I owe?"], "ids"),
    ("You are Ada Perkins.", ["Bill 156.8 to ada@example.com.", "What do I owe?"], "Ada Park"),
])
def test_the_check_names_each_broken_rule(persona, goals, problem):
    problems = language_problems(_task(), {"persona": persona, "goals": goals})
    assert any(problem in p for p in problems), problems


def test_a_good_rewrite_passes_and_keeps_the_facts_tail():
    t = _task()
    obj = {"persona": "You are Ada Park, on your lunch break.",
           "goals": ["Could you put a bill of 156.8 on ada@example.com?", "And what's my balance now?"]}
    assert language_problems(t, obj) == []
    new = apply_language(t, obj["persona"], obj["goals"], {"status": "rewritten"})
    assert new.instruction == ("You are Ada Park, on your lunch break. Could you put a bill of 156.8 on "
                               "ada@example.com? And what's my balance now? Facts you know: amount: 156.8. "
                               "Only reveal pet name if the agent asks for it.")
