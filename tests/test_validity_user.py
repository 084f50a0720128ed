"""Task validity, user half: the scripted user never sees the reward or the world (its replies to a
fixed transcript do not depend on them), understands the domain's words, confirms, follows its
decision points, says when it does not know, and recaps only what is still open."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from scaleenv.env.cache import TaskWorldCache
from scaleenv.env.core import ToolEnv
from scaleenv.env.judge import Progress, objectives_of
from scaleenv.env.language import spoken
from scaleenv.env.users import ScriptedUser, UserContext
from scaleenv.formats.task import REFUSAL_FACT, Decision, Objective, Task
from scaleenv.formats.trajectory import STOP
from scaleenv.synth.build import BuildConfig, prepare_out, run_build
from scaleenv.tools.chain import resolve_args
from scaleenv.universe import Universe


@pytest.fixture(scope="module")
def universe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("validity_user") / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care", "job_seeking", "stock_trading"], tasks_per_domain=4)
    prepare_out(cfg)
    run_build(cfg)
    return out


@pytest.fixture(scope="module")
def loader(universe):
    u = Universe(universe)
    return u, TaskWorldCache(u)


def _wrong(v: object) -> object:
    if isinstance(v, bool):
        return not v
    if isinstance(v, int | float):
        return v + 7
    return f"{v}-x"


def _transcript(task: Task, *, right: bool) -> list[str]:
    """What a careful agent says: questions, a confirmation, progress chatter, then its report with
    every answer (right or wrong values: the user cannot tell)."""
    facts = [f"I cannot do that, our policy does not allow it: {f.value if right else _wrong(f.value)}."
             if f.name == REFUSAL_FACT else f"The {f.name.replace('_', ' ')} is {spoken(f.value if right else _wrong(f.value))}."
             for f in task.answer_facts]
    # a user who says its requests one at a time hears the report once per request
    reports = len(task.user_profile.goals) if task.user_profile.gradual else 1
    return ["Hello! What is your id?", "Could you give me your email address?", "I am looking into it.",
            "Shall I go ahead with the change?", "What is your favourite colour?",
            *[" ".join(["Your request has been completed.", *facts])] * reports]


def _replies(loader, task: Task, *, act: bool, right: bool) -> list[str]:
    u, cache = loader
    env = ToolEnv(task, cache.acquire(task), user=ScriptedUser(patience=10, varied=False), release=lambda ep: cache.release(task, ep))
    try:
        obs, _ = env.reset()
        replies = [obs[-1]["content"]]
        if act:  # do the work (the user is not told)
            outputs: list[object] = []
            for i, call in enumerate(task.gold_chain):
                res = env.call(call.tool, resolve_args(call, outputs, i))
                assert res.ok, res.output
                outputs.append(res.value)
        for text in _transcript(task, right=right):
            if env.done:
                break
            obs, *_ = env.step({"role": "assistant", "content": text})
            replies.append(obs[-1]["content"] if obs else "")
        # the work and the answers are right (the writes were made before the user's yes, so the policy's
        # procedure is not met: that is another test's business, the user cannot see it either)
        components = env.evaluate().components
    finally:
        env.close()
    if act and right:
        assert components["state_match"] == 1.0 and components["answer_facts"] == 1.0
    return replies


def test_user_replies_do_not_depend_on_the_world_or_the_answers(loader):
    """For every task: the same transcript gets the same replies whether the world matches the
    expected state or not and whether the stated answers are right or wrong."""
    u, _ = loader
    tasks = u.tasks()
    assert len(tasks) >= 10
    for task in tasks:
        runs = {(act, right): _replies(loader, task, act=act, right=right)
                for act in (True, False) for right in (True, False)}
        first = runs[(True, True)]
        assert all(r == first for r in runs.values()), task.id
        if task.user_profile.pushback and task.user_profile.pushback in first:  # presses once at the first "cannot"
            assert first.count(task.user_profile.pushback) == 1, task.id
        else:
            assert STOP in first[-1], (task.id, first[-1])  # the report of every goal ends the conversation
        assert "I don't know that, sorry." in first[5]
        assert first[4].startswith("Yes, please go ahead.")


def test_the_user_ends_when_told_done_not_when_the_reward_says_so(loader):
    u, _ = loader
    task = next(t for t in u.tasks() if any(o.kind == "write" for o in t.user_profile.objectives))
    user = ScriptedUser(patience=5, varied=False)
    user.reset(UserContext(task=task, rng=None, spec=u.spec(task.domain)))
    asyncio.run(user.opening())
    reply = asyncio.run(user.reply("I could not complete the change, there was an error."))
    assert STOP not in reply and "I still need this" in reply
    report = " ".join(["All done: your request has been completed."]
                      + [f"The {f.name} is {spoken(f.value)}." for f in task.answer_facts])
    assert STOP in asyncio.run(user.reply(report))


def test_identity_and_vocabulary(loader):
    u, _ = loader
    task = next(t for t in u.tasks() if t.domain == "job_seeking")
    known = task.user_profile.known
    user = ScriptedUser(varied=False)
    user.reset(UserContext(task=task, rng=None, spec=u.spec(task.domain)))
    asyncio.run(user.opening())
    ident = asyncio.run(user.reply("What is your ID?"))
    assert task.user_profile.identity
    for fact in task.user_profile.identity:
        assert spoken(known[fact]) in ident
    if "candidate id" in known:
        assert spoken(known["candidate id"]) in asyncio.run(user.reply("Could you give me your job seeker id?"))


def test_scripted_user_understands_synonyms_and_decides():
    task = Task.model_validate({
        "id": "shop/00000", "domain": "shop", "instruction": "x", "initial_patch": {}, "gold_chain": [], "tools": [],
        "difficulty": {}, "verification": {},
        "user_profile": {
            "persona": "You are Ada Lovelace.",
            "goals": ["Please order the blue kettle with promo code SPRING.", "What is my loyalty balance?"],
            "known": {"customer email": "ada@example.com", "customer full name": "Ada Lovelace",
                      "order number": "ORD-0042", "promo code": "SPRING"},
            "identity": ["customer email", "customer full name"],
            "objectives": [
                Objective(kind="write", text="Please order the blue kettle with promo code SPRING.",
                          done_words=["ordered", "placed"], subject=["order", "kettle"]).model_dump(),
                Objective(kind="read", text="What is my loyalty balance?",
                          asks=["loyalty balance", "balance", "points"]).model_dump(),
            ],
            "decisions": [Decision(when=["promo code", "rejected"], say="Then order it without the code.")
                          .model_dump()],
        },
    })
    user = ScriptedUser(patience=3, varied=False)
    user.reset(UserContext(task=task, rng=None))

    def say(text: str) -> str:
        return asyncio.run(user.reply(text))

    asyncio.run(user.opening())
    assert say("Can I have your e-mail?") == "My email is ada@example.com."
    assert say("What's your order reference?") == "My order's number is ORD-0042."
    assert "ada@example.com" in say("Please verify your identity.")
    assert say("Is that correct?") == "Yes, please go ahead."
    assert say("The promo code was rejected. How should I continue?") == "Then order it without the code."
    assert say("What's the weather like?") == "I don't know that, sorry."
    # a recap lists only what is open: after the order is reported, only the question is left
    reply = say("Your kettle has been ordered.")
    assert "What is my loyalty balance?" in reply and "kettle" not in reply and STOP not in reply
    assert STOP in say("Your loyalty balance is 120 points.")


def test_older_task_files_get_objectives_from_their_goals(loader):
    u, _ = loader
    task = next(t for t in u.tasks() if t.answer_facts and t.family == "direct")  # older files: no families
    old = task.model_copy(update={"user_profile": task.user_profile.model_copy(update={"objectives": [],
                                                                                         "identity": []})})
    objectives = objectives_of(old)
    assert len(objectives) == len(task.user_profile.goals)
    assert [o.kind for o in objectives].count("read") >= 1
    progress = Progress(objectives)
    progress.update("Your request has been completed. " + " ".join(
        f"The {f.name.replace('_', ' ')} is {spoken(f.value)}." for f in task.answer_facts))
    assert progress.finished()


def test_progress_ignores_failures_questions_and_chatter():
    objectives = [Objective(kind="write", text="Cancel my visit.", done_words=["cancelled"], subject=["visit"]),
                  Objective(kind="read", text="What is my balance?", asks=["balance"])]
    p = Progress(objectives)
    assert not p.update("Should I cancel the visit?")
    assert not p.update("I couldn't cancel the visit: it has already started.")
    assert not p.update("Let me check.")
    assert p.update("The visit is cancelled.") and [o.text for o in p.pending()] == ["What is my balance?"]
    assert p.update("Your balance is $12.50.") and p.finished()


def test_content_parts_are_heard_and_scored_end_to_end(loader):
    """An agent replying with OpenAI content parts (a list, not a string) is heard by the user and
    its answers count."""
    u, cache = loader
    task = next(t for t in u.tasks() if t.answer_facts and t.family == "direct")
    env = ToolEnv(task, cache.acquire(task), user=ScriptedUser(varied=False), release=lambda ep: cache.release(task, ep))
    try:
        env.reset()
        outputs: list[object] = []
        for i, call in enumerate(task.gold_chain):
            outputs.append(env.call(call.tool, resolve_args(call, outputs, i)).value)
        parts = [{"type": "text", "text": "Your request has been completed."},
                 *({"type": "text", "text": f"The {f.name.replace('_', ' ')} is {spoken(f.value)}."}
                   for f in task.answer_facts)]
        obs, reward, terminated, _, info = env.step({"role": "assistant", "content": parts})
        components = env.evaluate().components
        # heard (the user is done) and scored (the answers count; the writes came before any yes, so the
        # policy's procedure is not met, which this test does not look at)
        assert terminated and info["termination"] == "user_done", env.evaluate().diff
        assert components["answer_facts"] == 1.0 and components["state_match"] == 1.0, env.evaluate().diff
    finally:
        env.close()


def test_language_defects_finds_the_seams():
    from scaleenv.env.language import language_defects, polish, self_names

    assert language_defects("Please apply promo code promo code SAVE10.") == ["doubled_word: 'promo code promo code'"]
    assert language_defects("Reserve a item for me.") == ["article: 'a item'"]
    assert language_defects("Enroll {student} now.") == ["unfilled_slot: '{student}'"]
    assert language_defects("It costs None.") == ["unfilled_slot: 'None'"]
    assert language_defects("Book it with vet VET-0006 at noon.") == []  # a noun and its id
    persona = "You are Timothy Mitchell."
    assert self_names(persona) == ["Timothy Mitchell"] and self_names("You are a staff member looking after x.") == []
    assert language_defects("the points for my owner Timothy Mitchell", self_names=self_names(persona)) == [
        "self_reference: 'my owner Timothy Mitchell'"]
    assert polish("Book a express shipment for the plan plan.") == "Book an express shipment for the plan."


def test_generated_goals_read_without_seams(loader):
    from scaleenv.env.language import language_defects, self_names

    u, _ = loader
    for task in u.tasks():
        profile = task.user_profile
        assert len(profile.objectives) == len(profile.goals), task.id
        for goal in profile.goals:
            assert language_defects(goal, self_names=self_names(profile.persona)) == [], (task.id, goal)


def test_vocabulary_matches_the_domains_words(loader):
    from scaleenv.env.vocabulary import Vocabulary

    u, _ = loader
    v = Vocabulary(u.spec("job_seeking"), ["candidate id", "candidate full name", "interview scheduled at",
                                           "application id", "reason"])
    assert v.asked("Could you give me your job seeker id?") == ["candidate id"]  # the tools' name for it
    assert v.asked("What's the reference of the application?") == ["application id"]
    assert v.asked("When is the interview scheduled?") == ["interview scheduled at"]
    assert sorted(v.asked("Which job seeker are you? What is your candidate number and full name?")) == [
        "candidate full name", "candidate id"]
    assert v.asked("What is the reason?") == ["reason"]
    assert v.asked("Have you enrolled anywhere?") == []
    pets = Vocabulary(u.spec("pet_care"), ["pet name", "pet birth date", "owner email"])
    assert pets.asked("Which pet is it?") == ["pet name", "pet birth date"]
    assert pets.asked("What is its date of birth?", "Which pet is the visit for? What is its date of birth?") == [
        "pet birth date"]
    assert pets.asked("And its name?", "I found two pets. And its name?") == ["pet name"]
    assert pets.statement("pet birth date", "2017-04-01") == "My pet's birth date is 2017-04-01."
    assert pets.statement("owner email", "a@b.c", mine=["owner email"]) == "My email is a@b.c."
