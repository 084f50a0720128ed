"""A user who says its requests one at a time: the first in its opening, each next one once those
before are dealt with; marked only at the hard and expert tiers; told to the LLM user and in exports."""

from __future__ import annotations

import asyncio
import random

import pytest

from scaleenv.env.user_prompt import GRADUAL_PROMPT, user_prompt
from scaleenv.env.users import (
    ScriptedUser,
    UserContext,
    turn_budget,
)
from scaleenv.env.voice import is_next_request
from scaleenv.formats.trajectory import STOP
from scaleenv.integrations.session import task_source
from scaleenv.integrations.tau2 import tau2_task
from scaleenv.synth.build import BuildConfig, prepare_out, run_build
from scaleenv.synth.tasks.pacing import with_gradual_requests
from scaleenv.universe import Universe
from synth_helpers import context, family_tasks


def _gradual_task(name: str = "pet_care"):
    # changes only ("Done: your request has been completed" answers no question), and no slip (a user who gives
    # a wrong id first does not say its requests word for word)
    task = next(t for t in family_tasks(name, "direct", 16) if len(t.user_profile.goals) >= 2
                and t.user_profile.slip is None and all(o.kind == "write" for o in t.user_profile.objectives))
    return task.model_copy(update={"user_profile": task.user_profile.model_copy(update={"gradual": True})})


def _user(task, name: str = "pet_care") -> ScriptedUser:
    user = ScriptedUser(patience=10)
    user.reset(UserContext(task=task, rng=random.Random(0), spec=context(name).spec))
    return user


def test_the_user_says_one_request_then_the_next_once_it_is_done():
    task = _gradual_task()
    goals = task.user_profile.goals
    user = _user(task)
    opening = asyncio.run(user.opening())
    assert goals[0].split()[0] in opening
    assert all(g not in opening for g in goals[1:]), opening
    # asked what it wants, it says only what it has said so far
    again = asyncio.run(user.reply("Sorry, what would you like me to do?"))
    assert all(g not in again for g in goals[1:]), again
    for i in range(1, len(goals)):
        reply = asyncio.run(user.reply("Done: your request has been completed."))
        assert is_next_request(reply) and STOP not in reply, reply
        assert goals[i].split()[-1] in reply
        assert all(g not in reply for g in goals[i + 1:]), reply
    assert STOP in asyncio.run(user.reply("Done: your request has been completed."))


def test_a_user_who_says_all_at_once_is_unchanged():
    task = _gradual_task()
    task = task.model_copy(update={"user_profile": task.user_profile.model_copy(update={"gradual": False})})
    user = _user(task)
    opening = asyncio.run(user.opening())
    assert all(g.split()[-1] in opening for g in task.user_profile.goals)
    assert STOP in asyncio.run(user.reply("Done: your request has been completed."))


def test_the_turn_budget_has_a_turn_per_request_said_later():
    task = _gradual_task()
    plain = task.model_copy(update={"user_profile": task.user_profile.model_copy(update={"gradual": False})})
    spec = context("pet_care").spec
    assert turn_budget(UserContext(task=task, rng=None, spec=spec)) == \
        turn_budget(UserContext(task=plain, rng=None, spec=spec)) + len(task.user_profile.goals)


def test_only_hard_and_expert_tasks_with_several_requests_are_gradual():
    task = _gradual_task()
    task.user_profile.gradual = False
    for tier, expect in (("easy", False), ("medium", False), ("expert", True)):
        t = task.model_copy(deep=True)
        t.difficulty.tier = tier
        with_gradual_requests(t, random.Random(0))
        assert t.user_profile.gradual is expect, tier
    one = task.model_copy(deep=True)
    one.difficulty.tier = "expert"
    one.user_profile.goals = one.user_profile.goals[:1]
    with_gradual_requests(one, random.Random(0))
    assert one.user_profile.gradual is False
    hard = [task.model_copy(deep=True) for _ in range(200)]
    rng = random.Random(1)
    for t in hard:
        t.difficulty.tier = "hard"
        with_gradual_requests(t, rng)
    assert 70 < sum(t.user_profile.gradual for t in hard) < 130  # about half


@pytest.fixture(scope="module")
def universe(tmp_path_factory):
    out = tmp_path_factory.mktemp("gradual") / "universe"
    cfg = BuildConfig(out=out, domains=["pet_care"], tasks_per_domain=12, tier_mix={"hard": 1.0, "expert": 1.0})
    prepare_out(cfg)
    run_build(cfg)
    return out


def test_a_build_marks_gradual_users_at_the_hard_and_expert_tiers(universe):
    tasks = Universe(universe).tasks()
    gradual = [t for t in tasks if t.user_profile.gradual]
    assert gradual and all(len(t.user_profile.goals) >= 2 for t in gradual)
    assert all(t.user_profile.gradual for t in tasks if t.difficulty.tier == "expert" and len(t.user_profile.goals) >= 2)


def test_the_llm_user_and_the_tau2_export_are_told_to_pace_the_requests(universe):
    task = next(t for t in Universe(universe).tasks() if t.user_profile.gradual)
    assert GRADUAL_PROMPT in user_prompt(task)
    said = tau2_task(task_source(universe), task)["user_scenario"]["instructions"]["task_instructions"]
    assert "one at a time" in said
    plain = task.model_copy(update={"user_profile": task.user_profile.model_copy(update={"gradual": False})})
    assert GRADUAL_PROMPT not in user_prompt(plain)
    # the field is left out of task files while False (older files round-trip byte for byte)
    assert "gradual" not in plain.user_profile.model_dump(mode="json")
    assert task.user_profile.model_dump(mode="json")["gradual"] is True


def test_the_oracle_waits_for_the_user_to_name_a_record(tmp_path):
    """Against users who say their requests one at a time, the oracle reports what it did before it
    acts on a record nobody has named yet: the dense shape finds no guessed id, and every task scores 1
    (wedding_planning/00002 of this build: its third request names vendor VND-0017)."""
    import json

    from scaleenv.run.rollout import RolloutConfig, run_rollout

    universe = tmp_path / "u"
    cfg = BuildConfig(out=universe, domains=["wedding_planning"], tasks_per_domain=6)
    prepare_out(cfg)
    run_build(cfg)

    res = run_rollout(RolloutConfig(universe=universe, agent="oracle", out=tmp_path / "r.json", reward_shape="dense"))
    assert res["avg_reward"] == 1.0
    lines = [json.loads(x) for x in (tmp_path / "r.trajectories.jsonl").read_text().splitlines()]
    gradual = {t.id for t in Universe(universe).tasks() if t.user_profile.gradual}
    paced = [r for r in lines if r["task_id"] in gradual]
    assert paced and all(not r["reward"]["subgoals"]["violations"] for r in paced)
    # the user said its later requests: each task's user spoke once more per request than its first
    assert any(sum(is_next_request(str(m.get("content"))) for m in r["messages"] if m.get("role") == "user") >= 1
               for r in paced)
