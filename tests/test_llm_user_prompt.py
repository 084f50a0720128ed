"""The LLM user's prompt (:func:`scaleenv.env.user_prompt.user_prompt`): what it shares and withholds, what it must
never leak (answers, tools, outcomes), when it stops, and the behaviour its profile adds (pace, pushback, slip,
decisions). Hermetic: tasks come from a small build in a temporary directory, or are made here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scaleenv.env.language import spoken
from scaleenv.env.user_prompt import (
    ACCEPT_PROMPT,
    ALL_AT_ONCE_PROMPT,
    DECISIONS_PROMPT,
    GRADUAL_PROMPT,
    PUSHBACK_PROMPT,
    SLIP_PROMPT,
    user_prompt,
)
from scaleenv.formats.task import Decision, Task
from scaleenv.formats.trajectory import STOP
from scaleenv.synth.build import BuildConfig, prepare_out, run_build
from scaleenv.universe import Universe

SHARED = "Facts you may share"
ASK_ONLY = "Facts you share ONLY if the agent asks"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> list[Task]:
    out: Path = tmp_path_factory.mktemp("llm_user_prompt") / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care", "job_seeking", "wedding_planning"], tasks_per_domain=8,
                      tier_mix={"medium": 1.0, "hard": 1.0, "expert": 1.0})
    prepare_out(cfg)
    run_build(cfg)
    built = Universe(out).tasks()
    assert len(built) >= 12
    return built


def _sections(prompt: str) -> tuple[str, str]:
    """The shared-facts section and the ask-only section of a prompt."""
    shared = prompt.split(SHARED, 1)[1].split(ASK_ONLY, 1)[0]
    lines = prompt.split(ASK_ONLY, 1)[1].split("\n")[1:]
    asked = "\n".join(line for line in lines[: next(i for i, x in enumerate(lines) if not x.startswith("  "))])
    return shared, asked


def _mentions(text: str, value: str) -> bool:
    return re.search(r"(?<![\w.])" + re.escape(value) + r"(?![\w]|\.\d)", text, re.IGNORECASE) is not None


def _with(task: Task, **update) -> Task:
    return task.model_copy(update={"user_profile": task.user_profile.model_copy(update=update)})


def test_withheld_facts_are_ask_only_and_not_among_the_shared_ones(tasks):
    checked = 0
    for task in tasks:
        profile = task.user_profile
        withheld = [w for w in profile.withheld if w in profile.known]
        shared, asked = _sections(user_prompt(task))
        for name in withheld:
            value = spoken(profile.known[name])
            assert f"{name}: {value}" in asked, (task.id, name)
            assert f"{name}:" not in shared and not _mentions(shared, value), (task.id, name)
            checked += 1
        for name, value in profile.known.items():
            if name not in withheld:
                assert f"{name}: {spoken(value)}" in shared, (task.id, name)
        if not withheld:
            assert asked.strip() == "(none)", task.id
    assert checked >= 5


def test_a_withheld_value_in_a_goal_is_hidden_there_too(tasks):
    task = next(t for t in tasks if any(w in t.user_profile.known for w in t.user_profile.withheld))
    name = next(w for w in task.user_profile.withheld if w in task.user_profile.known)
    value = spoken(task.user_profile.known[name])
    goals = [f"Please look at my account ({value}) and tell me my balance.", *task.user_profile.goals[1:]]
    prompt = user_prompt(_with(task, goals=goals))
    wants = prompt.split("What you want", 1)[1].split(SHARED, 1)[0]
    assert not _mentions(wants, value) and f"[your {name}: only if asked]" in wants
    assert f"{name}: {value}" in _sections(prompt)[1]


def test_no_answer_tool_or_outcome_leaks_into_the_prompt(tasks):
    answers = 0
    for task in tasks:
        prompt = user_prompt(task)
        asked_for = " ".join([*task.user_profile.goals, *map(spoken, task.user_profile.known.values())])
        for fact in task.answer_facts:
            if isinstance(fact.value, list | dict):
                continue
            value = spoken(fact.value)
            if len(value) < 2 or _mentions(asked_for, value):
                continue  # a value the user's own request holds ("move it into screening", then "its status?")
            assert not _mentions(prompt, value), (task.id, fact.name, value)
            answers += 1
        for call in task.gold_chain:
            assert call.tool not in prompt, (task.id, call.tool)
        for rival in (r for f in task.answer_facts for r in f.rivals if isinstance(r, str) and len(r) > 3):
            if not _mentions(asked_for, rival):
                assert not _mentions(prompt, rival), (task.id, rival)
        for word in ("gold", "oracle", "reward", "expected_hash"):
            assert word not in prompt.lower(), (task.id, word)
    assert answers >= 5


def test_the_stop_rules_are_told(tasks):
    prompt = user_prompt(tasks[0])
    assert prompt.count(STOP) == 2
    assert "When every request is dealt with, or the agent says it cannot help you any further" in prompt
    assert "Never end while the agent's last message still asks you something you can answer" in prompt
    assert "has not done it yet" in prompt  # an offer or a plan is not a request done
    assert "don't know" in prompt and "Never invent" in prompt
    assert "Say no to anything the agent offers that you did not ask for" in prompt
    assert "clear yes" in prompt and "clear no" in prompt
    for word in ("database", "tool", "simulation"):
        assert word in prompt  # named only to be forbidden
    assert "never mention a database, tools, instructions, a script, a test or a simulation" in prompt


def test_pushback_is_told_only_when_the_profile_has_one(tasks):
    task = tasks[0]
    pressing = user_prompt(_with(task, pushback="Surely you can make an exception this once?"))
    assert "Surely you can make an exception this once?" in pressing
    assert PUSHBACK_PROMPT.split("{")[0] in pressing and ACCEPT_PROMPT not in pressing
    plain = user_prompt(_with(task, pushback=""))
    assert PUSHBACK_PROMPT.split("{")[0] not in plain and ACCEPT_PROMPT in plain and "{pushback}" not in plain
    built = [t for t in tasks if t.user_profile.pushback]
    for t in built:
        assert t.user_profile.pushback in user_prompt(t)


def test_decisions_are_told_only_when_the_profile_has_some(tasks):
    task = tasks[0]
    deciding = user_prompt(_with(task, decisions=[Decision(when=["promo code", "rejected"],
                                                           say="Then order it without the code.")]))
    assert DECISIONS_PROMPT in deciding
    assert "promo code" in deciding and "rejected" in deciding and "Then order it without the code." in deciding
    for t in tasks:
        if not t.user_profile.decisions:
            assert DECISIONS_PROMPT not in user_prompt(t)


def test_the_pace_follows_the_profile(tasks):
    task = next(t for t in tasks if len(t.user_profile.goals) >= 2)
    gradual, at_once = user_prompt(_with(task, gradual=True)), user_prompt(_with(task, gradual=False))
    assert GRADUAL_PROMPT in gradual and ALL_AT_ONCE_PROMPT not in gradual
    assert ALL_AT_ONCE_PROMPT in at_once and GRADUAL_PROMPT not in at_once


def test_the_slip_is_told_only_when_the_profile_has_one(tasks):
    slipped = [t for t in tasks if t.user_profile.slip is not None]
    for t in slipped:
        prompt = user_prompt(t)
        assert SLIP_PROMPT.split("{")[0] in prompt and t.user_profile.slip.said in prompt
    for t in tasks:
        if t.user_profile.slip is None:
            assert SLIP_PROMPT.split("{")[0] not in user_prompt(t)


def test_persona_goals_and_identity_are_given(tasks):
    for task in tasks:
        prompt = user_prompt(task)
        assert task.user_profile.persona.strip() in prompt
        hidden = [spoken(v) for k, v in task.user_profile.known.items() if k in task.user_profile.withheld]
        assert all(g in prompt for g in task.user_profile.goals if not any(_mentions(g, h) for h in hidden))
        who = [f for f in task.user_profile.identity if f in task.user_profile.known]
        if who:
            assert ", ".join(who) in prompt, task.id
        assert not re.search(r"\{[a-z]+\}", prompt), task.id  # every slot filled


def test_a_custom_template_keeps_its_placeholders_and_gets_the_profile_extras(tasks):
    task = _with(tasks[0], gradual=True, pushback="Are you sure?")
    prompt = user_prompt(task, "Play {persona}. Want: {goals}. Know: {known}. Ask-only: {withheld}.")
    assert prompt.startswith("Play ") and "{" not in prompt
    assert GRADUAL_PROMPT in prompt and "Are you sure?" in prompt
    assert ACCEPT_PROMPT not in prompt and ALL_AT_ONCE_PROMPT not in prompt
    own = user_prompt(task, "Play {persona}; when refused say \"{pushback}\".")
    assert own.count("Are you sure?") == 1 and PUSHBACK_PROMPT.split("{")[0] not in own
