"""A user who gives a look-alike's id at first and puts it right once the agent names it back: drawn
only at the hard and expert tiers, solvable by an agent that confirms (the oracle), fatal to one that
acts on the id as given, and told to the LLM user and in the tau2 export."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from scaleenv.env.cache import task_cache
from scaleenv.env.core import make
from scaleenv.env.policies import OracleAgent, SwapAgent
from scaleenv.env.user_prompt import SLIP_PROMPT, user_prompt
from scaleenv.env.users import SLIP_OPENERS, ScriptedUser, UserContext, turn_budget
from scaleenv.formats.trajectory import STOP
from scaleenv.integrations.session import task_source
from scaleenv.integrations.tau2 import tau2_task
from scaleenv.synth.build import BuildConfig, prepare_out, run_build
from scaleenv.synth.tasks.gates import converse, play_policy
from scaleenv.synth.tasks.slips import SLIP_SHARE, draw_slip, slip_options
from scaleenv.universe import Universe


def corrects(reply: str, slip) -> bool:
    """Whether ``reply`` is the user putting its slip right."""
    return reply.startswith(SLIP_OPENERS) and reply.endswith(f"I meant {slip.meant}, not {slip.said}.")


@pytest.fixture(scope="module")
def universe(tmp_path_factory):
    out = tmp_path_factory.mktemp("slips") / "universe"
    cfg = BuildConfig(out=out, domains=["airline"], tasks_per_domain=24, seed=5, tier_mix={"hard": 1.0, "expert": 1.0})
    prepare_out(cfg)
    run_build(cfg)
    return out


def _slipped(universe):
    tasks = [t for t in Universe(universe).tasks() if t.user_profile.slip is not None]
    assert tasks, "the build gave no user a slip"
    return tasks


def _user(universe, task) -> ScriptedUser:
    user = ScriptedUser(patience=10)
    user.reset(UserContext(task=task, rng=random.Random(0), spec=task_cache(universe).spec(task.domain)))
    return user


def _said(user: ScriptedUser) -> str:
    """What the user has said of its requests: the opening, then each next request it is asked about."""
    text = asyncio.run(user.opening())
    while user.progress.said <= user.slip.goal:
        text += asyncio.run(user.reply("Done: your request has been completed."))
    return text


def test_a_build_gives_slips_at_the_hard_and_expert_tiers_only(universe):
    tasks = Universe(universe).tasks()
    slipped = _slipped(universe)
    for task in slipped:
        slip = task.user_profile.slip
        assert task.difficulty.tier in SLIP_SHARE
        # the goals and the solo request hold the right id; the wrong one is a look-alike of the task
        assert slip.meant in task.user_profile.goals[slip.goal] and slip.meant in task.instruction
        assert slip.said not in task.instruction
        assert any(slip.said in ids for ids in task.verification.distractors.values())
    assert len(slipped) < len(tasks)
    plain = next(t for t in tasks if t.user_profile.slip is None)
    assert "slip" not in plain.user_profile.model_dump(mode="json")  # older files round-trip byte for byte
    for tier in ("easy", "medium"):
        t = slipped[0].model_copy(deep=True)
        t.difficulty.tier, t.user_profile.slip = tier, None
        assert all(draw_slip(t, random.Random(i)) is None for i in range(20)), tier
    expert = slipped[0].model_copy(deep=True)
    expert.difficulty.tier, expert.user_profile.slip = "expert", None
    assert draw_slip(expert, random.Random(0)) in slip_options(expert)


def _talking(universe):
    """A slipped task's slip and its user, once it has said the slipped request; and what it said."""
    task = _slipped(universe)[0]
    user = _user(universe, task)
    return task.user_profile.slip, user, _said(user)


def test_the_user_says_the_wrong_id_and_puts_it_right_when_it_is_named_back(universe):
    slip, user, said = _talking(universe)
    assert slip.said in said and slip.meant not in said
    # a confirmation naming the wrong record gets the correction, not a yes
    reply = asyncio.run(user.reply(f"I found {slip.said}. Shall I go ahead with it?"))
    assert corrects(reply, slip) and "Yes" not in reply and STOP not in reply
    # from then on the user asks for the right one, and does not correct again
    recap = asyncio.run(user.reply("Sorry, what would you like me to do?"))
    assert slip.meant in recap and slip.said not in recap, recap
    again = asyncio.run(user.reply(f"Shall I go ahead with {slip.meant}?"))
    assert not corrects(again, slip)


def test_a_change_proposed_on_the_wrong_id_after_it_was_put_right_gets_a_no(universe):
    """football, play round 22: the agent named both ids, the slip counted as settled, and a later
    "should I cancel FXT-0053?" (the wrong one) got "Yes, please go ahead."."""
    slip, user, _ = _talking(universe)
    asyncio.run(user.reply(f"{slip.said} is not on your account; {slip.meant} is. Which one do you mean?"))
    assert user.slip is None  # settled: the agent found the right record itself
    reply = asyncio.run(user.reply(f"Shall I go ahead with {slip.said}? Yes or no?"))
    assert reply.startswith("No, that is not right") and slip.meant in reply and "Yes" not in reply, reply
    assert asyncio.run(user.reply(f"Shall I go ahead with {slip.meant}?")).startswith("Yes")


def test_a_proposal_naming_both_ids_gets_the_correction_not_a_yes(universe):
    """football, play round 23: "shall I postpone FXT-0051? Your ticket is on FXT-0055" named the
    right id too, counted as settled, and got "Yes, please go ahead." for the wrong fixture."""
    slip, user, _ = _talking(universe)
    reply = asyncio.run(user.reply(f"Your other record is {slip.meant}. Shall I go ahead with {slip.said}?"))
    assert corrects(reply, slip) and "Yes" not in reply, reply


def test_a_question_beside_the_wrong_id_is_still_answered(universe):
    """knowledge_management, play round 20: asked for its e-mail in the message that named the wrong
    article, the user put the id right and never gave the e-mail."""
    slip, user, _ = _talking(universe)
    # what proves who the user is: an e-mail, or a member of staff's flight number
    fact = next(f for f in user.identity if not f.endswith(" id"))
    value, noun = str(user.known[fact]), user.vocab.split(fact)[1]  # "email", "flight number"
    reply = asyncio.run(user.reply(f"I found {slip.said}. Before I change it, what is the {noun}?"))
    assert reply.startswith(SLIP_OPENERS) and slip.meant in reply and value in reply, (noun, reply)
    assert "Yes" not in reply


def test_a_report_on_the_wrong_record_does_not_count(universe):
    slip, user, _ = _talking(universe)
    reply = asyncio.run(user.reply(f"Done: {slip.said} has been updated as you asked."))
    assert corrects(reply, slip) and STOP not in reply
    assert not user.progress.done[slip.goal]


def test_an_agent_that_names_the_right_record_hears_no_correction(universe):
    slip, user, _ = _talking(universe)
    reply = asyncio.run(user.reply(f"I see {slip.meant} on your account. Shall I go ahead with it?"))
    assert not corrects(reply, slip)
    assert not corrects(asyncio.run(user.reply(f"Is {slip.said} perhaps the one?")), slip)  # already settled


def test_the_oracle_puts_it_right_and_acting_on_the_id_as_given_scores_zero(universe):
    for task in _slipped(universe):
        slip = task.user_profile.slip
        env = make(universe, task.id, user="scripted")
        from scaleenv.env.core import run_sync
        from scaleenv.env.loop import run_episode

        traj = run_sync(run_episode(env, OracleAgent()))
        assert traj.score == 1.0, task.id
        users = [str(m.get("content")) for m in traj.messages if m.get("role") == "user"]
        assert any(corrects(u, slip) for u in users), task.id
        ep = task_cache(universe).acquire(task)
        try:
            careless = SwapAgent(slip.meant, slip.said, also_forbidden=True)
            assert play_policy(ep, task, careless, random.Random(0)).score == 0.0, task.id
        finally:
            task_cache(universe).release(task, ep)


def test_the_builds_conversation_check_can_fail(universe):
    """converse() is the build's check that a slip can be put right: the oracle scores 1 in the
    conversation, an agent that acts on the id as given (without asking) scores 0."""
    task = _slipped(universe)[0]
    slip = task.user_profile.slip
    ep = task_cache(universe).acquire(task)
    try:
        assert converse(ep, task, OracleAgent()) == 1.0
        assert converse(ep, task, SwapAgent(slip.meant, slip.said, also_forbidden=True)) == 0.0
    finally:
        task_cache(universe).release(task, ep)


def test_the_turn_budget_and_the_llm_user_and_the_tau2_export_know_the_slip(universe):
    task = _slipped(universe)[0]
    slip = task.user_profile.slip
    plain = task.model_copy(update={"user_profile": task.user_profile.model_copy(update={"slip": None})})
    spec = task_cache(universe).spec(task.domain)
    assert turn_budget(UserContext(task=task, rng=None, spec=spec)) == \
        turn_budget(UserContext(task=plain, rng=None, spec=spec)) + 1
    prompt = user_prompt(task)
    assert SLIP_PROMPT.split("{")[0] in prompt and slip.said in prompt and slip.meant in prompt
    assert slip.said not in user_prompt(plain)
    said = tau2_task(task_source(universe), task)["user_scenario"]["instructions"]["task_instructions"]
    assert slip.said in said and slip.meant in said
    assert json.loads(task.model_dump_json())["user_profile"]["slip"] == slip.model_dump(mode="json")


@pytest.fixture(scope="module")
def refusals(tmp_path_factory):
    """football at the expert tier, refusals only: its look-alike tickets differ in price, which the
    refund rule reads."""
    out = tmp_path_factory.mktemp("slips") / "refusals"
    cfg = BuildConfig(out=out, domains=["football"], tasks_per_domain=24, seed=5, tier_mix={"hard": 1.0},
                      family_mix={"refusal": 1.0})
    prepare_out(cfg)
    run_build(cfg)
    return out


def test_a_slip_in_a_refused_request_names_a_look_alike_the_request_would_be_allowed_for(refusals):
    universe = refusals
    """The refused change asked for with a look-alike's id tempts where it can: on the look-alike it
    would run and break no rule, so an agent that acts on the id as given (without naming it back)
    changes it, and only the confirmation the policy asks for brings the correction and the refusal.
    A look-alike the rule forbids as well is drawn only where the task has no other."""
    from scaleenv.tools.chain import resolve_args, run_chain
    from scaleenv.tools.policy import broken_rules
    from scaleenv.tools.runtime import bind_params, first_failing_precondition
    from scaleenv.world.patch import apply_patch
    from scaleenv.world.world import World

    cache = task_cache(universe)
    refused = [t for t in _slipped(universe) if t.user_profile.objectives[t.user_profile.slip.goal].kind == "refusal"]
    assert refused, "no user slipped in a refused request"
    tempting_drawn = 0
    for task in refused:
        spec, slip = cache.spec(task.domain), task.user_profile.slip
        world = World.from_snapshot(spec, cache.base(task.domain))
        apply_patch(world, task.initial_patch)
        scratch = World.from_snapshot(spec, world.snapshot())
        outputs = run_chain(scratch, spec, task.gold_chain)  # the forbidden calls refer to what the chain shows
        scratch.close()
        resolved = [(c, resolve_args(c, outputs, len(outputs))) for c in task.forbidden]
        call, meant = next((c, a) for c, a in resolved if slip.meant in a.values())
        tool = spec.tool(call.tool)
        assert broken_rules(world, spec, tool, meant)  # the request as meant breaks the rule

        def tempting(said: str) -> bool:
            args = {k: said if v == slip.meant else v for k, v in meant.items()}  # noqa: B023
            return (first_failing_precondition(world, tool, bind_params(world, tool, args)) is None  # noqa: B023
                    and not broken_rules(world, spec, tool, args))  # noqa: B023

        others = [o.said for o in slip_options(task) if o.goal == slip.goal and o.meant == slip.meant]
        if tempting(slip.said):
            tempting_drawn += 1
        else:
            assert not any(tempting(o) for o in others), f"{task.id}: a tempting look-alike was passed over"
        world.close()
    assert tempting_drawn, "no slip in a refused request named a look-alike it would be allowed for"
