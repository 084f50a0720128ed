"""A refusal's reason counts only once the agent looked at a record it refuses on: refusing blindly,
with the one rule a tool has (read off the policy), is a guess and scores 0 (issue 15)."""

from __future__ import annotations

import pytest

from scaleenv.env.cache import build_worlds, make_episode
from scaleenv.env.episode import watched_in
from scaleenv.env.policies import answer_text
from scaleenv.formats.task import REFUSAL_FACT, AnswerFact, Task
from scaleenv.reward.state import compute_reward
from scaleenv.synth.tasks.families import generate_task
from scaleenv.synth.tasks.generate import ChainConfig, TaskRejected
from scaleenv.tools.chain import resolve_args, run_chain
from scaleenv.world.world import World
from synth_helpers import context, family_tasks

CASES = [("pet_care", "refusal"), ("fitness_club", "screened"), ("library_services", "partial")]


def tasks(domain: str, family: str) -> tuple[Task, ...]:
    return tuple(family_tasks(domain, family, 3))


def _refused_ids(domain: str, task: Task) -> list[str]:
    """The records the forbidden calls would change, from the gold chain run on the initial world."""
    ctx = context(domain)
    worlds = build_worlds(ctx.spec, ctx.base, task)
    world = World.from_snapshot(ctx.spec, worlds.initial)
    outputs = run_chain(world, ctx.spec, task.gold_chain)
    ids = set()
    for call in task.forbidden:
        focus = ctx.focus(ctx.spec.tool(call.tool))
        ids.add(resolve_args(call, outputs, len(outputs))[focus[0]])
    return sorted(ids)


@pytest.mark.parametrize(("domain", "family"), CASES)
def test_the_reason_names_the_records_it_refuses_on(domain, family):
    found = tasks(domain, family)
    assert found, (domain, family)
    for task in found:
        (reason,) = [f for f in task.answer_facts if f.name == REFUSAL_FACT]
        assert reason.seen == _refused_ids(domain, task), task.id


@pytest.mark.parametrize(("domain", "family"), CASES)
def test_a_blind_refusal_scores_zero_and_a_checked_one_counts(domain, family):
    ctx = context(domain)
    for task in tasks(domain, family):
        ep = make_episode(ctx.spec, task, build_worlds(ctx.spec, ctx.base, task))
        # the right words, no look at any record: the reason does not count
        ep.reset()
        ep.say(answer_text(task))
        blind = ep.evaluate()
        assert REFUSAL_FACT in blind.unseen and blind.score == 0.0, task.id
        assert any("without looking at the record" in d for d in blind.diff)
        # one look at a refused record, then the same words: the reason counts
        ep.reset()
        target = _refused_ids(domain, task)[0]
        table = ctx.focus(ctx.spec.tool(task.forbidden[0].tool))[1]
        getter = ctx.tool_by_family("get", table)
        assert ep.call_tool(getter.name, {getter.parameters[0].name: target}).ok
        ep.say(answer_text(task))
        assert REFUSAL_FACT not in ep.evaluate().unseen, task.id
        # the whole gold chain, then the words: 1
        ep.reset()
        outputs: list = []
        for i, call in enumerate(task.gold_chain):
            outputs.append(ep.call_tool(call.tool, resolve_args(call, outputs, i)).value)
        ep.say(answer_text(task))
        assert ep.evaluate().score == 1.0, task.id


def test_watched_ids_are_found_anywhere_in_a_call():
    watched = frozenset({"APT-0081", "APT-0090"})
    call = ({"appointment_id": "APT-0081"}, [{"id": "APT-0090", "pet": {"id": "PET-1"}}, "x", 3])
    assert watched_in(call, watched) == {"APT-0081", "APT-0090"}
    assert watched_in(({"q": "APT-00"}, None), watched) == set()


def test_a_fact_without_seen_ids_and_untracked_episodes_are_unchanged():
    ctx = context("pet_care")
    world = World.from_snapshot(ctx.spec, ctx.base)
    fact = AnswerFact(name=REFUSAL_FACT, value="the visit is less than a day away", seen=["APT-0001"])
    plain = AnswerFact(name=REFUSAL_FACT, value="the visit is less than a day away")
    said = "I cannot: the visit is less than a day away."
    assert compute_reward(world, world, answer_facts=[plain], said=said, shown=set()).score == 1.0
    assert compute_reward(world, world, answer_facts=[fact], said=said).score == 1.0  # not tracked
    assert compute_reward(world, world, answer_facts=[fact], said=said, shown=set()).score == 0.0
    assert compute_reward(world, world, answer_facts=[fact], said=said, shown={"APT-0001"}).score == 1.0
    assert "seen" not in plain.model_dump(mode="json")  # older task files round-trip byte for byte


def test_a_refused_record_the_request_does_not_lead_to_rejects_the_task():
    """library_services, seed 9013, attempt 3: "withdraw hold HLD-0044" said of a book whose holds do
    not include it; resolving the refused call crashed the build, now the attempt is rejected."""
    from scaleenv.synth.tasks.reasons import Reason

    ctx = context("library_services", 9013)
    with pytest.raises(TaskRejected) as err:
        generate_task(ctx, 9013, 3, ChainConfig(tier_mix={"hard": 0.6, "expert": 0.4}))
    assert err.value.reason == Reason.REFUSED_CALL_FAILS


def test_a_rule_whose_text_defines_its_condition_takes_the_condition_as_its_reason():
    """Own play, online_learning seed 777: "ENR-0076 is at 100 percent progress, and an enrollment above 80
    percent progress cannot be paused" scored 0, the reason being the rule's gloss "nearly finished". The
    policy asks the agent to name the rule's condition; where the text defines it in brackets ("nearly
    finished (progress above 80 percent)"), that condition states the reason."""
    import re

    from scaleenv.reward.facts import reason_stated
    from scaleenv.synth.procedural.blueprint import catalog

    checked = 0
    for bp in catalog().values():
        for rule in bp.policy:
            defined = re.search(r"\(([^()]*)\)", rule.text)
            if rule.reason and defined:
                assert reason_stated(rule.reason, defined.group(1)), (bp.name, rule.name, rule.reason)
                checked += 1
    assert checked >= 3
    assert reason_stated("80 percent", "ENR-0076 is at 100 percent progress, and an enrollment above 80 percent "
                                       "progress cannot be paused.")
